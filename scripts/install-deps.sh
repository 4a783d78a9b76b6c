#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Install what libcompmpi needs on Debian 12 (idempotent; root or sudo).
#   build:    MPICH and Open MPI (each is called by its own names, mpicc.mpich,
#             mpicc.openmpi, ...), autotools, OpenMP (gcc), hwloc, FFTW, ZFP 1.0 (the zfp
#             codec), CMocka, pkg-config
#   tests:    valgrind; clang 14 with its sanitizer runtimes and LLVM's OpenMP (the ASan/UBSan,
#             TSan and libFuzzer builds of scripts/test-hardening.sh), gfortran (the Fortran
#             test program), iproute2 (network namespaces of bench/netem), iptables (cluster.sh --delay)
#   examples: OpenBLAS, zlib, the Fashion-MNIST data set, gnuplot; the Python trainer:
#             Debian's mpi4py (Open MPI), torch, numpy
#   simulation: SimGrid 3.32's SMPI (smpicxx, smpirun; scripts/build-smpi.sh, bench/smpi/);
#             Debian's virtual package "simgrid" is provided by libsimgrid-dev
#   packages: debhelper, dpkg-dev, fakeroot, lintian (dpkg-buildpackage of debian/,
#             scripts/test-deb.sh)
# The CUDA toolkit is optional and not installed here (configure finds /usr/local/cuda).
# Nothing system-wide is changed beyond the packages: the mpi/mpirun alternatives (the
# plain mpicc/mpiexec) stay as the packages set them.
set -euo pipefail
pkgs=(build-essential autoconf automake libtool pkg-config
      mpich libmpich-dev openmpi-bin libopenmpi-dev libhwloc-dev libfftw3-dev libzfp-dev libzstd-dev libfpzip-dev liblz4-dev libblosc-dev libcmocka-dev
      valgrind clang-14 libclang-rt-14-dev libomp-14-dev gfortran iproute2 iptables zlib1g-dev libopenblas-dev dataset-fashion-mnist gnuplot-nox
      python3-mpi4py python3-torch python3-numpy
      libsimgrid-dev
      debhelper dpkg-dev fakeroot lintian)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep "install ok installed" >/dev/null || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "install-deps: all packages present"
    exit 0
fi
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"

#!/usr/bin/env bash
# Install what libcompmpi needs on Debian 12 (idempotent; root or sudo).
#   build:    MPICH, autotools, OpenMP (gcc), hwloc, FFTW, CMocka, pkg-config
#   tests:    valgrind
#   examples: OpenBLAS, zlib, the Fashion-MNIST data set, gnuplot
#   demo:     Debian's PyTorch (CPU), NumPy, mpi4py and Open MPI (wrappers to build libcompmpi
#             for it), iproute2 (emulated cluster)
# The CUDA toolkit is optional and not installed here (configure finds /usr/local/cuda).
set -euo pipefail
pkgs=(build-essential autoconf automake libtool pkg-config
      mpich libmpich-dev libhwloc-dev libfftw3-dev libcmocka-dev
      valgrind zlib1g-dev libopenblas-dev dataset-fashion-mnist gnuplot-nox
      python3-torch python3-numpy python3-mpi4py openmpi-bin libopenmpi-dev iproute2)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
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
# Debian's mpi4py and friends switch mpicc/mpiexec to Open MPI: we always call the
# .mpich names, but make the defaults MPICH too when both are present.
if [ -x /usr/bin/mpicc.mpich ] && update-alternatives --list mpi >/dev/null 2>&1; then
    $SUDO update-alternatives --set mpi /usr/bin/mpicc.mpich >/dev/null 2>&1 || true
    $SUDO update-alternatives --set mpirun /usr/bin/mpirun.mpich >/dev/null 2>&1 || true
fi
echo "install-deps: done"

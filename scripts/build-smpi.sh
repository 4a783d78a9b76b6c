#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Build libcompmpi for SimGrid SMPI (simulated MPI) out of tree in ${BUILD_DIR:-_build-smpi}:
# libcompmpi_smpi.so, compiled by the plain compilers against SMPI's mpi.h and linked to
# libsimgrid (configure --with-mpi=smpi), and the benchmark driver bench/smpi/allreduce_sim,
# an SMPI program (smpicc: a shared object that smpirun's runner dlopens per simulated rank).
# Extra arguments go to configure. Needs libsimgrid-dev (scripts/install-deps.sh).
# Running: bench/smpi/run.sh (docs/scale.md, "Simulated with SimGrid SMPI").
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-_build-smpi}
command -v smpicc >/dev/null || { echo "build-smpi: smpicc not found: scripts/install-deps.sh (libsimgrid-dev)" >&2; exit 1; }
[ -x configure ] && [ configure -nt configure.ac ] || ./autogen.sh
mkdir -p "$BUILD_DIR"
cd "$BUILD_DIR"
if [ ! -f Makefile ] || [ ../configure -nt config.status ]; then
    # CUDA stays out: SMPI simulates host ranks
    ../configure --with-mpi=smpi --without-cuda --prefix="$PWD/install" "$@" >configure.out 2>&1 ||
        { tail -30 configure.out; exit 1; }
    sed -n '/libcompmpi [0-9]/,$p' configure.out
fi
# the library only: the tools, tests and benchmarks of the tree are real-MPI programs
make -j"$(nproc)" libcompmpi_smpi.la >make.out 2>&1 || { grep -E "error|Error" -A5 make.out | head -60; exit 1; }
lib=$PWD/.libs/libcompmpi_smpi.so
# the driver: an SMPI program linked to the library. --no-as-needed: SMPI's mpi.h declares
# MPI_* weak, so the linker would otherwise drop the library the program seems not to need.
mkdir -p bench/smpi
smpicc -O2 -std=gnu11 -I../include -o bench/smpi/allreduce_sim ../bench/smpi/allreduce_sim.c \
    -Wl,--no-as-needed -L.libs -Wl,-rpath,"$PWD/.libs" -lcompmpi_smpi -lm >>make.out 2>&1 ||
    { tail -30 make.out; exit 1; }
echo "build-smpi: $lib"
echo "build-smpi: $PWD/bench/smpi/allreduce_sim"

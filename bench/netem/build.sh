#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# build.sh [--mpi-prefix PREFIX] [OUT]
# Compiles bench/coll_bench.c with Debian's mpicc.mpich (or PREFIX/bin/mpicc)
# -O2 into OUT (default: bench/netem/build/coll_bench), and into bench/netem/build/:
# pingpong (alpha/beta probe), the MPI_Finalize workaround shim ucx_finalize_fix.so (see
# ucx_finalize_fix.c), idle_sleep.so (tests/mpi/idle_sleep.c: idle ranks sleep instead of
# spinning, mpirun.sh --idle-sleep) and nfq_delay (cluster.sh --delay).
set -euo pipefail
dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mpi_prefix=${MPI_PREFIX:-}
if [ "${1:-}" = "--mpi-prefix" ]; then mpi_prefix=$2; shift 2; fi
out=${1:-$dir/build/coll_bench}
if [ -n "$mpi_prefix" ]; then mpicc=$mpi_prefix/bin/mpicc; else mpicc=mpicc.mpich; fi
command -v "$mpicc" >/dev/null || { echo "build.sh: $mpicc not found" >&2; exit 2; }
mkdir -p "$(dirname "$out")"
"$mpicc" -O2 -Wall -Wextra -o "$out" "$dir/../coll_bench.c" -lm
mkdir -p "$dir/build"
cc -O2 -shared -fPIC -o "$dir/build/ucx_finalize_fix.so" "$dir/ucx_finalize_fix.c"
cc -O2 -shared -fPIC -o "$dir/build/idle_sleep.so" "$dir/../../tests/mpi/idle_sleep.c" -ldl
cc -O2 -Wall -o "$dir/build/nfq_delay" "$dir/nfq_delay.c"
"$mpicc" -O2 -Wall -o "$dir/build/pingpong" "$dir/pingpong.c"
echo "$out"

#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Build the example trainer.
#   examples/build.sh [OUTDIR]            (default OUTDIR: build/examples)
# Env: GEMM=openblas|hand (default: openblas if <cblas.h> + libopenblas are
#      present, else the built-in blocked GEMM), MPICXX (default mpicxx.mpich),
#      MARCH (default: x86-64-v3 if the CPU has avx2, else x86-64-v2),
#      EXTRA_CXXFLAGS.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:-build/examples}"
mkdir -p "$out"

MPICXX="${MPICXX:-mpicxx.mpich}"
command -v "$MPICXX" >/dev/null 2>&1 || { echo "build.sh: $MPICXX not found (apt-get install mpich libmpich-dev)" >&2; exit 1; }

if [[ -z "${MARCH:-}" ]]; then
  if grep -qw avx2 /proc/cpuinfo 2>/dev/null && grep -qw fma /proc/cpuinfo 2>/dev/null; then
    MARCH=x86-64-v3
  else
    MARCH=x86-64-v2
  fi
fi

# Pick the GEMM backend.
if [[ -z "${GEMM:-}" ]]; then
  GEMM=hand
  if echo '#include <cblas.h>
int main(){openblas_set_num_threads(1);return 0;}' | g++ -x c++ - -o /dev/null -lopenblas >/dev/null 2>&1; then
    GEMM=openblas
  fi
fi

flags=(-std=c++17 -O3 "-march=$MARCH" -fopenmp -Wall -Wextra)
libs=(-lz)
case "$GEMM" in
  openblas) flags+=(-DFMNIST_USE_CBLAS); libs+=(-lopenblas) ;;
  hand) ;;
  *) echo "build.sh: GEMM must be openblas or hand (got '$GEMM')" >&2; exit 1 ;;
esac

# shellcheck disable=SC2086
"$MPICXX" "${flags[@]}" ${EXTRA_CXXFLAGS:-} "$here/fmnist_train.cc" -o "$out/fmnist_train" "${libs[@]}"
echo "built $out/fmnist_train (gemm=$GEMM march=$MARCH)"

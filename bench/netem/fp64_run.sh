#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# fp64_run.sh -- MPI_Allreduce of doubles on the emulated 1 Gbit/s cluster (issue 30): plain MPI
# against libcompmpi paired in every job (bench/fp64_bench.c), one job per configuration.
#
#   bench/netem/fp64_run.sh --lib _build/.libs/libcompmpi.so --bench _build/bench/fp64_bench \
#       [--ranks 2] [--rate 1gbit] [--sizes 16M,64M] [--iters 5]
#
# Configurations: bitpack 32 (2x), fp32 narrowing (2x), zfp fixed rate 16 and 8 (4x, 8x),
# error_bound rel:1e-6 and abs:1e-4 (the library's choice), all with the cost model off (the
# compressed arm is compressed), plus the defaults (cost model on). One OpenMP thread per rank.
# Prints one line per configuration and size (fp64_bench's), with the stats' wire ratio and
# the load average at the start of the job.
set -u
here=$(cd "$(dirname "$0")" && pwd)
lib= bench= ranks=2 rate=1gbit sizes=16M,64M iters=5
while [ $# -gt 0 ]; do
    case $1 in
        --lib) lib=$(realpath "$2"); shift 2 ;;
        --bench) bench=$(realpath "$2"); shift 2 ;;
        --ranks) ranks=$2; shift 2 ;;
        --rate) rate=$2; shift 2 ;;
        --sizes) sizes=$2; shift 2 ;;
        --iters) iters=$2; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
[ -n "$lib" ] && [ -n "$bench" ] || { echo "need --lib and --bench" >&2; exit 2; }
"$here/cluster.sh" up "$ranks" "$rate" >/dev/null || exit 1
trap '"$here/cluster.sh" down >/dev/null 2>&1' EXIT
configs=(
    "bitpack:32|-genv COMPMPI_CODEC bitpack -genv COMPMPI_POLICY static -genv COMPMPI_BITS 32 -genv COMPMPI_COST_MODEL off"
    "fp32|-genv COMPMPI_CODEC fp32 -genv COMPMPI_COST_MODEL off"
    "zfp:16|-genv COMPMPI_CODEC zfp -genv COMPMPI_BITS 16 -genv COMPMPI_COST_MODEL off"
    "zfp:8|-genv COMPMPI_CODEC zfp -genv COMPMPI_BITS 8 -genv COMPMPI_COST_MODEL off"
    "error_bound=rel:1e-6|-genv COMPMPI_ERROR_BOUND rel:1e-6 -genv COMPMPI_COST_MODEL off"
    "error_bound=abs:1e-4|-genv COMPMPI_ERROR_BOUND abs:1e-4 -genv COMPMPI_COST_MODEL off"
    "defaults|"
)
for c in "${configs[@]}"; do
    name=${c%%|*} args=${c#*|}
    load=$(cut -d' ' -f1 /proc/loadavg)
    # shellcheck disable=SC2086
    out=$("$here/mpirun.sh" -n "$ranks" --finalize-fix --ucx-eager --timeout 600 --preload "$lib" \
        -genv COMPMPI_THREADS 1 -genv COMPMPI_STATS 1 $args -- "$bench" --sizes "$sizes" --iters "$iters" 2>&1 </dev/null)
    ratio=$(echo "$out" | grep -o "coll=allreduce compressed=[0-9]* .*ratio=[0-9.]*" | head -1 | grep -o "ratio=[0-9.]*")
    echo "$out" | grep "^fp64 allreduce" | sed "s/^/$name load=$load ${ratio:-ratio=n\/a} | /"
done

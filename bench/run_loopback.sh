#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Compressed vs uncompressed MPI_Allreduce / MPI_Bcast / MPI_Allgather between ranks on this
# machine (MPICH shared memory), measured in one run. Prints a markdown table with the
# median time of each and the speedup (uncompressed / compressed).
#   bench/run_loopback.sh [--ranks 2] [--sizes 1M,4M,16M,64M,256M] [--iters 5]
#                         [--codecs "bitpack:16 bitpack:8"] [--colls allreduce,bcast] [--warmup 2]
# A codec spec is codec[:bits][+KEY=VAL...] (KEY without the COMPMPI_ prefix), each run with
# policy static and min_bytes 0; the spec `default` preloads libcompmpi with no setting at all
# (awp gated by the cost model: the "never slower" check). Warm-up calls are not timed: give
# the cost model its exploration calls (8 per size class and width: 4 exact, 4 compressed) with --warmup 10.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${BUILD_DIR:-$here/../_build}
ranks=2 sizes=1M,4M,16M,64M,256M iters=5 colls=allreduce,bcast codecs="bitpack:16 bitpack:8" warmup=2
while [ $# -gt 0 ]; do
    case $1 in
        --ranks) ranks=$2; shift 2 ;; --sizes) sizes=$2; shift 2 ;; --iters) iters=$2; shift 2 ;;
        --codecs) codecs=$2; shift 2 ;; --colls) colls=$2; shift 2 ;; --warmup) warmup=$2; shift 2 ;;
        *) echo "usage: $0 [--ranks P] [--sizes LIST] [--iters K] [--codecs SPECS] [--colls LIST] [--warmup W]"; exit 2 ;;
    esac
done
lib="$build/.libs/libcompmpi.so"
bench="$build/bench/coll_bench"
[ -x "$bench" ] && [ -f "$lib" ] || { echo "build first (scripts/build.sh)"; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
run() { # name, extra mpiexec args...
    local name=$1; shift
    timeout 900 mpiexec.mpich -n "$ranks" "$@" "$bench" --coll "$colls" --sizes "$sizes" --iters "$iters" \
        --warmup "$warmup" --check >"$out/$name" 2>"$out/$name.err" || { echo "run $name failed:"; tail "$out/$name.err"; exit 1; }
}
run none
for spec in $codecs; do
    if [ "$spec" = default ]; then
        run default -genv LD_PRELOAD "$lib" -genv COMPMPI_STATS 1
        continue
    fi
    IFS=+ read -r head extra <<<"$spec"
    env=(-genv LD_PRELOAD "$lib" -genv COMPMPI_CODEC "${head%%:*}" -genv COMPMPI_POLICY static -genv COMPMPI_MIN_BYTES 0)
    [[ $head == *:* ]] && env+=(-genv COMPMPI_BITS "${head#*:}")
    if [ -n "${extra:-}" ]; then
        IFS=+ read -ra kvs <<<"$extra"
        for kv in "${kvs[@]}"; do env+=(-genv "COMPMPI_${kv%%=*}" "${kv#*=}"); done
    fi
    run "$spec" "${env[@]}"
done
echo "| collective | bytes/rank | uncompressed (s) | $(for s in $codecs; do printf '%s (s) | speedup | rel_err | ' "$s"; done)"
echo "| --- | --- | --- | $(for s in $codecs; do printf -- '--- | --- | --- | '; done)"
grep -h '^coll=' "$out/none" | while read -r line; do
    coll=$(sed -n 's/.*coll=\([a-z]*\).*/\1/p' <<<"$line"); bytes=$(sed -n 's/.*bytes=\([0-9]*\).*/\1/p' <<<"$line")
    t0=$(sed -n 's/.*t_med_s=\([0-9.e+-]*\).*/\1/p' <<<"$line")
    row="| $coll | $bytes | $t0 |"
    for spec in $codecs; do
        l=$(grep -h "^coll=$coll bytes=$bytes " "$out/$spec" || true)
        t=$(sed -n 's/.*t_med_s=\([0-9.e+-]*\).*/\1/p' <<<"$l"); e=$(sed -n 's/.*rel_err=\([^ ]*\).*/\1/p' <<<"$l")
        id=$(sed -n 's/.*identical=\([^ ]*\).*/\1/p' <<<"$l")
        sp=$(awk -v a="$t0" -v b="$t" 'BEGIN{ if (b > 0) printf "%.2fx", a / b; else print "n/a" }')
        row="$row $t | $sp | $e${id:+ (identical=$id)} |"
    done
    echo "$row"
done
if [ -f "$out/default.err" ] && grep -q compmpi-stats-model "$out/default.err"; then
    echo
    echo "cost model (spec default; per size class: calls it compressed or ran exactly, predicted vs measured time):"
    echo '```'
    grep compmpi-stats-model "$out/default.err"
    echo '```'
fi
echo
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); load: $(cut -d' ' -f1-3 /proc/loadavg)"

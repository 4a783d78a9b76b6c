#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The full correctness sweep at scale (issue 28, part 3): tests/mpi/t_scale -- every allreduce
# algorithm and codec family, bcast, allgather and reduce_scatter_block; same bits on every
# rank, per-element or l2 bounds, exact paths equal to MPI's -- at more rank counts and bigger
# buffers than the CI lines of tests/mpi/testlist (13, 16 and 32 ranks, 6007 floats).
#
#   scripts/test-scale.sh [--mpi mpich|openmpi|both] [--ranks "2 3 4 5 7 8 13 16 24 30 32 48 64"]
#                         [--sizes "6007 100003 1048579"] [--mem-gb 6] [--timeout 1200]
#                         [--no-idle-sleep] [--out DIR]
#
# Ranks are oversubscribed on this machine's cores; tests/mpi/idle_sleep.so (LD_PRELOAD) lets
# idle MPICH ranks sleep instead of spinning (--no-idle-sleep: MPICH's busy polling; expect
# minutes per run from 32 ranks on 2 cores). A (ranks, floats) pair runs only when every
# rank's allgather result fits: ranks^2 x floats x 4 bytes <= --mem-gb (skipped ones are
# listed). Needs the builds of scripts/build.sh (_build, MPICH) and, for Open MPI, of
# scripts/test-openmpi.sh (_build-openmpi); builds t_scale there if missing. Prints one line
# per run (ok/FAIL, wall seconds) and a closing "N passed, N failed"; logs in --out
# (default _build/scale-sweep).
set -uo pipefail
cd "$(dirname "$0")/.."
src=$PWD
mpis=mpich ranks="2 3 4 5 7 8 13 16 24 30 32 48 64" sizes="6007 100003 1048579" mem_gb=6 timeout_s=1200 idle=1
out=""
while [ $# -gt 0 ]; do
    case $1 in
        --mpi) mpis=$2; shift 2 ;;
        --ranks) ranks=$2; shift 2 ;;
        --sizes) sizes=$2; shift 2 ;;
        --mem-gb) mem_gb=$2; shift 2 ;;
        --timeout) timeout_s=$2; shift 2 ;;
        --no-idle-sleep) idle=0; shift ;;
        --out) out=$2; shift 2 ;;
        -h|--help) sed -n '3,20p' "$0"; exit 0 ;;
        *) echo "test-scale.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
done
[ "$mpis" = both ] && mpis="mpich openmpi"
out=${out:-$src/_build/scale-sweep}
mkdir -p "$out"
. tests/mpi/launch.sh
pass=0 fail=0
for mpi in $mpis; do
    case $mpi in
        mpich) b=$src/${BUILD_DIR:-_build} ;;
        openmpi) b=$src/${OMPI_BUILD_DIR:-_build-openmpi} ;;
        *) echo "test-scale.sh: --mpi must be mpich, openmpi or both" >&2; exit 2 ;;
    esac
    [ -f "$b/Makefile" ] || { echo "test-scale.sh: no build in $b (scripts/build.sh; for Open MPI scripts/test-openmpi.sh)"; exit 2; }
    make -C "$b" -j"$(nproc)" tests/mpi/t_scale tests/mpi/idle_sleep.la >"$out/make-$mpi.out" 2>&1 ||
        { tail -20 "$out/make-$mpi.out"; exit 1; }
    echo "== $mpi ($b), idle_sleep=$idle, load $(cut -d' ' -f1-3 /proc/loadavg)"
    for n in $sizes; do
        for p in $ranks; do
            if [ $((p * p * n * 4)) -gt $((mem_gb * 1024 * 1024 * 1024)) ]; then
                printf 'skip  %-8s P=%-3s n=%-8s (allgather results need %d MB > --mem-gb %s)\n' "$mpi" "$p" "$n" \
                    $((p * p * n * 4 / 1048576)) "$mem_gb"
                continue
            fi
            mpi_launch_init "$mpi"
            MPI_ENV=(COMPMPI_THREADS=1 COMPMPI_COST_MODEL=off)
            [ $idle = 1 ] && MPI_ENV+=(LD_PRELOAD="$b/tests/mpi/.libs/idle_sleep.so")
            mpi_launch "$p" -- "$b/tests/mpi/t_scale" "n=$n"
            log=$out/$mpi-P$p-n$n
            t0=$(date +%s.%N)
            timeout -k 10 "$timeout_s" "${MPI_CMD[@]}" >"$log.out" 2>"$log.err" </dev/null
            rc=$?
            dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
            if [ $rc = 0 ] && grep -q "^ No Errors" "$log.out"; then
                pass=$((pass + 1)); printf 'ok    %-8s P=%-3s n=%-8s %7ss\n' "$mpi" "$p" "$n" "$dt"
            else
                fail=$((fail + 1)); printf 'FAIL  %-8s P=%-3s n=%-8s %7ss (exit %s; %s.err)\n' "$mpi" "$p" "$n" "$dt" "$rc" "$log"
                grep -m5 "check failed" "$log.err" | sed 's/^/      /'
            fi
        done
    done
done
echo "$pass passed, $fail failed"
[ $fail = 0 ]

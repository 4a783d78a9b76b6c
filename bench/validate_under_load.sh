#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# OSU-style validation under the default preload, on a quiet and on a loaded machine (issue
# 42, part 2): bench/validate_exact.c checks every call of allreduce, bcast, allgather and
# their non-blocking forms (4-256 KiB of floats) against MPI's own result, bit for bit. On
# shared memory no codec beats MPI, so any wrong call means the cost model decided a lossy
# path from noise. Not a test (its outcome depends on the machine's load): a benchmark that
# counts failing runs.
#
#   bench/validate_under_load.sh [--families mpich,openmpi] [--ranks 2,4] [--runs R]
#                                [--hogs H] [--iters K] [--settings "K=V ..."]
#
# Each configuration runs R times with no hog and R times with H busy loops (`yes`) beside
# it (default H = 2 x cores). --settings adds COMPMPI_* variables (e.g. to compare with
# COMPMPI_COST_MODEL=on). Needs scripts/build.sh (and the Open MPI build of
# scripts/test-openmpi.sh for openmpi). The program asks for MPI_THREAD_SINGLE (MPI_Init), so
# under nb_progress=auto its non-blocking calls pass through; --thread-multiple is not an
# option of validate_exact: set COMPMPI_NB_PROGRESS=thread in --settings to have them measured.
set -u
cd "$(dirname "$0")/.." || exit 1
families=mpich,openmpi ranks=2,4 runs=5 hogs=$(( 2 * $(nproc) )) iters=200 settings=""
while [ $# -gt 0 ]; do
    case $1 in
        --families) families=$2; shift 2 ;; --ranks) ranks=$2; shift 2 ;; --runs) runs=$2; shift 2 ;;
        --hogs) hogs=$2; shift 2 ;; --iters) iters=$2; shift 2 ;; --settings) settings=$2; shift 2 ;;
        *) echo "usage: $0 [--families LIST] [--ranks LIST] [--runs R] [--hogs H] [--iters K] [--settings \"K=V ...\"]"; exit 2 ;;
    esac
done
tmp=$(mktemp -d)
hog_pids=()
stop_hogs() { [ ${#hog_pids[@]} -gt 0 ] && kill "${hog_pids[@]}" 2>/dev/null; wait 2>/dev/null; hog_pids=(); }
trap 'stop_hogs; rm -rf "$tmp"' EXIT
echo "| MPI | ranks | load | runs | failing runs | wrong calls (all runs) | worst relative error | 1-min load seen |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
for fam in ${families//,/ }; do
    case $fam in
        mpich) lib=$PWD/_build/.libs/libcompmpi.so mpicc=mpicc.mpich ;;
        openmpi) lib=$PWD/${OMPI_BUILD_DIR:-_build-openmpi}/.libs/libcompmpi_openmpi.so mpicc=mpicc.openmpi ;;
        *) echo "unknown family $fam"; exit 2 ;;
    esac
    [ -f "$lib" ] || { echo "| $fam | - | - | - | - | - | - | no $lib: skipped |"; continue; }
    exe=$tmp/validate_$fam
    $mpicc -O2 -o "$exe" bench/validate_exact.c -lm || exit 1
    for np in ${ranks//,/ }; do
        for hog in 0 "$hogs"; do
            fails=0 wrong=0 worst=0 loads=""
            if [ "$hog" != 0 ]; then for _ in $(seq "$hog"); do yes >/dev/null & hog_pids+=($!); done; sleep 5; fi
            for r in $(seq "$runs"); do
                loads="$loads $(cut -d' ' -f1 /proc/loadavg)"
                envs=(LD_PRELOAD="$lib" COMPMPI_THREADS=1 $settings)
                if [ $fam = mpich ]; then
                    cmd=(mpiexec.mpich -n "$np")
                    for kv in "${envs[@]}"; do cmd+=(-genv "${kv%%=*}" "${kv#*=}"); done
                else
                    cmd=(mpiexec.openmpi --oversubscribe --allow-run-as-root --mca btl self,vader -n "$np")
                    for kv in "${envs[@]}"; do cmd+=(-x "$kv"); done
                fi
                timeout 900 "${cmd[@]}" "$exe" --iters "$iters" --quiet </dev/null >"$tmp/out" 2>"$tmp/err"
                rc=$?
                if [ $rc != 0 ] || ! grep -q "No Errors" "$tmp/out"; then
                    fails=$((fails + 1))
                    echo "  ($fam np=$np hogs=$hog run $r: exit $rc) $(grep -m3 validate: "$tmp/out" | tr '\n' ' ')" >&2
                fi
                w=$(awk -F'wrong_calls=' '/validate:/{split($2,a," "); s+=a[1]} END{print s+0}' "$tmp/out")
                e=$(sed -n 's/.*max_rel_err=\([^ ]*\).*/\1/p' "$tmp/out" | sort -g | tail -1)
                wrong=$((wrong + w))
                [ -n "$e" ] && worst=$(awk -v a="$worst" -v b="$e" 'BEGIN{print (b > a) ? b : a}')
            done
            stop_hogs
            echo "| $fam | $np | $([ "$hog" = 0 ] && echo quiet || echo "$hog x yes") | $runs | $fails | $wrong | $worst |$loads |"
        done
    done
done

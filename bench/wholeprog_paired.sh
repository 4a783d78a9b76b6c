#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# What preloading costs the calls libcompmpi does not compress (issue 42, part 1): plain MPI
# against the same program preloaded with libcompmpi's defaults, at the thread level the
# program asks for, runs alternating (A B B A ...; the thread level is per process, so the
# arms cannot share one job), shared memory, bench/wholeprog_bench.c.
#
#   bench/wholeprog_paired.sh [--families mpich,openmpi] [--ranks 2,4] [--levels single,multiple]
#                             [--rounds R] [--iters K] [--max-bytes B] [--tests LIST] [--forced] [--control]
#
# Arms: plain; preload (defaults: nb_progress=auto, the program's thread level);
# with --forced also preload with COMPMPI_NB_PROGRESS=thread (what libcompmpi did before
# nb_progress=auto: MPI_THREAD_MULTIPLE whatever the program asked); with --control a second
# plain arm (the method's own noise: its ratio to plain would be 1 on a perfect machine).
# Per (test, size) the median over the rounds of each run's median, and the ratio to plain.
# Needs scripts/build.sh (MPICH: _build) and, for Open MPI, the build of scripts/test-openmpi.sh
# (${OMPI_BUILD_DIR:-_build-openmpi}). Prints markdown tables; every table says the 1-minute
# load average before and after it (a loaded machine times the cores, not MPI).
set -u
cd "$(dirname "$0")/.." || exit 1
families=mpich,openmpi ranks=2,4 levels=single,multiple rounds=5 iters=21 max_bytes=4194304 tests="" forced=0 control=0
while [ $# -gt 0 ]; do
    case $1 in
        --families) families=$2; shift 2 ;; --ranks) ranks=$2; shift 2 ;; --levels) levels=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;; --iters) iters=$2; shift 2 ;; --max-bytes) max_bytes=$2; shift 2 ;;
        --tests) tests=$2; shift 2 ;; --forced) forced=1; shift ;; --control) control=1; shift ;;
        *) echo "usage: $0 [--families LIST] [--ranks LIST] [--levels LIST] [--rounds R] [--iters K] [--max-bytes B] [--tests LIST] [--forced] [--control]"; exit 2 ;;
    esac
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
load() { cut -d' ' -f1 /proc/loadavg; }
for fam in ${families//,/ }; do
    case $fam in
        mpich) lib=$PWD/_build/.libs/libcompmpi.so mpicc=mpicc.mpich mpiexec=(mpiexec.mpich) xenv=-genv ;;
        openmpi) lib=$PWD/${OMPI_BUILD_DIR:-_build-openmpi}/.libs/libcompmpi_openmpi.so mpicc=mpicc.openmpi
                 mpiexec=(mpiexec.openmpi --oversubscribe --allow-run-as-root --mca btl self,vader) xenv=-x ;;
        *) echo "unknown family $fam"; exit 2 ;;
    esac
    [ -f "$lib" ] || { echo "wholeprog_paired: $fam: no $lib (build it first); skipped"; continue; }
    exe=$tmp/wholeprog_$fam
    $mpicc -O2 -o "$exe" bench/wholeprog_bench.c || exit 1
    for np in ${ranks//,/ }; do
        for lvl in ${levels//,/ }; do
            arms="plain preload"
            [ $forced = 1 ] && [ "$lvl" != multiple ] && arms="$arms forced"
            [ $control = 1 ] && arms="$arms control"
            l0=$(load)
            for r in $(seq 1 "$rounds"); do
                order=$arms
                [ $((r % 2)) = 0 ] && order=$(echo "$arms" | tr ' ' '\n' | tac | tr '\n' ' ')
                for arm in $order; do
                    case $arm in
                        plain|control) env=() ;;
                        preload) if [ "$fam" = mpich ]; then env=(-genv LD_PRELOAD "$lib"); else env=(-x LD_PRELOAD="$lib"); fi ;;
                        forced) if [ "$fam" = mpich ]; then env=(-genv LD_PRELOAD "$lib" -genv COMPMPI_NB_PROGRESS thread)
                                else env=(-x LD_PRELOAD="$lib" -x COMPMPI_NB_PROGRESS=thread); fi ;;
                    esac
                    timeout 600 "${mpiexec[@]}" -n "$np" "${env[@]}" "$exe" --thread-level "$lvl" --iters "$iters" \
                        --max-bytes "$max_bytes" ${tests:+--tests "$tests"} </dev/null >"$tmp/$arm.$r" 2>"$tmp/$arm.$r.err" ||
                        { echo "wholeprog_paired: $fam np=$np $lvl $arm round $r failed:"; tail -5 "$tmp/$arm.$r.err"; }
                done
            done
            l1=$(load)
            echo
            echo "### $fam, $np ranks, the program asks for MPI_THREAD_${lvl^^} (load $l0 -> $l1, $rounds rounds)"
            echo
            for arm in $arms; do
                echo "- $arm: MPI gave $(sed -n 's/^wholeprog: asked=.* provided=\([a-z]*\).*/\1/p' "$tmp/$arm.1" | head -1)"
            done
            echo
            hdr="| test | bytes | plain median µs |"
            sep="| --- | --- | --- |"
            for arm in $arms; do [ $arm = plain ] && continue; hdr="$hdr $arm µs | $arm / plain |"; sep="$sep --- | --- |"; done
            echo "$hdr"; echo "$sep"
            for arm in $arms; do
                cat "$tmp/$arm".[0-9]* 2>/dev/null | sed -n "s/^wholeprog: test=\([a-z_]*\) bytes=\([0-9]*\) median_us=\([0-9.]*\).*/$arm \1 \2 \3/p"
            done | awk -v arms="$arms" '
                { k = $2 " " $3; v[$1, k, ++n[$1, k]] = $4; if (!(k in seen)) { seen[k] = 1; keys[++nk] = k } }
                function med(a, k,    m, i, j, t, x) {
                    m = n[a, k]; for (i = 1; i <= m; i++) x[i] = v[a, k, i]
                    for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (x[j] < x[i]) { t = x[i]; x[i] = x[j]; x[j] = t }
                    return m % 2 ? x[(m + 1) / 2] : (x[m / 2] + x[m / 2 + 1]) / 2 }
                END {
                    na = split(arms, A, " ")
                    for (i = 1; i <= nk; i++) {
                        split(keys[i], kk, " "); p = med("plain", keys[i])
                        line = sprintf("| %s | %s | %.3f |", kk[1], kk[2], p)
                        for (j = 2; j <= na; j++) { q = med(A[j], keys[i]); line = line sprintf(" %.3f | %.3f |", q, p > 0 ? q / p : 0) }
                        print line
                    }
                }'
        done
    done
done

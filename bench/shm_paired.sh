#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# libcompmpi with its defaults against plain MPICH IN THE SAME JOB, shared memory, 2 ranks,
# MPI_Allreduce / MPI_Allgather / MPI_Bcast of floats from 4 KiB to 256 MiB (issue 11:
# never more than 5% slower at any size).
#
#   bench/shm_paired.sh [--iters K] [--sizes LIST] [--colls LIST] [--out DIR]
#
# Why in one job: on this 2-vCPU virtual machine each job lands in a speed state of its own
# for its whole life (bench/shm_sweep.sh: plain MPICH's 1 MiB allreduce 0.15, 0.20 or 0.45 ms
# from job to job), so comparing separate jobs measures the states more than the library.
# Here one preloaded job times, in every iteration, MPICH's own collective (called as PMPI_*:
# libcompmpi defines only the MPI_* names) and the MPI_* call libcompmpi intercepts, the two
# arms alternating which goes first (coll_bench --paired). A second job without the library
# runs the same two arms (both plain MPICH): the method's own noise, shown beside.
# What this does not see: effects of the preload outside the calls themselves (the thread
# level requested at MPI_Init; docs/benchmarks.md measured those separately, and
# bench/shm_sweep.sh compares whole jobs).
# Calls up to 256 KiB are timed in batches of 100 back to back, larger ones one by one;
# the first iterations are warm-ups (the cost model explores in its first calls per size).
# Run from the repository root after scripts/build.sh. Prints a markdown table.
set -u
cd "$(dirname "$0")/.." || exit 1
iters=31 sizes=4K,16K,64K,256K,1M,4M,16M,64M,256M colls=allreduce,allgather,bcast out=
while [ $# -gt 0 ]; do
    case $1 in
        --iters) iters=$2; shift 2 ;; --sizes) sizes=$2; shift 2 ;; --colls) colls=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        *) echo "usage: $0 [--iters K] [--sizes LIST] [--colls LIST] [--out DIR]"; exit 2 ;;
    esac
done
lib=$PWD/_build/.libs/libcompmpi.so bench=$PWD/_build/bench/coll_bench
[ -x "$bench" ] && [ -f "$lib" ] || { echo "shm_paired: build first (scripts/build.sh)"; exit 1; }
out=${out:-$(mktemp -d /tmp/shm_paired.XXXXXX)}
mkdir -p "$out"
small= large=
for s in ${sizes//,/ }; do
    b=$(numfmt --from=iec "$s")
    if [ "$b" -le 262144 ]; then small+=${small:+,}$s; else large+=${large:+,}$s; fi
done
job() { # side: lib (preloaded) or control (not)
    local E=()
    [ "$1" = lib ] && E=(-genv LD_PRELOAD "$lib" -genv COMPMPI_THREADS 1)
    if [ -n "$small" ]; then
        timeout 900 mpiexec.mpich -n 2 "${E[@]}" "$bench" --paired --coll "$colls" --sizes "$small" --batch 100 \
            --iters "$iters" --warmup 2 </dev/null 2>>"$out/stderr" | grep '^coll=' | sed "s/^/side=$1 /"
    fi
    if [ -n "$large" ]; then
        timeout 900 mpiexec.mpich -n 2 "${E[@]}" "$bench" --paired --coll "$colls" --sizes "$large" \
            --iters "$iters" --warmup 12 </dev/null 2>>"$out/stderr" | grep '^coll=' | sed "s/^/side=$1 /"
    fi
}
{
    echo "# $(date -u +%FT%TZ) $(uname -srm), $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg) before;" \
         "git $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet 2>/dev/null || echo '+changes')"
} >"$out/meta.txt"
{ job lib; job control; } >"$out/all.txt"
echo "# load average $(cut -d' ' -f1-3 /proc/loadavg) after" >>"$out/meta.txt"
cat "$out/meta.txt"
python3 - "$out/all.txt" "$iters" <<'PY'
import re, sys, collections
d = {}
for l in open(sys.argv[1]):
    m = dict(re.findall(r'(\w+)=(\S+)', l))
    d[(m['coll'], int(m['bytes']), m['side'])] = m
print(f"\nOne job, {sys.argv[2]} paired iterations per size; microseconds per call (medians over iterations);"
      " [lo, hi]: distribution-free 95% confidence interval of the median paired ratio.\n")
print("| collective | bytes/rank | MPICH (PMPI) | libcompmpi (MPI) | ratio of medians | median paired ratio [95% CI] | control job: median paired ratio [95% CI] |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
over5, signif = [], []
us = lambda x: f"{x*1e6:.2f}" if x < 1e-3 else f"{x*1e6:.0f}"
ci = lambda m: f"{float(m['ratio_med']):.3f} [{float(m['ratio_lo']):.3f}, {float(m['ratio_hi']):.3f}]"
for (c, b, s) in sorted(d, key=lambda k: (k[0], k[1])):
    if s != 'lib': continue
    m = d[(c, b, s)]
    p, q = float(m['t_plain_med_s']), float(m['t_med_s'])
    ctl = d.get((c, b, 'control'))
    if float(m['ratio_med']) > 1.05: over5.append(f"{c} {b} ({float(m['ratio_med']):.3f})")
    if float(m['ratio_lo']) > 1.0: signif.append(f"{c} {b} ({ci(m)})")
    print(f"| {c} | {b} | {us(p)} | {us(q)} | {q/p:.3f} | {ci(m)} | {ci(ctl) if ctl else '-'} |")
print("\nPairs whose median paired ratio exceeds 1.05 (libcompmpi more than 5% slower): "
      + (", ".join(over5) if over5 else "none"))
print("Pairs slower at all with 95% confidence (interval above 1): " + (", ".join(signif) if signif else "none"))
PY
echo "raw: $out/all.txt"

#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# libcompmpi preloaded with its defaults against plain MPICH on one machine (shared memory),
# 2 ranks, MPI_Allreduce / MPI_Allgather / MPI_Bcast of floats from 4 KiB to 256 MiB
# (issue 11: never more than 5% slower at any size).
#
#   bench/shm_sweep.sh [--rounds R] [--sizes LIST] [--colls LIST] [--out DIR]
#
# Jobs alternate plain / preloaded R times (default 5): on this 2-vCPU virtual machine a job
# lands in one of a few speed states for its whole life (plain MPICH's 1 MiB allreduce
# 0.15, 0.20 or 0.45 ms), so one job per side says little. Per (collective, size) the table
# gives each side's median and best of the per-job medians, and the ratio of both:
# 'median ratio' compares typical jobs, 'best ratio' the fastest state each side reached.
# Calls up to 256 KiB are timed in batches of 100 back to back (coll_bench --batch), larger
# ones one by one; each job first makes 12 calls per size (the cost model explores 8).
# Run from the repository root after scripts/build.sh. Prints a markdown table.
set -u
cd "$(dirname "$0")/.." || exit 1
rounds=5 sizes=4K,16K,64K,256K,1M,4M,16M,64M,256M colls=allreduce,allgather,bcast out=
while [ $# -gt 0 ]; do
    case $1 in
        --rounds) rounds=$2; shift 2 ;; --sizes) sizes=$2; shift 2 ;; --colls) colls=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        *) echo "usage: $0 [--rounds R] [--sizes LIST] [--colls LIST] [--out DIR]"; exit 2 ;;
    esac
done
lib=$PWD/_build/.libs/libcompmpi.so bench=$PWD/_build/bench/coll_bench
[ -x "$bench" ] && [ -f "$lib" ] || { echo "shm_sweep: build first (scripts/build.sh)"; exit 1; }
out=${out:-$(mktemp -d /tmp/shm_sweep.XXXXXX)}
mkdir -p "$out"
small= large=
for s in ${sizes//,/ }; do
    b=$(numfmt --from=iec "$s")
    if [ "$b" -le 262144 ]; then small+=${small:+,}$s; else large+=${large:+,}$s; fi
done
job() { # side round
    local E=()
    [ "$1" = lib ] && E=(-genv LD_PRELOAD "$lib" -genv COMPMPI_THREADS 1)
    if [ -n "$small" ]; then
        timeout 600 mpiexec.mpich -n 2 "${E[@]}" "$bench" --coll "$colls" --sizes "$small" --batch 100 --iters 15 \
            --warmup 1 </dev/null 2>>"$out/stderr" | grep '^coll=' | sed "s/^/round=$2 side=$1 /"
    fi
    if [ -n "$large" ]; then
        timeout 600 mpiexec.mpich -n 2 "${E[@]}" "$bench" --coll "$colls" --sizes "$large" --iters 7 --warmup 12 \
            </dev/null 2>>"$out/stderr" | grep '^coll=' | sed "s/^/round=$2 side=$1 /"
    fi
}
{
    echo "# $(date -u +%FT%TZ) $(uname -srm), $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg) before;" \
         "git $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet 2>/dev/null || echo '+changes')"
} >"$out/meta.txt"
for r in $(seq "$rounds"); do
    for side in mpi lib; do job $side "$r"; done
done >"$out/all.txt"
echo "# load average $(cut -d' ' -f1-3 /proc/loadavg) after" >>"$out/meta.txt"
cat "$out/meta.txt"
python3 - "$out/all.txt" "$rounds" <<'PY'
import re, sys, statistics as st, collections
d = collections.defaultdict(list)
for l in open(sys.argv[1]):
    m = dict(re.findall(r'(\w+)=(\S+)', l))
    d[(m['coll'], int(m['bytes']), m['side'])].append(float(m['t_med_s']))
print(f"\n{sys.argv[2]} alternating jobs per side; times in microseconds per call (median of each job's calls).\n")
print("| collective | bytes/rank | MPICH median | preloaded median | median ratio | MPICH best | preloaded best | best ratio | MPICH jobs min-max | preloaded jobs min-max |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |")
worst = []
for (c, b, s) in sorted(d, key=lambda k: (k[0], k[1])):
    if s != 'mpi' or (c, b, 'lib') not in d: continue
    a, l = d[(c, b, 'mpi')], d[(c, b, 'lib')]
    ma, ml, ba, bl = st.median(a), st.median(l), min(a), min(l)
    worst.append((min(ml / ma, bl / ba), c, b))
    us = lambda x: f"{x*1e6:.2f}" if x < 1e-3 else f"{x*1e6:.0f}"
    print(f"| {c} | {b} | {us(ma)} | {us(ml)} | {ml/ma:.3f} | {us(ba)} | {us(bl)} | {bl/ba:.3f} | {us(min(a))}-{us(max(a))} | {us(min(l))}-{us(max(l))} |")
bad = [w for w in worst if w[0] > 1.05]
print(f"\nSizes where both ratios exceed 1.05 (slower by more than 5% by both measures): "
      + (", ".join(f"{c} {b} ({r:.3f})" for r, c, b in bad) if bad else "none"))
PY
echo "raw: $out/all.txt"

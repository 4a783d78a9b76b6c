#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Interleaved plain MPICH vs libcompmpi preloaded with its defaults, shared memory, 2 ranks:
# 5 alternating runs of coll_bench, medians of the per-run medians (docs/benchmarks.md §3).
#   bench/interleave_shm.sh   (from the repository root, after scripts/build.sh)
set -u
cd "$(dirname "$0")/.." || exit 1
lib=$PWD/_build/.libs/libcompmpi.so
O=$(mktemp -d /tmp/interleave_shm.XXXXXX)
for rep in 1 2 3 4 5; do
  for pre in mpi lib; do
    if [ $pre = lib ]; then E=(-genv LD_PRELOAD "$lib" -genv COMPMPI_THREADS 1); else E=(); fi
    timeout 300 mpiexec.mpich -n 2 "${E[@]}" _build/bench/coll_bench --coll allreduce,bcast,allgather \
      --sizes 4K,64K,256K,1M,4M --iters 100 --warmup 10 </dev/null 2>/dev/null | grep '^coll=' | sed "s/^/rep=$rep pre=$pre /" >> $O/all.txt
  done
done
python3 - "$O/all.txt" <<'PY'
import re,collections,sys
d=collections.defaultdict(list)
for l in open(sys.argv[1]):
    m=dict(re.findall(r'(\w+)=(\S+)',l))
    d[(m['coll'],int(m['bytes']),m['pre'])].append(float(m['t_med_s']))
print("| collective | bytes | MPICH median of 5 runs (µs) | preloaded median of 5 runs (µs) | preloaded / MPICH | MPICH runs min–max (µs) | preloaded runs min–max (µs) |")
print("| --- | --- | --- | --- | --- | --- | --- |")
import statistics as st
for (c,b,p) in sorted(d):
    if p!='mpi': continue
    a=d[(c,b,'mpi')]; l=d[(c,b,'lib')]
    ma=st.median(a); ml=st.median(l)
    print(f"| {c} | {b} | {ma*1e6:.1f} | {ml*1e6:.1f} | {ml/ma:.2f} | {min(a)*1e6:.1f}–{max(a)*1e6:.1f} | {min(l)*1e6:.1f}–{max(l)*1e6:.1f} |")
PY

#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# libcompmpi with its defaults against plain MPICH IN THE SAME JOB for the non-blocking and
# persistent forms (issue 29: never more than 5% slower at any size 4 KiB-256 MiB, as
# communication time alone and as overlap time), shared memory, 2 ranks,
# MPI_Iallreduce / MPI_Iallgather / MPI_Ibcast and MPI_Allreduce_init / MPI_Allgather_init /
# MPI_Bcast_init (+ MPI_Start) of floats, each call completed by MPI_Wait.
#
#   bench/nb_paired.sh [--forms LIST] [--modes LIST] [--sizes LIST] [--colls LIST]
#                      [--iters K] [--iters-huge K] [--out DIR]
#
# The method is bench/shm_paired.sh's (coll_bench --paired): in one preloaded job every
# iteration times MPICH's own call (PMPI_Iallreduce + PMPI_Wait, or PMPI_Allreduce_init once
# and PMPI_Start + PMPI_Wait per call: libcompmpi defines only the MPI_* names) and the MPI_*
# call libcompmpi intercepts, the two arms alternating which goes first; a second job without
# the library runs the same two arms (both plain MPICH): the method's own noise.
# Two modes (coll_bench --form F [--overlap]):
#   comm     issue, wait at once: communication time alone;
#   overlap  issue, compute (a busy loop, no MPI call) for as long as the plain call alone
#            took (its median over a first pass, slowest rank), wait: the whole is timed in
#            both arms (OSU's osu_i* "overall" time).
# Sizes up to 256 KiB are timed in batches of 100 calls after 2 warm-up iterations; 1-16 MiB
# one call per iteration after 12 warm-ups; 64 MiB and up likewise with --iters-huge
# iterations, so that the whole run stays near 15 minutes. The cost model explores each
# class's first calls (8 per class and rank, then one queued exact call): inside the warm-ups.
# Under MPICH < 4.1 the persistent allgather up to 256 KiB is also compared with MPICH's
# non-blocking allgather (form persistent_vs_nonblocking): MPICH's own persistent allgather
# returns wrong data there (docs/benchmarks.md §10b).
# Library settings: none (no COMPMPI_* variable at all); the program asks for
# MPI_THREAD_MULTIPLE (--thread-level multiple), which is what gets the progress threads under
# the default nb_progress=auto.
# Every output line carries the 1-minute load average read when its job started.
# Run from the repository root after scripts/build.sh. Prints markdown tables.
set -u
cd "$(dirname "$0")/.." || exit 1
forms=nonblocking,persistent modes=comm,overlap sizes=4K,16K,64K,256K,1M,4M,16M,64M,256M
colls=allreduce,allgather,bcast iters=21 iters_huge=11 out=
while [ $# -gt 0 ]; do
    case $1 in
        --forms) forms=$2; shift 2 ;; --modes) modes=$2; shift 2 ;; --sizes) sizes=$2; shift 2 ;;
        --colls) colls=$2; shift 2 ;; --iters) iters=$2; shift 2 ;; --iters-huge) iters_huge=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        *) echo "usage: $0 [--forms LIST] [--modes LIST] [--sizes LIST] [--colls LIST] [--iters K] [--iters-huge K] [--out DIR]"
           exit 2 ;;
    esac
done
lib=$PWD/_build/.libs/libcompmpi.so bench=$PWD/_build/bench/coll_bench
[ -x "$bench" ] && [ -f "$lib" ] || { echo "nb_paired: build first (scripts/build.sh)"; exit 1; }
out=${out:-$(mktemp -d /tmp/nb_paired.XXXXXX)}
mkdir -p "$out"
small= medium= huge=
for s in ${sizes//,/ }; do
    b=$(numfmt --from=iec "$s")
    if [ "$b" -le 262144 ]; then small+=${small:+,}$s
    elif [ "$b" -lt 67108864 ]; then medium+=${medium:+,}$s
    else huge+=${huge:+,}$s; fi
done
load1() { cut -d' ' -f1 /proc/loadavg; }
run() { # side form mode sizes iters warmup [batch]
    local side=$1 form=$2 mode=$3 sz=$4 it=$5 wu=$6 batch=${7:-1} E=() O=()
    [ -n "$sz" ] || return 0
    [ "$side" = lib ] && E=(-genv LD_PRELOAD "$lib")
    [ "$mode" = overlap ] && O=(--overlap)
    local l; l=$(load1)
    timeout 900 mpiexec.mpich -n 2 "${E[@]}" "$bench" --thread-level multiple --paired --form "$form" "${O[@]}" --coll "${colls_run:-$colls}" \
        --sizes "$sz" --batch "$batch" --iters "$it" --warmup "$wu" ${plain_flag:-} </dev/null 2>>"$out/stderr" |
        grep '^coll=' | sed "s/^/side=$side mode=$mode load=$l /"
}
{
    echo "# $(date -u +%FT%TZ) $(uname -srm), $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg) before;" \
         "git $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet 2>/dev/null || echo '+changes');" \
         "$(mpichversion 2>/dev/null | sed -n 's/^MPICH Version:[[:space:]]*/MPICH /p')"
} >"$out/meta.txt"
for form in ${forms//,/ }; do
    for mode in ${modes//,/ }; do
        for side in lib control; do
            run $side "$form" $mode "$small" "$iters" 2 100
            run $side "$form" $mode "$medium" "$iters" 12
            run $side "$form" $mode "$huge" "$iters_huge" 12
        done
    done
done >"$out/all.txt"
# MPICH before 4.1: its persistent allgather returns the first start's data from the second
# on below its ring threshold (docs/benchmarks.md §10b), so the rows above compare with a
# collective that moves nothing; these compare libcompmpi's persistent allgather with MPICH's
# non-blocking one (coll_bench --plain-nonblocking; form persistent_vs_nonblocking, no control)
v=$(mpichversion 2>/dev/null | sed -n 's/^MPICH Version:[[:space:]]*//p')
if [[ ",$forms," == *,persistent,* && ",$colls," == *,allgather,* && -n $v && $v != 4.1* ]] &&
    [ "$(printf '%s\n4.1\n' "$v" | sort -V | head -1)" = "$v" ]; then
    for mode in ${modes//,/ }; do
        colls_run=allgather plain_flag=--plain-nonblocking run lib persistent $mode "$small" "$iters" 2 100
    done >>"$out/all.txt"
fi
echo "# load average $(cut -d' ' -f1-3 /proc/loadavg) after; $(date -u +%FT%TZ)" >>"$out/meta.txt"
cat "$out/meta.txt"
python3 - "$out/all.txt" <<'PY'
import re, sys
d = {}
for l in open(sys.argv[1]):
    m = dict(re.findall(r'(\w+)=(\S+)', l))
    d[(m['form'], m['coll'], int(m['bytes']), m['mode'], m['side'])] = m
us = lambda x: f"{x*1e6:.2f}" if x < 1e-3 else f"{x*1e6:.0f}"
ci = lambda m: f"{float(m['ratio_med']):.3f} [{float(m['ratio_lo']):.3f}, {float(m['ratio_hi']):.3f}]"
size = lambda b: f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"
forms = sorted({k[0] for k in d})
modes = [m for m in ('comm', 'overlap') if any(k[3] == m for k in d)]
over5, signif, worst = [], [], {}
for form in forms:
    print(f"\n#### {form}: microseconds per call (medians over iterations, slowest rank); "
          "ratio: median paired ratio libcompmpi / MPICH [95% CI]; control: the same from a job without the library "
          "(both arms MPICH); load: 1-minute load average at the library job's start\n")
    head = "| collective | size |"
    rule = "| --- | ---: |"
    for mode in modes:
        extra = " compute |" if mode == 'overlap' else ""
        head += f"{extra} {mode}: MPICH | libcompmpi | ratio [95% CI] | control ratio [95% CI] | load |"
        rule += (" ---: |" if extra else "") + " ---: | ---: | ---: | ---: | ---: |"
    print(head); print(rule)
    for (c, b) in sorted({(k[1], k[2]) for k in d if k[0] == form}):
        row = f"| {c} | {size(b)} |"
        for mode in modes:
            m, ctl = d.get((form, c, b, mode, 'lib')), d.get((form, c, b, mode, 'control'))
            if not m:
                row += (" - |" if mode == 'overlap' else "") + " - | - | - | - | - |"; continue
            if mode == 'overlap': row += f" {us(float(m['t_compute_s']))} |"
            r = float(m['ratio_med'])
            row += (f" {us(float(m['t_plain_med_s']))} | {us(float(m['t_med_s']))} | {ci(m)} |"
                    f" {ci(ctl) if ctl else '-'} | {m['load']} |")
            tag = f"{form} {mode} {c} {size(b)}"
            if r > 1.05: over5.append(f"{tag} ({r:.3f}; control {float(ctl['ratio_med']):.3f})" if ctl else f"{tag} ({r:.3f})")
            if float(m['ratio_lo']) > 1.0: signif.append(f"{tag} ({ci(m)})")
            k = (form, mode, c)
            if k not in worst or r > worst[k][0]: worst[k] = (r, size(b))
        print(row)
print("\nWorst median paired ratio per form, mode and collective: "
      + "; ".join(f"{f} {mo} {c} {r:.3f} at {s}" for (f, mo, c), (r, s) in sorted(worst.items())))
print("\nPairs whose median paired ratio exceeds 1.05 (libcompmpi more than 5% slower): "
      + (", ".join(over5) if over5 else "none"))
print("\nPairs slower at all with 95% confidence (interval above 1): " + (", ".join(signif) if signif else "none"))
PY
echo "raw: $out/all.txt"

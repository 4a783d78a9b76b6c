#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# node_links.sh — alpha and beta inside a node, as the emulated clusters' ranks see them
# (issue 40, part 2: the hierarchy's exact node reduce and bcast), without the cluster:
# pingpong (its "node" part) with P ranks on this host, every rank in one MPICH node, under the
# same environment as run_scale.sh's jobs (idle sleep, UCX eager, UCX over tcp,self, the
# MPI_Finalize fix). Inside an emulated node the R ranks talk through MPICH's shared memory on
# the host's cores, as here; what the node stages of all N nodes meet when they run at once is
# every pair of ranks exchanging at once, P/2 pairs on the host's cores: pingpong's
# "all pairs" figure with P ranks (P = N x R) is that. The emulated cluster is not touched
# (it may be in use).
#
#   node_links.sh --out DIR [--topos "2x2 4x2 4x4 8x2"] [--reps 3] [--gap SEC] [--idle-sleep-us 200]
#
# Output: DIR/alphabeta.tsv (scale_report.py's columns; the link columns na: not measured
# here), DIR/meta.txt, DIR/logs/TOPO_REP.out. Every round measures each topology once (one
# pingpong job each), --reps rounds, --gap seconds apart (the load of a shared machine changes
# by the minute); the row keeps the median of each column over the rounds, and
# DIR/spread.tsv every round's all-pairs beta.
set -euo pipefail
dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
die() { echo "node_links.sh: error: $*" >&2; exit 2; }
out="" topos="2x2 4x2 4x4 8x2" reps=3 gap=0 idle_us=200
while [ $# -gt 0 ]; do
    case $1 in
        --out) out=$2; shift 2 ;;
        --topos) topos=$2; shift 2 ;;
        --reps) reps=$2; shift 2 ;;
        --gap) gap=$2; shift 2 ;;
        --idle-sleep-us) idle_us=$2; shift 2 ;;
        *) die "unknown option '$1'" ;;
    esac
done
[ -n "$out" ] || die "--out DIR is required"
mkdir -p "$out/logs"
"$dir/build.sh" >/dev/null
pre=$dir/build/idle_sleep.so:$dir/build/ucx_finalize_fix.so
{
    echo "date: $(date -Is)"
    echo "cmd: $0 --out $out --topos \"$topos\" --reps $reps --gap $gap --idle-sleep-us $idle_us"
    echo "git: $(git -C "$dir" log -1 --format='%h %s' 2>/dev/null | cut -c1-100)"
    echo "host: $(uname -srm), $(nproc) cores, load: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "where: this host, no namespaces (P ranks in one MPICH node); env as run_scale.sh's jobs"
} > "$out/meta.txt"
printf 'topo\tnodes\tppn\talpha_s\tbeta_Bps\tbeta_loaded_Bps\tload1\talpha_node_s\tbeta_node_Bps\tbeta_node_loaded_Bps\n' > "$out/alphabeta.tsv"
med() { sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
for ((k = 1; k <= reps; k++)); do
    [ "$k" -gt 1 ] && sleep "$gap"
    for topo in $topos; do
        [[ $topo =~ ^([0-9]+)x([0-9]+)$ ]] || die "bad topology '$topo'"
        p=$((BASH_REMATCH[1] * BASH_REMATCH[2]))
        env -u LD_PRELOAD timeout -k 10 120 mpiexec.mpich -n "$p" -genv LD_PRELOAD "$pre" \
            -genv MPITEST_IDLE_SLEEP_US "$idle_us" -genv UCX_RNDV_THRESH inf -genv UCX_TLS tcp,self \
            -genv UCX_NET_DEVICES lo "$dir/build/pingpong" > "$out/logs/${topo}_$k.out" 2>&1 </dev/null || true
    done
    echo "[$(date +%H:%M:%S)] round $k of $reps (load $(cut -d' ' -f1 /proc/loadavg))" >&2
done
printf 'topo\tround\tbeta_node_loaded_Bps\n' > "$out/spread.tsv"
for topo in $topos; do
    [[ $topo =~ ^([0-9]+)x([0-9]+)$ ]]
    n=${BASH_REMATCH[1]} r=${BASH_REMATCH[2]}
    for ((k = 1; k <= reps; k++)); do
        printf '%s\t%s\t%s\n' "$topo" "$k" "$(sed -n 's/.*node_beta_loaded_Bps=\([^ ]*\).*/\1/p' "$out/logs/${topo}_$k.out")" >> "$out/spread.tsv"
    done
    na=$(cat "$out"/logs/"${topo}"_*.out | sed -n 's/^pingpong: node_alpha_s=\([^ ]*\).*/\1/p' | med)
    nb=$(cat "$out"/logs/"${topo}"_*.out | sed -n 's/.* node_beta_Bps=\([^ ]*\).*/\1/p' | med)
    nbl=$(cat "$out"/logs/"${topo}"_*.out | sed -n 's/.*node_beta_loaded_Bps=\([^ ]*\).*/\1/p' | med)
    printf '%s\t%s\t%s\tna\tna\tna\t%s\t%s\t%s\t%s\n' "$topo" "$n" "$r" "$(cut -d' ' -f1 /proc/loadavg)" \
        "${na:-na}" "${nb:-na}" "${nbl:-na}" >> "$out/alphabeta.tsv"
    echo "$topo ($((n * r)) ranks): node alpha ${na:-na} s, beta ${nb:-na} B/s, all pairs ${nbl:-na} B/s" >&2
done

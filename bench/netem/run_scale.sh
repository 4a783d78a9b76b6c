#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# run_scale.sh — libcompmpi against plain MPICH on emulated multi-node clusters (issue 28,
# part 1): N nodes of R ranks, every node one network namespace whose R ranks share one
# shaped link (tbf rate + a fixed per-packet delay, cluster.sh --delay), MPI seeing the
# real node split (hydra -hosts a:R,b:R,...). Every job is coll_bench --paired --cpu: the
# plain MPICH call (PMPI_*) and libcompmpi's (MPI_*) alternate in the same job.
#
#   run_scale.sh --out DIR --lib PATH/libcompmpi.so
#       [--topos "4x1 8x1 16x1 2x2 4x2 8x2 4x4"]   nodes x ranks per node
#       [--rate 200mbit] [--delay 1000] [--burst 64kb]   per node link; delay in us, one way
#       [--sizes 1M,4M,16M]                        allreduce sizes of every algorithm
#       [--auto-sizes 1M,4M,16M,64M]               auto's sizes, one job each (its choice is
#                                                  read from the job's statistics: the
#                                                  hierarchical=/halving= counters, and the
#                                                  compmpi-stats-auto notes of timed choices)
#       [--auto-one-job]                           auto's sizes in one job (choices from the notes)
#       [--codecs "default bitpack:16 q8 terngrad"]
#       [--algs "twophase halving_doubling hier_twophase hier_halving auto"]
#       [--other-colls bcast,allgather] [--other-sizes 1M,4M]   per codec, default algorithm
#       [--iters 3] [--warmup 1] [--default-warmup 30] [--warmup-lib 0] [--idle-sleep-us 200] [--timeout 600] [--no-other]
#       [--openmpi]                                Debian's Open MPI instead of MPICH: coll_bench
#                                                  and pingpong built with mpicc.openmpi, --lib
#                                                  the Open MPI build (libcompmpi_openmpi.so),
#                                                  mpirun.sh --openmpi (ob1 + TCP BTL on the
#                                                  shaped link, vader inside a node, idle ranks
#                                                  yield: mpi_yield_when_idle)
#       --warmup-lib L: L untimed calls of libcompmpi's arm alone before each size's paired
#                                                  warm-ups (coll_bench --warmup-lib): room for
#                                                  auto's timed choices (up to 48 calls) and the
#                                                  cost model to explore without doubling the
#                                                  job with plain calls; their time is t_warmlib_s
#
# Algorithms (allreduce): twophase / halving_doubling = the flat algorithm
# (COMPMPI_HIERARCHY=off); hier_twophase / hier_halving = the hierarchy (exact node reduce,
# that algorithm among the node leaders, exact node bcast), only where R >= 2; auto =
# libcompmpi's defaults (hierarchy=auto, allreduce_algorithm=auto). Codecs: `default` =
# no COMPMPI_* setting but statistics and one thread (awp bitpack, cost model), run with
# auto only and --default-warmup untimed iterations (the cost model explores 10-28 calls
# of a size class, exact and compressed in pairs: src/runtime/costmodel.h, kCostExplore*;
# fewer warm-ups time the exploration itself, whose pairs each add a barrier and an
# agreement); `bitpack:16`, `q8`, `terngrad` = that codec,
# policy static, cost model off (the algorithm as it is).
#
# Every rank runs with COMPMPI_THREADS=1 and under mpirun.sh --idle-sleep (a waiting rank
# sleeps MPITEST_IDLE_SLEEP_US instead of spinning: 16 ranks on 2 cores otherwise starve
# each other; both arms alike), --finalize-fix and --ucx-eager. Per topology the cluster is
# brought up once and pingpong measures alpha and beta between two nodes and beta with every
# link loaded, and (R >= 2) alpha and beta inside a node, one pair and every node's pairs at
# once (alphabeta.tsv). Output: DIR/raw.tsv (one row per job line), DIR/alphabeta.tsv,
# DIR/meta.txt, DIR/logs/. bench/netem/scale_report.py turns them into tables and plots.
set -euo pipefail
dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
die() { echo "run_scale.sh: error: $*" >&2; exit 2; }
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }

out="" lib="" topos="4x1 8x1 16x1 2x2 4x2 8x2 4x4" rate=200mbit delay=1000 burst=64kb
sizes=1M,4M,16M auto_sizes=1M,4M,16M,64M codecs="default bitpack:16 q8 terngrad"
algs="twophase halving_doubling hier_twophase hier_halving auto" other_colls=bcast,allgather other_sizes=1M,4M
iters=3 warmup=1 wlib=0 dwarmup=30 idle_us=200 timeout_s=600 other=1 auto_one=0 ompi=0
orig_args="$*"
while [ $# -gt 0 ]; do
    case $1 in
        --out) out=$2; shift 2 ;;
        --lib) lib=$2; shift 2 ;;
        --topos) topos=$2; shift 2 ;;
        --rate) rate=$2; shift 2 ;;
        --delay) delay=$2; shift 2 ;;
        --burst) burst=$2; shift 2 ;;
        --sizes) sizes=$2; shift 2 ;;
        --auto-sizes) auto_sizes=$2; shift 2 ;;
        --codecs) codecs=$2; shift 2 ;;
        --algs) algs=$2; shift 2 ;;
        --other-colls) other_colls=$2; shift 2 ;;
        --other-sizes) other_sizes=$2; shift 2 ;;
        --iters) iters=$2; shift 2 ;;
        --warmup) warmup=$2; shift 2 ;;
        --default-warmup) dwarmup=$2; shift 2 ;;
        --warmup-lib) wlib=$2; shift 2 ;;
        --idle-sleep-us) idle_us=$2; shift 2 ;;
        --timeout) timeout_s=$2; shift 2 ;;
        --no-other) other=0; shift ;;
        --auto-one-job) auto_one=1; shift ;;
        --openmpi) ompi=1; shift ;;
        -h|--help) awk 'NR > 1 && /^# SPDX-License-Identifier:/ { next } NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        *) die "unknown option '$1' (see --help)" ;;
    esac
done
[ -n "$out" ] || die "--out DIR is required"
[ -f "$lib" ] || die "--lib: no such file '$lib'"
[ "$(id -u)" -eq 0 ] || die "must be run as root (network namespaces)"
mkdir -p "$out/logs"
out=$(cd "$out" && pwd)
# a copy: rebuilding the tree during a sweep must not change the library under test
cp "$lib" "$out/libcompmpi.so"
lib=$out/libcompmpi.so
"$dir/build.sh" >/dev/null
bench=$dir/build/coll_bench pingpong=$dir/build/pingpong
# MPICH: --finalize-fix, --ucx-eager (its UCX device); Open MPI: mpirun.sh's --openmpi
mpiopts=(--finalize-fix --ucx-eager)
if [ $ompi = 1 ]; then
    command -v mpicc.openmpi >/dev/null || die "mpicc.openmpi not found (apt-get install libopenmpi-dev)"
    mpicc.openmpi -O2 -Wall -Wextra -o "$dir/build/coll_bench_openmpi" "$dir/../coll_bench.c" -lm
    mpicc.openmpi -O2 -Wall -o "$dir/build/pingpong_openmpi" "$dir/pingpong.c"
    bench=$dir/build/coll_bench_openmpi pingpong=$dir/build/pingpong_openmpi
    mpiopts=(--openmpi)
fi

{
    echo "date: $(date -Is)"
    echo "cmd: $0 $orig_args"
    echo "git: $(git -C "$dir" log -1 --format='%h %s' 2>/dev/null | cut -c1-100)"
    echo "host: $(uname -srm), $(nproc) cores, load: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "rate=$rate delay_us=$delay burst=$burst topos=$topos sizes=$sizes auto_sizes=$auto_sizes"
    echo "codecs=$codecs algs=$algs other=$other_colls@$other_sizes iters=$iters warmup=$warmup warmup_lib=$wlib idle_sleep_us=$idle_us"
    if [ $ompi = 1 ]; then
        echo "mpi: Debian openmpi ($(mpiexec.openmpi --version 2>/dev/null | head -1)), ob1 + btl tcp (vader inside a node)"
    else
        echo "mpi: Debian mpich ($(mpichversion.mpich 2>/dev/null | head -1 | tr '\t' ' '))"
    fi
} > "$out/meta.txt"

job_pid=""
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    [ -n "$job_pid" ] && kill -TERM "$job_pid" 2>/dev/null || true
    "$dir/cluster.sh" down >/dev/null 2>&1 || true
    log "cluster down; results in $out"
    exit $rc
}
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT TERM

[ -f "$out/raw.tsv" ] || printf 'topo\tnodes\tppn\tranks\tcodec\talg\tcoll\tbytes\tt_lib_med_s\tt_lib_min_s\tt_plain_med_s\tt_plain_min_s\tratio_med\tratio_lo\tratio_hi\tcpu\thost_busy\trq_wait\tcpu_plain\thost_busy_plain\trq_wait_plain\twire_ratio\thierarchical\thalving\tcalls\tstatus\tload1\tauto_decisions\tlink_alpha_beta\tt_warmlib_s\thier_decisions\n' > "$out/raw.tsv"
[ -f "$out/alphabeta.tsv" ] || printf 'topo\tnodes\tppn\talpha_s\tbeta_Bps\tbeta_loaded_Bps\tload1\talpha_node_s\tbeta_node_Bps\tbeta_node_loaded_Bps\n' > "$out/alphabeta.tsv"

# codec_env SPEC -> ENV array
codec_env() {
    ENV=(-genv COMPMPI_STATS 1 -genv COMPMPI_THREADS 1)
    case $1 in
        default) ;;
        *:*) ENV+=(-genv COMPMPI_CODEC "${1%%:*}" -genv COMPMPI_BITS "${1#*:}" -genv COMPMPI_POLICY static -genv COMPMPI_COST_MODEL off) ;;
        *) ENV+=(-genv COMPMPI_CODEC "$1" -genv COMPMPI_POLICY static -genv COMPMPI_COST_MODEL off) ;;
    esac
}
# alg_env ALG -> appends to ENV
alg_env() {
    case $1 in
        twophase|halving_doubling) ENV+=(-genv COMPMPI_HIERARCHY off -genv COMPMPI_ALLREDUCE_ALGORITHM "$1") ;;
        hier_twophase) ENV+=(-genv COMPMPI_HIERARCHY on -genv COMPMPI_ALLREDUCE_ALGORITHM twophase) ;;
        hier_halving) ENV+=(-genv COMPMPI_HIERARCHY on -genv COMPMPI_ALLREDUCE_ALGORITHM halving_doubling) ;;
        auto|-) ;;
        *) die "unknown algorithm '$1'" ;;
    esac
}

# run_job TOPO N R CODEC ALG COLLS SIZES
run_job() {
    local topo=$1 n=$2 r=$3 codec=$4 alg=$5 colls=$6 sz=$7
    local p=$((n * r)) tag
    tag=$(printf '%s' "${topo}_${codec}_${alg}_${colls}_${sz}" | tr -c 'A-Za-z0-9_.=-' '_')
    local o=$out/logs/$tag.out e=$out/logs/$tag.err
    if grep -q "^# coll_bench: done" "$o" 2>/dev/null; then log "  $tag: done before, kept"; return 0; fi
    codec_env "$codec"
    alg_env "$alg"
    local load t0 rc=0 w=$warmup
    [ "$codec" = default ] && w=$dwarmup
    load=$(cut -d' ' -f1 /proc/loadavg)
    t0=$(date +%s)
    "$dir/mpirun.sh" -n "$p" --ppn "$r" "${mpiopts[@]}" --idle-sleep --preload "$lib" --timeout "$timeout_s" \
        -genv MPITEST_IDLE_SLEEP_US "$idle_us" "${ENV[@]}" -- \
        "$bench" --coll "$colls" --sizes "$sz" --iters "$iters" --warmup "$w" --warmup-lib "$wlib" --paired --cpu >"$o" 2>"$e" </dev/null &
    job_pid=$!
    wait "$job_pid" || rc=$?
    job_pid=""
    local status=ok
    [ $rc -ne 0 ] && status="exit$rc"
    [ $rc -ne 0 ] && grep -q "^# coll_bench: done" "$o" && status=finalize
    local line
    while read -r line; do
        kv() { printf '%s\n' "$line" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
        local c; c=$(kv coll)
        local st; st=$(grep -m1 "^compmpi-stats: coll=$c " "$e" || true)
        skv() { printf '%s\n' "$st" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
        local calls; calls=$(skv compressed)
        # auto's decisions (measured) and the alpha*beta its probe measured, from the notes
        local dec ab
        dec=$(sed -n 's/^compmpi-stats-auto: ranks=\([0-9]*\) floats=\([0-9]*\) .* -> \(.*\)$/\2@\1:\3/p' "$e" | tr '\n' ';')
        ab=$(sed -n 's/^compmpi-stats-link: .*alpha_beta_bytes=\([0-9]*\).*/\1/p' "$e" | head -1)
        # hierarchy=auto's flat-or-hierarchical decisions (floats@ranks:choice, model or timed)
        local hdec
        hdec=$(sed -n 's/^compmpi-stats-hier: ranks=\([0-9]*\) nodes=[0-9]* floats=\([0-9]*\) .*(model) -> \(.*\)$/\2@\1:\3(model)/p
                      s/^compmpi-stats-hier: ranks=\([0-9]*\) nodes=[0-9]* floats=\([0-9]*\) .* calls=\([0-9]*\) -> \(.*\)$/\2@\1:\4(timed,\3)/p' "$e" | tr '\n' ';')
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
            "$topo" "$n" "$r" "$p" "$codec" "$alg" "$c" "$(kv bytes)" "$(kv t_med_s)" "$(kv t_min_s)" \
            "$(kv t_plain_med_s)" "$(kv t_plain_min_s)" "$(kv ratio_med)" "$(kv ratio_lo)" "$(kv ratio_hi)" \
            "$(kv cpu)" "$(kv host_busy)" "$(kv rq_wait)" "$(kv cpu_plain)" "$(kv host_busy_plain)" "$(kv rq_wait_plain)" \
            "$(skv ratio)" "$(skv hierarchical)" "$(skv halving)" "${calls:-0}" "$status" "$load" "${dec:--}" "${ab:--}" \
            "$(kv t_warmlib_s)" "${hdec:--}" >> "$out/raw.tsv"
        log "  $topo $codec $alg $c $(kv bytes): lib $(kv t_med_s) plain $(kv t_plain_med_s) ratio_med $(kv ratio_med) cpu $(kv cpu) rq_wait $(kv rq_wait) [$status, $(($(date +%s) - t0))s]"
    done < <(grep "^coll=" "$o" || true)
    grep -q "^coll=" "$o" || log "  $tag: no result ($status; see $e)"
}

IFS=',' read -r -a auto_list <<< "$auto_sizes"
for topo in $topos; do
    [[ $topo =~ ^([0-9]+)x([0-9]+)$ ]] || die "bad topology '$topo' (want NxR)"
    n=${BASH_REMATCH[1]} r=${BASH_REMATCH[2]}
    log "=== $topo: $n nodes x $r ranks, $rate, delay ${delay} us, burst $burst (load $(cut -d' ' -f1 /proc/loadavg)) ==="
    "$dir/cluster.sh" up --delay "$delay" "$n" "$rate" "$burst" 2>&1 | tail -1 >&2
    if ! grep -q "^$topo	" "$out/alphabeta.tsv"; then
        pp=$out/logs/${topo}_pingpong.out
        "$dir/mpirun.sh" -n $((n * r)) --ppn "$r" "${mpiopts[@]}" --idle-sleep --timeout 300 \
            -genv MPITEST_IDLE_SLEEP_US "$idle_us" -- "$pingpong" >"$pp" 2>&1 </dev/null || true
        a=$(sed -n 's/^pingpong: alpha_s=\([^ ]*\).*/\1/p' "$pp") b=$(sed -n 's/^pingpong: alpha_s=.* beta_Bps=\([^ ]*\).*/\1/p' "$pp")
        bl=$(sed -n 's/.* beta_loaded_Bps=\([^ ]*\).*/\1/p' "$pp")
        # inside a node (R >= 2): shared memory, one pair, and every node's pairs at once
        na=$(sed -n 's/^pingpong: node_alpha_s=\([^ ]*\).*/\1/p' "$pp") nb=$(sed -n 's/.* node_beta_Bps=\([^ ]*\).*/\1/p' "$pp")
        nbl=$(sed -n 's/.*node_beta_loaded_Bps=\([^ ]*\).*/\1/p' "$pp")
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$topo" "$n" "$r" "${a:-na}" "${b:-na}" "${bl:-na}" \
            "$(cut -d' ' -f1 /proc/loadavg)" "${na:-na}" "${nb:-na}" "${nbl:-na}" >> "$out/alphabeta.tsv"
        log "  pingpong: alpha ${a:-na} s, beta ${b:-na} B/s, loaded ${bl:-na} B/s; node: alpha ${na:-na} s, beta ${nb:-na} B/s, loaded ${nbl:-na} B/s"
    fi
    for codec in $codecs; do
        for alg in $algs; do
            case $alg in hier_*) [ "$r" -ge 2 ] || continue ;; esac
            [ "$codec" = default ] && [ "$alg" != auto ] && continue
            if [ "$alg" = auto ] && [ $auto_one = 1 ]; then
                run_job "$topo" "$n" "$r" "$codec" auto allreduce "$auto_sizes"
            elif [ "$alg" = auto ]; then
                for s in "${auto_list[@]}"; do run_job "$topo" "$n" "$r" "$codec" auto allreduce "$s"; done
            else
                run_job "$topo" "$n" "$r" "$codec" "$alg" allreduce "$sizes"
            fi
        done
        [ $other = 1 ] && run_job "$topo" "$n" "$r" "$codec" - "$other_colls" "$other_sizes"
    done
    "$dir/cluster.sh" down >/dev/null 2>&1
done
log "all done"

#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The SimGrid SMPI allreduce sweep of docs/scale.md ("Simulated with SimGrid SMPI"): libcompmpi
# (bench/smpi/allreduce_sim, built by scripts/build-smpi.sh) against SMPI's own allreduce, on
# simulated clusters, timed on the simulated clock. One smpirun per (platform, Gbit/s, P);
# its result lines go to OUT/results.txt with the run's parameters in front:
#   topo=cluster gbit=25 R=1 comp=on sim P=16 MiB=4 config=bp16.tp t_s=... speedup=... ...
# and its host wall time and peak memory to OUT/wall.txt.
#
#   bench/smpi/run.sh [-o OUT] [-P "16 32 64 128"] [-t "cluster fattree"] [-g "10 25 100"]
#                     [-r R] [-s "1 4 16 64"] [-m MAX_MIB] [-c GROUPS] [-x] [-w W] [-i I] [-A ALG]
#                     [-C "bp16 q8 tg"]
#   -o OUT     output folder (default bench/smpi/out)
#   -P         simulated ranks; -r R ranks per host (hosts = P/R; default 1)
#   -t, -g     platforms (bench/smpi/platform.sh) and link rates in Gbit/s
#   -s, -m     per-rank buffer sizes in MiB; sizes with P x size > MAX_MIB (default 1024) are
#              left out: the host's memory is ~4 x P x size (buffers, workspaces)
#   -c GROUPS  comma list (default plain,default,algos): plain = SMPI's allreduce (PMPI);
#              default = libcompmpi's defaults (awp + cost model; 8 warm-up calls so that the
#              cost model has explored); algos = bitpack 16 (bp16), q8, terngrad (tg), each with
#              allreduce_algorithm=twophase (.tp) and halving_doubling (.hd); auto = each with
#              allreduce_algorithm=auto (.auto); hier = each with the hierarchy on (.hier,
#              R > 1; leaders pick their algorithm with auto). With R > 1, algos and auto run
#              with hierarchy=off (flat), so .hier shows what the hierarchy adds.
#   -x         computation not simulated (--cfg=smpi/simulate-computation:no): communication
#              only, codecs free (comp=off in the results)
#   -w, -i     warm-up and timed calls per configuration (default 1 and 1: the simulation is
#              deterministic but for the measured CPU time of the codecs); with -x SMPI's own
#              allreduce has no warm-up call (deterministic, and the same time with one)
#   -C         the codecs of the groups algos, auto and hier (default all three)
#   -A ALG     SMPI's alltoall algorithm (--cfg=smpi/alltoall:ALG; a2a=ALG in the results),
#              e.g. pair: Open MPI's rules choose basic_linear for blocks under 3000 bytes, all
#              P-1 requests in one MPI_Waitall, which SMPI 3.32 completes in time quadratic in
#              P per rank (the two-phase allreduce's alltoall at 256 ranks: minutes per call)
# What is simulated: every rank's computation is its thread's CPU time on this machine
# (host speed 1 Gflop/s, --cfg=smpi/host-speed:1Gf: 1:1; COMPMPI_THREADS=1: SMPI counts only
# the calling thread), the network is SMPI's flow model with its piecewise factors set to 1
# (bw-factor, lat-factor) and no cross traffic, so a message of s bytes between two hosts
# takes 2 us + s / link rate on an idle path: the alpha and beta of tools/scale_model.py.
# SMPI's collectives are chosen as Open MPI's rules choose them (--cfg=smpi/coll-selector:ompi:
# ring allreduce for large buffers, at the alpha-beta optimum 2(P-1)/P x size / rate).
# MPI_Test costs 1 us of simulated time (--cfg=smpi/test:1e-6, grow-injected-times:no): SMPI's
# default charges every MPI_Test a growing delay (its guard against busy-wait loops), which made
# the pipelined two-phase allreduce -- it tests its requests between chunk encodes so that real
# MPIs progress them -- 2-4x slower than without segments (docs/scale.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
OUT=$ROOT/bench/smpi/out PS="16 32 64 128" TOPOS="cluster fattree" GBITS="10 25 100" R=1
SIZES="1 4 16 64" MAXMIB=1024 CGROUPS=plain,default,algos COMP=on WARM=1 ITERS=1 A2A="" CODECS="bp16 q8 tg"
while getopts "o:P:t:g:r:s:m:c:xw:i:A:C:" o; do
    case $o in
        o) OUT=$OPTARG ;; P) PS=$OPTARG ;; t) TOPOS=$OPTARG ;; g) GBITS=$OPTARG ;; r) R=$OPTARG ;;
        s) SIZES=$OPTARG ;; m) MAXMIB=$OPTARG ;; c) CGROUPS=$OPTARG ;; x) COMP=off ;;
        w) WARM=$OPTARG ;; i) ITERS=$OPTARG ;; A) A2A=$OPTARG ;; C) CODECS=$OPTARG ;;
        *) sed -n '3,45p' "$0"; exit 1 ;;
    esac
done
BUILD=${BUILD_DIR:-$ROOT/_build-smpi}
LIB=$BUILD/.libs/libcompmpi_smpi.so.0
DRIVER=$BUILD/bench/smpi/allreduce_sim
[ -f "$LIB" ] && [ -x "$DRIVER" ] || { echo "run.sh: build first: scripts/build-smpi.sh" >&2; exit 1; }
mkdir -p "$OUT"

codecs=()
for c in "bp16:codec=bitpack,bits=16" "q8:codec=q8,policy=static" "tg:codec=terngrad,policy=static"; do
    [[ " $CODECS " == *" ${c%%:*} "* ]] && codecs+=("$c")
done
configs=()
flat=""
[ "$R" -gt 1 ] && flat=",hierarchy=off"
for g in ${CGROUPS//,/ }; do
    case $g in
        plain) if [ $COMP = off ]; then configs+=(-c plain:warm=0); else configs+=(-c plain); fi ;;
        default) configs+=(-c "default:warm=8") ;;
        algos) for c in "${codecs[@]}"; do
                   configs+=(-c "${c%%:*}.tp:${c#*:},allreduce_algorithm=twophase$flat")
                   configs+=(-c "${c%%:*}.hd:${c#*:},allreduce_algorithm=halving_doubling$flat")
               done ;;
        auto) for c in "${codecs[@]}"; do configs+=(-c "${c%%:*}.auto:${c#*:},allreduce_algorithm=auto$flat"); done ;;
        hier) for c in "${codecs[@]}"; do configs+=(-c "${c%%:*}.hier:${c#*:},hierarchy=on"); done ;;
        *) echo "run.sh: unknown group $g" >&2; exit 1 ;;
    esac
done

cfgs=(--cfg=smpi/host-speed:1Gf "--cfg=smpi/privatize-libs:$LIB" --cfg=smpi/coll-selector:ompi
      --cfg=smpi/bw-factor:0:1 --cfg=smpi/lat-factor:0:1 --cfg=network/crosstraffic:0
      --cfg=smpi/test:1e-6 --cfg=smpi/grow-injected-times:no
      --log=xbt_cfg.thres:warning --log=smpi_coll.thres:warning --log=smpi_colls.thres:warning
      --log=smpi_config.thres:warning)
[ $COMP = off ] && cfgs+=(--cfg=smpi/simulate-computation:no)
[ -n "$A2A" ] && cfgs+=("--cfg=smpi/alltoall:$A2A")

for topo in $TOPOS; do
    for gbit in $GBITS; do
        for P in $PS; do
            sizes=""
            for s in $SIZES; do
                awk -v p="$P" -v s="$s" -v m="$MAXMIB" 'BEGIN { exit !(p * s <= m) }' && sizes="${sizes:+$sizes,}$s"
            done
            [ -n "$sizes" ] || continue
            hosts=$((P / R))
            plat=$OUT/$topo-$gbit-$hosts-$R
            bench/smpi/platform.sh "$topo" "$gbit" "$hosts" "$R" "$plat"
            tag="topo=$topo gbit=$gbit R=$R comp=$COMP${A2A:+ a2a=$A2A}"
            echo "run.sh: $tag P=$P MiB=$sizes" >&2
            t0=$(date +%s.%N)
            # each privatized copy of libcompmpi takes static TLS (initial-exec variables):
            # glibc's spare room holds only a few copies
            env GLIBC_TUNABLES=glibc.rtld.optional_static_tls=$((4096 * P + 65536)) \
                COMPMPI_THREADS=1 COMPMPI_NB_PROGRESS=off \
                /usr/bin/time -f "maxrss_kb=%M" -o "$OUT/.time" \
                smpirun -np "$P" -platform "$plat.xml" -hostfile "$plat.hosts" "${cfgs[@]}" \
                "$DRIVER" -s "$sizes" -w "$WARM" -i "$ITERS" "${configs[@]}" >"$OUT/.log" 2>&1 || {
                    echo "run.sh: smpirun failed ($tag P=$P), see $OUT/fail-$topo-$gbit-$P-$R.log" >&2
                    cp "$OUT/.log" "$OUT/fail-$topo-$gbit-$P-$R.log"
                }
            t1=$(date +%s.%N)
            grep '^sim ' "$OUT/.log" | sed "s/^/$tag /" >>"$OUT/results.txt" || true
            echo "$tag P=$P MiB=$sizes groups=$CGROUPS wall_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}') $(cat "$OUT/.time" | tail -1)" \
                | tee -a "$OUT/wall.txt" >&2
        done
    done
done

#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# run_bench.sh — libcompmpi vs. plain MPICH on the emulated cluster.
#
#   run_bench.sh --out DIR [--lib PATH/libcompmpi.so] [--ranks "2 4"] [--rate 1gbit]
#                [--sizes 4M,16M,64M,256M] [--codecs "none bitpack:16 q8 terngrad fft_topk"]
#                [--colls allreduce,allgather,bcast] [--iters 5] [--warmup 1]
#                [--data gradient] [--seed 42] [--no-check]
#                [--mpi-prefix PREFIX] [--bench PATH] [--burst 512kb] [--latency 50ms]
#                [--timeout 300] [--grace 10] [--finalize-fix auto|on|off]
#                [--ucx-eager auto|on|off]
#
# For every rank count P (cluster brought up once with max(P) hosts and torn down
# on exit, also on error or Ctrl-C) it runs, one job per (collective, size):
#   * "mpi": coll_bench with NO LD_PRELOAD at all (real MPICH, the baseline);
#   * each codec spec under LD_PRELOAD=--lib with COMPMPI_STATS=1.
# Codec spec syntax:  codec[:bits][+KEY=VAL]...
#   codec       -> -genv COMPMPI_CODEC codec -genv COMPMPI_POLICY static
#   :bits       -> -genv COMPMPI_BITS bits
#   default     -> libcompmpi's defaults (no COMPMPI_CODEC/POLICY; use --warmup 8 so the
#                  cost model's exploration calls are not timed)
#   +KEY=VAL    -> -genv COMPMPI_KEY VAL, as in bench/run_loopback.sh ("q8+MIN_BYTES=0",
#                  "bitpack+POLICY=awp" overrides the policy since it comes later; not with :bits);
#                  KEY is taken verbatim if it starts with COMPMPI_, UCX_, MPIR_CVAR_,
#                  MPICH_ or OMP_ (any other variable: write it with such a prefix)
#
# Output in DIR:
#   results.tsv  codec ranks coll bytes t_med_s speedup rel_err identical ratio
#                ideal_t_s frac_of_ideal t_min_s t_max_s status
#       speedup       = t_med(mpi) / t_med(codec) at the same ranks/coll/bytes
#       ratio         = compression ratio from rank 0's "compmpi-stats:" line (n/a if none)
#       ideal_t_s     = t_med(mpi) / ratio   (a codec with free encode/decode)
#       frac_of_ideal = ideal_t_s / t_med = speedup / ratio  (1 = ideal)
#       status        = ok | finalize_hang (results complete, job killed --grace s after
#                       "# coll_bench: done") | timeout | failed(rc) | no_result
#   speedup.png  speedup vs size, one panel per (ranks, collective), one line per codec
#   ideal.png    frac_of_ideal, same layout (only if some ratio is known)
#   raw.tsv, logs/*.out|*.err (stdout / stderr of every job), meta.txt
#
# --finalize-fix (default auto = on with Debian's ch4:ucx MPICH, off with
# --mpi-prefix): preload bench/netem/build/ucx_finalize_fix.so into every job,
# the baseline included.  It only replaces ucp_disconnect_nb(), which MPICH calls
# in MPI_Finalize after all communication, and removes the MPI_Finalize hang of
# MPICH 4.0.2/UCX 1.13 over TCP.  With it off, a job that hangs after printing
# "# coll_bench: done" is killed after --grace seconds (status finalize_hang,
# results kept).
#
# --ucx-eager (default auto = on with Debian's ch4:ucx MPICH): UCX_RNDV_THRESH=inf
# for every job, the baseline included.  With UCX's default rendezvous protocol
# the shaped TCP links give bimodal times from job to job (4 MiB allreduce 0.035
# or 0.08-0.12 s); eager-only is steady and at line rate (README.md).
#
# With --mpi-prefix PREFIX (a build_mpich_ch3.sh build) coll_bench is compiled with
# PREFIX/bin/mpicc and launched with PREFIX/bin/mpiexec; --lib must then be a
# libcompmpi built against that MPI too.
set -euo pipefail

dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
die() { echo "run_bench.sh: error: $*" >&2; exit 2; }
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }

orig_args="$*"
lib=""; ranks="2"; rate="1gbit"; sizes="4M,16M,64M,256M"
codecs="none bitpack:16 q8 terngrad fft_topk"; out=""
colls="allreduce,allgather,bcast"; iters=5; warmup=1; data=gradient; seed=42; check=1
mpi_prefix=""; bench=""; burst=512kb; latency=50ms; timeout_s=300; grace=10; ffix=auto; eager=auto
while [ $# -gt 0 ]; do
    case $1 in
        --lib) lib=$2; shift 2 ;;
        --ranks) ranks=$2; shift 2 ;;
        --rate) rate=$2; shift 2 ;;
        --sizes) sizes=$2; shift 2 ;;
        --codecs) codecs=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --colls|--coll) colls=$2; shift 2 ;;
        --iters) iters=$2; shift 2 ;;
        --warmup) warmup=$2; shift 2 ;;
        --data) data=$2; shift 2 ;;
        --seed) seed=$2; shift 2 ;;
        --no-check) check=0; shift ;;
        --mpi-prefix) mpi_prefix=$2; shift 2 ;;
        --bench) bench=$2; shift 2 ;;
        --burst) burst=$2; shift 2 ;;
        --latency) latency=$2; shift 2 ;;
        --timeout) timeout_s=$2; shift 2 ;;
        --grace) grace=$2; shift 2 ;;
        --finalize-fix) ffix=$2; shift 2 ;;
        --ucx-eager) eager=$2; shift 2 ;;
        -h|--help) sed -n '3,53p' "$0"; exit 0 ;;
        *) die "unknown option '$1' (see --help)" ;;
    esac
done
[ -n "$out" ] || die "--out DIR is required"
[ "$(id -u)" -eq 0 ] || die "must be run as root (network namespaces)"
[ "$colls" = all ] && colls="allreduce,allgather,bcast"
maxp=0
for p in $ranks; do
    [[ $p =~ ^[0-9]+$ ]] && [ "$p" -ge 1 ] || die "--ranks: bad rank count '$p'"
    [ "$p" -gt "$maxp" ] && maxp=$p
done
[ "$maxp" -ge 1 ] || die "--ranks is empty"
mkdir -p "$out/logs"
out=$(cd "$out" && pwd)

if [ -n "$mpi_prefix" ]; then
    mpi_prefix=$(cd "$mpi_prefix" && pwd) || die "--mpi-prefix: no such directory"
    [ -x "$mpi_prefix/bin/mpiexec" ] || die "$mpi_prefix/bin/mpiexec missing (run build_mpich_ch3.sh $mpi_prefix)"
fi

# libcompmpi: tolerate its absence (baseline only)
if [ -n "$lib" ]; then
    if [ -f "$lib" ]; then
        lib=$(cd "$(dirname "$lib")" && pwd)/$(basename "$lib")
    else
        log "WARNING: --lib $lib does not exist: running the uncompressed baseline only"
        lib=""
    fi
fi
[ -n "$lib" ] || codecs=""

# coll_bench
if [ -z "$bench" ]; then
    bench=$out/coll_bench
    if [ -n "$mpi_prefix" ]; then "$dir/build.sh" --mpi-prefix "$mpi_prefix" "$bench" >/dev/null
    else "$dir/build.sh" "$bench" >/dev/null; fi
fi
[ -x "$bench" ] || die "coll_bench not found at $bench"

mpirun_args=()
[ -n "$mpi_prefix" ] && mpirun_args+=(--mpi-prefix "$mpi_prefix")
case $ffix in
    auto) if [ -n "$mpi_prefix" ]; then ffix=off; else ffix=on; fi ;;
    on|off) ;;
    *) die "--finalize-fix must be auto, on or off" ;;
esac
[ $ffix = on ] && mpirun_args+=(--finalize-fix)
case $eager in
    auto) if [ -n "$mpi_prefix" ]; then eager=off; else eager=on; fi ;;
    on|off) ;;
    *) die "--ucx-eager must be auto, on or off" ;;
esac
[ $eager = on ] && mpirun_args+=(--ucx-eager)

{
    echo "date: $(date -Is)"
    echo "cmd: $0 $orig_args"
    echo "host: $(uname -srm), $(nproc) cores, load: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "rate=$rate burst=$burst latency=$latency ranks=$ranks sizes=$sizes colls=$colls iters=$iters warmup=$warmup data=$data seed=$seed check=$check"
    if [ -n "$mpi_prefix" ]; then mv=$mpi_prefix/bin/mpichversion; else mv=mpichversion.mpich; fi
    echo "mpi: ${mpi_prefix:-Debian mpich} ($("$mv" 2>/dev/null | head -3 | tr '\n\t' '  '))"
    echo "lib: ${lib:-none}"
    echo "finalize-fix: $ffix"
    echo "ucx-eager (UCX_RNDV_THRESH=inf): $eager"
    echo "codecs: ${codecs:-none (baseline only)}"
} > "$out/meta.txt"

# ---- cluster lifetime ----------------------------------------------------------
job_pid=""
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if [ -n "$job_pid" ] && kill -0 "$job_pid" 2>/dev/null; then
        kill -TERM "$job_pid" 2>/dev/null || true
        sleep 1
    fi
    "$dir/cluster.sh" down >/dev/null 2>&1 || true
    [ -s "$out/raw.tsv" ] && summarize || true
    log "cluster down; results in $out"
    exit $rc
}
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT TERM

"$dir/cluster.sh" up "$maxp" "$rate" "$burst" "$latency"

printf 'codec\tranks\tcoll\tbytes\tt_min_s\tt_med_s\tt_max_s\trel_err\tidentical\tratio\tstatus\n' > "$out/raw.tsv"

# run_job LABEL P COLL SIZE [mpirun.sh options...]
run_job() {
    local label=$1 p=$2 coll=$3 size=$4; shift 4
    local tag
    tag=$(printf '%s' "P${p}_${label}_${coll}_${size}" | tr -c 'A-Za-z0-9_.=-' '_')
    local o=$out/logs/$tag.out e=$out/logs/$tag.err
    local bargs=(--coll "$coll" --sizes "$size" --iters "$iters" --warmup "$warmup" --data "$data" --seed "$seed")
    [ "$check" -eq 1 ] && bargs+=(--check)

    "$dir/mpirun.sh" -n "$p" "${mpirun_args[@]}" "$@" -- "$bench" "${bargs[@]}" >"$o" 2>"$e" &
    job_pid=$!
    local start now done_at="" status="" rc=0
    start=$(date +%s)
    while :; do
        if ! kill -0 "$job_pid" 2>/dev/null; then
            wait "$job_pid" && rc=0 || rc=$?
            status=ok; [ $rc -ne 0 ] && status="failed($rc)"
            break
        fi
        now=$(date +%s)
        if [ -z "$done_at" ] && grep -q '^# coll_bench: done' "$o" 2>/dev/null; then done_at=$now; fi
        if [ -n "$done_at" ] && [ $((now - done_at)) -ge "$grace" ]; then status=finalize_hang; break; fi
        if [ $((now - start)) -ge "$timeout_s" ]; then status=timeout; break; fi
        sleep 0.5
    done
    if [ "$status" = finalize_hang ] || [ "$status" = timeout ]; then
        kill -TERM "$job_pid" 2>/dev/null || true
        for _ in $(seq 20); do kill -0 "$job_pid" 2>/dev/null || break; sleep 0.25; done
        "$dir/cluster.sh" kill >/dev/null 2>&1 || true
        wait "$job_pid" 2>/dev/null || true
    fi
    job_pid=""

    local line ratio
    line=$(grep -m1 "^coll=$coll " "$o" || true)
    if [ -z "$line" ]; then
        [ "$status" = ok ] && status=no_result
        log "  $label P=$p $coll $size: $status (see $e)"
        printf '%s\t%s\t%s\t%s\tn/a\tn/a\tn/a\tn/a\tn/a\tn/a\t%s\n' "$label" "$p" "$coll" "$(numbytes "$size")" "$status" >> "$out/raw.tsv"
        return 0
    fi
    ratio=$(grep -m1 "^compmpi-stats: coll=$coll " "$e" 2>/dev/null | sed -n 's/.* ratio=\([^ ]*\).*/\1/p' || true)
    [ -n "$ratio" ] || ratio=n/a
    kv() { printf '%s\n' "$line" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$label" "$p" "$coll" "$(kv bytes)" \
        "$(kv t_min_s)" "$(kv t_med_s)" "$(kv t_max_s)" "$(kv rel_err)" "$(kv identical)" "$ratio" "$status" >> "$out/raw.tsv"
    log "  $label P=$p $coll $size: t_med=$(kv t_med_s)s rel_err=$(kv rel_err) identical=$(kv identical) ratio=$ratio [$status, $(( $(date +%s) - start ))s]"
}

numbytes() {  # 4M -> 4194304 (same rules as coll_bench)
    awk -v s="$1" 'BEGIN{ m=1; u=toupper(s); sub(/I?B$/,"",u);
        if (u ~ /K$/) m=1024; else if (u ~ /M$/) m=1048576; else if (u ~ /G$/) m=1073741824;
        sub(/[KMG]$/,"",u); printf "%d\n", u*m }'
}

summarize() {
    # join each row with its baseline ("mpi" at same ranks/coll/bytes)
    awk -F'\t' -v OFS='\t' '
        NR == FNR { if (FNR > 1 && $1 == "mpi" && $6 != "n/a") base[$2 FS $3 FS $4] = $6; next }
        FNR == 1 { print "codec","ranks","coll","bytes","t_med_s","speedup","rel_err","identical","ratio","ideal_t_s","frac_of_ideal","t_min_s","t_max_s","status"; next }
        {
            k = $2 FS $3 FS $4; b = (k in base) ? base[k] : ""
            sp = "n/a"; it = "n/a"; fr = "n/a"
            if (b != "" && $6 != "n/a" && $6 > 0) sp = sprintf("%.3f", b / $6)
            if (b != "" && $10 != "n/a" && $10 > 0) { it = sprintf("%.6f", b / $10); if ($6 != "n/a" && $6 > 0) fr = sprintf("%.3f", (b / $10) / $6) }
            print $1, $2, $3, $4, $6, sp, $8, $9, $10, it, fr, $5, $7, $11
        }' "$out/raw.tsv" "$out/raw.tsv" > "$out/results.tsv"
    plot || log "WARNING: plotting failed"
}

plot() {
    command -v gnuplot >/dev/null || { log "gnuplot not found: no plots"; return 0; }
    local pd=$out/plot
    rm -rf "$pd"; mkdir -p "$pd"
    # one data file per (ranks, coll, codec): bytes speedup frac_of_ideal
    awk -F'\t' -v d="$pd" 'NR > 1 && $6 != "n/a" {
        f = d "/" $2 "__" $3 "__" $1 ".dat"; gsub(/[^A-Za-z0-9_.\/=+:-]/, "_", f)
        print $4, $6, ($11 == "n/a" ? "NaN" : $11) >> f }' "$out/results.tsv"
    local ps cs labels nrows ncols
    ps=$(awk -F'\t' 'NR > 1 {print $2}' "$out/results.tsv" | sort -nu | tr '\n' ' ')
    cs=$(awk -F'\t' 'NR > 1 {print $3}' "$out/results.tsv" | awk '!s[$0]++' | tr '\n' ' ')
    labels=$(awk -F'\t' 'NR > 1 {print $1}' "$out/results.tsv" | awk '!s[$0]++' | tr '\n' ' ')
    nrows=$(wc -w <<< "$ps"); ncols=$(wc -w <<< "$cs")
    [ "$nrows" -ge 1 ] && [ "$ncols" -ge 1 ] || return 0
    local col=2 name=speedup ylabel="speedup vs MPICH"
    for what in speedup ideal; do
        if [ $what = ideal ]; then
            col=3; name=ideal; ylabel="fraction of ideal (speedup / ratio)"
            awk '$3 != "NaN"' "$pd"/*.dat 2>/dev/null | grep . >/dev/null || continue
        fi
        {
            echo "set terminal pngcairo size $((480 * ncols)),$((380 * nrows)) font ',10'"
            echo "set output '$out/$name.png'"
            echo "set multiplot layout $nrows,$ncols title 'libcompmpi $name, $rate emulated links ($(basename "$out"))' noenhanced"
            echo "set logscale x 2; set format x '%.0b%BB'; set grid; set key top left noenhanced font ',8'"
            echo "set xlabel 'bytes per rank buffer'; set ylabel '$ylabel'; set yrange [0:*]"
            local p c l f first cmd li
            for p in $ps; do for c in $cs; do
                echo "set title '$c, $p ranks' noenhanced"
                first=1; cmd="plot "; li=0
                for l in $labels; do
                    li=$((li + 1))
                    f="$pd/${p}__${c}__${l}.dat"; f=$(printf '%s' "$f" | sed 's/[^A-Za-z0-9_.\/=+:-]/_/g')
                    [ -f "$f" ] || continue
                    if [ $what = ideal ]; then
                        [ "$l" != mpi ] && awk '$3 != "NaN" {ok=1} END {exit !ok}' "$f" || continue
                    fi
                    [ $first -eq 1 ] || cmd+=", "
                    first=0
                    if [ "$l" = mpi ]; then cmd+=$(printf "'%s' using 1:%d with lines dt 2 lw 2 lc rgb 'black' title 'MPICH (no lib)'" "$f" "$col")
                    else cmd+=$(printf "'%s' using 1:%d with linespoints lw 2 lc %d title '%s'" "$f" "$col" "$li" "$l"); fi
                done
                if [ $first -eq 1 ]; then   # empty panel
                    echo "set label 1 'no data' at graph 0.45,0.5"
                    echo "plot [1024:1048576] [0:1] 0 notitle lc rgb 'white'"
                    echo "unset label 1"
                else
                    echo "$cmd"
                fi
            done; done
            echo "unset multiplot"
        } > "$pd/$name.gp"
        gnuplot "$pd/$name.gp" 2> "$pd/$name.gp.err" || { cat "$pd/$name.gp.err" >&2; return 1; }
    done
}

# ---- the runs --------------------------------------------------------------------
IFS=',' read -r -a coll_list <<< "$colls"
IFS=',' read -r -a size_list <<< "$sizes"
for p in $ranks; do
    log "=== $p ranks: baseline (MPICH without libcompmpi) ==="
    for c in "${coll_list[@]}"; do for s in "${size_list[@]}"; do
        run_job mpi "$p" "$c" "$s"
    done; done
    for spec in $codecs; do
        log "=== $p ranks: $spec ==="
        base=${spec%%+*}; extras=""
        [ "$base" != "$spec" ] && extras=${spec#*+}
        codec=${base%%:*}; bits=""
        [ "$codec" != "$base" ] && bits=${base#*:}
        # The namespaces share this machine's cores, which hwloc cannot see: each rank would
        # think it owns the node and start one OpenMP thread per core, and the ranks would
        # then fight over the cores (measured: 40-80 ms lost per call). One thread per rank;
        # a spec's +THREADS=N comes later and wins.
        if [ "$codec" = default ]; then
            # libcompmpi's defaults (policy, codec, cost model): only statistics and one thread
            envs=(--preload "$lib" -genv COMPMPI_STATS 1 -genv COMPMPI_THREADS 1)
        else
            envs=(--preload "$lib" -genv COMPMPI_STATS 1 -genv COMPMPI_THREADS 1 -genv COMPMPI_CODEC "$codec" -genv COMPMPI_POLICY static)
        fi
        [ -n "$bits" ] && envs+=(-genv COMPMPI_BITS "$bits")
        if [ -n "$extras" ]; then
            IFS='+' read -r -a kvs <<< "$extras"
            for kv in "${kvs[@]}"; do
                [[ $kv == *=* ]] || die "codec spec '$spec': '+$kv' is not KEY=VAL"
                k=${kv%%=*}
                case $k in COMPMPI_*|UCX_*|MPIR_CVAR_*|MPICH_*|OMP_*) ;; *) k=COMPMPI_$k ;; esac
                envs+=(-genv "$k" "${kv#*=}")
            done
        fi
        for c in "${coll_list[@]}"; do for s in "${size_list[@]}"; do
            run_job "$spec" "$p" "$c" "$s" "${envs[@]}"
        done; done
    done
done
log "all runs done"

#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# run_codecs.sh — train the Fashion-MNIST example under several libcompmpi
# codecs and compare accuracy, bytes on the wire and time.
#
#   examples/run_codecs.sh --lib PATH/libcompmpi.so --ranks "2 4" \
#       --codecs "baseline none bitpack:awp q8 q8+COMPMPI_ERROR_FEEDBACK=1" \
#       --epochs 2 --train-limit 20000 --out DIR
#   examples/run_codecs.sh --quick [--lib PATH] [--codecs "..."]   # ~1-2 min demo, 2 ranks
#   --netem 1gbit: run every rank in its own network namespace on links shaped to that rate
#                  (bench/netem; root), so time per epoch reflects a bandwidth-limited network
#
# Codec spec syntax:   NAME[:POLICY][+VAR=VALUE]...
#   NAME      value of COMPMPI_CODEC; the special name "baseline" runs the
#             trainer WITHOUT LD_PRELOAD (plain 32-bit MPI).
#   POLICY    value of COMPMPI_POLICY (default: static; ignored for baseline); a number
#             instead is a static bit width (bitpack:16 = policy static, COMPMPI_BITS=16,
#             as in bench/netem/run_bench.sh).
#   +VAR=VAL  extra environment for the ranks (passed with -genv), repeatable,
#             e.g.  q8+COMPMPI_ERROR_FEEDBACK=1  or  bitpack:awp+COMPMPI_X=3+COMPMPI_Y=a
# A baseline run is added automatically (needed for the accuracy gap) unless
# --no-baseline is given.  See examples/README.md.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
prog="$(basename "$0")"

usage() {
  cat <<EOF
usage: $prog [--lib PATH] [--ranks "2 4"] [--codecs "SPEC ..."] [--epochs E]
             [--train-limit N] [--test-limit N] [--out DIR] [--quick]
             [--bin TRAINER] [--train-args "ARGS"] [--eval-every N] [--timeout SEC]
             [--no-baseline]
  --lib PATH         libcompmpi.so to LD_PRELOAD (needed for any spec but 'baseline')
  --ranks LIST       rank counts (default "2")
  --codecs LIST      codec specs NAME[:POLICY][+VAR=VALUE]... (default: baseline, plus
                     'none' when --lib is given)
  --epochs E         epochs per run (default 2; quick: 3)
  --train-limit N    first N training samples, 0 = all 60000 (default 0; quick: 6000)
  --test-limit N     first N test samples, 0 = all 10000 (default 0; quick: 2000)
  --out DIR          output directory (default ./codec-runs)
  --quick            short demo: 2 ranks, 3 epochs on 6000 samples, 2000 test samples,
                     eval every 10 steps, 300 s timeout per run (explicit flags win)
  --bin TRAINER      use this trainer binary instead of building DIR/bin/fmnist_train
  --train-args ARGS  extra trainer flags, e.g. "--hidden 512,256 --batch 256 --lr 0.02"
  --eval-every N     extra test evaluations every N steps, for smoother accuracy curves
                     (default 0 = per epoch only; quick: 10); excluded from timings
  --timeout SEC      kill a run after SEC seconds (default 0 = never; quick: 300)
  --no-baseline      do not add a baseline run automatically
EOF
}

die() { echo "$prog: error: $*" >&2; exit 2; }

lib=""; ranks=""; codecs=""; epochs=""; train_limit=""; test_limit=""; out=""
quick=0; bin=""; train_args=""; run_timeout=""; add_baseline=1; eval_every=""; netem_rate=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --lib) lib="${2:?--lib needs a value}"; shift 2 ;;
    --ranks) ranks="${2:?--ranks needs a value}"; shift 2 ;;
    --codecs) codecs="${2:?--codecs needs a value}"; shift 2 ;;
    --epochs) epochs="${2:?--epochs needs a value}"; shift 2 ;;
    --train-limit) train_limit="${2:?--train-limit needs a value}"; shift 2 ;;
    --test-limit) test_limit="${2:?--test-limit needs a value}"; shift 2 ;;
    --out) out="${2:?--out needs a value}"; shift 2 ;;
    --bin) bin="${2:?--bin needs a value}"; shift 2 ;;
    --train-args) train_args="${2?--train-args needs a value}"; shift 2 ;;
    --eval-every) eval_every="${2:?--eval-every needs a value}"; shift 2 ;;
    --timeout) run_timeout="${2:?--timeout needs a value}"; shift 2 ;;
    --quick) quick=1; shift ;;
    --netem) netem_rate="${2:?--netem needs a rate, e.g. 1gbit}"; shift 2 ;;
    --no-baseline) add_baseline=0; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument '$1'" ;;
  esac
done

if [[ $quick == 1 ]]; then
  : "${ranks:=2}" "${epochs:=3}" "${train_limit:=6000}" "${test_limit:=2000}" "${run_timeout:=300}" "${eval_every:=10}"
fi
: "${ranks:=2}" "${epochs:=2}" "${train_limit:=0}" "${test_limit:=0}" "${run_timeout:=0}" "${eval_every:=0}"
: "${out:=codec-runs}"
if [[ -z "$codecs" ]]; then
  codecs="baseline"
  if [[ -n "$lib" ]]; then codecs="baseline none"; fi
fi

is_uint() { [[ "$1" =~ ^[0-9]+$ ]]; }
for v in "$epochs" "$train_limit" "$test_limit" "$run_timeout" "$eval_every"; do
  is_uint "$v" || die "expected a non-negative integer, got '$v'"
done
[[ "$epochs" -ge 1 ]] || die "--epochs must be >= 1"
for p in $ranks; do
  { is_uint "$p" && [[ "$p" -ge 1 ]]; } || die "--ranks: bad rank count '$p'"
done

# ---- parse codec specs ------------------------------------------------------
declare -a specs=()
for s in $codecs; do specs+=("$s"); done
[[ ${#specs[@]} -gt 0 ]] || die "--codecs is empty"
has_baseline=0
for s in "${specs[@]}"; do if [[ "${s%%+*}" == baseline ]]; then has_baseline=1; fi; done
if [[ $has_baseline == 0 && $add_baseline == 1 ]]; then
  specs=("baseline" "${specs[@]}")
fi

# spec_parse SPEC -> sets p_codec, p_policy, p_env (array of VAR=VALUE)
spec_parse() {
  local spec="$1" head rest
  head="${spec%%+*}"
  rest=""
  [[ "$spec" == *+* ]] && rest="${spec#*+}"
  p_codec="${head%%:*}"
  if [[ "$head" == *:* ]]; then p_policy="${head#*:}"; else p_policy="static"; fi
  [[ -n "$p_codec" ]] || die "spec '$spec': empty codec name"
  [[ -n "$p_policy" && "$p_policy" != *:* ]] || die "spec '$spec': bad policy (syntax NAME[:POLICY][+VAR=VALUE]...)"
  p_env=()
  if [[ "$p_policy" =~ ^[0-9]+$ ]]; then p_env+=("COMPMPI_BITS=$p_policy"); p_policy=static; fi
  if [[ -n "$rest" ]]; then
    local IFS='+' kv
    for kv in $rest; do
      [[ "$kv" =~ ^[A-Za-z_][A-Za-z0-9_]*=.*$ ]] || die "spec '$spec': '+$kv' is not VAR=VALUE"
      p_env+=("$kv")
    done
  fi
}
kv_get() { printf '%s\n' "$1" | tr ' ' '\n' | awk -F= -v k="$2" '$1 == k { print $2; exit }'; }
safe_name() { printf '%s' "$1" | tr -c 'A-Za-z0-9._-' '_'; }

need_lib=0
for s in "${specs[@]}"; do spec_parse "$s"; if [[ "$p_codec" != baseline ]]; then need_lib=1; fi; done
if [[ $need_lib == 1 ]]; then
  [[ -n "$lib" ]] || die "codec specs other than 'baseline' need --lib PATH/libcompmpi.so"
  [[ -f "$lib" ]] || die "--lib '$lib' does not exist (build libcompmpi first, or run only 'baseline')"
  lib="$(cd "$(dirname "$lib")" && pwd)/$(basename "$lib")"
fi

command -v mpiexec.mpich >/dev/null || die "mpiexec.mpich not found (apt-get install mpich)"
command -v gnuplot >/dev/null || echo "$prog: warning: gnuplot not found, no accuracy.png" >&2

# The runs must not inherit libcompmpi settings from the caller's shell.
while read -r v; do [[ -n "$v" ]] && unset "$v"; done < <(compgen -e | grep '^COMPMPI_' || true)

mkdir -p "$out/runs"

# --netem RATE: an emulated cluster (network namespaces, links shaped with tc; root only),
# torn down when this script exits
netem_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/../bench/netem" && pwd)"
if [[ -n "$netem_rate" ]]; then
  maxp=0
  for P in $ranks; do [[ "$P" -gt "$maxp" ]] && maxp=$P; done
  "$netem_dir/cluster.sh" up "$maxp" "$netem_rate" >&2 || die "could not bring up the emulated cluster"
  trap '"$netem_dir/cluster.sh" down >/dev/null 2>&1 || true' EXIT
fi
out="$(cd "$out" && pwd)"

# ---- build the trainer ----------------------------------------------------
if [[ -z "$bin" ]]; then
  "$here/build.sh" "$out/bin" >&2
  bin="$out/bin/fmnist_train"
fi
[[ -x "$bin" ]] || die "trainer '$bin' is not executable"

ncpu="$(nproc 2>/dev/null || echo 1)"
# shellcheck disable=SC2206
extra_train=($train_args)

csv="$out/results.csv"
echo "spec,codec,policy,ranks,status,final_test_acc,gap_pp,steps,wire_bytes_per_step,uncompressed_bytes_per_step,allreduce_ratio,time_per_epoch_s,comm_per_epoch_s,t_encode_s,t_decode_s,fallback_nonfinite" >"$csv"

declare -A acc_of status_of steps_of wire_of unc_of ratio_of tep_of comm_of enc_of dec_of nonfin_of
declare -a run_keys=()
any_fail=0

# stats_sum FILE FIELD [COLL]: sum FIELD over compmpi-stats lines (all colls or one); n/a if none
stats_sum() {
  awk -v f="$2" -v c="${3:-}" '
    { i = index($0, "compmpi-stats:"); if (!i) next
      line = substr($0, i + 14); n = split(line, kv, /[ \t]+/); coll = ""; val = ""
      for (j = 1; j <= n; j++) { split(kv[j], p, "=")
        if (p[1] == "coll") coll = p[2]; if (p[1] == f) val = p[2] }
      if (c != "" && coll != c) next
      if (val != "") { s += val; found = 1 } }
    END { if (found) printf "%.10g\n", s; else print "n/a" }' "$1"
}
stats_field() {  # stats_field FILE COLL FIELD -> value or n/a
  awk -v c="$2" -v f="$3" '
    { i = index($0, "compmpi-stats:"); if (!i) next
      line = substr($0, i + 14); n = split(line, kv, /[ \t]+/); coll = ""; val = ""
      for (j = 1; j <= n; j++) { split(kv[j], p, "=")
        if (p[1] == "coll") coll = p[2]; if (p[1] == f) val = p[2] }
      if (coll == c && val != "") { print val; found = 1; exit } }
    END { if (!found) print "n/a" }' "$1"
}
div_or_na() {  # div_or_na A B [fmt]
  if [[ "$1" == n/a || "$2" == n/a || "$2" == 0 || -z "$1" || -z "$2" ]]; then echo n/a
  else awk -v a="$1" -v b="$2" -v f="${3:-%.0f}" 'BEGIN { printf f "\n", a / b }'; fi
}

echo "$prog: ${#specs[@]} spec(s) x ranks [$ranks], epochs=$epochs train_limit=$train_limit test_limit=$test_limit eval_every=$eval_every -> $out" >&2

for P in $ranks; do
  if [[ "$P" -gt "$ncpu" ]]; then
    echo "$prog: warning: $P ranks on $ncpu cores is oversubscribed; times will be pessimistic" >&2
  fi
  for spec in "${specs[@]}"; do
    spec_parse "$spec"
    name="P${P}_$(safe_name "$spec")"
    base="$out/runs/$name"
    rm -f "$base.out" "$base.err" "$base.epochs" "$base.dat" "$base.stats"
    genv=()
    if [[ "$p_codec" != baseline ]]; then
      genv+=(-genv LD_PRELOAD "$lib" -genv COMPMPI_STATS 1 -genv COMPMPI_CODEC "$p_codec"
             -genv COMPMPI_POLICY "$p_policy")
    fi
    for kv in "${p_env[@]+"${p_env[@]}"}"; do genv+=(-genv "${kv%%=*}" "${kv#*=}"); done
    train=("$bin" --epochs "$epochs" --train-limit "$train_limit" --test-limit "$test_limit"
           --eval-every "$eval_every" "${extra_train[@]+"${extra_train[@]}"}")
    if [[ -n "$netem_rate" ]]; then
      # one rank per network namespace, links shaped to $netem_rate (bench/netem); the
      # namespaces share this machine's cores: one codec thread per rank
      cmd=("$netem_dir/mpirun.sh" -n "$P" --finalize-fix --ucx-eager -genv COMPMPI_THREADS 1
           "${genv[@]+"${genv[@]}"}" -- "${train[@]}")
    else
      cmd=(mpiexec.mpich -n "$P" "${genv[@]+"${genv[@]}"}" "${train[@]}")
    fi
    if [[ "$run_timeout" -gt 0 ]]; then cmd=(timeout --kill-after=10 "$run_timeout" "${cmd[@]}"); fi
    printf '%q ' "${cmd[@]}" >"$base.cmd"; echo >>"$base.cmd"
    echo "$prog: [$name] $(cat "$base.cmd")" >&2
    rc=0
    env -u LD_PRELOAD "${cmd[@]}" >"$base.out" 2>"$base.err" </dev/null || rc=$?
    grep -E '^epoch=' "$base.out" >"$base.epochs" || true
    grep 'compmpi-stats:' "$base.err" | sed 's/.*compmpi-stats:/compmpi-stats:/' >"$base.stats" || true
    # elapsed_s test_acc per epoch, for the plot
    awk '$1 == "eval" { e = ""; a = ""; for (i = 2; i <= NF; i++) { split($i, p, "=")
             if (p[1] == "elapsed_s") e = p[2]; if (p[1] == "test_acc") a = p[2] }
           if (e != "" && a != "") print e, a }' "$base.out" >"$base.dat"
    final="$(grep -E '^final ' "$base.out" | tail -n1 || true)"
    key="$P|$spec"
    run_keys+=("$key")
    if [[ $rc -ne 0 || -z "$final" ]]; then
      any_fail=1
      if [[ $rc -eq 124 || $rc -eq 137 ]]; then status_of[$key]="TIMEOUT"; else status_of[$key]="FAILED(rc=$rc)"; fi
      echo "$prog: [$name] failed (rc=$rc); see $base.err:" >&2
      tail -n 5 "$base.err" >&2 || true
      acc_of[$key]=n/a; steps_of[$key]=n/a
    else
      status_of[$key]=ok
      acc_of[$key]="$(kv_get "$final" test_acc)"
      steps_of[$key]="$(kv_get "$final" steps)"
    fi
    if [[ -s "$base.epochs" ]]; then
      tep_of[$key]="$(awk '{ for (i = 1; i <= NF; i++) { split($i, p, "=")
          if (p[1] == "time_s") { t += p[2]; n++ } if (p[1] == "comm_s") c += p[2] } }
          END { if (n) printf "%.2f %.2f\n", t / n, c / n; else print "n/a n/a" }' "$base.epochs")"
      comm_of[$key]="${tep_of[$key]#* }"; tep_of[$key]="${tep_of[$key]% *}"
    else
      tep_of[$key]=n/a; comm_of[$key]=n/a
    fi
    wire_total="$(stats_sum "$base.stats" bytes_wire)"
    unc_total="$(stats_sum "$base.stats" bytes_uncompressed_wire)"
    wire_of[$key]="$(div_or_na "$wire_total" "${steps_of[$key]}")"
    unc_of[$key]="$(div_or_na "$unc_total" "${steps_of[$key]}")"
    ratio_of[$key]="$(stats_field "$base.stats" allreduce ratio)"
    enc_of[$key]="$(stats_sum "$base.stats" t_encode_s)"
    dec_of[$key]="$(stats_sum "$base.stats" t_decode_s)"
    nonfin_of[$key]="$(stats_sum "$base.stats" fallback_nonfinite)"
    if [[ "$p_codec" != baseline && ! -s "$base.stats" ]]; then
      echo "$prog: [$name] note: no compmpi-stats lines in stderr (library not printing stats?)" >&2
    fi
    echo "$prog: [$name] status=${status_of[$key]} test_acc=${acc_of[$key]} time/epoch_s=${tep_of[$key]}" >&2
  done
done

# ---- table -----------------------------------------------------------------
fmt_bytes() {
  if [[ "$1" == n/a ]]; then echo n/a
  else awk -v b="$1" 'BEGIN { printf "%.0f (%.2f MB)\n", b, b / 1e6 }'; fi
}
table="$out/table.md"
{
  echo "# libcompmpi codec comparison — Fashion-MNIST MLP"
  echo
  echo "epochs=$epochs train_limit=$train_limit test_limit=$test_limit eval_every=$eval_every train_args='${train_args}' host_cores=$ncpu"
  echo
  echo "| codec spec | ranks | final test acc | gap vs baseline (pp) | wire bytes/step | uncompressed bytes/step | allreduce ratio | time/epoch (s) | comm/epoch (s) | status |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"
  for key in "${run_keys[@]}"; do
    P="${key%%|*}"; spec="${key#*|}"
    acc="${acc_of[$key]}"
    bkey=""
    for k2 in "${run_keys[@]}"; do
      s2="${k2#*|}"
      if [[ "${k2%%|*}" == "$P" && "$s2" == baseline ]]; then bkey="$k2"; fi
    done
    gap=n/a
    if [[ -n "$bkey" && "$acc" != n/a && "${acc_of[$bkey]}" != n/a ]]; then
      gap="$(awk -v a="$acc" -v b="${acc_of[$bkey]}" 'BEGIN { printf "%+.2f\n", (a - b) * 100 }')"
    fi
    acc_s="$acc"; if [[ "$acc" != n/a ]]; then acc_s="$(awk -v a="$acc" 'BEGIN { printf "%.2f%%\n", a * 100 }')"; fi
    spec_parse "$spec"
    # shellcheck disable=SC2016
    printf '| `%s` | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$spec" "$P" "$acc_s" "$gap" \
      "$(fmt_bytes "${wire_of[$key]}")" "$(fmt_bytes "${unc_of[$key]}")" "${ratio_of[$key]}" \
      "${tep_of[$key]}" "${comm_of[$key]}" "${status_of[$key]}"
    echo "\"$spec\",$p_codec,$p_policy,$P,${status_of[$key]},$acc,$gap,${steps_of[$key]},${wire_of[$key]},${unc_of[$key]},${ratio_of[$key]},${tep_of[$key]},${comm_of[$key]},${enc_of[$key]},${dec_of[$key]},${nonfin_of[$key]}" >>"$csv"
  done
  echo
  echo "wire bytes/step = bytes_wire summed over ranks and over all collectives (allreduce, allgather, bcast) / optimizer steps;"
  echo "n/a = no compmpi-stats lines (baseline runs, or a library that does not print them). time/epoch excludes evaluation."
} >"$table"

# ---- plot ------------------------------------------------------------------
png="$out/accuracy.png"
if command -v gnuplot >/dev/null; then
  gp="$out/accuracy.gp"
  {
    echo "set terminal pngcairo size 1100,650 font ',10'"
    echo "set output '$png'"
    echo "set termoption noenhanced"
    echo "set title 'Fashion-MNIST MLP: test accuracy vs training time (epochs=$epochs, train_limit=$train_limit)'"
    echo "set xlabel 'elapsed training time (s)'"
    echo "set ylabel 'test accuracy'"
    echo "set grid"
    echo "set key bottom right box opaque"
    echo "set xrange [0:*]"
    plots=()
    for key in "${run_keys[@]}"; do
      P="${key%%|*}"; spec="${key#*|}"
      dat="$out/runs/P${P}_$(safe_name "$spec").dat"
      [[ -s "$dat" ]] || continue
      title="${spec} (P=$P)"
      plots+=("'$dat' using 1:2 with linespoints lw 2 pt 7 ps 0.8 title '${title//\'/}'")
    done
    if [[ ${#plots[@]} -gt 0 ]]; then
      printf 'plot '
      for i in "${!plots[@]}"; do
        if [[ $i -gt 0 ]]; then printf ', \\\n     '; fi
        printf '%s' "${plots[$i]}"
      done
      echo
    fi
  } >"$gp"
  if grep -q '^plot' "$gp"; then
    gnuplot "$gp" 2>"$out/gnuplot.err" || echo "$prog: warning: gnuplot failed, see $out/gnuplot.err" >&2
  else
    echo "$prog: warning: no epoch data to plot" >&2
  fi
fi

echo
cat "$table"
echo
echo "results: $table  $csv  ${png}  runs/: $out/runs"
exit $any_fail

#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A long decoder fuzzing campaign (docs/hardening.md, "A longer run"): fuzz_decode once per
# codec (FUZZ_CODEC), each from a copy of its committed corpus directory, until RUNS
# executions or SECONDS seconds, JOBS codecs at a time, at nice 19. Then a table of
# executions, exec/s, coverage, corpus growth and crashes per codec, and, with --seeds, the
# inputs that add coverage to the committed corpus (libFuzzer -merge=1), at most MAXSEEDS per
# codec (smallest first), written into tests/fuzz/corpus/fuzz_decode/<codec>/ with the
# codec's id in their header byte (so they replay the same without FUZZ_CODEC).
#
#   tests/fuzz/campaign.sh BUILD_DIR WORK_DIR [--runs N] [--seconds S] [--jobs J]
#                          [--codecs "a b ..."] [--seeds] [--maxseeds M]
# --codecs coded: one campaign over the entropy-coded seeds (*-zstd) of every codec together.
# BUILD_DIR: a tree configured with --enable-fuzzing (scripts/test-hardening.sh: _build-clang).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "$1" && pwd); work=$2; shift 2
runs=10000000 seconds=800 jobs=2 seeds=0 maxseeds=50
codecs=$(sed -n 's/^COMPMPI_CODEC([a-z0-9_]*, *[0-9]*, *"\([a-z0-9_]*\)")/\1/p' "$top/src/base/codecs.def" | tr '\n' ' ')
while [ $# -gt 0 ]; do
    case $1 in
    --runs) runs=$2; shift ;;
    --seconds) seconds=$2; shift ;;
    --jobs) jobs=$2; shift ;;
    --codecs) codecs=$2; shift ;;
    --seeds) seeds=1 ;;
    --maxseeds) maxseeds=$2; shift ;;
    *) echo "campaign.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
export ASAN_OPTIONS="detect_leaks=1:verify_asan_link_order=0:exitcode=86"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:exitcode=87"
export COMPMPI_THREADS=1 OMP_NUM_THREADS=2
mkdir -p "$work"
work=$(cd "$work" && pwd)

one() { # codec
    local c=$1 d=$work/$1
    rm -rf "$d" && mkdir -p "$d/artifacts"
    if [ "$c" = coded ]; then
        # the entropy stage across every codec: the coded seeds of all corpus directories,
        # each decoded by the codec its own header names (FUZZ_CODEC=all)
        mkdir -p "$d/corpus"
        for f in "$top"/tests/fuzz/corpus/fuzz_decode/*/*-zstd; do
            cp "$f" "$d/corpus/$(basename "$(dirname "$f")")-$(basename "$f")"
        done
        fc=all
    else
        cp -r "$top/tests/fuzz/corpus/fuzz_decode/$c" "$d/corpus"
        fc=$c
    fi
    ls "$d/corpus" | wc -l >"$d/seeds"
    date -u +%H:%M:%S >"$d/start"
    FUZZ_CODEC=$fc nice -n 19 "$work/fuzz_decode" -runs="$runs" -max_total_time="$seconds" -max_len=16500 \
        -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$d/artifacts/" "$d/corpus" >"$d/log" 2>&1
    echo $? >"$d/rc"
    date -u +%H:%M:%S >"$d/end"
}
# CAMPAIGN_REPORT_ONLY=1: no fuzzing, the table (and --seeds) of an earlier run in WORK_DIR
if [ "${CAMPAIGN_REPORT_ONLY:-0}" != 1 ]; then
    # a copy of the binary: rebuilding the tree does not touch a running campaign
    cp "$build/tests/fuzz/fuzz_decode" "$work/fuzz_decode"
    export -f one; export top work runs seconds
    printf '%s\n' $codecs | xargs -P "$jobs" -I{} bash -c 'one {}'
fi

printf '| codec | executions | exec/s | coverage (edges) | features | corpus (seeds → end) | crashes |\n'
printf '| --- | --- | --- | --- | --- | --- | --- |\n'
for c in $codecs; do
    d=$work/$c
    [ -f "$d/log" ] || continue
    ex=$(sed -n 's/^stat::number_of_executed_units: *//p' "$d/log")
    eps=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$d/log")
    last=$(grep -E '^#[0-9]+' "$d/log" | tail -1)
    cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
    ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
    crashes=$(ls "$d/artifacts" | wc -l)
    printf '| `%s` | %s | %s | %s | %s | %s → %s | %s (exit %s) |\n' "$c" "${ex:-?}" "${eps:-?}" "${cov:-?}" "${ft:-?}" \
        "$(cat "$d/seeds")" "$(ls "$d/corpus" | wc -l)" "$crashes" "$(cat "$d/rc" 2>/dev/null || echo '?')"
done
for c in $codecs; do grep -h '^fuzz_decode: codec' "$work/$c/log" 2>/dev/null || true; done

[ "$seeds" = 1 ] || exit 0
for c in $codecs; do
    d=$work/$c
    [ -d "$d/corpus" ] || continue
    rm -rf "$d/merged" "$d/new" && cp -r "$top/tests/fuzz/corpus/fuzz_decode/$c" "$d/merged" && mkdir -p "$d/new"
    FUZZ_CODEC=$c nice -n 19 "$work/fuzz_decode" -merge=1 -max_len=16500 -timeout=10 -rss_limit_mb=2048 \
        "$d/merged" "$d/corpus" >"$d/merge.log" 2>&1
    added=$(($(ls "$d/merged" | wc -l) - $(ls "$top/tests/fuzz/corpus/fuzz_decode/$c" | wc -l)))
    k=0
    # inputs -merge=1 added to the committed set, smallest first
    while read -r f; do
        [ "$k" -lt "$maxseeds" ] || break
        b=$(basename "$f")
        [ -e "$top/tests/fuzz/corpus/fuzz_decode/$c/$b" ] && continue
        python3 - "$f" "$top/tests/fuzz/corpus/fuzz_decode/$c/found-${b:0:12}" "$(sed -n "s/^COMPMPI_CODEC([a-z0-9_]*, *\([0-9]*\), *\"$c\")/\1/p" "$top/src/base/codecs.def")" <<'EOF'
import sys
b = bytearray(open(sys.argv[1], 'rb').read())
if len(b) > 10: b[10] = int(sys.argv[3])  # 5-byte prefix + header byte 5: the codec id
open(sys.argv[2], 'wb').write(b)
EOF
        k=$((k + 1))
    done < <(cd "$d/merged" && ls -S -r | sed "s|^|$d/merged/|")
    echo "$c: -merge=1 kept $added new inputs over the committed corpus; $k written"
done

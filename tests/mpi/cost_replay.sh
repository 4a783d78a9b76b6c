#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Record / replay of the cost model's decisions (settings cost_record, cost_replay;
# docs/design.md, "Record and replay"), with tests/mpi/t_plain_cost_replay on 2 ranks, preloaded,
# a static 16-bit bitpack plan gated by the model (deterministic bits per call):
#   1. record: COMPMPI_FAULT=cost_skew:toward=compressed (every exact sample 10^6 x: every class
#      decides compressed) and cost_record=FILE; the file holds the header and decisions;
#   2. without replay under the opposite skew (toward=exact): every class exact, so the hash of
#      the results after the exploration differs from the recorded run's;
#   3. replay under the opposite skew: the recorded decisions hold from the first call, the
#      results' hash equals the recorded run's, no call explores;
#   4. a file recorded for another settings hash, and a file that is not a decisions file, are
#      refused with one line on stderr and the run measures (hash as in 2);
#   5. COMPMPI_STATS=1 prints the decisions as compmpi-stats-decision: lines, as in the file.
# Environment as tests/mpi/run_tests.sh (top_builddir, top_srcdir, MPI_FAMILY, MPIEXEC,
# MPI_TEST_LIBNAME).
set -u
top_builddir=${top_builddir:-$(pwd)}
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$top_srcdir/tests/mpi/launch.sh"
if [ -z "${MPI_FAMILY:-}" ]; then
    MPI_FAMILY=$(mpi_family_of_launcher "${MPIEXEC:-mpiexec.mpich}")
fi
mpi_launch_init "$MPI_FAMILY" "${MPIEXEC:-}" || exit 2
if [ -z "${MPI_TEST_LIBNAME:-}" ]; then
    MPI_TEST_LIBNAME=libcompmpi
    [ "$MPI_FAMILY" = openmpi ] && MPI_TEST_LIBNAME=libcompmpi_openmpi
fi
lib="$top_builddir/.libs/$MPI_TEST_LIBNAME.so"
exe="$top_builddir/tests/mpi/t_plain_cost_replay"
for v in $(env | sed -n 's/^\(COMPMPI_[A-Z0-9_]*\)=.*/\1/p'); do unset "$v"; done
dir=$(mktemp -d "${TMPDIR:-/tmp}/cost_replay.XXXXXX")
trap 'rm -rf "$dir"' EXIT
fail=0
base=(LD_PRELOAD="$lib" COMPMPI_COST_MODEL=on COMPMPI_POLICY=static COMPMPI_BITS=16 COMPMPI_THREADS=1)

# run NAME ENV...: the program on 2 ranks; stdout/stderr in $dir/NAME.{out,err}; prints the hash
run() {
    local name=$1
    shift
    MPI_ENV=("${base[@]}" "$@") MPI_ENV0=() MPI_WRAP=()
    mpi_launch 2 -- "$exe"
    timeout -k 10 300 "${MPI_CMD[@]}" >"$dir/$name.out" 2>"$dir/$name.err" </dev/null
    local rc=$?
    if [ $rc != 0 ] || ! grep -q "^ No Errors" "$dir/$name.out"; then
        echo "FAIL  cost_replay: run '$name' exited $rc"
        sed 's/^/      out| /' "$dir/$name.out" | tail -5
        sed 's/^/      err| /' "$dir/$name.err" | tail -20
        fail=1
    fi
    sed -n 's/^t_plain_cost_replay: results_hash=//p' "$dir/$name.out"
}
check() { # check COND MESSAGE [RUN...]: on failure the runs' stderr tails
    local cond=$1 msg=$2 r
    shift 2
    if eval "$cond"; then echo "ok    cost_replay: $msg"; return; fi
    echo "FAIL  cost_replay: $msg"
    fail=1
    for r in "$@"; do sed "s/^/      $r| /" "$dir/$r.err" | tail -15; done
}

rec=$(run record COMPMPI_FAULT=cost_skew:toward=compressed:factor=1000000 COMPMPI_COST_RECORD="$dir/decisions.txt" COMPMPI_STATS=1)
check '[ -s "$dir/decisions.txt" ] && head -1 "$dir/decisions.txt" | grep -Eq "^compmpi-cost-decisions version=1 ranks=2 settings=[0-9a-f]{16}$"' "the record has its header"
check '[ "$(grep -c "decision=compressed$" "$dir/decisions.txt")" = 4 ]' "4 classes recorded compressed (allreduce, allgather x 16 KiB, 256 KiB)" record
check 'diff <(sed 1d "$dir/decisions.txt") <(sed -n "s/^compmpi-stats-decision: //p" "$dir/record.err") >/dev/null' "compmpi-stats-decision: lines are the file's lines" record
other=$(run other COMPMPI_FAULT=cost_skew:toward=exact:factor=1000000)
check '[ -n "$rec" ] && [ -n "$other" ] && [ "$rec" != "$other" ]' "without replay the opposite skew gives other bits ($rec vs $other)" record other
rep=$(run replay COMPMPI_FAULT=cost_skew:toward=exact:factor=1000000 COMPMPI_COST_REPLAY="$dir/decisions.txt" COMPMPI_STATS=1)
check '[ -n "$rep" ] && [ "$rep" = "$rec" ]' "replayed under the opposite skew: the recorded bits ($rep)" record replay
check 'grep -Eq "cost_explore=[1-9]" "$dir/record.err" && ! grep -q "refused" "$dir/replay.err" && ! grep -Eq "cost_explore=[1-9]" "$dir/replay.err"' "the recording run explored, the replayed run explores nothing and refuses nothing" record replay
sed 's/settings=[0-9a-f]*/settings=0123456789abcdef/' "$dir/decisions.txt" >"$dir/other_settings.txt"
bad=$(run bad_settings COMPMPI_FAULT=cost_skew:toward=exact:factor=1000000 COMPMPI_COST_REPLAY="$dir/other_settings.txt")
check '[ "$(grep -c "cost_replay=.*refused: settings hash" "$dir/bad_settings.err")" = 1 ] && [ "$bad" = "$other" ]' "another settings hash: refused in one line, the run measures" bad_settings
echo "not a decisions file" >"$dir/garbage.txt"
bad=$(run garbage COMPMPI_FAULT=cost_skew:toward=exact:factor=1000000 COMPMPI_COST_REPLAY="$dir/garbage.txt")
check '[ "$(grep -c "cost_replay=.*refused" "$dir/garbage.err")" = 1 ] && [ "$bad" = "$other" ]' "an unparsable file: refused in one line, the run measures" garbage
grep -h "refused" "$dir/bad_settings.err" "$dir/garbage.err" | sed 's/^/      /' 
exit $fail

#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Run the MPI test list (tests/mpi/testlist). Prints one line per run and a closing
# "N passed, N failed". Environment: top_builddir, top_srcdir (set by make check),
# MPI_FAMILY (mpich | openmpi; set by make check, else read from MPIEXEC --version),
# MPIEXEC (default mpiexec.<family>), MPI_TEST_LIBNAME (default: the family's libcompmpi),
# MPI_TEST_FILTER (regex on the line), MPI_TEST_SKIP (regex: matching lines print SKIP with
# the reason MPI_TEST_SKIP_WHY), MPI_TEST_TIMEOUT (s).
# Launcher differences (MPICH hydra / Open MPI) live in tests/mpi/launch.sh.
# MPI_TEST_EXCLUDE (regex: skip matching lines), MPI_TEST_PRELOAD (libraries loaded before
# libcompmpi in preload runs, e.g. a sanitizer runtime).
set -u
set -f  # testlist options hold regex brackets: no globbing
top_builddir=${top_builddir:-$(pwd)}
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$top_srcdir/tests/mpi/launch.sh"
if [ -z "${MPI_FAMILY:-}" ]; then
    MPI_FAMILY=$(mpi_family_of_launcher "${MPIEXEC:-mpiexec.mpich}")
    [ "$MPI_FAMILY" = unknown ] && { echo "run_tests.sh: cannot tell the MPI family of ${MPIEXEC:-mpiexec.mpich}: set MPI_FAMILY"; exit 2; }
fi
mpi_launch_init "$MPI_FAMILY" "${MPIEXEC:-}" || exit 2
MPIEXEC=$MPI_LAUNCHER
timeout_s=${MPI_TEST_TIMEOUT:-600}
# (not COMPMPI_*: libcompmpi rejects unknown COMPMPI_ variables, unit tests read them all)
if [ -z "${MPI_TEST_LIBNAME:-}" ]; then
    MPI_TEST_LIBNAME=libcompmpi
    [ "$MPI_FAMILY" = openmpi ] && MPI_TEST_LIBNAME=libcompmpi_openmpi
fi
lib="$top_builddir/.libs/$MPI_TEST_LIBNAME.so"
list="$top_srcdir/tests/mpi/testlist"
supp=("--suppressions=$top_srcdir/tests/mpi/valgrind.supp")
if [ "$MPI_FAMILY" = openmpi ]; then
    supp+=("--suppressions=$top_srcdir/tests/mpi/valgrind-openmpi.supp")
    [ -f /usr/share/openmpi/openmpi-valgrind.supp ] && supp+=(--suppressions=/usr/share/openmpi/openmpi-valgrind.supp)
fi
logdir="$top_builddir/tests/mpi/logs"
mkdir -p "$logdir"
# The tests set what they need; a developer's own COMPMPI_* must not leak in.
for v in $(env | sed -n 's/^\(COMPMPI_[A-Z0-9_]*\)=.*/\1/p'); do unset "$v"; done

echo "mpi tests: $MPI_FAMILY, launcher $MPIEXEC, library $lib"
pass=0 fail=0 skip=0 idx=0
while read -r line; do
    line=${line%%#*}
    [ -z "${line// /}" ] && continue
    if [ -n "${MPI_TEST_FILTER:-}" ] && ! [[ $line =~ $MPI_TEST_FILTER ]]; then continue; fi
    if [ -n "${MPI_TEST_EXCLUDE:-}" ] && [[ $line =~ $MPI_TEST_EXCLUDE ]]; then continue; fi
    idx=$((idx + 1))
    read -r prog np mode opts <<<"$line"
    genv=() rank0=() args=() expect_fail=0 expect_res=() count_n="" count_re="" wrap=() only="" optional=0 idle=0
    before="" after=""
    for o in $opts; do
        case $o in
            only:*) only=${o#only:} ;;
            rank0:*) rank0+=("${o#rank0:}") ;;
            arg:*) args+=("${o#arg:}") ;;
            expect_fail) expect_fail=1 ;;
            optional) optional=1 ;;
            idle_sleep) idle=1 ;;
            preload_before:*) before="${before:+$before }$top_builddir/${o#preload_before:}" ;;
            preload_after:*) after="${after:+$after }$top_builddir/${o#preload_after:}" ;;
            expect_stderr:*) re=${o#expect_stderr:}; expect_res+=("${re//\\s/[[:space:]]}") ;; # each must match
            expect_stderr_count:*) count_re=${o#expect_stderr_count:}; count_n=${count_re%%:*}
                                   count_re=${count_re#*:}; count_re=${count_re//\\s/[[:space:]]} ;;
            valgrind) wrap=(valgrind -q --error-exitcode=97 --leak-check=full --errors-for-leak-kinds=definite
                            --show-leak-kinds=definite "${supp[@]}" --num-callers=30) ;;
            *=*) genv+=("$o") ;;
            *) echo "testlist: unknown option '$o'"; exit 2 ;;
        esac
    done
    if [ -n "$only" ] && [ "$only" != "$MPI_FAMILY" ]; then
        skip=$((skip + 1)); printf 'SKIP  %-22s np=%s %-7s %-60s (only:%s, this run is %s)\n' "$prog" "$np" "$mode" "$opts" "$only" "$MPI_FAMILY"
        continue
    fi
    # a caller's subset (scripts/test-openmpi.sh): skipped visibly, with its reason
    if [ -n "${MPI_TEST_SKIP:-}" ] && [[ $line =~ $MPI_TEST_SKIP ]]; then
        skip=$((skip + 1)); printf 'SKIP  %-22s np=%s %-7s %-60s (%s)\n' "$prog" "$np" "$mode" "$opts" "${MPI_TEST_SKIP_WHY:-MPI_TEST_SKIP}"
        continue
    fi
    # The tests exercise the compressed algorithms: the cost model (which would run most calls
    # on shared memory exactly) is off unless a line sets COMPMPI_COST_MODEL itself.
    [[ " $opts " == *" COMPMPI_COST_MODEL="* ]] || genv+=(COMPMPI_COST_MODEL=off)
    # and the non-blocking ones: progress threads (nb_progress=thread: MPI_THREAD_MULTIPLE
    # whatever the program asks; mpitest.h calls MPI_Init) unless a line sets
    # COMPMPI_NB_PROGRESS itself (the default, auto, has its own lines)
    [[ " $opts " == *" COMPMPI_NB_PROGRESS="* ]] || genv+=(COMPMPI_NB_PROGRESS=thread)
    pre=${MPI_TEST_PRELOAD:-}
    [ $idle = 1 ] && pre="${pre:+$pre }$top_builddir/tests/mpi/.libs/idle_sleep.so"
    [ -n "$before" ] && pre="${pre:+$pre }$before"
    case $mode in
        preload) genv+=("LD_PRELOAD=${pre:+$pre }$lib${after:+ $after}") ;;
        plain|link) [ $idle = 1 ] || [ -n "$before$after" ] && genv+=("LD_PRELOAD=$pre${after:+${pre:+ }$after}") ;;
        *) echo "testlist: unknown mode '$mode'"; exit 2 ;;
    esac
    exe="$top_builddir/tests/mpi/$prog"
    if [ $optional = 1 ] && [ ! -x "$exe" ]; then
        printf 'skip  %-22s np=%s %-7s (not built here)\n' "$prog" "$np" "$mode"
        continue
    fi
    log="$logdir/$idx-$prog-np$np-$mode"
    MPI_ENV=("${genv[@]}") MPI_ENV0=("${rank0[@]}") MPI_WRAP=("${wrap[@]}")
    mpi_launch "$np" -- "$exe" "${args[@]}"
    cmd=("${MPI_CMD[@]}")
    t0=$(date +%s.%N)
    timeout -k 10 "$timeout_s" "${cmd[@]}" >"$log.out" 2>"$log.err" </dev/null
    rc=$?
    dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
    ok=1 why=""
    # a hang fails every line, those that expect the job to fail included: the harness's
    # timeout (124; 137 after -k, which is also Open MPI's status for a rank killed by
    # SIGKILL: told apart by the time) or a program's own watchdog line (t_fault, t_storm)
    if [ $rc = 124 ] || { [ $rc = 137 ] && awk -v d="$dt" -v t="$timeout_s" 'BEGIN{exit !(d >= t)}'; }; then
        ok=0 why="timed out after ${timeout_s}s (a hang)"
    elif grep -q "watchdog: .*hang" "$log.err" "$log.out"; then
        ok=0 why="a watchdog saw a hang (exit $rc)"
    elif [ $expect_fail = 1 ]; then
        [ $rc = 0 ] && ok=0 why="expected failure, exit 0"
    else
        [ $rc != 0 ] && ok=0 why="exit $rc"
        [ $ok = 1 ] && ! grep -q "^ No Errors" "$log.out" && ok=0 why="no ' No Errors'"
    fi
    for re in "${expect_res[@]}"; do
        if [ $ok = 1 ] && ! grep -Eq "$re" "$log.err"; then ok=0 why="stderr lacks /$re/"; fi
    done
    if [ $ok = 1 ] && [ -n "$count_n" ]; then
        got=$(grep -Ec "$count_re" "$log.err")
        [ "$got" != "$count_n" ] && ok=0 why="$got stderr lines match /$count_re/, expected $count_n"
    fi
    if [ $ok = 1 ]; then
        pass=$((pass + 1)); printf 'ok    %-22s np=%s %-7s %-60s %6ss\n' "$prog" "$np" "$mode" "$opts" "$dt"
    else
        fail=$((fail + 1)); printf 'FAIL  %-22s np=%s %-7s %-60s %6ss  (%s)\n' "$prog" "$np" "$mode" "$opts" "$dt" "$why"
        echo "      command: ${cmd[*]}"
        sed 's/^/      out| /' "$log.out" | tail -n 20
        sed 's/^/      err| /' "$log.err" | tail -n 40
    fi
done <"$list"
echo "mpi tests ($MPI_FAMILY): $pass passed, $fail failed, $skip skipped"
echo "$pass passed, $fail failed"
[ $fail = 0 ]

#!/usr/bin/env bash
# Run the MPI test list (tests/mpi/testlist). Prints one line per run and a closing
# "N passed, N failed". Environment: top_builddir, top_srcdir (set by make check),
# MPIEXEC (default mpiexec.mpich), MPI_TEST_FILTER (regex on the line), MPI_TEST_TIMEOUT (s).
set -u
set -f  # testlist options hold regex brackets: no globbing
top_builddir=${top_builddir:-$(pwd)}
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
MPIEXEC=${MPIEXEC:-mpiexec.mpich}
timeout_s=${MPI_TEST_TIMEOUT:-600}
lib="$top_builddir/.libs/libcompmpi.so"
list="$top_srcdir/tests/mpi/testlist"
supp="$top_srcdir/tests/mpi/valgrind.supp"
logdir="$top_builddir/tests/mpi/logs"
mkdir -p "$logdir"
# The tests set what they need; a developer's own COMPMPI_* must not leak in.
for v in $(env | sed -n 's/^\(COMPMPI_[A-Z0-9_]*\)=.*/\1/p'); do unset "$v"; done

pass=0 fail=0 idx=0
while read -r line; do
    line=${line%%#*}
    [ -z "${line// /}" ] && continue
    if [ -n "${MPI_TEST_FILTER:-}" ] && ! [[ $line =~ $MPI_TEST_FILTER ]]; then continue; fi
    idx=$((idx + 1))
    read -r prog np mode opts <<<"$line"
    genv=() rank0=() args=() expect_fail=0 expect_re="" count_n="" count_re="" wrap=()
    for o in $opts; do
        case $o in
            rank0:*) kv=${o#rank0:}; rank0+=(-env "${kv%%=*}" "${kv#*=}") ;;
            arg:*) args+=("${o#arg:}") ;;
            expect_fail) expect_fail=1 ;;
            expect_stderr:*) expect_re=${o#expect_stderr:}; expect_re=${expect_re//\\s/[[:space:]]} ;;
            expect_stderr_count:*) count_re=${o#expect_stderr_count:}; count_n=${count_re%%:*}
                                   count_re=${count_re#*:}; count_re=${count_re//\\s/[[:space:]]} ;;
            valgrind) wrap=(valgrind -q --error-exitcode=97 --leak-check=full --errors-for-leak-kinds=definite
                            --show-leak-kinds=definite --suppressions="$supp" --num-callers=30) ;;
            *=*) genv+=(-genv "${o%%=*}" "${o#*=}") ;;
            *) echo "testlist: unknown option '$o'"; exit 2 ;;
        esac
    done
    # The tests exercise the compressed algorithms: the cost model (which would run most calls
    # on shared memory exactly) is off unless a line sets COMPMPI_COST_MODEL itself.
    [[ " $opts " == *" COMPMPI_COST_MODEL="* ]] || genv+=(-genv COMPMPI_COST_MODEL off)
    case $mode in
        preload) genv+=(-genv LD_PRELOAD "$lib") ;;
        plain|link) ;;
        *) echo "testlist: unknown mode '$mode'"; exit 2 ;;
    esac
    exe="$top_builddir/tests/mpi/$prog"
    log="$logdir/$idx-$prog-np$np-$mode"
    if [ ${#rank0[@]} -gt 0 ]; then
        cmd=("$MPIEXEC" "${genv[@]}" -n 1 "${rank0[@]}" "${wrap[@]}" "$exe" "${args[@]}" : -n $((np - 1)) "${wrap[@]}" "$exe" "${args[@]}")
    else
        cmd=("$MPIEXEC" "${genv[@]}" -n "$np" "${wrap[@]}" "$exe" "${args[@]}")
    fi
    t0=$(date +%s.%N)
    timeout -k 10 "$timeout_s" "${cmd[@]}" >"$log.out" 2>"$log.err" </dev/null
    rc=$?
    dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
    ok=1 why=""
    if [ $expect_fail = 1 ]; then
        [ $rc = 0 ] && ok=0 why="expected failure, exit 0"
    else
        [ $rc != 0 ] && ok=0 why="exit $rc"
        [ $ok = 1 ] && ! grep -q "^ No Errors" "$log.out" && ok=0 why="no ' No Errors'"
    fi
    if [ $ok = 1 ] && [ -n "$expect_re" ] && ! grep -Eq "$expect_re" "$log.err"; then ok=0 why="stderr lacks /$expect_re/"; fi
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
echo "mpi tests: $pass passed, $fail failed"
echo "$pass passed, $fail failed"
[ $fail = 0 ]

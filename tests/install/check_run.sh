# SPDX-License-Identifier: BSD-3-Clause
# shellcheck shell=bash disable=SC2034
# Sourced by scripts/test-install.sh and scripts/test-deb.sh, after tests/mpi/launch.sh and
# mpi_launch_init: run a program built from tests/install/allreduce_sum.c on 2 ranks and
# check both its result and that libcompmpi was active in it.
#   check_run LABEL PROG [NAME=VALUE...]    extra environment for every rank (LD_PRELOAD=...)
# Passes when the program printed " No Errors" and COMPMPI_STATS counted compressed
# allreduces; otherwise prints why and the program's output, and returns 1. fp16 carries the
# program's small integers exactly, so its compressed sums are checkable exactly; the cost
# model is off because it would keep shared memory exact.
check_run() {
    local label=$1 prog=$2; shift 2
    local out err rc=0 why=""
    out=$(mktemp "${TMPDIR:-/tmp}/compmpi-check-run.XXXXXX") err=$(mktemp "${TMPDIR:-/tmp}/compmpi-check-run.XXXXXX")
    MPI_ENV=(COMPMPI_CODEC=fp16 COMPMPI_STATS=1 COMPMPI_THREADS=1 COMPMPI_COST_MODEL=off "$@")
    mpi_launch 2 -- "$prog"
    timeout -k 5 120 "${MPI_CMD[@]}" >"$out" 2>"$err" </dev/null || rc=$?
    if [ $rc != 0 ]; then why="exit $rc"
    elif ! grep -q " No Errors" "$out"; then why="wrong result"
    elif ! grep -Eq "compmpi-stats: coll=allreduce compressed=[1-9]" "$err"; then why="nothing compressed (libcompmpi not active?)"
    fi
    if [ -n "$why" ]; then
        echo "check_run: $label: $why; ran: ${MPI_CMD[*]}"
        sed 's/^/      | /' "$out" "$err" | tail -30
    fi
    rm -f "$out" "$err"
    [ -z "$why" ]
}

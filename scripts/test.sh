#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The whole test suite, from a fresh Debian 12 machine: install dependencies, build, then
# run the unit tests (CMocka), the fuzz target, the MPI tests (tests/mpi/testlist: 2 to 8 ranks,
# t_scale at 13, 16 and 32; LD_PRELOAD and linked, some under valgrind) and the docs check.
# The longer correctness sweep at scale (more ranks, bigger buffers): scripts/test-scale.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
cd "${BUILD_DIR:-_build}"
rc=0
make -j"$(nproc)" check >check.out 2>&1 || rc=$?
# automake's harness keeps each test's output in its .log: show them all
for log in tests/unit/*.log tests/fuzz/*.log tests/mpi/run_tests.sh.log tests/check_docs.sh.log tests/check_layers.sh.log; do
    [ -f "$log" ] || continue
    echo "==== ${log%.log}"
    grep -vE "^(hwloc x86 backend|May be reenabled|and reloading them)" "$log" | tail -n 60
done
sed -n '/^=\+$/,/^=\+$/p' check.out | tail -n 12
if [ $rc != 0 ]; then
    echo "make check failed (exit $rc)"
    exit $rc
fi
BUILD_DIR=$PWD "$OLDPWD"/scripts/test-openmpi.sh || exit 1  # Open MPI: build, test list, mpi4py, cross-family, install
(cd "$OLDPWD" && scripts/test-hardening.sh)  # clang, ASan/UBSan, TSan, libFuzzer (docs/hardening.md)
# SimGrid SMPI: the simulated-MPI build and its smoke test (4 and 8 simulated ranks; docs/scale.md)
smpi=$(cd "$OLDPWD" && scripts/test-smpi.sh 2>&1) || { echo "$smpi" | tail -n 40; echo "SMPI smoke test failed"; exit 1; }
echo "==== tests/smpi/smoke.sh"
echo "$smpi" | grep -E "^(PASS|FAIL)" || true
smpi_pass=$(echo "$smpi" | sed -n 's/^\([0-9]\+\) passed, [0-9]\+ failed$/\1/p' | tail -1)
# one closing line for the whole suite
pass=0 fail=0
for trs in $(find tests -name '*.trs'); do
    grep -q '^:test-result: PASS' "$trs" && pass=$((pass + 1)) || fail=$((fail + 1))
done
mpi=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' tests/mpi/run_tests.sh.log | tail -1)
mpi_pass=${mpi%% passed*}
echo "test programs: $pass passed, $fail failed (MPI runs inside: $mpi; SMPI smoke: ${smpi_pass:-0} passed)"
echo "$((pass - 1 + mpi_pass + ${smpi_pass:-0})) passed, $fail failed"

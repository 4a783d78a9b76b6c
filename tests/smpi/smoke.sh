#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# SMPI smoke test: libcompmpi_smpi.so under SimGrid's simulated MPI at 4 and 8 simulated
# ranks (a few seconds). Behaviour only, never timings:
#  - tests/smpi/t_smpi_quirks.c at 4 ranks: the SMPI quirks the library handles
#    (src/mpi_family.h) -- prints " No Errors";
#  - bench/smpi/allreduce_sim at 8 ranks on 4 simulated hosts of 2 (so the hierarchy
#    applies), 1/4 MiB: SMPI's own allreduce, the defaults (cost model on the simulated
#    clock), bitpack 16 (two-phase, halving-doubling, hierarchical), q8, terngrad: every
#    rank ends with the same bits, the result is finite and within the codec's error;
#  - the SMPI build preloaded into an MPICH program: stopped at load with the family message.
# Usage: tests/smpi/smoke.sh [BUILD_DIR]   (default _build-smpi, made by scripts/build-smpi.sh)
# Last line: "N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD=$(cd "${1:-_build-smpi}" && pwd)
LIB=$BUILD/.libs/libcompmpi_smpi.so.0
WORK=$BUILD/tests/smpi
mkdir -p "$WORK"
pass=0 fail=0
ok() { echo "PASS: $*"; pass=$((pass + 1)); }
ko() { echo "FAIL: $*"; fail=$((fail + 1)); }

smpicc -O2 -I"$ROOT/include" -o "$WORK/t_smpi_quirks" "$ROOT/tests/smpi/t_smpi_quirks.c" \
    -Wl,--no-as-needed -L"$BUILD/.libs" -lcompmpi_smpi -lm >"$WORK/build.log" 2>&1 ||
    { cat "$WORK/build.log"; echo "0 passed, 1 failed"; exit 1; }
bench/smpi/platform.sh cluster 10 4 1 "$WORK/c4"
bench/smpi/platform.sh cluster 10 4 2 "$WORK/c4x2"
run() { # NP PLATFORM PROGRAM ARGS...: smpirun with the settings every run here needs
    local np=$1 plat=$2
    shift 2
    env GLIBC_TUNABLES=glibc.rtld.optional_static_tls=131072 COMPMPI_THREADS=1 COMPMPI_NB_PROGRESS=off \
        timeout 120 smpirun -np "$np" -platform "$plat.xml" -hostfile "$plat.hosts" \
        --cfg=smpi/host-speed:1Gf "--cfg=smpi/privatize-libs:$LIB" --cfg=smpi/coll-selector:ompi \
        --cfg=smpi/test:1e-6 --cfg=smpi/grow-injected-times:no \
        --log=xbt_cfg.thres:warning --log=smpi_config.thres:warning --log=smpi_coll.thres:warning \
        --log=smpi_colls.thres:warning "$@"
}

COMPMPI_CODEC=bitpack COMPMPI_BITS=16 run 4 "$WORK/c4" "$WORK/t_smpi_quirks" >"$WORK/quirks.out" 2>&1
rc=$?
if [ $rc = 0 ] && grep -q "^ No Errors" "$WORK/quirks.out"; then ok "t_smpi_quirks (4 ranks)"
else cat "$WORK/quirks.out"; ko "t_smpi_quirks (4 ranks): exit $rc"; fi

run 8 "$WORK/c4x2" "$BUILD/bench/smpi/allreduce_sim" -s 0.25 -w 1 -i 1 -c plain -c default:warm=8 \
    -c bp16.tp:codec=bitpack,bits=16,allreduce_algorithm=twophase,hierarchy=off \
    -c bp16.hd:codec=bitpack,bits=16,allreduce_algorithm=halving_doubling,hierarchy=off \
    -c bp16.hier:codec=bitpack,bits=16,hierarchy=on \
    -c q8.tp:codec=q8,policy=static,allreduce_algorithm=twophase,hierarchy=off \
    -c tg.hd:codec=terngrad,policy=static,allreduce_algorithm=halving_doubling,hierarchy=off \
    >"$WORK/sim.out" 2>&1
rc=$?
[ $rc = 0 ] || { cat "$WORK/sim.out"; ko "allreduce_sim (8 ranks): exit $rc"; }
# the largest relative error each configuration may show (terngrad: stochastic, about 1)
for want in plain:0 default:1 bp16.tp:2e-2 bp16.hd:2e-2 bp16.hier:2e-2 q8.tp:6e-2 tg.hd:3; do
    name=${want%%:*} bound=${want#*:}
    line=$(grep "^sim .* config=$name " "$WORK/sim.out")
    if [ -z "$line" ]; then ko "allreduce_sim $name: no result"; continue; fi
    if echo "$line" | awk -v b="$bound" '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] } }
        END { exit !(v["identical"] == "yes" && v["finite"] == "yes" && v["relerr"] + 0 <= b + 0) }'; then
        ok "allreduce_sim $name (8 ranks, 4 hosts x 2): same bits everywhere, relerr <= $bound"
    else
        ko "allreduce_sim $name: $line"
    fi
done
# the family check still stops a wrong-family process (it asks each distinct loaded file
# once since SMPI's per-rank copies made it cubic in the ranks: src/base/mpi_family.cc)
if command -v mpicc.mpich >/dev/null; then
    printf '#include <mpi.h>\nint main(int c, char **v) { MPI_Init(&c, &v); MPI_Finalize(); return 0; }\n' >"$WORK/hello.c"
    mpicc.mpich -o "$WORK/hello_mpich" "$WORK/hello.c" >>"$WORK/build.log" 2>&1
    LD_PRELOAD=$LIB timeout 60 "$WORK/hello_mpich" </dev/null >"$WORK/family.out" 2>&1
    rc=$?
    if [ $rc = 1 ] && grep -q "is built for SimGrid SMPI, but MPICH .* is loaded in this process too" "$WORK/family.out"; then
        ok "the SMPI build preloaded into an MPICH program stops at load, naming both"
    else cat "$WORK/family.out"; ko "family check: exit $rc"; fi
else
    echo "SKIP: family check (no mpicc.mpich)"
fi
echo "$pass passed, $fail failed"
[ $fail = 0 ]

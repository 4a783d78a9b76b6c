#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The GPU checks of docs/gpu.md, in order, on a machine with an NVIDIA GPU and no MPI (the
# device tool), from a folder made by tests/gpu/pack.sh. Logs go to $OUT (or ./gpu-out).
#
#   bash tests/gpu/run_device.sh [PACK_DIR] [STEPS]   STEPS: any of unit bench mpi timing timing_mps
#                                                     (default: unit bench mpi)
#
# Exit status: the number of failed steps.
set -u
P=$(cd "${1:-.gpu}" && pwd)
STEPS=${2:-"unit bench mpi"}
O=${OUT:-$PWD/gpu-out}
mkdir -p "$O"
fails=0
for z in "$P"/*/*.gz; do [ -e "$z" ] && gunzip -f "$z"; done
export LD_LIBRARY_PATH=$P/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export UCX_MODULE_DIR=$P/ucx
export PATH=$P/bin:$PATH
{ nvidia-smi; nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv; ldd --version | head -1; nproc; } > "$O/machine.txt" 2>&1

# test_cuda was built with the build tree's absolute paths of the fake driver and the module
# (COMPMPI_TEST_FAKEDRV / COMPMPI_TEST_CUDA_MODULE); recreate them on this machine.
bdir=$(strings "$P/bin/test_cuda" | grep -m1 '/tests/unit/libcompmpi_fakecuda.so$' | sed 's|/tests/unit/libcompmpi_fakecuda.so$||')
if [ -n "$bdir" ]; then
    mkdir -p "$bdir/tests/unit" "$bdir/.libs"
    cp -f "$P/bin/libcompmpi_fakecuda.so" "$bdir/tests/unit/"
    cp -f "$P/lib/libcompmpi_cuda.so" "$bdir/libcompmpi_cuda.so"
fi

step() { echo "== $1: exit $2" | tee -a "$O/summary.txt"; [ "$2" = 0 ] || fails=$((fails + 1)); }

if [[ " $STEPS " == *" unit "* ]]; then
    timeout 400 "$P/bin/test_cuda" > "$O/test_cuda.log" 2>&1
    step test_cuda $?
    grep -E '^\[  (FAILED|PASSED|SKIPPED) |^\[  FAILED  \]|skipped' "$O/test_cuda.log" | tail -30 >> "$O/summary.txt"
fi
if [[ " $STEPS " == *" bench "* ]]; then
    timeout 300 "$P/bin/cuda_bench" -n 67108864 -r 20 > "$O/cuda_bench.log" 2>&1
    rc=$?
    step cuda_bench $rc
    if [ $rc -ge 128 ] && command -v cuda-gdb > /dev/null; then
        timeout 200 cuda-gdb -batch -ex run -ex bt --args "$P/bin/cuda_bench" -n 67108864 -r 20 > "$O/cuda_bench.gdb" 2>&1
    fi
fi
if [[ " $STEPS " == *" mpi "* ]]; then
    specs=(codec=bitpack/bits=8 codec=bitpack/bits=16 codec=bitpack/bits=24
        codec=bitpack/bits=16/rounding=nearest codec=bitpack codec=fp16 codec=bf16 codec=q8
        codec=q8/q8_type=linear codec=terngrad codec=terngrad/terngrad_bucket=512
        codec=terngrad/terngrad_packing=base3 codec=qsgd/bits=4 codec=qsgd/bits=8 codec=sparse
        codec=rangefloat codec=rangefloat/rangefloat_mode=paper codec=topk codec=fft_topk
        codec=zfp codec=zfp/bits=8 codec=zfp/zfp_tolerance=1e-3
        codec=bitpack/bits=8/error_feedback=1 codec=q8/error_feedback=1
        codec=bitpack/bits=16/chunk_bytes=64K codec=terngrad/chunk_bytes=64K)
    for mode in ${MODES:-host device mixed managed}; do
        timeout 300 mpiexec.hydra -n 2 -genv LD_PRELOAD "$P/lib/libcompmpi.so" -genv COMPMPI_COST_MODEL off \
            -genv COMPMPI_STATS 1 "$P/bin/t_gpu_coll" "$mode" "${specs[@]}" \
            > "$O/mpi_$mode.out" 2> "$O/mpi_$mode.err" < /dev/null
        rc=$?
        grep -q '^ No Errors' "$O/mpi_$mode.out" || rc=${rc/#0/1}
        step "mpi $mode" $rc
        if [ "$mode" != host ]; then
            diff <(grep '^H ' "$O/mpi_host.out") <(grep '^H ' "$O/mpi_$mode.out") > "$O/diff_$mode.txt"
            rc=$?
            step "mpi $mode bits == host bits ($(grep -c '^H ' "$O/mpi_$mode.out") results)" $rc
        fi
    done
fi
# 64 MiB allreduce of device buffers, 2 ranks on the one GPU, shared memory between them:
# plain (copy down, MPICH, copy up) against each codec; one process per codec so the
# statistics (encode / decode / comm split) belong to that codec alone
timing() { # $1: log file
    for spec in plain codec=bitpack/bits=16 codec=bitpack/bits=8 codec=fp16 codec=q8 codec=terngrad codec=qsgd/bits=4 codec=topk; do
        timeout 120 mpiexec.hydra -n 2 -genv LD_PRELOAD "$P/lib/libcompmpi.so" -genv COMPMPI_COST_MODEL off \
            -genv COMPMPI_STATS 1 -genv T_GPU_BENCH 10 "$P/bin/t_gpu_coll" device "$spec" < /dev/null >> "$1" 2>&1
        step "timing $spec" $?
    done
}
if [[ " $STEPS " == *" timing "* ]]; then
    timing "$O/timing.txt"
fi
# The same under MPS (CUDA's multi-process service): two processes on one GPU otherwise
# take turns in time slices, and every synchronisation of one rank can wait out the other's
# slice -- an artefact of sharing one GPU that a job with one GPU per rank does not have.
if [[ " $STEPS " == *" timing_mps "* ]]; then
    if command -v nvidia-cuda-mps-control > /dev/null; then
        export CUDA_MPS_PIPE_DIRECTORY=/tmp/compmpi-mps CUDA_MPS_LOG_DIRECTORY=/tmp/compmpi-mps-log
        mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
        nvidia-cuda-mps-control -d
        step "mps daemon" $?
        timing "$O/timing_mps.txt"
        echo quit | nvidia-cuda-mps-control
        unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
    else
        step "timing_mps: no nvidia-cuda-mps-control" 1
    fi
fi
cat "$O/summary.txt"
# the device tool returns at most 8 files: everything also goes back as one archive
tar -C "$O" -czf "$O/../gpu-logs.tgz" . && mv "$O/../gpu-logs.tgz" "$O/"
exit $fails

// SPDX-License-Identifier: BSD-3-Clause
/* Where a call's buffers live decides the backend that runs it: host memory -> the CPU
 * backend; device memory -> the CUDA module's backend (libcompmpi_cuda.so, loaded on the first
 * device buffer by src/runtime/cuda_loader); a mix -> host copies on the CPU backend. Never
 * whether the call is compressed: ranks do not agree on memory placement, so every rank runs
 * the same algorithm. The device state of a communicator (the module's context and the
 * pinned blob workspaces its backend DMAs directly) lives here, beside the module it serves. */
#pragma once
#include <mpi.h>

#include "coll.h"
#include "cuda/module_abi.h"
#include "runtime/args.h"

namespace compmpi {

struct CommState;

/* A communicator's device side, created on its first call on device buffers. */
struct DeviceState {
    void *ctx = nullptr;                  /* the CUDA module's context (Backend ctx) */
    void (*destroy)(void *) = nullptr;
    /* blob workspaces in pinned host memory: a device call's payloads go straight between
     * them and the GPU, without the backend's staging ring (docs/gpu.md) */
    CollWorkspace ws_pinned;
    DeviceState() = default;
    DeviceState(const DeviceState &) = delete;
    DeviceState &operator=(const DeviceState &) = delete;
    ~DeviceState() {
        if (ctx && destroy) destroy(ctx);
    }
};

/* The compressed path for a's buffers wherever they live (src/runtime/run.h); the caller
 * holds st.mu. */
int device_run_placed(const CollArgs &a, CommState &st);

/* The exact path; device buffers go through host copies unless MPI is CUDA-aware. */
int device_run_exact(const CollArgs &a, const CommState &st, const CudaModule *m);

/* Stop the job with a message naming why a device buffer cannot be handled (the other ranks
 * are already inside the collective: returning alone would hang them). */
[[noreturn]] void device_abort(const CollArgs &a, const char *why);

}  // namespace compmpi

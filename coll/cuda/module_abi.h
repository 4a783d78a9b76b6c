// SPDX-License-Identifier: BSD-3-Clause
/* The ABI between the core (libcompmpi.so) and the CUDA module (libcompmpi_cuda.so).
 *
 * Plain C++ with no CUDA types: the core includes it without the CUDA toolkit. The core
 * dlopen()s the module on the first device pointer it sees (src/runtime/cuda_loader.cc) and calls
 * the one exported symbol
 *
 *     extern "C" const CudaModule *compmpi_cuda_module_v1(void);
 *
 * Core symbols are hidden (-fvisibility=hidden), so the module cannot link against them:
 * everything it needs from the core comes in a CoreApi table handed to ctx_create(). The
 * module links with -Wl,--no-undefined, so a stray reference to a core symbol fails its
 * link instead of its dlopen.
 *
 * Versioning: both structs start with {abi_version, size}. A mismatch on either side means
 * "not this module": the core logs once and keeps device buffers on the exact path. Bump
 * kCudaModuleAbi on ANY change to these structs, to Backend (coll/backend.h), CodecOps,
 * CodecParams or BlobInfo (kernels/codec.h): the two sides are compiled separately. */
#pragma once
#include <cstddef>
#include <cstdint>

#include "backend.h"
#include "codec.h"
#include "base/status.h"

namespace compmpi {

inline constexpr uint32_t kCudaModuleAbi = 5; /* 2: error-feedback residuals in device memory; 3: CodecOps::decode_sum;
                                                4: CodecOps::whole_scale, CodecParams::fixed_scale;
                                                5: CodecParams::stream_out */

/* The symbol the core resolves; the module exports nothing else. */
#define COMPMPI_CUDA_MODULE_SYMBOL "compmpi_cuda_module_v1"

/* Core functions the module may call (all thread-safe). */
struct CoreApi {
    uint32_t abi_version; /* kCudaModuleAbi */
    uint32_t size;        /* sizeof(CoreApi) */
    void (*blob_write_header)(uint8_t *out, const BlobInfo &info);
    Status (*blob_peek)(const uint8_t *blob, size_t avail, size_t expect_count, BlobInfo *info);
    const CodecOps *(*codec_by_id)(int id);
    /* CPU fallbacks for codecs without CUDA kernels (the module stages the data on the host) */
    Status (*blob_encode)(const CodecOps &c, const CodecParams &p, const float *in, size_t n, uint8_t *out,
                          size_t cap, size_t *len);
    Status (*blob_decode)(const uint8_t *blob, size_t avail, size_t expect_count, float *out, bool accumulate,
                          SimdLevel simd, int threads);
    void (*log_error)(const char *fmt, ...);
    void (*log_warn)(const char *fmt, ...);
    const char *(*status_str)(Status s);
};

/* Memory kinds for CudaModule::mem_alloc (tests, benchmarks, and optionally the core's
 * blob workspaces: a host blob allocated as kMemPinned is DMA'd directly, without the
 * module's staging copy). */
enum CudaMemKind : int { kMemDevice = 0, kMemManaged = 1, kMemPinned = 2 };

/* Host executions of the CUDA kernels' per-thread bodies (the same __host__ __device__
 * code, same index arithmetic, run in a host loop). They let a machine without a GPU check
 * the byte layout and the summation order of the kernels against the CPU codecs; launch
 * geometry, warp votes and shuffles are only exercised on a GPU. Host pointers. */
struct CudaHostModel {
    /* Payload of codec c for n floats (no blob header), as CodecOps::encode would write it;
     * unsupported if c has no CUDA kernels for p; nonfinite like the CPU codec (bytes are
     * still written). */
    Status (*encode)(const CodecOps &c, const CodecParams &p, const float *in, size_t n, uint8_t *out, size_t cap,
                     size_t *len);
    Status (*decode)(const CodecOps &c, const CodecParams &p, const uint8_t *in, size_t len, size_t n, float *out,
                     bool accumulate);
    /* The deterministic l2 norm exactly as the kernels order it. */
    double (*l2norm)(const float *x, size_t n);
    /* CodecOps::prepare as the kernels compute it (p.clip_out set as the CPU sets it);
     * unsupported where the backend stages prepare() through the host. */
    Status (*prepare)(const CodecOps &c, const CodecParams &p, const float *in, size_t n, double *stat);
};

struct CudaModule {
    uint32_t abi_version; /* kCudaModuleAbi */
    uint32_t size;        /* sizeof(CudaModule) */
    const char *build_info; /* "CUDA runtime 13000, archs 80 90, kernels: none bitpack fp16 bf16 q8" */
    /* Backend whose data pointers are device (or managed) memory; blobs stay host memory.
     * Every function takes the ctx returned by ctx_create. */
    const Backend *backend;
    /* One context per communicator: a CUDA stream, events, pooled pinned staging and
     * grow-only device workspaces. Creating one touches no CUDA state: it binds to the
     * device of the first data pointer it is given (or the current device). nullptr if
     * core's ABI does not match. Destroy with the communicator. */
    void *(*ctx_create)(const CoreApi *core);
    void (*ctx_destroy)(void *ctx);
    /* 1 if codec_id with p runs as CUDA kernels; 0 = the backend stages the floats through
     * the host and runs the CPU codec (correct, slower). */
    int (*has_kernels)(int codec_id, const CodecParams *p);
    /* CUDA devices visible; 0 without a driver or a GPU (never fails). */
    int (*device_count)(void);
    /* Allocation helpers (tests, benchmarks, pinned blob workspaces); nullptr on failure. */
    void *(*mem_alloc)(size_t bytes, int kind);
    void (*mem_free)(void *p, int kind);
    /* Synchronous copy between any two pointers (cudaMemcpyDefault); 0 on success. */
    int (*memcpy_sync)(void *dst, const void *src, size_t bytes);
    const CudaHostModel *model;
    /* Error feedback for device buffers (allreduce of lossy codecs): the residual of the
     * buffer (key, n) in device memory, zeroed when first seen, and in *next a device
     * buffer of n floats for the algorithm's new residual (CollCtx::ef_res / ef_new). After
     * a successful call ef_commit makes the new residual current; after a failed one the
     * old residual stays. Owned by ctx (freed by ctx_destroy); nullptr on failure (the call
     * then runs without error feedback). */
    float *(*ef_residual)(void *ctx, const void *key, size_t n, float **next);
    void (*ef_commit)(void *ctx, const void *key, size_t n);
};

}  // namespace compmpi

extern "C" {
typedef const compmpi::CudaModule *(*compmpi_cuda_module_fn)(void);
}

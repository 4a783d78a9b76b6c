// SPDX-License-Identifier: BSD-3-Clause
/* Where a collective's data lives. The algorithms in coll/ touch user data and fp32
 * scratch only through a Backend, and blobs always in host memory (what MPI sends). The
 * CPU backend (coll/backend_cpu.cc) works on host memory with the CPU kernels; the CUDA
 * module (libcompmpi_cuda.so, kernels/<codec>/cuda/) supplies one whose data pointers are
 * device memory: it encodes on the GPU and copies only the compressed bytes across PCIe.
 *
 * All functions are synchronous from the caller's view: when one returns, the blob or
 * the data it wrote is complete (a GPU backend orders its work on one stream and waits
 * on an event before returning a host blob). */
#pragma once
#include <cstddef>
#include <cstdint>

#include "base/buffer.h"
#include "codec.h"

namespace compmpi {

struct Backend {
    const char *name;
    /* Encode n floats of `data` into the host blob at `blob` (capacity cap); *len = blob
     * bytes. Returns 0, BLOB_NONFINITE or BLOB_ABANDON (and writes a flagged header). */
    uint8_t (*encode)(void *ctx, const CodecOps &c, const CodecParams &p, const float *data, size_t n, uint8_t *blob,
                      size_t cap, size_t *len);
    /* Decode a host blob into data (or add into it). Same statuses as blob_decode. */
    Status (*decode)(void *ctx, const uint8_t *blob, size_t avail, size_t n, float *data, bool accumulate,
                     const CodecParams &p);
    /* fp32 scratch in the backend's memory, slot 0..3, grow-only, valid until the next call
     * with the same slot; nullptr on allocation failure. */
    float *(*scratch)(void *ctx, int slot, size_t n);
    void (*copy)(void *ctx, float *dst, const float *src, size_t n);
    void (*add)(void *ctx, float *dst, const float *src, size_t n);   /* dst += src */
    void (*sum)(void *ctx, float *dst, const float *a, const float *b, size_t n); /* dst = a + b */
    void (*sub)(void *ctx, float *dst, const float *a, const float *b, size_t n); /* dst = a - b */
    /* codec->prepare on backend data (shared scale); nonfinite on NaN/Inf */
    Status (*prepare)(void *ctx, const CodecOps &c, const CodecParams &p, const float *data, size_t n, double *stat);
    /* Deterministic l2 norm (same bits for the same data on every rank and thread count). */
    double (*l2norm)(void *ctx, const float *data, size_t n);

    /* ---- fp64 data (CodecParams::elem == Elem::f64): the same operations on doubles. A
     * backend without them (nullptr encode64: the CUDA module so far) never sees doubles: the
     * runtime stages such calls through host memory (src/runtime/device.cc). scratch64 slots
     * are the same memory as scratch's (a slot holds floats or doubles, not both at once). */
    uint8_t (*encode64)(void *ctx, const CodecOps &c, const CodecParams &p, const double *data, size_t n,
                        uint8_t *blob, size_t cap, size_t *len);
    Status (*decode64)(void *ctx, const uint8_t *blob, size_t avail, size_t n, double *data, bool accumulate,
                       const CodecParams &p);
    double *(*scratch64)(void *ctx, int slot, size_t n);
    void (*copy64)(void *ctx, double *dst, const double *src, size_t n);
    void (*add64)(void *ctx, double *dst, const double *src, size_t n);
    void (*sum64)(void *ctx, double *dst, const double *a, const double *b, size_t n);
    void (*sub64)(void *ctx, double *dst, const double *a, const double *b, size_t n);
    Status (*prepare64)(void *ctx, const CodecOps &c, const CodecParams &p, const double *data, size_t n,
                        double *stat);
    double (*l2norm64)(void *ctx, const double *data, size_t n);
};

/* Whether backend be handles elements of type e. */
inline bool backend_has_elem(const Backend &be, Elem e) { return e == Elem::f32 || be.encode64 != nullptr; }

/* The host backend's memory of one communicator: its fp32 scratch slots (Backend::scratch). */
struct CpuBackendState {
    static constexpr int kSlots = 4;
    Buffer scratch[kSlots];
    size_t capacity() const {
        size_t c = 0;
        for (const Buffer &b : scratch) c += b.capacity();
        return c;
    }
};

/* The host backend; ctx is a CpuBackendState (the communicator's, CollState::cpu). */
const Backend &backend_cpu();

}  // namespace compmpi

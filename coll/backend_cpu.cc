// SPDX-License-Identifier: BSD-3-Clause
/* The host backend: user data and fp32 scratch in host memory, CPU kernels (OpenMP + SIMD). */
#include <cmath>
#include <cstring>

#include "backend.h"
#include "base/log.h"
#include "norm.h"
#include "simd.h"

namespace compmpi {
namespace {

constexpr size_t kPar = 1u << 18; /* below this one thread is faster */

template <class T>
uint8_t cpu_encode(void *, const CodecOps &c, const CodecParams &p, const T *data, size_t n, uint8_t *blob, size_t cap,
                   size_t *plen) {
    size_t len = kBlobHeaderBytes;
    Status s = blob_encode(c, p, data, n, blob, cap, &len);
    if (plen) *plen = s == Status::ok ? len : kBlobHeaderBytes;
    if (s == Status::ok) return 0;
    if (s == Status::nonfinite) return BLOB_NONFINITE;
    log_error("%s encode of %zu %s values failed (%s); this call falls back to the exact MPI collective", c.name, n,
              elem_name(p.elem), status_str(s));
    blob_write_header(blob, BlobInfo{c.id, BLOB_ABANDON, p.bits, p.variant, p.param, n, 0, p.elem});
    return BLOB_ABANDON;
}

template <class T>
Status cpu_decode(void *, const uint8_t *blob, size_t avail, size_t n, T *data, bool accumulate,
                  const CodecParams &p) {
    return blob_decode(blob, avail, n, data, accumulate, p.simd, p.threads);
}

template <class T> T *cpu_scratch(void *ctx, int slot, size_t n) {
    CpuBackendState *st = static_cast<CpuBackendState *>(ctx);
    if (slot < 0 || slot >= CpuBackendState::kSlots) return nullptr;
    return st->scratch[slot].as<T>(n ? n : 1);
}

template <class T> void cpu_copy(void *, T *dst, const T *src, size_t n) {
    if (dst != src) std::memcpy(dst, src, n * sizeof(T));
}
template <class T> void cpu_add(void *, T *dst, const T *src, size_t n) {
    const int t = kernel_threads();
#pragma omp parallel for num_threads(t) schedule(static) if (n >= kPar && t > 1)
    for (size_t i = 0; i < n; ++i) dst[i] += src[i];
}
template <class T> void cpu_sum(void *, T *dst, const T *a, const T *b, size_t n) {
    const int t = kernel_threads();
#pragma omp parallel for num_threads(t) schedule(static) if (n >= kPar && t > 1)
    for (size_t i = 0; i < n; ++i) dst[i] = a[i] + b[i];
}
template <class T> void cpu_sub(void *, T *dst, const T *a, const T *b, size_t n) {
    const int t = kernel_threads();
#pragma omp parallel for num_threads(t) schedule(static) if (n >= kPar && t > 1)
    for (size_t i = 0; i < n; ++i) dst[i] = a[i] - b[i];
}
Status cpu_prepare(void *, const CodecOps &c, const CodecParams &p, const float *data, size_t n, double *stat) {
    return c.prepare ? c.prepare(data, n, p, stat) : Status::unsupported;
}
Status cpu_prepare64(void *, const CodecOps &c, const CodecParams &p, const double *data, size_t n, double *stat) {
    return c.prepare64 ? c.prepare64(data, n, p, stat) : Status::unsupported;
}
double cpu_l2norm(void *, const float *data, size_t n) { return l2_norm_det(data, n, kernel_threads()); }
double cpu_l2norm64(void *, const double *data, size_t n) { return l2_norm_det(data, n, kernel_threads()); }

const Backend kCpu = {"cpu",
                      cpu_encode<float>,
                      cpu_decode<float>,
                      cpu_scratch<float>,
                      cpu_copy<float>,
                      cpu_add<float>,
                      cpu_sum<float>,
                      cpu_sub<float>,
                      cpu_prepare,
                      cpu_l2norm,
                      cpu_encode<double>,
                      cpu_decode<double>,
                      cpu_scratch<double>,
                      cpu_copy<double>,
                      cpu_add<double>,
                      cpu_sum<double>,
                      cpu_sub<double>,
                      cpu_prepare64,
                      cpu_l2norm64};

}  // namespace

const Backend &backend_cpu() { return kCpu; }

}  // namespace compmpi

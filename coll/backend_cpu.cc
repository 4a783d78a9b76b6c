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

uint8_t cpu_encode(void *, const CodecOps &c, const CodecParams &p, const float *data, size_t n, uint8_t *blob,
                   size_t cap, size_t *plen) {
    size_t len = kBlobHeaderBytes;
    Status s = blob_encode(c, p, data, n, blob, cap, &len);
    if (plen) *plen = s == Status::ok ? len : kBlobHeaderBytes;
    if (s == Status::ok) return 0;
    if (s == Status::nonfinite) return BLOB_NONFINITE;
    log_error("%s encode of %zu floats failed (%s); this call falls back to the exact MPI collective", c.name, n,
              status_str(s));
    blob_write_header(blob, BlobInfo{c.id, BLOB_ABANDON, p.bits, p.variant, p.param, n, 0});
    return BLOB_ABANDON;
}

Status cpu_decode(void *, const uint8_t *blob, size_t avail, size_t n, float *data, bool accumulate,
                  const CodecParams &p) {
    return blob_decode(blob, avail, n, data, accumulate, p.simd, p.threads);
}

float *cpu_scratch(void *ctx, int slot, size_t n) {
    CpuBackendState *st = static_cast<CpuBackendState *>(ctx);
    if (slot < 0 || slot >= CpuBackendState::kSlots) return nullptr;
    return st->scratch[slot].as<float>(n ? n : 1);
}

void cpu_copy(void *, float *dst, const float *src, size_t n) {
    if (dst != src) std::memcpy(dst, src, n * sizeof(float));
}
void cpu_add(void *, float *dst, const float *src, size_t n) {
    const int t = kernel_threads();
#pragma omp parallel for num_threads(t) schedule(static) if (n >= kPar && t > 1)
    for (size_t i = 0; i < n; ++i) dst[i] += src[i];
}
void cpu_sum(void *, float *dst, const float *a, const float *b, size_t n) {
    const int t = kernel_threads();
#pragma omp parallel for num_threads(t) schedule(static) if (n >= kPar && t > 1)
    for (size_t i = 0; i < n; ++i) dst[i] = a[i] + b[i];
}
void cpu_sub(void *, float *dst, const float *a, const float *b, size_t n) {
    const int t = kernel_threads();
#pragma omp parallel for num_threads(t) schedule(static) if (n >= kPar && t > 1)
    for (size_t i = 0; i < n; ++i) dst[i] = a[i] - b[i];
}
Status cpu_prepare(void *, const CodecOps &c, const CodecParams &p, const float *data, size_t n, double *stat) {
    return c.prepare ? c.prepare(data, n, p, stat) : Status::unsupported;
}
double cpu_l2norm(void *, const float *data, size_t n) { return l2_norm_det(data, n, kernel_threads()); }

const Backend kCpu = {"cpu", cpu_encode, cpu_decode, cpu_scratch, cpu_copy, cpu_add, cpu_sum, cpu_sub, cpu_prepare,
                      cpu_l2norm};

}  // namespace

const Backend &backend_cpu() { return kCpu; }

}  // namespace compmpi

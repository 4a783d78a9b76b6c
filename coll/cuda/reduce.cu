// SPDX-License-Identifier: BSD-3-Clause
/* Element-wise fp32 kernels (dst = a + b, a - b), the integer max-abs and the deterministic
 * l2 norm.
 *
 * l2 norm: the same bits as l2_norm_det() in src/runtime/policy.cc, so the awp policy decides alike
 * on a GPU rank and a CPU rank. Its order of operations, replicated exactly:
 *   blocks of 16384 elements; in block b, double lane j (0..7) sums x[i]^2 for i = lo+j,
 *   lo+j+8, ... over the block's whole groups of 8, in increasing i; the block's last
 *   (hi-lo) % 8 elements are added, in order, to lane 0 afterwards; the block's partial is
 *   ((a0+a1)+(a2+a3))+((a4+a5)+(a6+a7)); the partials are summed in block order from 0.0;
 *   sqrt. x[i]^2 is exact in double (24-bit significands), every add is one IEEE
 *   round-to-nearest add, never fused (dadd/dmul, -fmad=false).
 * GPU mapping: one thread per (block, lane) does the lane's sequential sum (16 loads in
 * flight, then the adds in order); the 8 lanes of a block are 8 consecutive threads of one warp and
 * are folded with shuffles by lane 0; the few partials are summed on the host. A NaN/Inf
 * input gives a NaN/Inf norm, as on the CPU (the NaN's payload bits may differ). */
#include <algorithm>
#include <cmath>

#include "common/cuda_util.cuh"
#include "common/gpu_codec.cuh"

namespace compmpi::cuda {
namespace {

/* dst = a + b (sub: a - b), 4 elements per item, float4 when all three are 16-byte aligned */
struct Binary {
    float *dst;
    const float *a, *b;
    size_t n;
    bool sub, vec;

    __host__ __device__ bool operator()(size_t g) const {
        const size_t i0 = 4 * g;
        if (vec && i0 + 4 <= n) {
            const float4 x = load_vec<float4>(a + i0), y = load_vec<float4>(b + i0);
            const float4 r = sub ? make_float4(fsub(x.x, y.x), fsub(x.y, y.y), fsub(x.z, y.z), fsub(x.w, y.w))
                                 : make_float4(fadd(x.x, y.x), fadd(x.y, y.y), fadd(x.z, y.z), fadd(x.w, y.w));
            store_vec(dst + i0, r);
            return false;
        }
        const size_t i1 = i0 + 4 < n ? i0 + 4 : n;
        for (size_t i = i0; i < i1; ++i) dst[i] = sub ? fsub(a[i], b[i]) : fadd(a[i], b[i]);
        return false;
    }
};

cudaError_t launch_binary(float *dst, const float *a, const float *b, size_t n, bool sub, cudaStream_t s) {
    const Binary body{dst, a, b, n, sub, aligned(dst, 16) && aligned(a, 16) && aligned(b, 16)};
    return launch_for_each((n + 3) / 4, body, nullptr, s);
}

__host__ __device__ inline double sq(float v) {
    const double d = v;
    return dmul(d, d);
}

constexpr int kUnroll = 16;      /* loads of one lane in flight */
constexpr int kNormThreads = 64; /* 8 norm blocks per CTA: 16 Mi floats still fill 128 SMs */

/* Lane j of block b (see the top of the file). */
__host__ __device__ inline double lane_sum(const float *__restrict__ x, size_t n, size_t b, int j) {
    const size_t lo = b * kNormBlock, hi = lo + kNormBlock < n ? lo + kNormBlock : n;
    const size_t full = lo + (hi - lo) / 8 * 8;
    double acc = 0.0;
    size_t i = lo + static_cast<size_t>(j);
    for (; i + 8 * (kUnroll - 1) < full; i += 8 * kUnroll) { /* loads in flight, then the adds in order */
        float v[kUnroll];
        for (int u = 0; u < kUnroll; ++u) v[u] = x[i + 8 * static_cast<size_t>(u)];
        for (int u = 0; u < kUnroll; ++u) acc = dadd(acc, sq(v[u]));
    }
    for (; i < full; i += 8) acc = dadd(acc, sq(x[i]));
    if (j == 0)
        for (size_t t = full; t < hi; ++t) acc = dadd(acc, sq(x[t]));
    return acc;
}

__host__ __device__ inline double fold8(const double a[8]) {
    return dadd(dadd(dadd(a[0], a[1]), dadd(a[2], a[3])), dadd(dadd(a[4], a[5]), dadd(a[6], a[7])));
}

__global__ void __launch_bounds__(kNormThreads) l2_partials_kernel(const float *__restrict__ x, size_t n, size_t nb,
                                                             double *__restrict__ part) {
    const size_t t = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    const size_t b = t >> 3;
    const int j = static_cast<int>(t & 7);
    const double acc = b < nb ? lane_sum(x, n, b, j) : 0.0;
    /* all 32 threads of the warp take part (the grid covers whole warps) */
    double a[8];
    for (int k = 0; k < 8; ++k) a[k] = __shfl_sync(0xFFFFFFFFu, acc, k, 8);
    if (j == 0 && b < nb) part[b] = fold8(a);
}

__global__ void __launch_bounds__(kThreads) maxabs_kernel(const float *__restrict__ x, size_t n, uint32_t *mx) {
    uint32_t m = 0;
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    const bool vec = aligned(x, 16);
    const size_t groups = vec ? n / 4 : 0;
    for (size_t g = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; g < groups; g += stride) {
        const uint4 u = load_vec<uint4>(x + 4 * g);
        m = max(m, max(max(u.x & 0x7FFFFFFFu, u.y & 0x7FFFFFFFu), max(u.z & 0x7FFFFFFFu, u.w & 0x7FFFFFFFu)));
    }
    for (size_t i = 4 * groups + static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
        m = max(m, f2u(x[i]) & 0x7FFFFFFFu);
    for (int o = 16; o; o >>= 1) m = max(m, __shfl_xor_sync(0xFFFFFFFFu, m, o)); /* any sm */
    if ((threadIdx.x & 31) == 0 && m) atomicMax(mx, m);
}

}  // namespace

cudaError_t launch_maxabs(const float *x, size_t n, uint32_t *mx, cudaStream_t s) {
    if (n == 0) return cudaSuccess;
    maxabs_kernel<<<grid_for((n + 3) / 4), kThreads, 0, s>>>(x, n, mx);
    return cudaGetLastError();
}

namespace {
__global__ void set_word_kernel(uint32_t *w, uint32_t v) { *w = v; }
}  // namespace

cudaError_t launch_set_word(uint32_t *w, uint32_t v, cudaStream_t s) {
    set_word_kernel<<<1, 1, 0, s>>>(w, v);
    return cudaGetLastError();
}

uint32_t maxabs_host(const float *x, size_t n) {
    uint32_t m = 0;
    for (size_t i = 0; i < n; ++i) m = std::max(m, f2u(x[i]) & 0x7FFFFFFFu);
    return m;
}

cudaError_t launch_add(float *dst, const float *src, size_t n, cudaStream_t s) {
    return launch_binary(dst, dst, src, n, false, s);
}
cudaError_t launch_sum(float *dst, const float *a, const float *b, size_t n, cudaStream_t s) {
    return launch_binary(dst, a, b, n, false, s);
}
cudaError_t launch_sub(float *dst, const float *a, const float *b, size_t n, cudaStream_t s) {
    return launch_binary(dst, a, b, n, true, s);
}

cudaError_t launch_l2_partials(const float *x, size_t n, double *part, cudaStream_t s) {
    const size_t nb = l2_blocks(n);
    if (nb == 0) return cudaSuccess;
    const size_t threads = nb * 8;
    const size_t blocks = (threads + kNormThreads - 1) / kNormThreads;
    l2_partials_kernel<<<static_cast<unsigned>(blocks), kNormThreads, 0, s>>>(x, n, nb, part);
    return cudaGetLastError();
}

double l2_finish(const double *part, size_t nb) {
    double s = 0;
    for (size_t b = 0; b < nb; ++b) s += part[b];
    return std::sqrt(s);
}

double l2norm_host(const float *x, size_t n) {
    const size_t nb = l2_blocks(n);
    double s = 0;
    for (size_t b = 0; b < nb; ++b) {
        double a[8];
        for (int j = 0; j < 8; ++j) a[j] = lane_sum(x, n, b, j);
        s += fold8(a);
    }
    return std::sqrt(s);
}

}  // namespace compmpi::cuda

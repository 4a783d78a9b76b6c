// SPDX-License-Identifier: BSD-3-Clause
/* Helpers shared by the CUDA module's files: one kernel shape for element-wise work, host
 * execution of the same bodies (the host model), unaligned-safe vector loads/stores.
 *
 * Kernel bodies are functors with `__host__ __device__ bool operator()(size_t item) const`
 * (true = "saw NaN/Inf" for encoders, ignored elsewhere). On the GPU a grid-stride loop runs
 * them; on the host a plain loop does (CudaHostModel), so the index arithmetic and the
 * bytes are the same code in both places. */
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace compmpi::cuda {

inline constexpr int kThreads = 256;      /* threads per block of element-wise kernels */
inline constexpr size_t kMaxBlocks = 8192; /* grid-stride beyond 2M threads */

inline unsigned grid_for(size_t items) {
    size_t b = (items + kThreads - 1) / kThreads;
    return static_cast<unsigned>(b < kMaxBlocks ? b : kMaxBlocks);
}

template <class Body>
__global__ void __launch_bounds__(kThreads) for_each_kernel(size_t items, Body body, uint32_t *flag) {
    bool bad = false;
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < items; i += stride)
        bad |= body(i);
    if (flag) {
        /* every thread of the warp reaches the vote (blockDim is a multiple of 32) */
        if (__any_sync(0xFFFFFFFFu, bad) && (threadIdx.x & 31) == 0) atomicOr(flag, 1u);
    }
}

/* Enqueue body(0..items) on stream; flag (device, may be nullptr) gets 1 if any body
 * returned true. Zero items launch nothing. */
template <class Body>
cudaError_t launch_for_each(size_t items, const Body &body, uint32_t *flag, cudaStream_t stream) {
    if (items == 0) return cudaSuccess;
    for_each_kernel<<<grid_for(items), kThreads, 0, stream>>>(items, body, flag);
    return cudaGetLastError();
}

/* The host model: the same bodies in a loop. */
template <class Body>
bool run_for_each_host(size_t items, const Body &body) {
    bool bad = false;
    for (size_t i = 0; i < items; ++i) bad |= body(i);
    return bad;
}

/* ---- loads/stores: vector instructions on the GPU (caller guarantees alignment), memcpy
 * on the host (no aliasing games in the host model) */
template <class V, class T>
__host__ __device__ inline V load_vec(const T *p) {
#ifdef __CUDA_ARCH__
    return *reinterpret_cast<const V *>(p);
#else
    V v;
    std::memcpy(&v, p, sizeof v);
    return v;
#endif
}
template <class V, class T>
__host__ __device__ inline void store_vec(T *p, const V &v) {
#ifdef __CUDA_ARCH__
    *reinterpret_cast<V *>(p) = v;
#else
    std::memcpy(p, &v, sizeof v);
#endif
}

__host__ __device__ inline uint32_t f2u(float f) {
#ifdef __CUDA_ARCH__
    return __float_as_uint(f);
#else
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
#endif
}
__host__ __device__ inline float u2f(uint32_t u) {
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float f;
    std::memcpy(&f, &u, 4);
    return f;
#endif
}

/* IEEE round-to-nearest arithmetic that is never contracted into an FMA (the module is
 * also compiled with -fmad=false; this makes the intent local and visible). */
__host__ __device__ inline double dadd(double a, double b) {
#ifdef __CUDA_ARCH__
    return __dadd_rn(a, b);
#else
    return a + b;
#endif
}
__host__ __device__ inline double dmul(double a, double b) {
#ifdef __CUDA_ARCH__
    return __dmul_rn(a, b);
#else
    return a * b;
#endif
}
/* A NaN result with the bits x86 gives (the CPU path and a CPU rank): an input NaN made quiet,
 * the first operand's when both are NaN; Inf - Inf the "default NaN" 0xFFC00000. The GPU's
 * own rule (one canonical 0x7FFFFFFF) would leave a GPU rank with other NaN bits than a CPU
 * rank in the same communicator. Called only when the result is NaN. */
__host__ __device__ inline float x86_nan(float a, float b) {
    if (a != a) return u2f(f2u(a) | 0x00400000u);
    if (b != b) return u2f(f2u(b) | 0x00400000u);
    return u2f(0xFFC00000u);
}
__host__ __device__ inline float fadd(float a, float b) {
#ifdef __CUDA_ARCH__
    const float s = __fadd_rn(a, b);
    return s == s ? s : x86_nan(a, b);
#else
    return a + b;
#endif
}
__host__ __device__ inline float fmul(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}
__host__ __device__ inline float fdiv(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fdiv_rn(a, b);
#else
    return a / b;
#endif
}
__host__ __device__ inline float fsub(float a, float b) {
#ifdef __CUDA_ARCH__
    const float s = __fsub_rn(a, b);
    return s == s ? s : x86_nan(a, b);
#else
    return a - b;
#endif
}
/* out[0..4) = v, or out[0..4) + v lane by lane (add: decode_add's fadd) */
__host__ __device__ inline void store4(float *out, float4 v, bool add) {
    if (add) {
        const float4 o = load_vec<float4>(out);
        v = make_float4(fadd(o.x, v.x), fadd(o.y, v.y), fadd(o.z, v.z), fadd(o.w, v.w));
    }
    store_vec(out, v);
}

/* Decode bodies of the sparse formats (sparse, topk): out[i] = (or +=) the fp32 stored at
 * vals + 4 i (4-byte aligned on the device: a payload offset of 4 or 16), and zeroing. */
struct DenseDecodeBody {
    const uint8_t *vals;
    float *out;
    bool add;
    __host__ __device__ bool operator()(size_t i) const {
        const float v = u2f(load_vec<uint32_t>(vals + 4 * i));
        out[i] = add ? fadd(out[i], v) : v;
        return false;
    }
};
struct ZeroBody {
    float *out;
    __host__ __device__ bool operator()(size_t i) const {
        out[i] = 0.0f;
        return false;
    }
};

__host__ __device__ inline bool aligned(const void *p, size_t a) { return (reinterpret_cast<uintptr_t>(p) & (a - 1)) == 0; }

}  // namespace compmpi::cuda

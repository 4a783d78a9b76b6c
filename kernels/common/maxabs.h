// SPDX-License-Identifier: BSD-3-Clause
/* Max of |x| over fp32 (fp64) data, as the bit pattern of |x| (NaN/Inf compare above every finite
 * value, so one scan also finds them). Scalar, AVX2 and AVX-512 give the same result; used
 * by the codecs that normalise by max-abs (q8, fp16) and the fp64 codecs' NaN/Inf scans. */
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "common/blocks.h"
#include "simd.h"

namespace compmpi::maxabs {

/* The bit pattern of |x| for T = float (uint32_t) or double (uint64_t) */
template <class T> using Bits = std::conditional_t<sizeof(T) == 8, uint64_t, uint32_t>;

template <class T> inline Bits<T> scalar(const T *in, size_t n) {
    constexpr Bits<T> abs = ~Bits<T>{0} >> 1;
    Bits<T> m = 0;
    for (size_t i = 0; i < n; ++i) {
        Bits<T> u;
        std::memcpy(&u, in + i, sizeof(T));
        m = std::max<Bits<T>>(m, u & abs);
    }
    return m;
}

__attribute__((target("avx2"))) inline uint32_t avx2(const float *in, size_t n) {
    const __m256i abs = _mm256_set1_epi32(0x7FFFFFFF);
    __m256i m0 = _mm256_setzero_si256(), m1 = m0;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        m0 = _mm256_max_epu32(m0, _mm256_and_si256(abs, _mm256_loadu_si256(reinterpret_cast<const __m256i *>(in + i))));
        m1 = _mm256_max_epu32(m1, _mm256_and_si256(abs, _mm256_loadu_si256(reinterpret_cast<const __m256i *>(in + i + 8))));
    }
    alignas(32) uint32_t v[8];
    _mm256_store_si256(reinterpret_cast<__m256i *>(v), _mm256_max_epu32(m0, m1));
    uint32_t m = scalar(in + i, n - i);
    for (uint32_t x : v) m = std::max(m, x);
    return m;
}

__attribute__((target("avx512f"))) inline uint32_t avx512(const float *in, size_t n) {
    const __m512i abs = _mm512_set1_epi32(0x7FFFFFFF);
    __m512i m0 = _mm512_setzero_si512(), m1 = m0;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        m0 = _mm512_max_epu32(m0, _mm512_and_si512(abs, _mm512_loadu_si512(in + i)));
        m1 = _mm512_max_epu32(m1, _mm512_and_si512(abs, _mm512_loadu_si512(in + i + 16)));
    }
    return std::max(scalar(in + i, n - i), _mm512_reduce_max_epu32(_mm512_max_epu32(m0, m1)));
}

/* ---- doubles: the |x| bit pattern as uint64 (NaN/Inf: >= 0x7FF0000000000000) */

__attribute__((target("avx2"))) inline uint64_t avx2(const double *in, size_t n) {
    /* |x| patterns are below 2^63: the signed 64-bit compare orders them */
    const __m256i abs = _mm256_set1_epi64x(0x7FFFFFFFFFFFFFFFll);
    __m256i m0 = _mm256_setzero_si256(), m1 = m0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i a = _mm256_and_si256(abs, _mm256_loadu_si256(reinterpret_cast<const __m256i *>(in + i)));
        const __m256i b = _mm256_and_si256(abs, _mm256_loadu_si256(reinterpret_cast<const __m256i *>(in + i + 4)));
        m0 = _mm256_blendv_epi8(m0, a, _mm256_cmpgt_epi64(a, m0));
        m1 = _mm256_blendv_epi8(m1, b, _mm256_cmpgt_epi64(b, m1));
    }
    alignas(32) uint64_t v[4];
    _mm256_store_si256(reinterpret_cast<__m256i *>(v), _mm256_blendv_epi8(m0, m1, _mm256_cmpgt_epi64(m1, m0)));
    uint64_t m = scalar(in + i, n - i);
    for (uint64_t x : v) m = std::max(m, x);
    return m;
}

__attribute__((target("avx512f"))) inline uint64_t avx512(const double *in, size_t n) {
    const __m512i abs = _mm512_set1_epi64(0x7FFFFFFFFFFFFFFFll);
    __m512i m0 = _mm512_setzero_si512(), m1 = m0;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        m0 = _mm512_max_epu64(m0, _mm512_and_si512(abs, _mm512_loadu_si512(in + i)));
        m1 = _mm512_max_epu64(m1, _mm512_and_si512(abs, _mm512_loadu_si512(in + i + 8)));
    }
    return std::max(scalar(in + i, n - i), static_cast<uint64_t>(_mm512_reduce_max_epu64(_mm512_max_epu64(m0, m1))));
}

/* One block on the given path (the caller clamps lvl to simd_detect()). */
template <class T> inline Bits<T> block(const T *in, size_t n, SimdLevel lvl) {
    switch (lvl) {
        case SimdLevel::avx512: return avx512(in, n);
        case SimdLevel::avx2: return avx2(in, n);
        default: return scalar(in, n);
    }
}

/* The whole buffer in blocks.h's fixed blocks, in parallel above its kParallelMin. */
template <class T> Bits<T> parallel(const T *in, size_t n, SimdLevel lvl, int threads) {
    using blocks::kBlock;
    const size_t nblocks = (n + kBlock - 1) / kBlock;
    Bits<T> m = 0;
#pragma omp parallel for num_threads(threads) schedule(static) reduction(max : m) if (n >= blocks::kParallelMin && threads > 1)
    for (size_t b = 0; b < nblocks; ++b) m = std::max(m, block(in + b * kBlock, std::min(kBlock, n - b * kBlock), lvl));
    return m;
}

}  // namespace compmpi::maxabs

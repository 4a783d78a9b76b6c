// SPDX-License-Identifier: BSD-3-Clause
/* Per-bucket statistics (sum, sum of squares, max |x|, NaN/Inf) for the scaled stochastic
 * codecs (terngrad: sigma and max; qsgd: the l2 norm). Deterministic by construction:
 *  - a bucket is cut into segments of kSeg elements starting at the bucket's first element;
 *    segment partials are combined in segment order, whatever thread computed them;
 *  - inside a segment element j goes to double accumulator lane j % 16 (squares of floats
 *    are exact in double), lanes are folded by one fixed tree. The AVX2 (4 x 4 lanes) and
 *    AVX-512 (2 x 8 lanes) paths keep exactly that lane assignment, so every path and every
 *    thread count gives the same bits. */
#pragma once
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "common/simd_target.h"
#include "simd.h"

namespace compmpi::bstats {

inline constexpr size_t kSeg = 1 << 15;         /* elements per segment */
inline constexpr size_t kParallelMin = 1 << 17; /* below this one thread is faster */
inline constexpr uint32_t kExp = 0x7F800000u;

struct Moments {
    double sum = 0, sumsq = 0; /* only when asked for */
    float maxabs = 0;
    uint32_t bad = 0; /* a NaN or Inf was seen */
};

inline double fold16(const double a[16]) {
    double t8[8], t4[4];
    for (int j = 0; j < 8; ++j) t8[j] = a[j] + a[j + 8];
    for (int j = 0; j < 4; ++j) t4[j] = t8[j] + t8[j + 4];
    return (t4[0] + t4[2]) + (t4[1] + t4[3]);
}

/* Tail elements and the scalar path: element lo + j into lane j % 16. */
inline void seg_tail(const float *x, size_t i, size_t n, bool moments, double s[16], double q[16], float *mx,
                     uint32_t *bad) {
    for (; i < n; ++i) {
        uint32_t u;
        std::memcpy(&u, x + i, 4);
        *bad |= static_cast<uint32_t>((u & kExp) == kExp);
        const float a = std::fabs(x[i]);
        *mx = a > *mx ? a : *mx;
        if (moments) {
            const double d = x[i];
            s[i & 15] += d;
            q[i & 15] += d * d;
        }
    }
}

inline void seg_scalar(const float *x, size_t n, bool moments, Moments *m) {
    double s[16] = {}, q[16] = {};
    float mx = 0;
    uint32_t bad = 0;
    seg_tail(x, 0, n, moments, s, q, &mx, &bad);
    m->sum = moments ? fold16(s) : 0;
    m->sumsq = moments ? fold16(q) : 0;
    m->maxabs = mx;
    m->bad = bad;
}

/* With moments, the SIMD loops skip the per-element NaN/Inf test: a NaN or Inf element makes
 * the segment's sum or sum of squares NaN or Inf, and finite elements cannot (a segment's
 * sum of squares is at most kSeg * FLT_MAX^2, about 4e81), so the flag is the same. */
inline bool finite_sums(const Moments &m) {
    return std::isfinite(m.sum) && std::isfinite(m.sumsq);
}

CMPI_AVX2 inline void seg_avx2(const float *x, size_t n, bool moments, Moments *m) {
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    const __m256i exp = _mm256_set1_epi32(static_cast<int>(kExp));
    __m256d s[4], q[4];
    for (int j = 0; j < 4; ++j) s[j] = q[j] = _mm256_setzero_pd();
    __m256 mx = _mm256_setzero_ps();
    __m256i bad = _mm256_setzero_si256();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);
        if (!moments) { /* with moments, NaN/Inf shows in the sums (finite_sums) */
            __m256i u0 = _mm256_castps_si256(v0), u1 = _mm256_castps_si256(v1);
            bad = _mm256_or_si256(bad, _mm256_cmpeq_epi32(_mm256_and_si256(u0, exp), exp));
            bad = _mm256_or_si256(bad, _mm256_cmpeq_epi32(_mm256_and_si256(u1, exp), exp));
        }
        mx = _mm256_max_ps(mx, _mm256_and_ps(v0, absmask));
        mx = _mm256_max_ps(mx, _mm256_and_ps(v1, absmask));
        if (moments) {
            __m256d d[4] = {_mm256_cvtps_pd(_mm256_castps256_ps128(v0)), _mm256_cvtps_pd(_mm256_extractf128_ps(v0, 1)),
                            _mm256_cvtps_pd(_mm256_castps256_ps128(v1)), _mm256_cvtps_pd(_mm256_extractf128_ps(v1, 1))};
            for (int j = 0; j < 4; ++j) {
                s[j] = _mm256_add_pd(s[j], d[j]);
                q[j] = _mm256_add_pd(q[j], _mm256_mul_pd(d[j], d[j]));
            }
        }
    }
    alignas(32) double sa[16], qa[16];
    alignas(32) float ma[8];
    for (int j = 0; j < 4; ++j) {
        _mm256_store_pd(sa + 4 * j, s[j]);
        _mm256_store_pd(qa + 4 * j, q[j]);
    }
    _mm256_store_ps(ma, mx);
    float mxs = 0;
    for (float v : ma) mxs = v > mxs ? v : mxs;
    uint32_t bads = !_mm256_testz_si256(bad, bad);
    seg_tail(x, i, n, moments, sa, qa, &mxs, &bads);
    m->sum = moments ? fold16(sa) : 0;
    m->sumsq = moments ? fold16(qa) : 0;
    m->maxabs = mxs;
    m->bad = bads | (moments && !finite_sums(*m));
}

CMPI_AVX512 inline void seg_avx512(const float *x, size_t n, bool moments, Moments *m) {
    const __m512i exp = _mm512_set1_epi32(static_cast<int>(kExp));
    __m512d s0 = _mm512_setzero_pd(), s1 = s0, q0 = s0, q1 = s0;
    __m512 mx = _mm512_setzero_ps();
    __mmask16 bad = 0;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_loadu_ps(x + i);
        if (!moments) bad |= _mm512_cmpeq_epi32_mask(_mm512_and_si512(_mm512_castps_si512(v), exp), exp);
        mx = _mm512_max_ps(mx, _mm512_abs_ps(v));
        if (moments) {
            __m512d d0 = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
            __m512d d1 = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
            s0 = _mm512_add_pd(s0, d0);
            s1 = _mm512_add_pd(s1, d1);
            /* d * d is exact in double (24-bit significands, no overflow or underflow): one
             * rounding either way, so the fused form gives the bits of add(q, mul(d, d)) */
            q0 = _mm512_fmadd_pd(d0, d0, q0);
            q1 = _mm512_fmadd_pd(d1, d1, q1);
        }
    }
    alignas(64) double sa[16], qa[16];
    alignas(64) float ma[16];
    _mm512_store_pd(sa, s0);
    _mm512_store_pd(sa + 8, s1);
    _mm512_store_pd(qa, q0);
    _mm512_store_pd(qa + 8, q1);
    _mm512_store_ps(ma, mx);
    float mxs = 0;
    for (float v : ma) mxs = v > mxs ? v : mxs;
    uint32_t bads = bad != 0;
    seg_tail(x, i, n, moments, sa, qa, &mxs, &bads);
    m->sum = moments ? fold16(sa) : 0;
    m->sumsq = moments ? fold16(qa) : 0;
    m->maxabs = mxs;
    m->bad = bads | (moments && !finite_sums(*m));
}

inline void seg(const float *x, size_t n, bool moments, SimdLevel lvl, Moments *m) {
    by_level<seg_avx512, seg_avx2, seg_scalar>(lvl, x, n, moments, m);
}

/* Number of buckets of B elements (B = 0: one bucket) covering n elements; 0 if n = 0. */
inline size_t bucket_count(size_t n, size_t B) {
    if (n == 0) return 0;
    return B == 0 || B >= n ? 1 : (n + B - 1) / B;
}

inline void accumulate(Moments *m, const Moments &p) {
    m->sum += p.sum;
    m->sumsq += p.sumsq;
    m->maxabs = std::max(m->maxabs, p.maxabs);
    m->bad |= p.bad;
}

/* Statistics of one bucket, its segments in order: the same bits as bucket_moments gives
 * for it (encoders use this to do a block's buckets right before encoding them). */
inline Moments moments_of(const float *x, size_t len, bool moments, SimdLevel lvl) {
    if (lvl > simd_detect()) lvl = simd_detect();
    Moments m;
    for (size_t lo = 0; lo < len; lo += kSeg) {
        Moments p;
        seg(x + lo, std::min(kSeg, len - lo), moments, lvl, &p);
        accumulate(&m, p);
    }
    return m;
}

/* The sum of squares of one bucket and whether it holds NaN/Inf (qsgd's norm): the bits of
 * moments_of(x, len, true, lvl).sumsq -- the same lanes, the same fold, segment by segment --
 * without the sum and the maximum the AVX-512 path would also compute. */
CMPI_AVX512 inline void sumsq_seg_avx512(const float *x, size_t n, double *sumsq, uint32_t *bad) {
    __m512d q0 = _mm512_setzero_pd(), q1 = q0;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) { /* NaN/Inf: seen in the sum of squares (finite_sums) */
        __m512 v = _mm512_loadu_ps(x + i);
        __m512d d0 = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
        __m512d d1 = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
        q0 = _mm512_fmadd_pd(d0, d0, q0); /* exact product: the bits of add(q, mul(d, d)) */
        q1 = _mm512_fmadd_pd(d1, d1, q1);
    }
    alignas(64) double sa[16] = {}, qa[16];
    _mm512_store_pd(qa, q0);
    _mm512_store_pd(qa + 8, q1);
    float mx = 0;
    uint32_t bads = 0;
    seg_tail(x, i, n, true, sa, qa, &mx, &bads);
    *sumsq = fold16(qa);
    *bad = bads | !std::isfinite(*sumsq);
}

inline Moments sumsq_of(const float *x, size_t len, SimdLevel lvl) {
    if (lvl > simd_detect()) lvl = simd_detect();
    if (lvl != SimdLevel::avx512) return moments_of(x, len, true, lvl);
    Moments m;
    for (size_t lo = 0; lo < len; lo += kSeg) {
        double q = 0;
        uint32_t bad = 0;
        sumsq_seg_avx512(x + lo, std::min(kSeg, len - lo), &q, &bad);
        m.sumsq += q;
        m.bad |= bad;
    }
    return m;
}

/* Statistics of each bucket of x[0..n). Returns false if x holds NaN/Inf. */
inline bool bucket_moments(const float *x, size_t n, size_t B, bool moments, SimdLevel lvl, int threads,
                           std::vector<Moments> *out) {
    if (lvl > simd_detect()) lvl = simd_detect();
    const size_t nb = bucket_count(n, B);
    if (nb <= 1) B = n;
    out->assign(nb, Moments{});
    if (nb == 0) return true;
    const size_t spb = (B + kSeg - 1) / kSeg, nseg = nb * spb;
    std::vector<Moments> part(nseg);
#pragma omp parallel for num_threads(threads) schedule(static) if (n >= kParallelMin && threads > 1)
    for (size_t j = 0; j < nseg; ++j) {
        const size_t b = j / spb, k = j % spb;
        const size_t lo = b * B + k * kSeg, hi = std::min({(b + 1) * B, n, lo + kSeg});
        if (lo < hi) seg(x + lo, hi - lo, moments, lvl, &part[j]);
    }
    bool ok = true;
    for (size_t b = 0; b < nb; ++b) {
        for (size_t k = 0; k < spb; ++k)
            if (b * B + k * kSeg < std::min((b + 1) * B, n)) accumulate(&(*out)[b], part[b * spb + k]);
        ok = ok && !(*out)[b].bad;
    }
    return ok;
}

/* The smallest float >= d (d finite, >= 0); +Inf if d exceeds FLT_MAX. */
inline float float_up(double d) {
    float f = static_cast<float>(d);
    if (static_cast<double>(f) < d) f = std::nextafter(f, HUGE_VALF);
    return f;
}

}  // namespace compmpi::bstats

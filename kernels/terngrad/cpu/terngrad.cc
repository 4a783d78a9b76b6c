// SPDX-License-Identifier: BSD-3-Clause
/* terngrad CPU kernels: statistics (sigma, max) in fixed segment order, stochastic
 * ternarisation with Philox-4x32-10 draws (scalar, AVX2, AVX-512), packing to base4 / base3,
 * and the "levels" variant for phase 2. OpenMP splits the buffer into fixed blocks;
 * every path and thread count writes identical bytes (tests/unit/test_terngrad.cc).
 *
 * Encode, per call:
 *   1. clip threshold cs = c sigma of the WHOLE contribution (paper eq. 21, sigma of the
 *      layer; none if c = 0 or sigma = 0): p.clip_at when the collective decided it once
 *      per buffer (prepare() reports it), else computed here from all n values;
 *      per bucket: max|g| (NaN/Inf -> Status::nonfinite), s = min(max|g|, cs); a pass of
 *      its own, or for buckets that divide the OpenMP block, block by block before step 2;
 *      one bucket (param 0) and p.shared_scale > 0: s = shared scale (eq. 4, rounded up to
 *      fp32), cs = min(cs, s); with buckets the shared scale is not used (one double
 *      cannot carry per-bucket scalers)
 *   2. per element: gc = min(|g|, cs); code = sign(g) if u24 < gc (2^24 / s) else 0,
 *      u24 the element's 24-bit uniform draw (common/philox.h: 16 bits from half a Philox
 *      word, 8 more from a word of their own only where the 16 do not decide)
 *      ->  P(code != 0) = ceil(gc 2^24 / s) / 2^24 = gc / s (+ < 2^-24)
 *   3. pack a sub-block's int8 codes, or (AVX-512) pack straight from the compare masks.
 * Phase 2 (variant levels), K = 2^(bits-1) - 1: on the shared grid (one bucket, shared
 * scale s) k = round(x / s), exact for sums of ternaries; otherwise unbiased stochastic
 * rounding of x / s_j, s_j = max|x_j| / K rounded up. */
#include "terngrad/terngrad.h"

#include "common/simd_target.h" /* <immintrin.h> */

#include <algorithm>
#include <array>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "common/blocks.h"
#include "common/bucket_stats.h"
#include "common/fields.h"
#include "common/maxabs.h"
#include "common/philox.h"

namespace compmpi::terngrad {
namespace {

using fields::kBlock;
using fields::kSub;
constexpr float kTwo24 = 16777216.0f;
constexpr float kInf = std::numeric_limits<float>::infinity();

/* A bucket's scaler and clip threshold. */
struct Scale {
    float s;  /* scaler */
    float cs; /* clip threshold (inf: none) */
};

/* ---------------------------------------------------------------- ternarisation */
/* The Bernoulli threshold (gc / s) 2^24 as (gc * pre) * r24 -- a multiply, not a divide:
 * r24 = 2^24 / (s pre), pre = 2^64 for tiny s (so that r24 stays finite), else 1. */
struct Thresh {
    float pre, r24, cs;
};

inline Thresh make_thresh(float s, float cs) {
    const float pre = s < 0x1p-60f ? 0x1p64f : 1.0f;
    return Thresh{pre, kTwo24 / (s * pre), cs};
}

/* The code of element i of value g with its 16-bit draw a (philox.h: [u24 < t] exactly). */
inline int8_t tern_one(float g, const Thresh &th, const philox::Stream &st, uint64_t i, uint32_t a) {
    const float x = std::fabs(g), gc = x < th.cs ? x : th.cs; /* = _mm*_min_ps(x, cs) */
    const float t = (gc * th.pre) * th.r24;
    if (!philox::below(st, i, a, philox::ceil24(t))) return 0;
    return std::signbit(g) ? -1 : 1;
}
inline int8_t tern_one(float g, const Thresh &th, const philox::Stream &st, uint64_t i) {
    return tern_one(g, th, st, i, philox::draw16(st, i));
}

/* codes[i - i0] for elements i in [i0, i1) of in (indexed from element 0 of the buffer,
 * which is also the RNG's element index). s > 0. */
void tern_scalar(const float *in, size_t i0, size_t i1, const Thresh &th, const philox::Stream &st, int8_t *codes) {
    size_t i = i0;
    for (; i < i1 && (i & 63); ++i) codes[i - i0] = tern_one(in[i], th, st, i);
    uint32_t a[64];
    for (; i + 64 <= i1; i += 64) {
        philox::group16_scalar(st, i >> 6, a);
        for (int j = 0; j < 64; ++j) codes[i - i0 + j] = tern_one(in[i + j], th, st, i + j, a[j]);
    }
    for (; i < i1; ++i) codes[i - i0] = tern_one(in[i], th, st, i);
}

CMPI_AVX2 void tern_avx2(const float *in, size_t i0, size_t i1, const Thresh &th, const philox::Stream &st,
                         int8_t *codes) {
    size_t i = i0;
    for (; i < i1 && (i & 63); ++i) codes[i - i0] = tern_one(in[i], th, st, i);
    const __m256 vpre = _mm256_set1_ps(th.pre), vr24 = _mm256_set1_ps(th.r24), vcs = _mm256_set1_ps(th.cs);
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    const __m256i one = _mm256_set1_epi32(1);
    const philox::KeysAvx2 keys = philox::keys_avx2(st);
    philox::Draws16Avx2 d;
    for (; i + 64 <= i1; i += 64) {
        __m256i a8[8];
        philox::draws16_avx2(st, keys, i >> 6, d, a8);
        for (int h = 0; h < 2; ++h) {
            for (int l = 0; l < 4; ++l) {
                const size_t e = i + 16 * l + 8 * h;
                __m256 g = _mm256_loadu_ps(in + e);
                __m256 gc = _mm256_min_ps(_mm256_and_ps(g, absmask), vcs);
                __m256 t = _mm256_mul_ps(_mm256_mul_ps(gc, vpre), vr24);
                __m256i hit = philox::below8_avx2(st, e, a8[2 * l + h], t);
                __m256i sign = _mm256_srai_epi32(_mm256_castps_si256(g), 31);
                __m256i c = _mm256_and_si256(hit, _mm256_or_si256(sign, one));
                __m128i c16 = _mm_packs_epi32(_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1));
                _mm_storel_epi64(reinterpret_cast<__m128i *>(codes + (e - i0)), _mm_packs_epi16(c16, c16));
            }
        }
    }
    for (; i < i1; ++i) codes[i - i0] = tern_one(in[i], th, st, i);
}

/* Masks of the nonzero and of the negative codes of 16 values (elements e ..), given their
 * draws; *bad |= the lanes holding NaN/Inf (exponent all ones; dead code where unread). */
template <bool kPre = true> /* false: Thresh::pre is 1 and its multiply (an identity) is skipped */
CMPI_AVX512 inline __mmask16 tern_mask_avx512(const float *in, const philox::Stream &st, uint64_t e, __m512i a,
                                              __m512 vpre, __m512 vr24, __m512 vcs, __mmask16 *neg,
                                              __mmask16 *bad) {
    __m512 g = _mm512_loadu_ps(in + e);
    const __m512i exp = _mm512_set1_epi32(0x7F800000);
    *bad |= _mm512_cmpeq_epi32_mask(_mm512_and_si512(_mm512_castps_si512(g), exp), exp);
    __m512 gc = _mm512_min_ps(_mm512_abs_ps(g), vcs);
    if constexpr (kPre) gc = _mm512_mul_ps(gc, vpre);
    __m512 t = _mm512_mul_ps(gc, vr24);
    __mmask16 hit = philox::below16_avx512(st, e, a, t);
    *neg = _mm512_mask_cmplt_epi32_mask(hit, _mm512_castps_si512(g), _mm512_setzero_si512());
    return hit;
}

CMPI_AVX512 void tern_avx512(const float *in, size_t i0, size_t i1, const Thresh &th, const philox::Stream &st,
                             int8_t *codes) {
    size_t i = i0;
    for (; i < i1 && (i & 63); ++i) codes[i - i0] = tern_one(in[i], th, st, i);
    const __m512 vpre = _mm512_set1_ps(th.pre), vr24 = _mm512_set1_ps(th.r24), vcs = _mm512_set1_ps(th.cs);
    const philox::KeysAvx512 keys = philox::keys_avx512(st);
    philox::Draws16Avx512 d;
    for (; i + 64 <= i1; i += 64) {
        __m512i a[4];
        philox::draws16_avx512(st, keys, i >> 6, d, a);
        for (int l = 0; l < 4; ++l) {
            __mmask16 neg, unread = 0, hit = tern_mask_avx512(in, st, i + 16 * l, a[l], vpre, vr24, vcs, &neg, &unread);
            __m128i c = _mm_mask_mov_epi8(_mm_maskz_mov_epi8(hit, _mm_set1_epi8(1)), neg, _mm_set1_epi8(-1));
            _mm_storeu_si128(reinterpret_cast<__m128i *>(codes + (i - i0) + 16 * l), c);
        }
    }
    for (; i < i1; ++i) codes[i - i0] = tern_one(in[i], th, st, i);
}

/* AVX-512 direct path: the nonzero (hit) and negative masks of 64-element groups, packed
 * straight from the masks without int8 codes. base4: the 2-bit field of element j is
 * (hit_j, hit_j & neg_j), i.e. bit 2j = hit, bit 2j+1 = negative hit (pdep interleaves);
 * base3: a 10-bit (hit, neg) index per 5 elements into a table of base-3 bytes. Same
 * bytes as int8 codes + pack (tests hold every path to the scalar one). */
#define CMPI_AVX512_BMI2 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi,bmi2")))

/* base4 bytes of one 64-element group from its masks: 16 bytes, or the first `bytes`. */
CMPI_AVX512_BMI2 inline void base4_store(uint64_t hit, uint64_t neg, uint8_t *out, size_t bytes = 16) {
    const uint64_t even = 0x5555555555555555ull, odd = 0xAAAAAAAAAAAAAAAAull;
    uint64_t v[2];
    v[0] = _pdep_u64(hit & 0xFFFFFFFFu, even) | _pdep_u64(neg & 0xFFFFFFFFu, odd);
    v[1] = _pdep_u64(hit >> 32, even) | _pdep_u64(neg >> 32, odd);
    if (bytes == 16)
        std::memcpy(out, v, 16);
    else
        std::memcpy(out, v, bytes);
}

/* The whole 64-element groups of tern_masks_avx512 from i0; returns where they end. */
template <bool Base4, bool kPre>
CMPI_AVX512_BMI2 inline size_t tern_groups_avx512(const float *in, size_t i0, size_t i1, const Thresh &th,
                                                  const philox::Stream &st, const philox::KeysAvx512 &keys,
                                                  uint64_t *hit, uint64_t *neg, uint8_t *out, __mmask16 *b) {
    const __m512 vpre = _mm512_set1_ps(th.pre), vr24 = _mm512_set1_ps(th.r24), vcs = _mm512_set1_ps(th.cs);
    size_t i = i0;
    philox::Draws16Avx512 d;
    for (; i + 64 <= i1; i += 64) {
        __m512i a[4];
        philox::draws16_avx512(st, keys, i >> 6, d, a);
        uint64_t h = 0, m = 0;
        for (int l = 0; l < 4; ++l) {
            __mmask16 nl, hl = tern_mask_avx512<kPre>(in, st, i + 16 * l, a[l], vpre, vr24, vcs, &nl, b);
            h |= static_cast<uint64_t>(hl) << (16 * l);
            m |= static_cast<uint64_t>(nl) << (16 * l);
        }
        if (Base4) {
            base4_store(h, m, out + i / 4);
        } else {
            hit[(i - i0) / 64] = h;
            neg[(i - i0) / 64] = m;
        }
    }
    return i;
}

/* Masks of elements [i0, i1) (i0 % 64 == 0). Base4: written straight to out (the byte of
 * element 0), each group as soon as it is known (stores spread among the arithmetic run
 * faster than a burst per sub-block). Else: word w of hit/neg covers i0 + 64w .. +63, bits
 * past i1 are 0. */
template <bool Base4, bool CheckBad>
CMPI_AVX512_BMI2 inline void tern_masks_avx512(const float *in, size_t i0, size_t i1, float s, float cs,
                                               const philox::Stream &st, const philox::KeysAvx512 &keys, uint64_t *hit,
                                               uint64_t *neg, uint8_t *out, uint32_t *bad) {
    const size_t words = (i1 - i0 + 63) / 64;
    if (!(s > 0)) { /* all-zero bucket */
        if (CheckBad) /* NaN/Inf: exponent all ones (the caller made no statistics pass) */
            for (size_t i = i0; i < i1; ++i) *bad |= !std::isfinite(in[i]);
        if (Base4)
            std::memset(out + i0 / 4, 0, (i1 - i0 + 3) / 4);
        else
            std::memset(hit, 0, 8 * words), std::memset(neg, 0, 8 * words);
        return;
    }
    const Thresh th = make_thresh(s, cs);
    __mmask16 b = 0; /* CheckBad: NaN/Inf seen in the same read (no statistics pass before) */
    const size_t i = th.pre == 1.0f ? tern_groups_avx512<Base4, false>(in, i0, i1, th, st, keys, hit, neg, out, &b)
                                    : tern_groups_avx512<Base4, true>(in, i0, i1, th, st, keys, hit, neg, out, &b);
    if (CheckBad) {
        for (size_t k = i; k < i1; ++k) b |= !std::isfinite(in[k]);
        *bad |= b != 0;
    }
    if (i < i1) { /* the last < 64, scalar */
        const size_t e = i1;
        uint64_t h = 0, m = 0;
        for (size_t k = i; k < e; ++k) {
            const int8_t c = tern_one(in[k], th, st, k);
            h |= static_cast<uint64_t>(c != 0) << (k - i);
            m |= static_cast<uint64_t>(c < 0) << (k - i);
        }
        if (Base4) {
            base4_store(h, m, out + i / 4, (e - i + 3) / 4);
        } else {
            hit[(i - i0) / 64] = h;
            neg[(i - i0) / 64] = m;
        }
    }
}

/* One OpenMP block [lo, hi) of the AVX-512 path (lo % kBlock == 0; runs start on 64-element
 * groups: one bucket, or B % 64 == 0). */
void pack3_masks(const uint64_t *hit, const uint64_t *neg, size_t count, uint8_t *out);

template <bool CheckBad>
CMPI_AVX512_BMI2 void tern_block_avx512(const float *in, size_t lo0, size_t hi, size_t B, const Scale *sc,
                                        const philox::Stream &st, bool base3, uint8_t *codes, uint32_t *bad) {
    const philox::KeysAvx512 keys = philox::keys_avx512(st);
    uint64_t hit[kSub / 64 + 1], neg[kSub / 64 + 1];
    for (size_t lo = lo0; lo < hi; lo += kSub) {
        const size_t shi = std::min(hi, lo + kSub);
        for (size_t r = lo; r < shi;) {
            const size_t j = r / B, end = std::min(shi, (j + 1) * B);
            if (base3)
                tern_masks_avx512<false, CheckBad>(in, r, end, sc[j].s, sc[j].cs, st, keys, hit + (r - lo) / 64,
                                                   neg + (r - lo) / 64, nullptr, bad);
            else
                tern_masks_avx512<true, CheckBad>(in, r, end, sc[j].s, sc[j].cs, st, keys, nullptr, nullptr, codes,
                                                  bad);
            r = end;
        }
        if (base3) {
            hit[(shi - lo + 63) / 64] = neg[(shi - lo + 63) / 64] = 0;
            pack3_masks(hit, neg, shi - lo, codes + lo / 5);
        }
    }
}

/* kBase3Of[h | n << 5] = the base-3 byte of 5 codes with hit bits h and negative bits n */
constexpr std::array<uint8_t, 1024> make_base3_of() {
    std::array<uint8_t, 1024> t{};
    for (int idx = 0; idx < 1024; ++idx) {
        int v = 0;
        for (int j = 4; j >= 0; --j) {
            const int h = (idx >> j) & 1, ng = (idx >> (5 + j)) & 1;
            v = 3 * v + (h ? (ng ? 0 : 2) : 1);
        }
        t[idx] = static_cast<uint8_t>(v);
    }
    return t;
}
constexpr auto kBase3Of = make_base3_of();

inline uint32_t bits5(const uint64_t *m, size_t pos) {
    const size_t w = pos / 64, o = pos % 64;
    uint64_t v = m[w] >> o;
    if (o > 59) v |= m[w + 1] << (64 - o);
    return static_cast<uint32_t>(v & 31);
}

/* count (a multiple of 5 unless it ends the buffer) elements from the masks; masks hold
 * ceil(count / 64) + 1 words so that bits5 may read one past the last. */
void pack3_masks_scalar(const uint64_t *hit, const uint64_t *neg, size_t count, uint8_t *out) {
    size_t j = 0;
    for (; 5 * j + 5 <= count; ++j) out[j] = kBase3Of[bits5(hit, 5 * j) | bits5(neg, 5 * j) << 5];
    if (5 * j < count) { /* the elements present, missing digits 0 (as pack3) */
        int v = 0, w = 1;
        for (size_t i = 5 * j; i < count; ++i, w *= 3) {
            const bool h = (hit[i / 64] >> (i % 64)) & 1, ng = (neg[i / 64] >> (i % 64)) & 1;
            v += (h ? (ng ? 0 : 2) : 1) * w;
        }
        out[j] = static_cast<uint8_t>(v);
    }
}

/* 320 elements (5 mask words) -> 64 bytes at a time: a 40-bit slice of the positive and of the
 * negative mask (byte-aligned: 40 bits = 5 bytes) is spread by pdep to 8 bytes of 5 bits, and
 * byte = 121 + T[pos] - T[neg] with T[x] = sum of 3^j over the bits j of x (= sum (k_j+1) 3^j).
 * Reads up to 3 bytes past the 5 words of a slice: the masks hold one word more. */
CMPI_AVX512_BMI2 void pack3_masks(const uint64_t *hit, const uint64_t *neg, size_t count, uint8_t *out) {
    alignas(64) uint8_t t5[64];
    for (int x = 0; x < 64; ++x) {
        int v = 0;
        for (int j = 4; j >= 0; --j) v = 3 * v + ((x >> j) & 1);
        t5[x] = static_cast<uint8_t>(v);
    }
    const __m512i table = _mm512_load_si512(t5), base = _mm512_set1_epi8(121);
    const uint64_t spread = 0x1F1F1F1F1F1F1F1Full, low40 = (1ull << 40) - 1;
    size_t c = 0;
    for (; c + 320 <= count; c += 320) {
        uint64_t pos[6], ng[6];
        for (int w = 0; w < 6; ++w) { /* positive hits, negative hits (neg is set only on hits) */
            pos[w] = hit[c / 64 + w] ^ neg[c / 64 + w];
            ng[w] = neg[c / 64 + w];
        }
        alignas(64) uint64_t pb[8], nb[8];
        for (int k = 0; k < 8; ++k) {
            uint64_t p, m;
            std::memcpy(&p, reinterpret_cast<const uint8_t *>(pos) + 5 * k, 8);
            std::memcpy(&m, reinterpret_cast<const uint8_t *>(ng) + 5 * k, 8);
            pb[k] = _pdep_u64(p & low40, spread);
            nb[k] = _pdep_u64(m & low40, spread);
        }
        __m512i v = _mm512_sub_epi8(_mm512_add_epi8(base, _mm512_permutexvar_epi8(_mm512_load_si512(pb), table)),
                                    _mm512_permutexvar_epi8(_mm512_load_si512(nb), table));
        _mm512_storeu_si512(out + c / 5, v);
    }
    pack3_masks_scalar(hit + c / 64, neg + c / 64, count - c, out + c / 5);
}

void tern_run(const float *in, size_t i0, size_t i1, float s, float cs, const philox::Stream &st, int8_t *codes,
              SimdLevel lvl) {
    if (!(s > 0)) { /* all-zero bucket */
        std::memset(codes, 0, i1 - i0);
        return;
    }
    by_level<tern_avx512, tern_avx2, tern_scalar>(lvl, in, i0, i1, make_thresh(s, cs), st, codes);
}

/* ---------------------------------------------------------------- levels (phase 2) */
/* Every b-bit field k (|k| <= 2^(b-1)) times s stays finite: decoders reject other scalers. */
inline bool levels_fit(float s, int b) {
    return std::ldexp(static_cast<double>(s), b - 1) <= FLT_MAX;
}
inline bool levels_fit(double s, int b) { return std::ldexp(s, b - 1) <= DBL_MAX; }

/* round(x / s) clamped to [-K, K]; |q| < 2^22 so adding and removing 1.5 * 2^23 rounds to
 * nearest even in plain IEEE arithmetic (no libm call: the loop vectorises). */
inline int32_t level_one(float x, float s, float K) {
    if (!(s > 0)) return 0;
    float q = x / s;
    q = q < K ? q : K;
    q = q > -K ? q : -K;
    return static_cast<int32_t>((q + 0x1.8p23f) - 0x1.8p23f);
}

/* ---------------------------------------------------------------- base 3 */
void pack3(const int8_t *c, size_t n, uint8_t *out) {
    size_t j = 0, i = 0;
    for (; i + 5 <= n; i += 5, ++j)
        out[j] = static_cast<uint8_t>(121 + c[i] + 3 * c[i + 1] + 9 * c[i + 2] + 27 * c[i + 3] + 81 * c[i + 4]);
    if (i < n) {
        int v = 0, w = 1;
        for (; i < n; ++i, w *= 3) v += (c[i] + 1) * w;
        out[j] = static_cast<uint8_t>(v);
    }
}

/* kDigits[byte] = the byte's 5 codes as floats (3 padding lanes for 8-wide loads). */
constexpr std::array<std::array<float, 8>, 243> make_digits() {
    std::array<std::array<float, 8>, 243> t{};
    for (int b = 0; b < 243; ++b) {
        int v = b;
        for (int j = 0; j < 5; ++j, v /= 3) t[b][j] = static_cast<float>(v % 3 - 1);
    }
    return t;
}
constexpr auto kDigits = make_digits();

/* dst[i - i0] = value of element i, i in [i0, i1) */
void unpack3_scalar(const uint8_t *codes, size_t i0, size_t i1, float s, float *dst) {
    for (size_t i = i0; i < i1; ++i) dst[i - i0] = kDigits[codes[i / 5]][i % 5] * s;
}

CMPI_AVX2 void unpack3_avx2(const uint8_t *codes, size_t i0, size_t i1, float s, float *dst) {
    size_t i = i0;
    for (; i < i1 && i % 5; ++i) dst[i - i0] = kDigits[codes[i / 5]][i % 5] * s;
    const __m256 vs = _mm256_set1_ps(s);
    /* 8-wide stores of 5 useful lanes, each overwriting the last one's 3 extra lanes: stop
     * while the run still owns the 3 lanes past the last */
    for (; i + 8 <= i1; i += 5)
        _mm256_storeu_ps(dst + (i - i0), _mm256_mul_ps(_mm256_loadu_ps(kDigits[codes[i / 5]].data()), vs));
    for (; i < i1; ++i) dst[i - i0] = kDigits[codes[i / 5]][i % 5] * s;
}

void unpack3(const uint8_t *codes, size_t i0, size_t i1, float s, float *out, bool add, SimdLevel lvl) {
    if (!add) {
        if (lvl >= SimdLevel::avx2)
            unpack3_avx2(codes, i0, i1, s, out + i0);
        else
            unpack3_scalar(codes, i0, i1, s, out + i0);
        return;
    }
    /* decode_add through a small buffer: overlapping 8-wide load/add/store would stall on
     * store forwarding */
    alignas(64) float tmp[640];
    for (size_t lo = i0; lo < i1; lo += 640) {
        const size_t hi = std::min(i1, lo + 640);
        if (lvl >= SimdLevel::avx2)
            unpack3_avx2(codes, lo, hi, s, tmp);
        else
            unpack3_scalar(codes, lo, hi, s, tmp);
        float *o = out + lo;
        for (size_t k = 0; k < hi - lo; ++k) o[k] += tmp[k];
    }
}

/* Elements [lo, hi), bucket j (of B elements) scaled by s[j], bucket run by bucket run. */
void unpack3_range(const uint8_t *codes, const float *s, size_t B, size_t lo, size_t hi, float *out, bool add,
                   SimdLevel lvl) {
    while (lo < hi) {
        const size_t j = lo / B, end = std::min(hi, (j + 1) * B);
        unpack3(codes, lo, end, s[j], out, add, lvl);
        lo = end;
    }
}

/* ---------------------------------------------------------------- scalers */
/* The clip threshold c sigma of data with moments m over cnt elements (inf: no clipping). */
float clip_threshold(const bstats::Moments &m, size_t cnt, float clip) {
    if (!(clip > 0) || cnt == 0) return kInf;
    const double mean = m.sum / static_cast<double>(cnt);
    const double var = std::max(0.0, m.sumsq / static_cast<double>(cnt) - mean * mean);
    /* sigma = 0 (a constant buffer) would clip everything to 0: no clipping then */
    const float c = static_cast<float>(static_cast<double>(clip) * std::sqrt(var));
    return c > 0 ? c : kInf;
}

/* The clip threshold of a whole contribution (paper eq. 21: sigma of the layer's gradient g,
 * not of a bucket or of a chunk of it): p.clip_at when the collective decided it, else
 * c sigma of in[0..n). false if the data hold NaN/Inf (only checked when a pass is made). */
bool buffer_clip(const float *in, size_t n, const CodecParams &p, SimdLevel lvl, float *cs) {
    if (p.clip_at > 0) {
        *cs = p.clip_at;
        return true;
    }
    *cs = kInf;
    if (!(p.clip > 0)) return true;
    std::vector<bstats::Moments> m;
    if (!bstats::bucket_moments(in, n, 0, true, lvl, p.threads, &m)) return false;
    if (!m.empty()) *cs = clip_threshold(m[0], n, p.clip);
    return true;
}

/* Local scalers of every bucket, s_j = max |clipped g| over bucket j, all clipped at the
 * one threshold *cs of the buffer; false if the data hold NaN/Inf. */
bool local_scales(const float *in, size_t n, const CodecParams &p, SimdLevel lvl, std::vector<Scale> *sc,
                  float *cs_out = nullptr) {
    std::vector<bstats::Moments> m;
    const size_t nb = bstats::bucket_count(n, p.param);
    float cs = kInf;
    if (nb <= 1 && !(p.clip_at > 0) && p.clip > 0) { /* one pass gives sigma and max */
        if (!bstats::bucket_moments(in, n, 0, true, lvl, p.threads, &m)) return false;
        if (!m.empty()) cs = clip_threshold(m[0], n, p.clip);
    } else {
        if (!buffer_clip(in, n, p, lvl, &cs)) return false;
        if (!bstats::bucket_moments(in, n, p.param, false, lvl, p.threads, &m)) return false;
    }
    sc->resize(m.size());
    for (size_t b = 0; b < m.size(); ++b) (*sc)[b] = Scale{std::min(m[b].maxabs, cs), cs};
    if (cs_out) *cs_out = cs;
    return true;
}

size_t code_bytes(size_t n, const CodecParams &p) {
    switch (p.variant) {
        case kBase4:
            return (n + 3) / 4;
        case kBase3:
            return (n + 4) / 5;
        default:
            return fields::bytes(n, p.bits);
    }
}

/* ---------------------------------------------------------------- CodecOps */
Status tg_check(const CodecParams &p) {
    if (p.variant == kBase4 || p.variant == kBase3) return p.bits == 2 ? Status::ok : Status::invalid_arg;
    if (p.variant == kLevels) return p.bits >= 2 && p.bits <= kMaxLevelBits ? Status::ok : Status::invalid_arg;
    return Status::invalid_arg;
}

/* both element types: the scalers (fp32 or fp64, one per bucket), then the codes */
size_t tg_max_payload(size_t n, const CodecParams &p) {
    return (p.elem == Elem::f64 ? 8 : 4) * bstats::bucket_count(n, p.param) + code_bytes(n, p);
}

/* The shared statistic (eq. 4): this rank's scaler max |clipped g| over its whole
 * contribution; the clip threshold it used goes to p.clip_out for the encoder (clip_at). */
Status tg_prepare(const float *in, size_t n, const CodecParams &p, double *stat) {
    if (p.elem != Elem::f32) return Status::invalid_arg;
    std::vector<Scale> sc;
    float cs = kInf;
    if (!local_scales(in, n, p, std::min(p.simd, simd_detect()), &sc, &cs)) return Status::nonfinite;
    float mx = 0;
    for (const Scale &x : sc) mx = std::max(mx, x.s);
    *stat = mx;
    if (p.clip_out) *p.clip_out = cs;
    return Status::ok;
}

/* Stochastic rounding of x / s to an integer in [-K, K]: floor(q) + Bernoulli(q - floor(q)),
 * E[k] s = x for |x| <= K s (the scaler is rounded up so that this holds). */
inline int32_t level_stoch(float x, float s, float K, uint32_t w) {
    if (!(s > 0)) return 0;
    float q = x / s;
    q = q < K ? q : K;
    q = q > -K ? q : -K;
    const float fl = std::floor(q);
    const float up = static_cast<float>(w >> 8) < (q - fl) * kTwo24 ? 1.0f : 0.0f;
    return static_cast<int32_t>(fl + up);
}

/* level_one of 16 values at a time (the same operations: an IEEE division, the clamps as
 * min/max -- _mm512_min_ps(q, K) = q < K ? q : K, _mm512_max_ps(q, -K) = q > -K ? q : -K --
 * and the 1.5 * 2^23 rounding), int8 codes (K < 128); *bad |= NaN/Inf seen. */
CMPI_AVX512 void levels_grid_avx512(const float *in, size_t n, float s, float K, int8_t *c, uint32_t *bad) {
    const __m512 vs = _mm512_set1_ps(s), vk = _mm512_set1_ps(K), vnk = _mm512_set1_ps(-K);
    const __m512 magic = _mm512_set1_ps(0x1.8p23f);
    const __m512i exp = _mm512_set1_epi32(0x7F800000);
    __mmask16 b = 0;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 x = _mm512_loadu_ps(in + i);
        b |= _mm512_cmpeq_epi32_mask(_mm512_and_si512(_mm512_castps_si512(x), exp), exp);
        __m512 q = _mm512_max_ps(_mm512_min_ps(_mm512_div_ps(x, vs), vk), vnk);
        q = _mm512_sub_ps(_mm512_add_ps(q, magic), magic);
        _mm_storeu_si128(reinterpret_cast<__m128i *>(c + i), _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(q)));
    }
    uint32_t t = b != 0;
    for (; i < n; ++i) {
        t |= !std::isfinite(in[i]);
        c[i] = static_cast<int8_t>(level_one(in[i], s, K));
    }
    *bad |= t;
}

/* Phase 2 on the shared grid, AVX-512, b <= 8: no statistics pass (the grid's step is the
 * shared scale; NaN/Inf are checked in the same read). Same bytes as encode_levels. */
Status encode_levels_grid(const float *in, size_t n, const CodecParams &p, uint8_t *out, SimdLevel lvl) {
    const int b = p.bits;
    const float K = static_cast<float>((1 << (b - 1)) - 1);
    const float s = bstats::float_up(p.shared_scale);
    if (!levels_fit(s, b)) return Status::nonfinite; /* |x| near FLT_MAX: the exact path takes it */
    std::memcpy(out, &s, 4);
    uint8_t *codes = out + 4;
    std::vector<uint8_t> bad((n + kBlock - 1) / kBlock, 0);
    fields::encode_blocks(
        n, n, p.threads,
        [&](size_t lo, size_t hi, size_t, int8_t *c) {
            uint32_t t = 0;
            levels_grid_avx512(in + lo, hi - lo, s, K, c, &t);
            if (t) bad[lo / kBlock] = 1;
        },
        [&](const int8_t *c, size_t cnt, size_t lo) { fields::pack(c, cnt, b, codes + lo / 8 * b, lvl); });
    for (uint8_t x : bad)
        if (x) return Status::nonfinite;
    return Status::ok;
}

Status encode_levels(const float *in, size_t n, const CodecParams &p, uint8_t *out, SimdLevel lvl) {
    if (lvl == SimdLevel::avx512 && p.bits <= 8 && p.param == 0 && p.shared_scale > 0 &&
        bstats::bucket_count(n, 0) == 1)
        return encode_levels_grid(in, n, p, out, lvl);
    std::vector<bstats::Moments> m;
    if (!bstats::bucket_moments(in, n, p.param, false, lvl, p.threads, &m)) return Status::nonfinite;
    const size_t nb = m.size(), B = nb <= 1 ? std::max<size_t>(n, 1) : p.param;
    const int b = p.bits;
    const float K = static_cast<float>((1 << (b - 1)) - 1);
    std::vector<float> s(nb);
    /* On the shared grid (one bucket, shared scale s): the values are sums of ternaries k s
     * and round(x / s) recovers k exactly. Otherwise (buckets: every rank has its own
     * scalers; no shared scale) the values are not on a grid: 2K+1 levels of step
     * s_j = max|x_j| / K (rounded up: |x| <= K s_j) and unbiased stochastic rounding. */
    const bool grid = p.param == 0 && p.shared_scale > 0 && nb == 1;
    if (grid) s[0] = bstats::float_up(p.shared_scale);
    else
        for (size_t j = 0; j < nb; ++j) s[j] = bstats::float_up(m[j].maxabs / static_cast<double>(K));
    for (float v : s)
        if (!levels_fit(v, b)) return Status::nonfinite; /* |x| near FLT_MAX: the exact path takes it */
    if (nb) std::memcpy(out, s.data(), 4 * nb);
    uint8_t *codes = out + 4 * nb;
    const philox::Stream st = philox::make_stream(p.seed, p.stream);
    /* k of elements [lo, hi) into c (int8 or int32) */
    auto levels_of = [&](size_t lo, size_t hi, auto *c) {
        using T = std::remove_pointer_t<decltype(c)>;
        if (grid) {
            const float s0 = s[0];
            for (size_t i = lo; i < hi; ++i) c[i - lo] = static_cast<T>(level_one(in[i], s0, K));
            return;
        }
        uint32_t w[64];
        for (size_t i = lo; i < hi;) {
            const size_t g = i >> 6, e = std::min(hi, (g + 1) << 6);
            philox::group_scalar(st, g, w);
            for (; i < e; ++i) c[i - lo] = static_cast<T>(level_stoch(in[i], s[i / B], K, w[i & 63]));
        }
    };
    if (b <= 8) {
        fields::encode_blocks(
            n, B, p.threads, [&](size_t lo, size_t hi, size_t, int8_t *c) { levels_of(lo, hi, c); },
            [&](const int8_t *c, size_t cnt, size_t lo) { fields::pack(c, cnt, b, codes + lo / 8 * b, lvl); });
        return Status::ok;
    }
    blocks::for_each(
        n, p.threads,
        [&](size_t lo, size_t cnt) {
            std::vector<int32_t> c(kBlock);
            levels_of(lo, lo + cnt, c.data());
            fields::pack_wide_scalar(c.data(), cnt, b, codes + lo / 8 * b);
        },
        kBlock);
    return Status::ok;
}

Status tg_encode(const float *in, size_t n, const CodecParams &p, uint8_t *out, size_t cap, size_t *len) {
    CMPI_CHECK(tg_check(p));
    if (p.elem != Elem::f32) return Status::invalid_arg;
    if (p.bucket && p.bucket != p.param) return Status::invalid_arg; /* bucket travels in param */
    if (!(p.shared_scale >= 0) || std::isinf(p.shared_scale)) return Status::invalid_arg;
    const size_t need = tg_max_payload(n, p);
    if (cap < need) return Status::invalid_arg;
    const SimdLevel lvl = std::min(p.simd, simd_detect());
    if (p.variant == kLevels) {
        CMPI_CHECK(encode_levels(in, n, p, out, lvl));
        *len = need;
        return Status::ok;
    }
    const size_t nb = bstats::bucket_count(n, p.param), B = nb <= 1 ? std::max<size_t>(n, 1) : p.param;
    std::vector<Scale> sc(nb);
    /* small buckets: statistics block by block inside the encode loop (one read of the data) */
    const bool fused = fields::fused_stats(nb, B);
    float cs = kInf; /* the buffer's clip threshold (eq. 21), one for every bucket */
    static const bool bmi2 = cpu_has(CpuFeature::bmi2);
    const bool avx512 = lvl == SimdLevel::avx512 && bmi2 && (nb <= 1 || B % 64 == 0);
    /* One bucket, the agreed scaler (eq. 4) and the clip threshold given (the collective's
     * case): this rank's max |clipped g| would be replaced by the shared scale, so no
     * statistics pass; the AVX-512 loop checks for NaN/Inf in the same read. */
    const bool given = avx512 && !fused && nb == 1 && p.param == 0 && p.shared_scale > 0 &&
                       (p.clip_at > 0 || !(p.clip > 0));
    if (given) {
        if (!buffer_clip(in, n, p, lvl, &cs)) return Status::nonfinite; /* no pass: clip_at or none */
        sc[0].s = bstats::float_up(p.shared_scale);
        sc[0].cs = std::min(cs, sc[0].s);
    } else if (!fused) {
        if (!local_scales(in, n, p, lvl, &sc)) return Status::nonfinite;
        if (p.param == 0 && p.shared_scale > 0 && nb == 1) {
            /* the agreed scaler (eq. 4), >= this rank's max |clipped g|; the extra clip at s
             * only matters to a caller whose shared scale is not the MAX of the prepare()s */
            sc[0].s = bstats::float_up(p.shared_scale);
            sc[0].cs = std::min(sc[0].cs, sc[0].s);
        }
    } else if (!buffer_clip(in, n, p, lvl, &cs)) {
        return Status::nonfinite;
    }
    std::vector<uint8_t> bad(fused ? (n + kBlock - 1) / kBlock : 0, 0);
    auto block_stats = [&](size_t k, size_t lo, size_t hi) {
        if (!fused) return;
        for (size_t j = lo / B; j * B < hi; ++j) {
            const size_t cnt = std::min(B, n - j * B);
            const bstats::Moments m = bstats::moments_of(in + j * B, cnt, false, lvl);
            bad[k] |= m.bad;
            sc[j] = Scale{std::min(m.maxabs, cs), cs};
        }
    };
    uint8_t *codes = out + 4 * nb;
    const philox::Stream st = philox::make_stream(p.seed, p.stream);
    const bool base3 = p.variant == kBase3;
    if (avx512) {
        /* runs start on 64-element groups; sub-blocks on whole bytes of either packing */
        const size_t nblocks = (n + kBlock - 1) / kBlock;
        if (given) bad.assign(nblocks, 0);
#pragma omp parallel for num_threads(p.threads) schedule(static) if (n >= fields::kParallelMin && p.threads > 1)
        for (size_t k = 0; k < nblocks; ++k) {
            const size_t hi = std::min(n, (k + 1) * kBlock);
            block_stats(k, k * kBlock, hi);
            uint32_t b = 0;
            if (given) tern_block_avx512<true>(in, k * kBlock, hi, B, sc.data(), st, base3, codes, &b);
            else tern_block_avx512<false>(in, k * kBlock, hi, B, sc.data(), st, base3, codes, &b);
            if (b) bad[k] = 1;
        }
    } else {
        fields::encode_blocks(
            n, B, p.threads, block_stats,
            [&](size_t lo, size_t hi, size_t j, int8_t *c) { tern_run(in, lo, hi, sc[j].s, sc[j].cs, st, c, lvl); },
            [&](const int8_t *c, size_t cnt, size_t lo) {
                if (base3)
                    pack3(c, cnt, codes + lo / 5);
                else
                    fields::pack(c, cnt, 2, codes + lo / 4, lvl);
            });
    }
    for (uint8_t x : bad)
        if (x) return Status::nonfinite;
    for (size_t j = 0; j < nb; ++j) std::memcpy(out + 4 * j, &sc[j].s, 4);
    *len = need;
    return Status::ok;
}

/* Every check of a payload (of floats or doubles, T), before any output is written: its
 * scalers into *s. */
template <class T>
Status tg_validate(const uint8_t *in, size_t len, size_t n, const CodecParams &p, std::vector<T> *s_out) {
    if (tg_check(p) != Status::ok || p.elem != (sizeof(T) == 8 ? Elem::f64 : Elem::f32)) return Status::corrupt;
    if (len != tg_max_payload(n, p)) return Status::corrupt;
    const size_t nb = bstats::bucket_count(n, p.param);
    std::vector<T> &s = *s_out;
    s.resize(nb);
    if (nb) std::memcpy(s.data(), in, sizeof(T) * nb);
    for (T v : s)
        if (!std::isfinite(v) || std::signbit(v) || (p.variant == kLevels && !levels_fit(v, p.bits)))
            return Status::corrupt;
    const uint8_t *codes = in + sizeof(T) * nb;
    const size_t avail = len - sizeof(T) * nb;
    uint64_t bad = 0;
    if (p.variant == kBase4) { /* field 10b = -2; 8 bytes at a time (fields never straddle bytes) */
        size_t i = 0;
        for (; i + 8 <= avail; i += 8) {
            uint64_t w;
            std::memcpy(&w, codes + i, 8);
            bad |= (w >> 1) & ~w & 0x5555555555555555ull;
        }
        for (; i < avail; ++i) bad |= (codes[i] >> 1) & ~codes[i] & 0x55u;
    } else if (p.variant == kBase3) {
        uint8_t mx = 0;
        for (size_t i = 0; i < avail; ++i) mx = std::max(mx, codes[i]);
        bad = mx > 242;
    }
    return bad ? Status::corrupt : Status::ok;
}

Status tg_decode_common(const uint8_t *in, size_t len, size_t n, const CodecParams &p, float *out, bool add) {
    CMPI_CHECK(tg_check(p));
    std::vector<float> s;
    CMPI_CHECK(tg_validate(in, len, n, p, &s));
    const size_t nb = s.size();
    const uint8_t *codes = in + 4 * nb;
    const size_t avail = len - 4 * nb;
    SimdLevel lvl = std::min(p.simd, simd_detect());
    if (p.variant != kBase3) {
        fields::decode(codes, avail, n, p.variant == kBase4 ? 2 : p.bits, s.data(), p.param, out, add, lvl, p.threads);
        return Status::ok;
    }
    const size_t B = nb <= 1 ? std::max<size_t>(n, 1) : p.param;
    blocks::for_each(
        n, p.threads, [&](size_t lo, size_t cnt) { unpack3_range(codes, s.data(), B, lo, lo + cnt, out, add, lvl); },
        kBlock);
    return Status::ok;
}

using TgDecode = DecodeOps<float, tg_decode_common>;
/* The sum of cnt payloads in index order, block by block (the bits of decode + decode_add). */
Status tg_decode_sum(const uint8_t *const *in, const size_t *len, int cnt, size_t n, const CodecParams &p, float *out) {
    if (cnt < 1) return Status::invalid_arg;
    std::vector<std::vector<float>> s(static_cast<size_t>(cnt));
    std::vector<const uint8_t *> codes(static_cast<size_t>(cnt));
    std::vector<size_t> avail(static_cast<size_t>(cnt));
    std::vector<const float *> steps(static_cast<size_t>(cnt));
    for (int k = 0; k < cnt; ++k) {
        CMPI_CHECK(tg_validate(in[k], len[k], n, p, &s[k]));
        codes[k] = in[k] + 4 * s[k].size();
        avail[k] = len[k] - 4 * s[k].size();
        steps[k] = s[k].data();
    }
    const SimdLevel lvl = std::min(p.simd, simd_detect());
    if (p.variant != kBase3) {
        fields::decode_sum(codes.data(), avail.data(), cnt, n, p.variant == kBase4 ? 2 : p.bits, steps.data(), p.param,
                           out, lvl, p.threads, p.stream_out);
        return Status::ok;
    }
    const size_t nb = s[0].size(), B = nb <= 1 ? std::max<size_t>(n, 1) : p.param;
    blocks::for_each(
        n, p.threads,
        [&](size_t lo, size_t m) {
            for (int q = 0; q < cnt; ++q) unpack3_range(codes[q], steps[q], B, lo, lo + m, out, q > 0, lvl);
        },
        kBlock);
    return Status::ok;
}

/* Phase 2 sums P ternary contributions on one grid {-s, 0, s}: integer levels in [-P, P]. The
 * collective may set nranks on either argument. */
Status tg_reduced_params(const CodecParams &p, CodecParams *out) {
    const int P = std::max(p.nranks, out->nranks);
    const int b = level_bits(P);
    if (b == 0) return Status::unsupported;
    *out = p;
    out->nranks = P;
    out->variant = kLevels;
    out->bits = static_cast<uint8_t>(b);
    return Status::ok;
}

/* ---------------------------------------------------------------- fp64
 * Doubles (docs/codecs/terngrad.md, "fp64"): the same codes (base4, base3, levels) after f64
 * scalers (8 bytes per bucket). Statistics in double: max |g| per bucket and sigma from sums in
 * fixed block order, the clip threshold c sigma in double; clip_out / clip_at are fp32
 * (CodecParams), so prepare64 reports it rounded down into [FLT_TRUE_MIN, FLT_MAX] (the
 * encoder clips at min(cs, s) with the shared scale, so probabilities stay <= 1 whatever
 * threshold a caller passes). The ternary decision is the fp32 one with its threshold in
 * double: code = sign(g) if u24 < ceil(gc 2^24 / s), the same Philox draws (draw16 + refine8)
 * of (seed, stream, element), so P(code != 0) = gc / s (+ < 2^-24) as for floats. Ternarisation
 * scalar, AVX2 and AVX-512 (the same codes); packing and decode scalar; OpenMP over the fixed
 * blocks of common/fields.h. */
constexpr double kInf64 = std::numeric_limits<double>::infinity();

struct Scale64 {
    double s, cs;
};

/* c sigma of in[0..n) in double (inf: none), or p.clip_at; false on NaN/Inf. The sums run on
 * x 2^-e, e the exponent of max |x| (mx): exact scaling, no overflow or underflow of x^2 for
 * doubles far outside fp32's range. */
bool clip_of64(const double *in, size_t n, double mx, const CodecParams &p, double *cs) {
    if (p.clip_at > 0) {
        *cs = p.clip_at;
        return true;
    }
    *cs = kInf64;
    if (!(p.clip > 0) || n == 0 || !(mx > 0)) return true;
    const int e = std::ilogb(mx);
    const double f = std::ldexp(1.0, -e);
    const size_t nblocks = (n + kBlock - 1) / kBlock;
    std::vector<double> sum(nblocks), sq(nblocks);
    blocks::for_each(
        n, p.threads,
        [&](size_t lo, size_t cnt) {
            double a = 0, b = 0;
            for (size_t i = lo; i < lo + cnt; ++i) {
                const double y = in[i] * f;
                a += y;
                b += y * y;
            }
            sum[lo / kBlock] = a;
            sq[lo / kBlock] = b;
        },
        kBlock);
    double a = 0, b = 0;
    for (size_t k = 0; k < nblocks; ++k) a += sum[k], b += sq[k];
    const double mean = a / static_cast<double>(n);
    const double var = std::max(0.0, b / static_cast<double>(n) - mean * mean);
    const double c = std::ldexp(static_cast<double>(p.clip) * std::sqrt(var), e);
    if (c > 0) *cs = c;
    return true;
}

/* max |g| of every bucket (bucket size B, nb buckets); false on NaN/Inf */
bool bucket_max64(const double *in, size_t n, size_t B, size_t nb, int threads, std::vector<double> *mx) {
    mx->assign(nb, 0.0);
    if (nb == 0) return true;
    uint64_t bad = 0;
    if (nb == 1) {
        const uint64_t m = maxabs::parallel(in, n, SimdLevel::scalar, threads);
        bad = m >= 0x7FF0000000000000ull;
        std::memcpy(mx->data(), &m, 8);
    } else {
        std::vector<uint64_t> m(nb, 0);
#pragma omp parallel for num_threads(threads) schedule(static) if (n >= fields::kParallelMin && threads > 1)
        for (size_t j = 0; j < nb; ++j) m[j] = maxabs::scalar(in + j * B, std::min(B, n - j * B));
        for (size_t j = 0; j < nb; ++j) {
            bad |= m[j] >= 0x7FF0000000000000ull;
            std::memcpy(&(*mx)[j], &m[j], 8);
        }
    }
    return bad == 0;
}

/* s_j = min(max|g_j|, cs) for every bucket, cs the buffer's clip threshold */
bool local_scales64(const double *in, size_t n, const CodecParams &p, std::vector<Scale64> *sc, double *cs_out) {
    const size_t nb = bstats::bucket_count(n, p.param), B = nb <= 1 ? std::max<size_t>(n, 1) : p.param;
    double cs;
    std::vector<double> mx;
    if (!bucket_max64(in, n, B, nb, p.threads, &mx)) return false;
    if (!clip_of64(in, n, mx.empty() ? 0.0 : *std::max_element(mx.begin(), mx.end()), p, &cs)) return false;
    sc->resize(nb);
    for (size_t j = 0; j < nb; ++j) (*sc)[j] = Scale64{std::min(mx[j], cs), cs};
    if (cs_out) *cs_out = cs;
    return true;
}


/* C = ceil(gc 2^24 / s) clamped to 2^24, in double */
inline uint32_t ceil24_64(double gc, double s) {
    const double t = gc / s * 0x1p24;
    return static_cast<uint32_t>(std::ceil(t < 0x1p24 ? t : 0x1p24));
}

inline int8_t tern_one64(double g, double s, double cs, const philox::Stream &st, uint64_t i, uint32_t a) {
    const double x = std::fabs(g), gc = x < cs ? x : cs;
    if (!philox::below(st, i, a, ceil24_64(gc, s))) return 0;
    return std::signbit(g) ? -1 : 1;
}

void tern64_scalar(const double *in, size_t i0, size_t i1, double s, double cs, const philox::Stream &st,
                   int8_t *codes) {
    uint32_t a[64];
    for (size_t i = i0; i < i1;) {
        const size_t q = i >> 6, e = std::min(i1, (q + 1) << 6);
        philox::group16_scalar(st, q, a);
        for (; i < e; ++i) codes[i - i0] = tern_one64(in[i], s, cs, st, i, a[i & 63]);
    }
}

/* The SIMD paths: the scalar operations lane by lane (min as x < cs ? x : cs, t = gc / s 2^24
 * clamped to 2^24, ceil exact), the same draws: the same codes. */
CMPI_AVX2 inline __m128i tern64_c4_avx2(__m256d g, __m256d vs, __m256d vcs) {
    const __m256d absm = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7FFFFFFFFFFFFFFFll)), two24 = _mm256_set1_pd(0x1p24);
    const __m256d gc = _mm256_min_pd(_mm256_and_pd(g, absm), vcs);
    const __m256d t = _mm256_min_pd(_mm256_mul_pd(_mm256_div_pd(gc, vs), two24), two24);
    return _mm256_cvtpd_epi32(_mm256_ceil_pd(t)); /* integral: exact */
}
CMPI_AVX2 void tern64_avx2(const double *in, size_t i0, size_t i1, double s, double cs, const philox::Stream &st,
                           int8_t *codes) {
    size_t i = i0;
    for (; i < i1 && (i & 63); ++i) codes[i - i0] = tern_one64(in[i], s, cs, st, i, philox::draw16(st, i));
    const __m256d vs = _mm256_set1_pd(s), vcs = _mm256_set1_pd(cs);
    const __m256i hi32 = _mm256_setr_epi32(1, 3, 5, 7, 1, 3, 5, 7), one = _mm256_set1_epi32(1);
    const philox::KeysAvx2 keys = philox::keys_avx2(st);
    philox::Draws16Avx2 d;
    for (; i + 64 <= i1; i += 64) {
        __m256i a8[8];
        philox::draws16_avx2(st, keys, i >> 6, d, a8);
        for (int l = 0; l < 4; ++l)
            for (int h = 0; h < 2; ++h) {
                const size_t e = i + 16 * l + 8 * h;
                const __m256d g0 = _mm256_loadu_pd(in + e), g1 = _mm256_loadu_pd(in + e + 4);
                const __m256i C = _mm256_set_m128i(tern64_c4_avx2(g1, vs, vcs), tern64_c4_avx2(g0, vs, vcs));
                const __m256i hit = philox::below8c_avx2(st, e, a8[2 * l + h], C);
                const __m256i top = _mm256_set_m128i(
                    _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(_mm256_castpd_si256(g1), hi32)),
                    _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(_mm256_castpd_si256(g0), hi32)));
                const __m256i c = _mm256_and_si256(hit, _mm256_or_si256(_mm256_srai_epi32(top, 31), one));
                const __m128i c16 = _mm_packs_epi32(_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1));
                _mm_storel_epi64(reinterpret_cast<__m128i *>(codes + (e - i0)), _mm_packs_epi16(c16, c16));
            }
    }
    if (i < i1) tern64_scalar(in, i, i1, s, cs, st, codes + (i - i0));
}
CMPI_AVX512 inline __m256i tern64_c8_avx512(__m512d g, __m512d vs, __m512d vcs) {
    const __m512d two24 = _mm512_set1_pd(0x1p24);
    const __m512d gc = _mm512_min_pd(_mm512_abs_pd(g), vcs);
    const __m512d t = _mm512_min_pd(_mm512_mul_pd(_mm512_div_pd(gc, vs), two24), two24);
    return _mm512_cvt_roundpd_epi32(t, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC);
}
CMPI_AVX512 void tern64_avx512(const double *in, size_t i0, size_t i1, double s, double cs, const philox::Stream &st,
                               int8_t *codes) {
    size_t i = i0;
    for (; i < i1 && (i & 63); ++i) codes[i - i0] = tern_one64(in[i], s, cs, st, i, philox::draw16(st, i));
    const __m512d vs = _mm512_set1_pd(s), vcs = _mm512_set1_pd(cs);
    const philox::KeysAvx512 keys = philox::keys_avx512(st);
    philox::Draws16Avx512 d;
    for (; i + 64 <= i1; i += 64) {
        __m512i a[4];
        philox::draws16_avx512(st, keys, i >> 6, d, a);
        for (int l = 0; l < 4; ++l) {
            const size_t e = i + 16 * l;
            const __m512d g0 = _mm512_loadu_pd(in + e), g1 = _mm512_loadu_pd(in + e + 8);
            const __m512i C = _mm512_inserti64x4(_mm512_castsi256_si512(tern64_c8_avx512(g0, vs, vcs)),
                                                 tern64_c8_avx512(g1, vs, vcs), 1);
            const __mmask16 hit = philox::below16c_avx512(st, e, a[l], C);
            const __mmask16 neg = static_cast<__mmask16>(
                _mm512_cmplt_epi64_mask(_mm512_castpd_si512(g0), _mm512_setzero_si512()) |
                (_mm512_cmplt_epi64_mask(_mm512_castpd_si512(g1), _mm512_setzero_si512()) << 8));
            const __m128i c = _mm_mask_mov_epi8(_mm_maskz_mov_epi8(hit, _mm_set1_epi8(1)), hit & neg, _mm_set1_epi8(-1));
            _mm_storeu_si128(reinterpret_cast<__m128i *>(codes + (e - i0)), c);
        }
    }
    if (i < i1) tern64_scalar(in, i, i1, s, cs, st, codes + (i - i0));
}

void tern_run64(const double *in, size_t i0, size_t i1, double s, double cs, const philox::Stream &st, int8_t *codes,
                SimdLevel lvl) {
    if (!(s > 0)) {
        std::memset(codes, 0, i1 - i0);
        return;
    }
    by_level<tern64_avx512, tern64_avx2, tern64_scalar>(lvl, in, i0, i1, s, cs, st, codes);
}

/* levels: round(x / s) on the shared grid, else unbiased stochastic rounding (as for floats) */
inline int32_t level_one64(double x, double s, double K) {
    if (!(s > 0)) return 0;
    double q = x / s;
    q = q < K ? q : K;
    q = q > -K ? q : -K;
    return static_cast<int32_t>(std::nearbyint(q));
}
inline int32_t level_stoch64(double x, double s, double K, uint32_t w) {
    if (!(s > 0)) return 0;
    double q = x / s;
    q = q < K ? q : K;
    q = q > -K ? q : -K;
    const double fl = std::floor(q);
    return static_cast<int32_t>(fl) + (static_cast<double>(w >> 8) < (q - fl) * 0x1p24 ? 1 : 0);
}

Status encode_levels64(const double *in, size_t n, const CodecParams &p, uint8_t *out) {
    const size_t nb = bstats::bucket_count(n, p.param), B = nb <= 1 ? std::max<size_t>(n, 1) : p.param;
    const int b = p.bits;
    const double K = static_cast<double>((1 << (b - 1)) - 1);
    std::vector<double> mx;
    if (!bucket_max64(in, n, B, nb, p.threads, &mx)) return Status::nonfinite;
    const bool grid = p.param == 0 && p.shared_scale > 0 && nb == 1;
    std::vector<double> s(nb);
    if (grid) s[0] = p.shared_scale;
    else
        for (size_t j = 0; j < nb; ++j) { /* |x| <= K s_j */
            s[j] = mx[j] / K;
            if (s[j] * K < mx[j]) s[j] = std::nextafter(s[j], kInf64);
        }
    for (double v : s)
        if (!levels_fit(v, b)) return Status::nonfinite;
    if (nb) std::memcpy(out, s.data(), 8 * nb);
    uint8_t *codes = out + 8 * nb;
    const philox::Stream st = philox::make_stream(p.seed, p.stream);
    blocks::for_each(
        n, p.threads,
        [&](size_t lo, size_t cnt) {
            const size_t hi = lo + cnt;
            std::vector<int32_t> c(cnt);
            if (grid) {
                for (size_t i = lo; i < hi; ++i) c[i - lo] = level_one64(in[i], s[0], K);
            } else {
                uint32_t w[64];
                for (size_t i = lo; i < hi;) {
                    const size_t g = i >> 6, e = std::min(hi, (g + 1) << 6);
                    philox::group_scalar(st, g, w);
                    for (; i < e; ++i) c[i - lo] = level_stoch64(in[i], s[i / B], K, w[i & 63]);
                }
            }
            if (b <= 8) {
                std::vector<int8_t> c8(c.begin(), c.end());
                fields::pack_scalar(c8.data(), cnt, b, codes + lo / 8 * b);
            } else {
                fields::pack_wide_scalar(c.data(), cnt, b, codes + lo / 8 * b);
            }
        },
        kBlock);
    return Status::ok;
}

Status tg_prepare64(const double *in, size_t n, const CodecParams &p, double *stat) {
    if (p.elem != Elem::f64) return Status::invalid_arg;
    std::vector<Scale64> sc;
    double cs = kInf64;
    if (!local_scales64(in, n, p, &sc, &cs)) return Status::nonfinite;
    double mx = 0;
    for (const Scale64 &x : sc) mx = std::max(mx, x.s);
    *stat = mx;
    if (p.clip_out) { /* fp32 (CodecParams): rounded down into [FLT_TRUE_MIN, FLT_MAX]; inf: none */
        float f = std::isinf(cs) ? kInf : static_cast<float>(std::min(cs, static_cast<double>(FLT_MAX)));
        if (static_cast<double>(f) > cs) f = std::nextafter(f, 0.0f);
        *p.clip_out = f > 0 ? f : std::numeric_limits<float>::denorm_min();
    }
    return Status::ok;
}

Status tg_encode64(const double *in, size_t n, const CodecParams &p, uint8_t *out, size_t cap, size_t *len) {
    CMPI_CHECK(tg_check(p));
    if (p.elem != Elem::f64) return Status::invalid_arg;
    if (p.bucket && p.bucket != p.param) return Status::invalid_arg;
    if (!(p.shared_scale >= 0) || std::isinf(p.shared_scale)) return Status::invalid_arg;
    const size_t need = tg_max_payload(n, p);
    if (cap < need) return Status::invalid_arg;
    if (p.variant == kLevels) {
        CMPI_CHECK(encode_levels64(in, n, p, out));
        *len = need;
        return Status::ok;
    }
    const size_t nb = bstats::bucket_count(n, p.param), B = nb <= 1 ? std::max<size_t>(n, 1) : p.param;
    std::vector<Scale64> sc;
    if (!local_scales64(in, n, p, &sc, nullptr)) return Status::nonfinite;
    if (p.param == 0 && p.shared_scale > 0 && nb == 1) { /* the agreed scaler (eq. 4), exact in double */
        sc[0].s = p.shared_scale;
        sc[0].cs = std::min(sc[0].cs, sc[0].s);
    }
    uint8_t *codes = out + 8 * nb;
    const philox::Stream st = philox::make_stream(p.seed, p.stream);
    const bool base3 = p.variant == kBase3;
    const SimdLevel lvl = std::min(p.simd, simd_detect());
    fields::encode_blocks(
        n, B, p.threads,
        [&](size_t lo, size_t hi, size_t j, int8_t *c) { tern_run64(in, lo, hi, sc[j].s, sc[j].cs, st, c, lvl); },
        [&](const int8_t *c, size_t cnt, size_t lo) {
            if (base3) pack3(c, cnt, codes + lo / 5);
            else fields::pack_scalar(c, cnt, 2, codes + lo / 4);
        });
    for (size_t j = 0; j < nb; ++j) std::memcpy(out + 8 * j, &sc[j].s, 8);
    *len = need;
    return Status::ok;
}

/* out = (or +=, add) the sum of cnt payloads in index order, block by block: k s_j in double */
Status decode_sum64(const uint8_t *const *in, const size_t *len, int cnt, size_t n, const CodecParams &p, double *out,
                    bool add) {
    return fields::decode_sum64(
        in, len, cnt, n, p, out, add,
        [&](const uint8_t *b, size_t l, std::vector<double> *s) { return tg_validate(b, l, n, p, s); },
        [&](const uint8_t *codes, size_t avail, size_t i) -> int32_t {
            if (p.variant == kBase3) return static_cast<int32_t>(kDigits[codes[i / 5]][i % 5]);
            return fields::field(codes, avail, p.variant == kBase4 ? 2 : p.bits, i);
        });
}
Status tg_decode_sum64(const uint8_t *const *in, const size_t *len, int cnt, size_t n, const CodecParams &p,
                       double *out) {
    return decode_sum64(in, len, cnt, n, p, out, false);
}
Status tg_decode_common64(const uint8_t *in, size_t len, size_t n, const CodecParams &p, double *out, bool add) {
    return decode_sum64(&in, &len, 1, n, p, out, add);
}
using TgDecode64 = DecodeOps<double, tg_decode_common64>;

}  // namespace

int level_bits(int nranks) {
    if (nranks < 1) nranks = 1;
    for (int b = 2; b <= kMaxLevelBits; ++b)
        if (nranks <= (1 << (b - 1)) - 1) return b;
    return 0;
}

}  // namespace compmpi::terngrad

namespace compmpi {
extern const CodecOps codec_terngrad_ops = {
    CodecId::terngrad, "terngrad",
    "stochastic ternary {-s,0,s} (TernGrad), c*sigma clipping, scaler shared across ranks; packing: base4|base3",
    CODEC_SHARED_SCALE | CODEC_STOCHASTIC,
    2, 2, 2, 1,
    terngrad::tg_check, terngrad::tg_max_payload, terngrad::tg_prepare, terngrad::tg_encode,
    terngrad::TgDecode::decode, terngrad::TgDecode::decode_add, terngrad::tg_reduced_params, terngrad::tg_decode_sum,
    nullptr,
    /* fp64: the same codes after f64 scalers */
    2, 2, 2, 1,
    terngrad::tg_prepare64, terngrad::tg_encode64, terngrad::TgDecode64::decode, terngrad::TgDecode64::decode_add,
    terngrad::tg_decode_sum64, nullptr,
};
}  // namespace compmpi

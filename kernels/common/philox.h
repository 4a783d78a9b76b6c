// SPDX-License-Identifier: BSD-3-Clause
/* Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11), the
 * counter-based generator of the stochastic codecs (terngrad, qsgd). Output is a pure
 * function of (key, counter), so every element's random word is fixed by (seed, stream,
 * element index): the same bytes for any thread count and any SIMD path.
 *
 * Keying: key = seed (2 x 32 bits); counter = (c, stream) with c the 64-bit block counter in
 * words 0-1 and the 64-bit stream in words 2-3 (cuRAND's subsequence placement).
 *
 * Word mapping (chosen so that SIMD lanes need no transpose): elements come in groups of
 * 64, group q = i / 64; element i = 64 q + 16 l + m (l = 0..3, m = 0..15) takes output word l
 * of the block with counter c = 16 q + m: word(). A group is 16 Philox blocks, computed in
 * SIMD lanes and returned as registers of consecutive elements (AVX-512: register l =
 * elements 16l..16l+15). terngrad's phase-2 levels use these 32-bit words.
 *
 * 24-bit Bernoulli draws (terngrad's ternarisation, qsgd's stochastic rounding): the
 * decision [u24 < t] for a uniform 24-bit u24 and a threshold t in [0, 2^24], whose law is
 * P = ceil(t) / 2^24. u24 = 256 a + b is drawn in two parts:
 *   a (16 bits): half of a Philox word, two elements per word -- half the generator work of
 *     a word per element. Element i = 128 P + 64 g + 16 l + m takes half g (0: low 16 bits,
 *     1: high) of word l of the block with counter 16 P + m: group q = 2P + g, register l,
 *     lane m, as above, with the blocks of pair P shared by groups 2P and 2P+1 (draw16());
 *   b (8 bits): drawn only where a does not decide, a == ceil(t) / 256 with ceil(t) % 256
 *     != 0 (probability <= 2^-16 per element): the top 8 bits of word 0 of the block with
 *     counter 2^63 + i (refine8(); draw counters stay below 2^60, so no block is used twice).
 * [u24 < t] = [a < A] or ([a == A] and [b < R]), A = ceil(t) / 256, R = ceil(t) % 256:
 * exactly the law of a 24-bit uniform (tests/unit/test_terngrad.cc checks every (a, b)).
 * Known-answer tests against Random123's kat_vectors: tests/unit/test_terngrad.cc. */
#pragma once
#include <immintrin.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "common/simd_target.h"

namespace compmpi::philox {

inline constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u; /* multipliers */
inline constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u; /* Weyl key bumps */

struct Stream {
    uint32_t k0, k1; /* key: seed */
    uint32_t s0, s1; /* counter words 2-3: stream */
};

inline Stream make_stream(uint64_t seed, uint64_t stream) {
    return Stream{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32), static_cast<uint32_t>(stream),
                  static_cast<uint32_t>(stream >> 32)};
}

/* ---------------------------------------------------------------- scalar reference */
inline void block(const uint32_t ctr_in[4], uint32_t k0, uint32_t k1, uint32_t out[4]) {
    uint32_t c0 = ctr_in[0], c1 = ctr_in[1], c2 = ctr_in[2], c3 = ctr_in[3];
    for (int r = 0; r < 10; ++r) {
        if (r) {
            k0 += kW0;
            k1 += kW1;
        }
        uint64_t p0 = static_cast<uint64_t>(kM0) * c0, p1 = static_cast<uint64_t>(kM1) * c2;
        uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
        uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

/* The random word of element i. */
inline uint32_t word(const Stream &s, uint64_t i) {
    const uint64_t q = i >> 6, r = i & 63, c = 16 * q + (r & 15);
    const uint32_t ctr[4] = {static_cast<uint32_t>(c), static_cast<uint32_t>(c >> 32), s.s0, s.s1};
    uint32_t out[4];
    block(ctr, s.k0, s.k1, out);
    return out[r >> 4];
}

/* The 64 words of group q, in element order. */
inline void group_scalar(const Stream &s, uint64_t q, uint32_t w[64]) {
    for (uint32_t m = 0; m < 16; ++m) {
        const uint64_t c = 16 * q + m;
        const uint32_t ctr[4] = {static_cast<uint32_t>(c), static_cast<uint32_t>(c >> 32), s.s0, s.s1};
        uint32_t out[4];
        block(ctr, s.k0, s.k1, out);
        for (int l = 0; l < 4; ++l) w[16 * l + m] = out[l];
    }
}

/* ---------------------------------------------------------------- 24-bit Bernoulli draws */
/* The 16-bit draw a of element i. */
inline uint32_t draw16(const Stream &s, uint64_t i) {
    const uint64_t q = i >> 6; /* word(64 (q / 2) + i % 64) is word l of block 16 (q / 2) + m */
    return (word(s, ((q >> 1) << 6) | (i & 63)) >> (16 * (q & 1))) & 0xFFFFu;
}

/* The 8-bit refinement b of element i. */
inline uint32_t refine8(const Stream &s, uint64_t i) {
    const uint32_t ctr[4] = {static_cast<uint32_t>(i), static_cast<uint32_t>(i >> 32) | 0x80000000u, s.s0, s.s1};
    uint32_t out[4];
    block(ctr, s.k0, s.k1, out);
    return out[0] >> 24;
}

/* ceil(t) for t >= 0, clamped to 2^24 (NaN: 2^24, as _mm*_min_ps(t, 2^24)). */
inline uint32_t ceil24(float t) {
    const float tc = t < 0x1p24f ? t : 0x1p24f;
    return static_cast<uint32_t>(std::ceil(tc));
}

/* [u24 < t] given a, b and C = ceil24(t). */
inline bool below_ab(uint32_t a, uint32_t b, uint32_t C) {
    const uint32_t A = C >> 8, R = C & 255u;
    return a < A || (a == A && b < R);
}

/* [u24 < t] of element i with draw a and C = ceil24(t); b is drawn only on a tie. */
inline bool below(const Stream &s, uint64_t i, uint32_t a, uint32_t C) {
    const uint32_t A = C >> 8, R = C & 255u;
    return a < A || (a == A && R != 0 && refine8(s, i) < R);
}

/* The 64 draws of group q, in element order. */
inline void group16_scalar(const Stream &s, uint64_t q, uint32_t a[64]) {
    uint32_t w[64];
    group_scalar(s, q >> 1, w);
    const int sh = 16 * static_cast<int>(q & 1);
    for (int j = 0; j < 64; ++j) a[j] = (w[j] >> sh) & 0xFFFFu;
}

/* The tie lanes of a SIMD decision (bit j: element e + j), with C per lane: the lanes where
 * the refinement makes it a hit. Out of line: it runs for about one vector in 4096. */
__attribute__((noinline, cold)) inline uint32_t refine_lanes(const Stream &s, uint64_t e, uint32_t tie,
                                                             const uint32_t *C) {
    uint32_t hit = 0;
    for (; tie; tie &= tie - 1) {
        const int j = __builtin_ctz(tie);
        if (refine8(s, e + static_cast<uint64_t>(j)) < (C[j] & 255u)) hit |= 1u << j;
    }
    return hit;
}

/* SIMD paths keep each Philox word in the low half of a 64-bit lane: _mm*_mul_epu32 then
 * yields the full 32x32->64 product per lane (lo = low half, hi = product >> 32) with no
 * even/odd shuffling; the garbage high halves never reach a low half (xor is lane-wise and
 * mul_epu32 reads only low halves). 10 rounds = 2 mul + 2 shift + 2 xor3 per lane-set. */

/* Round keys, broadcast once per stream: k0 + r W0, k1 + r W1 for r = 0..9. */
struct KeysAvx2 {
    __m256i k0[10], k1[10];
};
struct KeysAvx512 {
    __m512i k0[10], k1[10];
};

/* ---------------------------------------------------------------- AVX2: 4 counters per set */
CMPI_AVX2 inline KeysAvx2 keys_avx2(const Stream &s) {
    KeysAvx2 k;
    for (uint32_t r = 0; r < 10; ++r) {
        k.k0[r] = _mm256_set1_epi64x(static_cast<uint32_t>(s.k0 + r * kW0));
        k.k1[r] = _mm256_set1_epi64x(static_cast<uint32_t>(s.k1 + r * kW1));
    }
    return k;
}

/* 10 rounds on N independent sets at once (interleaved for instruction-level parallelism). */
template <int N>
CMPI_AVX2 inline void rounds_avx2(__m256i (&c)[N][4], const KeysAvx2 &k) {
    const __m256i m0 = _mm256_set1_epi64x(kM0), m1 = _mm256_set1_epi64x(kM1);
#pragma GCC unroll 10
    for (int r = 0; r < 10; ++r)
#pragma GCC unroll 4
        for (int j = 0; j < N; ++j) {
            __m256i p0 = _mm256_mul_epu32(c[j][0], m0), p1 = _mm256_mul_epu32(c[j][2], m1);
            c[j][0] = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(p1, 32), c[j][1]), k.k0[r]);
            c[j][1] = p1;
            c[j][2] = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(p0, 32), c[j][3]), k.k1[r]);
            c[j][3] = p0;
        }
}

/* Words of elements 64q + 16l + 8h + j (j = 0..7) in w[2l + h]. */
CMPI_AVX2 inline void group_avx2(const Stream &s, const KeysAvx2 &k, uint64_t q, __m256i w[8]) {
    const uint64_t c = 16 * q; /* the low word + 15 never carries */
    const __m256i lo = _mm256_set1_epi64x(static_cast<uint32_t>(c));
    __m256i o[4][4]; /* o[set][word], set t = counters 4t..4t+3 */
    for (int t = 0; t < 4; ++t) {
        o[t][0] = _mm256_add_epi64(lo, _mm256_setr_epi64x(4 * t, 4 * t + 1, 4 * t + 2, 4 * t + 3));
        o[t][1] = _mm256_set1_epi64x(static_cast<uint32_t>(c >> 32));
        o[t][2] = _mm256_set1_epi64x(s.s0);
        o[t][3] = _mm256_set1_epi64x(s.s1);
    }
    rounds_avx2<4>(o, k);
    /* low halves of sets (2h, 2h+1) -> 8 consecutive counters */
    const __m256i order = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
    for (int l = 0; l < 4; ++l)
        for (int h = 0; h < 2; ++h) {
            __m256 a = _mm256_castsi256_ps(o[2 * h][l]), b = _mm256_castsi256_ps(o[2 * h + 1][l]);
            /* per 128-bit half: a0 a1 b0 b1 | a2 a3 b2 b3 (low words) */
            __m256i x = _mm256_castps_si256(_mm256_shuffle_ps(a, b, 0x88));
            w[2 * l + h] = _mm256_permutevar8x32_epi32(x, order);
        }
}

/* ---------------------------------------------------------------- AVX-512: 8 counters per set */
CMPI_AVX512 inline KeysAvx512 keys_avx512(const Stream &s) {
    KeysAvx512 k;
    for (uint32_t r = 0; r < 10; ++r) {
        k.k0[r] = _mm512_set1_epi64(static_cast<uint32_t>(s.k0 + r * kW0));
        k.k1[r] = _mm512_set1_epi64(static_cast<uint32_t>(s.k1 + r * kW1));
    }
    return k;
}

template <int N>
CMPI_AVX512 inline void rounds_avx512(__m512i (&c)[N][4], const KeysAvx512 &k) {
    const __m512i m0 = _mm512_set1_epi64(kM0), m1 = _mm512_set1_epi64(kM1);
#pragma GCC unroll 10
    for (int r = 0; r < 10; ++r)
#pragma GCC unroll 4
        for (int j = 0; j < N; ++j) {
            __m512i p0 = _mm512_mul_epu32(c[j][0], m0), p1 = _mm512_mul_epu32(c[j][2], m1);
            /* ternary-logic 0x96: a ^ b ^ c */
            c[j][0] = _mm512_ternarylogic_epi64(_mm512_srli_epi64(p1, 32), c[j][1], k.k0[r], 0x96);
            c[j][1] = p1;
            c[j][2] = _mm512_ternarylogic_epi64(_mm512_srli_epi64(p0, 32), c[j][3], k.k1[r], 0x96);
            c[j][3] = p0;
        }
}

/* G consecutive groups from q: words of elements 64(q+g) + 16l + m in w[4g + l] lane m. */
template <int G>
CMPI_AVX512 inline void groups_avx512(const Stream &s, const KeysAvx512 &k, uint64_t q, __m512i *w) {
    __m512i c[2 * G][4]; /* set 2g + t = counters 16(q+g) + 8t .. +7 */
    for (int g = 0; g < G; ++g)
        for (int t = 0; t < 2; ++t) {
            const uint64_t base = 16 * (q + g) + 8 * t; /* the low word + 7 never carries */
            c[2 * g + t][0] = _mm512_add_epi64(_mm512_set1_epi64(static_cast<uint32_t>(base)),
                                               _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7));
            c[2 * g + t][1] = _mm512_set1_epi64(static_cast<uint32_t>(base >> 32));
            c[2 * g + t][2] = _mm512_set1_epi64(s.s0);
            c[2 * g + t][3] = _mm512_set1_epi64(s.s1);
        }
    rounds_avx512<2 * G>(c, k);
    /* the low halves of set 2g (counters 0..7) then of set 2g+1 (8..15) */
    const __m512i idx = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    for (int g = 0; g < G; ++g)
        for (int l = 0; l < 4; ++l) w[4 * g + l] = _mm512_permutex2var_epi32(c[2 * g][l], idx, c[2 * g + 1][l]);
}

/* ---------------------------------------------------------------- SIMD 24-bit Bernoulli draws */
/* AVX2: the draws of group q in a[2l + h] (elements 64q + 16l + 8h + j, j = 0..7; the layout of
 * group_avx2), from the blocks of pair q / 2, generated once per pair. */
struct Draws16Avx2 {
    uint64_t pair = ~uint64_t{0};
    __m256i w[8];
};
CMPI_AVX2 inline void draws16_avx2(const Stream &s, const KeysAvx2 &k, uint64_t q, Draws16Avx2 &d, __m256i a[8]) {
    if ((q >> 1) != d.pair) {
        d.pair = q >> 1;
        group_avx2(s, k, d.pair, d.w);
    }
    const __m256i lo16 = _mm256_set1_epi32(0xFFFF);
    for (int r = 0; r < 8; ++r) a[r] = (q & 1) ? _mm256_srli_epi32(d.w[r], 16) : _mm256_and_si256(d.w[r], lo16);
}

/* The SIMD decisions need no clamp of t: any t >= 2^24 gives A >= 2^16 > a (a hit, as
 * ceil24's 2^24), and a NaN or t >= 2^31 converts to 0x80000000, A = 2^23: a hit, as well.
 * A tie lane (a == A) with R = 0 goes to refine_lanes, which finds no b < 0: no hit. */

/* [u24 < t] of 8 elements e .. e + 7 with draws a, given C = ceil(t) per lane (t >= 2^24 or NaN:
 * see the note above): all-ones lanes where it holds. */
CMPI_AVX2 inline __m256i below8c_avx2(const Stream &s, uint64_t e, __m256i a, __m256i C) {
    const __m256i A = _mm256_srli_epi32(C, 8);
    __m256i hit = _mm256_cmpgt_epi32(A, a);
    const uint32_t tie =
        static_cast<uint32_t>(_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(a, A))));
    if (__builtin_expect(tie != 0, 0)) {
        alignas(32) uint32_t c[8];
        _mm256_store_si256(reinterpret_cast<__m256i *>(c), C);
        const uint32_t more = refine_lanes(s, e, tie, c);
        const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
        const __m256i m = _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(static_cast<int>(more)), bit), bit);
        hit = _mm256_or_si256(hit, m);
    }
    return hit;
}

/* [u24 < t] of 8 elements e .. e + 7 with draws a: all-ones lanes where it holds. */
CMPI_AVX2 inline __m256i below8_avx2(const Stream &s, uint64_t e, __m256i a, __m256 t) {
    return below8c_avx2(s, e, a, _mm256_cvtps_epi32(_mm256_ceil_ps(t)));
}

/* AVX-512: the draws of group q in a[l] (elements 64q + 16l + m), from the blocks of pairs
 * 2 (q / 4) and 2 (q / 4) + 1, generated once per four groups (four Philox sets in flight). */
struct Draws16Avx512 {
    uint64_t quad = ~uint64_t{0};
    __m512i w[8];
};
CMPI_AVX512 inline void draws16_avx512(const Stream &s, const KeysAvx512 &k, uint64_t q, Draws16Avx512 &d,
                                       __m512i a[4]) {
    if ((q >> 2) != d.quad) {
        d.quad = q >> 2;
        groups_avx512<2>(s, k, 2 * d.quad, d.w);
    }
    const __m512i *w = d.w + 4 * ((q >> 1) & 1);
    const __m512i lo16 = _mm512_set1_epi32(0xFFFF);
    for (int l = 0; l < 4; ++l) a[l] = (q & 1) ? _mm512_srli_epi32(w[l], 16) : _mm512_and_si512(w[l], lo16);
}

/* [u24 < t] of 16 elements e .. e + 15 with draws a, given C = ceil(t) as the SIMD conversion
 * gives it (t >= 2^24 or NaN: see the note above below8_avx2). */
CMPI_AVX512 inline __mmask16 below16c_avx512(const Stream &s, uint64_t e, __m512i a, __m512i C) {
    const __m512i A = _mm512_srli_epi32(C, 8);
    __mmask16 hit = _mm512_cmplt_epi32_mask(a, A);
    const __mmask16 tie = _mm512_cmpeq_epi32_mask(a, A);
    if (__builtin_expect(tie != 0, 0)) {
        alignas(64) uint32_t c[16];
        _mm512_store_si512(c, C);
        hit = static_cast<__mmask16>(hit | refine_lanes(s, e, tie, c));
    }
    return hit;
}

/* [u24 < t] of 16 elements e .. e + 15 with draws a. */
CMPI_AVX512 inline __mmask16 below16_avx512(const Stream &s, uint64_t e, __m512i a, __m512 t) {
    return below16c_avx512(s, e, a, _mm512_cvt_roundps_epi32(t, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC));
}

}  // namespace compmpi::philox

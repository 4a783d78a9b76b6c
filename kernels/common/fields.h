// SPDX-License-Identifier: BSD-3-Clause
/* Fixed-width signed fields: the packed integer codes of terngrad (2-bit ternary and the
 * phase-2 "levels") and qsgd. Field i holds k_i in b-bit two's complement (b = 2..16) at bit
 * i*b of a little-endian, LSB-first bit stream, so 8 fields fill exactly b bytes; the last
 * byte's unused high bits are zero. Decoding gives k_i * step (step per bucket).
 *
 * Encoders compute int8 codes (b <= 8) for a sub-block into a scratch array and pack them
 * here; all paths pack to the same bytes (the AVX-512 path does 64 fields in registers,
 * the others 8 at a time with a 64-bit word). Decoders unpack with AVX-512 VBMI
 * (multishift), AVX2 (variable shifts of a 64-bit window) or a scalar window. */
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "codec.h"
#include "common/blocks.h"
#include "common/simd_target.h"
#include "simd.h"

namespace compmpi::fields {

/* Encode/decode geometry shared by the codecs: OpenMP work items of kBlock elements, each
 * processed in sub-blocks of kSub (scratch codes stay in L1). Both are multiples of 64 (RNG
 * groups), 8 (field groups) and 5 (base-3 bytes), so every sub-block starts on a byte. */
inline constexpr size_t kSub = 2560;
inline constexpr size_t kBlock = 16 * kSub;
inline constexpr size_t kParallelMin = 1 << 17;

inline constexpr size_t bytes(size_t n, int b) {
    return (n * static_cast<size_t>(b) + 7) / 8;
}

/* ---------------------------------------------------------------- packing (b <= 8) */
inline void pack_scalar(const int8_t *c, size_t n, int b, uint8_t *out) {
    const uint64_t mask = (1u << b) - 1;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w = 0;
        for (int j = 0; j < 8; ++j) w |= (static_cast<uint64_t>(static_cast<uint8_t>(c[i + j])) & mask) << (b * j);
        std::memcpy(out + i / 8 * b, &w, static_cast<size_t>(b));
    }
    if (i < n) {
        uint64_t w = 0;
        for (size_t j = 0; i + j < n; ++j)
            w |= (static_cast<uint64_t>(static_cast<uint8_t>(c[i + j])) & mask) << (b * j);
        std::memcpy(out + i / 8 * b, &w, bytes(n - i, b));
    }
}

/* Wide fields (b = 9..16) from int32 codes: 8 fields = b bytes through a 128-bit word. */
inline void pack_wide_scalar(const int32_t *c, size_t n, int b, uint8_t *out) {
    const unsigned __int128 mask = (1u << b) - 1;
    for (size_t i = 0; i < n; i += 8) {
        unsigned __int128 w = 0;
        const size_t m = n - i < 8 ? n - i : 8;
        for (size_t j = 0; j < m; ++j)
            w |= (static_cast<unsigned __int128>(static_cast<uint32_t>(c[i + j])) & mask) << (b * j);
        std::memcpy(out + i / 8 * b, &w, bytes(m, b));
    }
}

/* Byte-index tables for b = 1..8: kComp[b] gathers the low b bytes of each 64-bit lane into
 * 8b contiguous bytes; kSpread[b] does the reverse (lane k gets bytes kb..kb+7). */
constexpr std::array<std::array<uint8_t, 64>, 9> make_comp() {
    std::array<std::array<uint8_t, 64>, 9> t{};
    for (int b = 1; b <= 8; ++b)
        for (int k = 0; k < 64; ++k) t[b][k] = static_cast<uint8_t>(k < 8 * b ? (k / b) * 8 + k % b : 0);
    return t;
}
constexpr std::array<std::array<uint8_t, 64>, 9> make_spread() {
    std::array<std::array<uint8_t, 64>, 9> t{};
    for (int b = 1; b <= 8; ++b)
        for (int k = 0; k < 64; ++k) t[b][k] = static_cast<uint8_t>((k / 8) * b + k % 8);
    return t;
}
constexpr std::array<std::array<uint8_t, 64>, 9> make_shift() {
    std::array<std::array<uint8_t, 64>, 9> t{};
    for (int b = 1; b <= 8; ++b)
        for (int k = 0; k < 64; ++k) t[b][k] = static_cast<uint8_t>((k % 8) * b);
    return t;
}
inline constexpr auto kComp = make_comp();
inline constexpr auto kSpread = make_spread();
inline constexpr auto kShift = make_shift();

inline uint64_t mask_bytes(int nbytes) {
    return nbytes >= 64 ? ~0ull : (1ull << nbytes) - 1;
}

/* 64 int8 codes in v -> 8b bytes at out; b a compile-time constant, so the shift counts
 * are immediates and the masks and the byte table stay in registers across a loop. */
template <int b>
CMPI_AVX512 inline void pack64_avx512(__m512i v, uint8_t *out) {
    static_assert(b >= 1 && b <= 8, "field width");
    v = _mm512_and_si512(v, _mm512_set1_epi8(static_cast<char>((1u << b) - 1)));
    if constexpr (b < 8) {
        /* pairs -> 2b bits per 16-bit lane, quads -> 4b per 32, octets -> 8b per 64 */
        v = _mm512_or_si512(
            _mm512_and_si512(v, _mm512_set1_epi16(0x00FF)),
            _mm512_srli_epi16(_mm512_and_si512(v, _mm512_set1_epi16(static_cast<short>(0xFF00))), 8 - b));
        v = _mm512_or_si512(
            _mm512_and_si512(v, _mm512_set1_epi32(0xFFFF)),
            _mm512_srli_epi32(_mm512_and_si512(v, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))), 16 - 2 * b));
        v = _mm512_or_si512(
            _mm512_and_si512(v, _mm512_set1_epi64(0xFFFFFFFFll)),
            _mm512_srli_epi64(_mm512_and_si512(v, _mm512_set1_epi64(static_cast<long long>(0xFFFFFFFF00000000ull))),
                              32 - 4 * b));
        v = _mm512_permutexvar_epi8(_mm512_loadu_si512(kComp[b].data()), v);
    }
    _mm512_mask_storeu_epi8(out, mask_bytes(8 * b), v);
}

/* Calls f(std::integral_constant<int, b>{}) for a run-time b in 1..8 (a loop instantiated per
 * width; b outside 1..8 is a caller bug and calls nothing). */
template <class F>
inline void with_width(int b, F &&f) {
    switch (b) {
        case 1: return f(std::integral_constant<int, 1>{});
        case 2: return f(std::integral_constant<int, 2>{});
        case 3: return f(std::integral_constant<int, 3>{});
        case 4: return f(std::integral_constant<int, 4>{});
        case 5: return f(std::integral_constant<int, 5>{});
        case 6: return f(std::integral_constant<int, 6>{});
        case 7: return f(std::integral_constant<int, 7>{});
        case 8: return f(std::integral_constant<int, 8>{});
        default: return;
    }
}

template <int b>
CMPI_AVX512 inline void pack_avx512_b(const int8_t *c, size_t n, uint8_t *out) {
    size_t i = 0;
    for (; i + 64 <= n; i += 64) pack64_avx512<b>(_mm512_loadu_si512(c + i), out + i / 8 * b);
    pack_scalar(c + i, n - i, b, out + i / 8 * b);
}

CMPI_AVX512 inline void pack_avx512(const int8_t *c, size_t n, int b, uint8_t *out) {
    with_width(b, [&](auto w) { pack_avx512_b<decltype(w)::value>(c, n, out); });
}

/* n codes (starting on a field group) -> bytes(n, b) bytes. */
inline void pack(const int8_t *c, size_t n, int b, uint8_t *out, SimdLevel lvl) {
    if (lvl == SimdLevel::avx512)
        pack_avx512(c, n, b, out);
    else
        pack_scalar(c, n, b, out);
}

/* ---------------------------------------------------------------- unpacking */
/* Field i of a stream of avail bytes (i*b + b <= avail*8). */
inline int32_t field(const uint8_t *codes, size_t avail, int b, size_t i) {
    const size_t bit = i * static_cast<size_t>(b), byte = bit >> 3;
    uint64_t w = 0;
    if (byte + 8 <= avail)
        std::memcpy(&w, codes + byte, 8);
    else
        for (size_t t = 0; byte + t < avail && t < 8; ++t) w |= static_cast<uint64_t>(codes[byte + t]) << (8 * t);
    const uint32_t f = static_cast<uint32_t>(w >> (bit & 7)) & ((1u << b) - 1);
    return static_cast<int32_t>(f << (32 - b)) >> (32 - b);
}

inline void put(float *out, size_t i, float v, bool add) {
    out[i] = add ? out[i] + v : v;
}

inline void unpack_scalar(const uint8_t *codes, size_t avail, int b, size_t i0, size_t i1, float step, float *out,
                          bool add) {
    for (size_t i = i0; i < i1; ++i) put(out, i, static_cast<float>(field(codes, avail, b, i)) * step, add);
}

CMPI_AVX2 inline void store8_avx2(float *p, __m256 v, bool add) {
    if (add) v = _mm256_add_ps(_mm256_loadu_ps(p), v);
    _mm256_storeu_ps(p, v);
}

CMPI_AVX2 inline void unpack_avx2(const uint8_t *codes, size_t avail, int b, size_t i0, size_t i1, float step,
                                  float *out, bool add) {
    size_t i = i0;
    for (; i < i1 && (i & 7); ++i) put(out, i, static_cast<float>(field(codes, avail, b, i)) * step, add);
    if (b <= 8) {
        const __m256i sh_lo = _mm256_setr_epi64x(0, b, 2 * b, 3 * b),
                      sh_hi = _mm256_setr_epi64x(4 * b, 5 * b, 6 * b, 7 * b);
        const __m256i order = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
        const __m256 vstep = _mm256_set1_ps(step);
        for (; i + 8 <= i1 && i / 8 * b + 8 <= avail; i += 8) {
            uint64_t w;
            std::memcpy(&w, codes + i / 8 * b, 8);
            __m256i v = _mm256_set1_epi64x(static_cast<long long>(w));
            __m256 lo = _mm256_castsi256_ps(_mm256_srlv_epi64(v, sh_lo)),
                   hi = _mm256_castsi256_ps(_mm256_srlv_epi64(v, sh_hi));
            __m256i f = _mm256_permutevar8x32_epi32(_mm256_castps_si256(_mm256_shuffle_ps(lo, hi, 0x88)), order);
            f = _mm256_srai_epi32(_mm256_slli_epi32(f, 32 - b), 32 - b);
            store8_avx2(out + i, _mm256_mul_ps(_mm256_cvtepi32_ps(f), vstep), add);
        }
    }
    for (; i < i1; ++i) put(out, i, static_cast<float>(field(codes, avail, b, i)) * step, add);
}

CMPI_AVX512 inline void store16_avx512(float *p, __m512 v, bool add) {
    if (add) v = _mm512_add_ps(_mm512_loadu_ps(p), v);
    _mm512_storeu_ps(p, v);
}

CMPI_AVX512 inline void unpack_avx512(const uint8_t *codes, size_t avail, int b, size_t i0, size_t i1, float step,
                                      float *out, bool add) {
    if (b > 8) return unpack_avx2(codes, avail, b, i0, i1, step, out, add);
    size_t i = i0;
    for (; i < i1 && (i & 7); ++i) put(out, i, static_cast<float>(field(codes, avail, b, i)) * step, add);
    const __m512i spread = _mm512_loadu_si512(kSpread[b].data()), shift = _mm512_loadu_si512(kShift[b].data());
    const __m512i fmask = _mm512_set1_epi8(static_cast<char>((1u << b) - 1));
    const __m512i sgn = _mm512_set1_epi8(static_cast<char>(1u << (b - 1)));
    const __m512 vstep = _mm512_set1_ps(step);
    const uint64_t lmask = mask_bytes(8 * b);
    for (; i + 64 <= i1; i += 64) {
        __m512i raw = _mm512_maskz_loadu_epi8(lmask, codes + i / 8 * b);
        __m512i f = _mm512_multishift_epi64_epi8(shift, _mm512_permutexvar_epi8(spread, raw));
        f = _mm512_and_si512(f, fmask);
        f = _mm512_sub_epi8(_mm512_xor_si512(f, sgn), sgn); /* sign-extend b bits */
        store16_avx512(out + i,
                       _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm512_castsi512_si128(f))), vstep), add);
        store16_avx512(out + i + 16,
                       _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm512_extracti32x4_epi32(f, 1))), vstep),
                       add);
        store16_avx512(out + i + 32,
                       _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm512_extracti32x4_epi32(f, 2))), vstep),
                       add);
        store16_avx512(out + i + 48,
                       _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm512_extracti32x4_epi32(f, 3))), vstep),
                       add);
    }
    unpack_avx2(codes, avail, b, i, i1, step, out, add);
}

/* out[i] (+)= k_i * step for i in [i0, i1); out is indexed from field 0. */
inline void unpack(const uint8_t *codes, size_t avail, int b, size_t i0, size_t i1, float step, float *out, bool add,
                   SimdLevel lvl) {
    by_level<unpack_avx512, unpack_avx2, unpack_scalar>(lvl, codes, avail, b, i0, i1, step, out, add);
}

/* Fields [lo, hi), bucket j (of B elements) scaled by steps[j], bucket run by bucket run. */
inline void decode_range(const uint8_t *codes, size_t avail, int b, const float *steps, size_t B, size_t lo,
                         size_t hi, float *out, bool add, SimdLevel lvl) {
    while (lo < hi) {
        const size_t j = lo / B, end = std::min(hi, (j + 1) * B);
        unpack(codes, avail, b, lo, end, steps[j], out, add, lvl);
        lo = end;
    }
}

/* ---------------------------------------------------------------- two 2-bit payloads at once */
/* The sum of two 2-bit fields, f0 s0 + f1 s1, takes one of 16 values per bucket: a table
 * indexed by the pair (f0 | f1 << 2) holds each sum as decode + decode_add compute it,
 * fl(fl(f0 s0) + fl(f1 s1)) (no contraction: -ffp-contract=off), so one lookup replaces two
 * unpack-convert-multiply passes and a store and reload. */
inline void pair2_table(float s0, float s1, float tab[16]) {
    for (int c = 0; c < 16; ++c) {
        const int f0 = ((c & 3) ^ 2) - 2, f1 = (((c >> 2) & 3) ^ 2) - 2; /* sign-extended 2 bits */
        const float v0 = static_cast<float>(f0) * s0, v1 = static_cast<float>(f1) * s1;
        tab[c] = v0 + v1;
    }
}

template <bool NT>
CMPI_AVX512 inline void store_pair2_avx512(float *o, __m512 v) {
    if constexpr (NT)
        _mm512_stream_ps(o, v);
    else
        _mm512_storeu_ps(o, v);
}

/* out[i] = f0_i s0 + f1_i s1 for i in [i0, i1) of two 2-bit streams. NT: non-temporal
 * stores (the caller checked out + i0 is 16-byte aligned; a scalar head reaches 64). */
template <bool NT>
CMPI_AVX512 inline void unpack_pair2_avx512(const uint8_t *c0, size_t av0, const uint8_t *c1, size_t av1, size_t i0,
                                            size_t i1, float s0, float s1, float *out) {
    alignas(64) float tab[16];
    pair2_table(s0, s1, tab);
    auto pair = [&](size_t i) {
        return static_cast<unsigned>(field(c0, av0, 2, i) & 3) | static_cast<unsigned>(field(c1, av1, 2, i) & 3) << 2;
    };
    size_t i = i0;
    /* fields start on a byte (i % 4 == 0); streaming stores need 64-byte aligned output */
    for (; i < i1 && ((i & 3) || (NT && (reinterpret_cast<uintptr_t>(out + i) & 63))); ++i) out[i] = tab[pair(i)];
    const __m512i spread = _mm512_loadu_si512(kSpread[2].data()), shift = _mm512_loadu_si512(kShift[2].data());
    const __m512i three = _mm512_set1_epi8(3);
    const __m512 vtab = _mm512_load_ps(tab);
    for (; i + 64 <= i1; i += 64) {
        const __m512i r0 = _mm512_maskz_loadu_epi8(0xFFFF, c0 + i / 4), r1 = _mm512_maskz_loadu_epi8(0xFFFF, c1 + i / 4);
        const __m512i f0 = _mm512_and_si512(_mm512_multishift_epi64_epi8(shift, _mm512_permutexvar_epi8(spread, r0)), three);
        const __m512i f1 = _mm512_and_si512(_mm512_multishift_epi64_epi8(shift, _mm512_permutexvar_epi8(spread, r1)), three);
        const __m512i idx = _mm512_or_si512(f0, _mm512_slli_epi16(f1, 2)); /* bytes 0..15: no carry across bytes */
        float *o = out + i;
        store_pair2_avx512<NT>(o, _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm512_castsi512_si128(idx)), vtab));
        store_pair2_avx512<NT>(o + 16, _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32(idx, 1)), vtab));
        store_pair2_avx512<NT>(o + 32, _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32(idx, 2)), vtab));
        store_pair2_avx512<NT>(o + 48, _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32(idx, 3)), vtab));
    }
    if constexpr (NT) _mm_sfence(); /* ordered before any later store, and seen by other cores */
    for (; i < i1; ++i) out[i] = tab[pair(i)];
}

/* Decode n fields, bucket j (of B elements; B = 0: one bucket) scaled by steps[j]. */
inline void decode(const uint8_t *codes, size_t avail, size_t n, int b, const float *steps, size_t B, float *out,
                   bool add, SimdLevel lvl, int threads) {
    if (lvl > simd_detect()) lvl = simd_detect();
    if (B == 0 || B > n) B = n;
    const size_t nblocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for num_threads(threads) schedule(static) if (n >= kParallelMin && threads > 1)
    for (size_t k = 0; k < nblocks; ++k)
        decode_range(codes, avail, b, steps, B, k * kBlock, std::min(n, (k + 1) * kBlock), out, add, lvl);
}

/* out = the sum over p = 0..cnt-1, in that order, of payload p's n fields decoded (bucket j
 * of payload p scaled by steps[p][j]): the bits of decode(payload 0) followed by
 * decode(payload p, add) for each later p, but block by block, so a block of out is summed
 * while it is in cache and written to memory once. */
inline void decode_sum(const uint8_t *const *codes, const size_t *avail, int cnt, size_t n, int b,
                       const float *const *steps, size_t B, float *out, SimdLevel lvl, int threads,
                       bool stream = false) {
    if (lvl > simd_detect()) lvl = simd_detect();
    if (B == 0 || B > n) B = n;
    /* 2-bit fields (terngrad base4, qsgd bits 2), AVX-512: payloads 0 and 1 in one pass;
     * stream (CodecParams::stream_out): with non-temporal stores where the output is
     * 16-byte aligned and no later payload adds to it */
    const bool pair2 = b == 2 && cnt >= 2 && lvl == SimdLevel::avx512;
    const bool nt = pair2 && stream && cnt == 2 && (reinterpret_cast<uintptr_t>(out) & 15) == 0;
    const size_t nblocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for num_threads(threads) schedule(static) if (n >= kParallelMin && threads > 1)
    for (size_t k = 0; k < nblocks; ++k) {
        const size_t lo = k * kBlock, hi = std::min(n, (k + 1) * kBlock);
        int p = 0;
        if (pair2) {
            for (size_t r = lo; r < hi;) {
                const size_t j = r / B, end = std::min(hi, (j + 1) * B);
                if (nt)
                    unpack_pair2_avx512<true>(codes[0], avail[0], codes[1], avail[1], r, end, steps[0][j], steps[1][j],
                                              out);
                else
                    unpack_pair2_avx512<false>(codes[0], avail[0], codes[1], avail[1], r, end, steps[0][j],
                                               steps[1][j], out);
                r = end;
            }
            p = 2;
        }
        for (; p < cnt; ++p) decode_range(codes[p], avail[p], b, steps[p], B, lo, hi, out, p > 0, lvl);
    }
}

/* Encode driver. Per block k of [lo, hi): block_fn(k, lo, hi) (e.g. the statistics of the
 * block's buckets), then for every sub-block code_fn(lo, hi, bucket, int8 codes of lo..hi)
 * once per bucket run and pack_fn(codes, count, first element of the sub-block). B > 0. */
template <class BlockFn, class CodeFn, class PackFn>
void encode_blocks(size_t n, size_t B, int threads, BlockFn block_fn, CodeFn code_fn, PackFn pack_fn) {
    const size_t nblocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for num_threads(threads) schedule(static) if (n >= kParallelMin && threads > 1)
    for (size_t k = 0; k < nblocks; ++k) {
        alignas(64) int8_t codes[kSub];
        const size_t hi = std::min(n, (k + 1) * kBlock);
        block_fn(k, k * kBlock, hi);
        for (size_t lo = k * kBlock; lo < hi; lo += kSub) {
            const size_t shi = std::min(hi, lo + kSub);
            for (size_t r = lo; r < shi;) {
                const size_t j = r / B, end = std::min(shi, (j + 1) * B);
                code_fn(r, end, j, codes + (r - lo));
                r = end;
            }
            pack_fn(codes, shi - lo, lo);
        }
    }
}

template <class CodeFn, class PackFn>
void encode_blocks(size_t n, size_t B, int threads, CodeFn code_fn, PackFn pack_fn) {
    encode_blocks(
        n, B, threads, [](size_t, size_t, size_t) {}, code_fn, pack_fn);
}

/* Buckets small enough to take their statistics block by block, just before encoding them
 * (the data are then read from memory once): B divides the block. */
inline bool fused_stats(size_t nb, size_t B) {
    return nb > 1 && kBlock % B == 0;
}

/* fp64 payloads (a double per bucket, then the codes), scalar: out = (or +=, add) the sum of
 * cnt payloads in index order, block by block. scales(payload, len, &s) checks a payload and
 * reads its doubles; element i of a payload is code(codes, avail, i) * s[i / B]. */
template <class Scales, class Code>
Status decode_sum64(const uint8_t *const *in, const size_t *len, int cnt, size_t n, const CodecParams &p, double *out,
                    bool add, Scales scales, Code code) {
    if (cnt < 1) return Status::invalid_arg;
    std::vector<std::vector<double>> s(static_cast<size_t>(cnt));
    for (int k = 0; k < cnt; ++k) CMPI_CHECK(scales(in[k], len[k], &s[k]));
    const size_t nb = s[0].size(), B = nb <= 1 ? std::max<size_t>(n, 1) : p.param;
    blocks::for_each(
        n, p.threads,
        [&](size_t lo, size_t m) {
            for (int q = 0; q < cnt; ++q)
                for (size_t i = lo; i < lo + m; ++i) {
                    const double v = static_cast<double>(code(in[q] + 8 * nb, len[q] - 8 * nb, i)) * s[q][i / B];
                    out[i] = add || q > 0 ? out[i] + v : v;
                }
        },
        kBlock);
    return Status::ok;
}

}  // namespace compmpi::fields

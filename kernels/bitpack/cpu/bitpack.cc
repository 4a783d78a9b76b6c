// SPDX-License-Identifier: BSD-3-Clause
/* bitpack CPU kernels: scalar, AVX2 and AVX-512 (F/BW/VL/VBMI), chosen at run time; OpenMP
 * splits large buffers into blocks. Every path writes identical bytes (tests/unit).
 * fp32 and fp64 share the scalar reference, the rounding rule, the dispatch, the OpenMP
 * blocks and the CodecOps (templates on the element type); the vector kernels differ (fp32:
 * packs and shuffles per 32-bit lane; fp64: one byte permute per 64-bit lane, any width). */
#include "bitpack/bitpack.h"

#include "common/simd_target.h" /* <immintrin.h> */

#include <algorithm>
#include <cstring>

#include "common/blocks.h"

namespace compmpi::bitpack {
namespace {

/* The IEEE-754 pattern of an element type: unsigned word, exponent field, bytes. */
template <class T> struct Pattern;
template <> struct Pattern<float> {
    using U = uint32_t;
    static constexpr U kExp = 0x7F800000u;
};
template <> struct Pattern<double> {
    using U = uint64_t;
    static constexpr U kExp = 0x7FF0000000000000ull;
};

constexpr uint32_t kExp = Pattern<float>::kExp;
constexpr uint64_t kExp64 = Pattern<double>::kExp;

/* Round the pattern u to the nearest value whose low s bits are zero (ties to even); keep u
 * when it is NaN/Inf or when rounding would carry into the Inf exponent. The carry never
 * reaches the sign bit: below the Inf exponent a carry stops in the exponent field. */
template <class U> inline U round_bits(U u, int s, U exp) {
    if ((u & exp) == exp) return u;
    U r = u + ((U{1} << (s - 1)) - 1) + ((u >> s) & 1u);
    return (r & exp) == exp ? u : r;
}

/* ---------------------------------------------------------------- scalar */
template <class T> bool encode_scalar(const T *in, size_t n, int k, bool nearest, uint8_t *out) {
    using U = typename Pattern<T>::U;
    constexpr U exp = Pattern<T>::kExp;
    const int s = static_cast<int>(8 * sizeof(T)) - 8 * k;
    U bad = 0;
    for (size_t i = 0; i < n; ++i) {
        U u;
        std::memcpy(&u, in + i, sizeof(T));
        bad |= static_cast<U>((u & exp) == exp);
        if (nearest && s) u = round_bits(u, s, exp);
        for (int b = 0; b < k; ++b) out[i * k + b] = static_cast<uint8_t>(u >> (s + 8 * b));
    }
    return bad != 0;
}

template <class T> void decode_scalar(const uint8_t *in, size_t n, int k, T *out, bool add) {
    using U = typename Pattern<T>::U;
    const int s = static_cast<int>(8 * sizeof(T)) - 8 * k;
    for (size_t i = 0; i < n; ++i) {
        U u = 0;
        for (int b = 0; b < k; ++b) u |= static_cast<U>(in[i * k + b]) << (s + 8 * b);
        T v;
        std::memcpy(&v, &u, sizeof(T));
        out[i] = add ? out[i] + v : v;
    }
}

/* ---------------------------------------------------------------- AVX2 */
#define AVX2 __attribute__((target("avx2")))

AVX2 inline __m256i round_avx2(__m256i u, int s) {
    const __m256i exp = _mm256_set1_epi32(static_cast<int>(kExp));
    __m256i half = _mm256_set1_epi32(static_cast<int>((1u << (s - 1)) - 1));
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, s), _mm256_set1_epi32(1));
    __m256i r = _mm256_add_epi32(u, _mm256_add_epi32(half, lsb));
    __m256i keep = _mm256_or_si256(_mm256_cmpeq_epi32(_mm256_and_si256(u, exp), exp),
                                   _mm256_cmpeq_epi32(_mm256_and_si256(r, exp), exp));
    return _mm256_blendv_epi8(r, u, keep);
}

AVX2 inline __m256i bad_avx2(__m256i acc, __m256i u) {
    const __m256i exp = _mm256_set1_epi32(static_cast<int>(kExp));
    return _mm256_or_si256(acc, _mm256_cmpeq_epi32(_mm256_and_si256(u, exp), exp));
}

/* load 8 floats, note NaN/Inf, round if asked (s = dropped bits) */
AVX2 inline __m256i load_enc_avx2(const float *p, __m256i *bad, bool nearest, int s) {
    __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p));
    *bad = bad_avx2(*bad, u);
    return nearest && s ? round_avx2(u, s) : u;
}
#define ld(j) load_enc_avx2(in + (j), &bad, nearest, s)

AVX2 bool encode_avx2(const float *in, size_t n, int k, bool nearest, uint8_t *out) {
    const int s = 32 - 8 * k;
    __m256i bad = _mm256_setzero_si256();
    size_t i = 0;
    if (k == 2) {
        for (; i + 16 <= n; i += 16) {
            __m256i a = _mm256_srli_epi32(ld(i), 16), b = _mm256_srli_epi32(ld(i + 8), 16);
            __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xD8);
            _mm256_storeu_si256(reinterpret_cast<__m256i *>(out + 2 * i), p);
        }
    } else if (k == 1) {
        const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        for (; i + 32 <= n; i += 32) {
            __m256i a = _mm256_srli_epi32(ld(i), 24), b = _mm256_srli_epi32(ld(i + 8), 24);
            __m256i c = _mm256_srli_epi32(ld(i + 16), 24), d = _mm256_srli_epi32(ld(i + 24), 24);
            __m256i q = _mm256_packus_epi16(_mm256_packus_epi32(a, b), _mm256_packus_epi32(c, d));
            _mm256_storeu_si256(reinterpret_cast<__m256i *>(out + i), _mm256_permutevar8x32_epi32(q, perm));
        }
    } else if (k == 3) {
        const __m256i shuf = _mm256_setr_epi8(1, 2, 3, 5, 6, 7, 9, 10, 11, 13, 14, 15, -1, -1, -1, -1,
                                              1, 2, 3, 5, 6, 7, 9, 10, 11, 13, 14, 15, -1, -1, -1, -1);
        /* 16-byte stores of 12 useful bytes: stop while a later element still owns the
         * 4 bytes each store writes past its group. */
        for (; i + 10 <= n; i += 8) {
            __m256i p = _mm256_shuffle_epi8(ld(i), shuf);
            _mm_storeu_si128(reinterpret_cast<__m128i *>(out + 3 * i), _mm256_castsi256_si128(p));
            _mm_storeu_si128(reinterpret_cast<__m128i *>(out + 3 * i + 12), _mm256_extracti128_si256(p, 1));
        }
    } else { /* k == 4 */
        for (; i + 8 <= n; i += 8) _mm256_storeu_si256(reinterpret_cast<__m256i *>(out + 4 * i), ld(i));
    }
    bool tail_bad = encode_scalar(in + i, n - i, k, nearest, out + static_cast<size_t>(k) * i);
    return tail_bad || !_mm256_testz_si256(bad, bad);
}

#undef ld

AVX2 inline void store_dec_avx2(float *p, __m256i v, bool add) {
    __m256 f = _mm256_castsi256_ps(v);
    if (add) f = _mm256_add_ps(_mm256_loadu_ps(p), f);
    _mm256_storeu_ps(p, f);
}
#define st(j, v) store_dec_avx2(out + (j), (v), add)

AVX2 void decode_avx2(const uint8_t *in, size_t n, int k, float *out, bool add) {
    size_t i = 0;
    if (k == 2) {
        for (; i + 8 <= n; i += 8) {
            __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i *>(in + 2 * i));
            st(i, _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
        }
    } else if (k == 1) {
        for (; i + 8 <= n; i += 8) {
            __m128i h = _mm_loadl_epi64(reinterpret_cast<const __m128i *>(in + i));
            st(i, _mm256_slli_epi32(_mm256_cvtepu8_epi32(h), 24));
        }
    } else if (k == 3) {
        const __m256i shuf = _mm256_setr_epi8(-1, 0, 1, 2, -1, 3, 4, 5, -1, 6, 7, 8, -1, 9, 10, 11,
                                              -1, 0, 1, 2, -1, 3, 4, 5, -1, 6, 7, 8, -1, 9, 10, 11);
        for (; i + 10 <= n; i += 8) { /* 16-byte loads of 12 useful bytes stay inside the payload */
            __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i *>(in + 3 * i));
            __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i *>(in + 3 * i + 12));
            st(i, _mm256_shuffle_epi8(_mm256_set_m128i(hi, lo), shuf));
        }
    } else {
        for (; i + 8 <= n; i += 8) st(i, _mm256_loadu_si256(reinterpret_cast<const __m256i *>(in + 4 * i)));
    }
    decode_scalar(in + static_cast<size_t>(k) * i, n - i, k, out + i, add);
}

/* ---------------------------------------------------------------- AVX-512 */
#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi")))

AVX512 inline __m512i round_avx512(__m512i u, int s) {
    const __m512i exp = _mm512_set1_epi32(static_cast<int>(kExp));
    __m512i half = _mm512_set1_epi32(static_cast<int>((1u << (s - 1)) - 1));
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, s), _mm512_set1_epi32(1));
    __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(half, lsb));
    __mmask16 keep = _mm512_cmpeq_epi32_mask(_mm512_and_si512(u, exp), exp) |
                     _mm512_cmpeq_epi32_mask(_mm512_and_si512(r, exp), exp);
    return _mm512_mask_mov_epi32(r, keep, u);
}

#undef st

AVX512 inline __m512i load_enc_avx512(const float *p, __mmask16 *bad, bool nearest, int s) {
    const __m512i exp = _mm512_set1_epi32(static_cast<int>(kExp));
    __m512i u = _mm512_loadu_si512(p);
    *bad |= _mm512_cmpeq_epi32_mask(_mm512_and_si512(u, exp), exp);
    return nearest && s ? round_avx512(u, s) : u;
}
#define ld(j) load_enc_avx512(in + (j), &bad, nearest, s)

AVX512 bool encode_avx512(const float *in, size_t n, int k, bool nearest, uint8_t *out) {
    const int s = 32 - 8 * k;
    __mmask16 bad = 0;
    size_t i = 0;
    if (k == 2) {
        for (; i + 16 <= n; i += 16)
            _mm256_storeu_si256(reinterpret_cast<__m256i *>(out + 2 * i),
                                _mm512_cvtepi32_epi16(_mm512_srli_epi32(ld(i), 16)));
    } else if (k == 1) {
        for (; i + 16 <= n; i += 16)
            _mm_storeu_si128(reinterpret_cast<__m128i *>(out + i), _mm512_cvtepi32_epi8(_mm512_srli_epi32(ld(i), 24)));
    } else if (k == 3) {
        alignas(64) uint8_t idx[64];
        for (int j = 0; j < 64; ++j) idx[j] = static_cast<uint8_t>(j < 48 ? (j / 3) * 4 + 1 + j % 3 : 0);
        const __m512i perm = _mm512_load_si512(idx);
        const __mmask64 m48 = (1ull << 48) - 1;
        for (; i + 16 <= n; i += 16)
            _mm512_mask_storeu_epi8(out + 3 * i, m48, _mm512_permutexvar_epi8(perm, ld(i)));
    } else {
        for (; i + 16 <= n; i += 16) _mm512_storeu_si512(out + 4 * i, ld(i));
    }
    bool tail_bad = encode_scalar(in + i, n - i, k, nearest, out + static_cast<size_t>(k) * i);
    return tail_bad || bad != 0;
}

#undef ld

AVX512 inline void store_dec_avx512(float *p, __m512i v, bool add) {
    __m512 f = _mm512_castsi512_ps(v);
    if (add) f = _mm512_add_ps(_mm512_loadu_ps(p), f);
    _mm512_storeu_ps(p, f);
}
#define st(j, v) store_dec_avx512(out + (j), (v), add)

AVX512 void decode_avx512(const uint8_t *in, size_t n, int k, float *out, bool add) {
    size_t i = 0;
    if (k == 2) {
        for (; i + 16 <= n; i += 16)
            st(i, _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(in + 2 * i))), 16));
    } else if (k == 1) {
        for (; i + 16 <= n; i += 16)
            st(i, _mm512_slli_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(in + i))), 24));
    } else if (k == 3) {
        alignas(64) uint8_t idx[64];
        for (int j = 0; j < 64; ++j) idx[j] = static_cast<uint8_t>(j % 4 == 0 ? 0 : (j / 4) * 3 + j % 4 - 1);
        const __m512i perm = _mm512_load_si512(idx);
        const __mmask64 m48 = (1ull << 48) - 1, nz = 0xEEEEEEEEEEEEEEEEull; /* byte 0 of each lane = 0 */
        for (; i + 16 <= n; i += 16)
            st(i, _mm512_maskz_permutexvar_epi8(nz, perm, _mm512_maskz_loadu_epi8(m48, in + 3 * i)));
    } else {
        for (; i + 16 <= n; i += 16) st(i, _mm512_loadu_si512(in + 4 * i));
    }
    decode_scalar(in + static_cast<size_t>(k) * i, n - i, k, out + i, add);
}

#undef st

/* ---------------------------------------------------------------- fp64, AVX2
 * 4 doubles per step: vpshufb gathers the top k bytes of each 64-bit lane to the front of its
 * 128-bit half (2k useful bytes), two 16-byte stores (the second overwrites the first's
 * spare bytes); decode mirrors it with two 16-byte loads. Both stay inside the payload: the
 * loop runs while the second access ends at or before the last element's bytes. */
AVX2 inline __m256i round64_avx2(__m256i u, int s) {
    const __m256i exp = _mm256_set1_epi64x(static_cast<long long>(kExp64));
    __m256i half = _mm256_set1_epi64x(static_cast<long long>((uint64_t{1} << (s - 1)) - 1));
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi64(u, s), _mm256_set1_epi64x(1));
    __m256i r = _mm256_add_epi64(u, _mm256_add_epi64(half, lsb));
    __m256i keep = _mm256_or_si256(_mm256_cmpeq_epi64(_mm256_and_si256(u, exp), exp),
                                   _mm256_cmpeq_epi64(_mm256_and_si256(r, exp), exp));
    return _mm256_blendv_epi8(r, u, keep);
}

/* pshufb control, per 128-bit half: encode (take) puts byte 8e + 8 - k + b at e k + b;
 * decode (put) the reverse, zero below the kept bytes */
AVX2 inline __m256i shuf64_avx2(int k, bool take) {
    alignas(32) int8_t c[32];
    for (int j = 0; j < 16; ++j) {
        int v = -1;
        if (take && j < 2 * k) v = (j / k) * 8 + 8 - k + j % k;
        if (!take && j % 8 >= 8 - k) v = (j / 8) * k + j % 8 - (8 - k);
        c[j] = c[j + 16] = static_cast<int8_t>(v);
    }
    return _mm256_load_si256(reinterpret_cast<const __m256i *>(c));
}

AVX2 inline __m256i load_enc64_avx2(const double *p, __m256i *bad, bool nearest, int s) {
    const __m256i exp = _mm256_set1_epi64x(static_cast<long long>(kExp64));
    __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p));
    *bad = _mm256_or_si256(*bad, _mm256_cmpeq_epi64(_mm256_and_si256(u, exp), exp));
    return nearest && s ? round64_avx2(u, s) : u;
}

AVX2 bool encode_avx2(const double *in, size_t n, int k, bool nearest, uint8_t *out) {
    const int s = 64 - 8 * k;
    const size_t K = static_cast<size_t>(k);
    __m256i bad = _mm256_setzero_si256();
    size_t i = 0;
    if (k == 8) {
        for (; i + 4 <= n; i += 4)
            _mm256_storeu_si256(reinterpret_cast<__m256i *>(out + 8 * i), load_enc64_avx2(in + i, &bad, nearest, s));
    } else {
        const __m256i shuf = shuf64_avx2(k, true);
        for (; K * i + 2 * K + 16 <= K * n; i += 4) {
            __m256i p = _mm256_shuffle_epi8(load_enc64_avx2(in + i, &bad, nearest, s), shuf);
            _mm_storeu_si128(reinterpret_cast<__m128i *>(out + K * i), _mm256_castsi256_si128(p));
            _mm_storeu_si128(reinterpret_cast<__m128i *>(out + K * i + 2 * K), _mm256_extracti128_si256(p, 1));
        }
    }
    bool tail_bad = encode_scalar(in + i, n - i, k, nearest, out + K * i);
    return tail_bad || !_mm256_testz_si256(bad, bad);
}

AVX2 inline void store_dec64_avx2(double *p, __m256i v, bool add) {
    __m256d f = _mm256_castsi256_pd(v);
    if (add) f = _mm256_add_pd(_mm256_loadu_pd(p), f);
    _mm256_storeu_pd(p, f);
}

AVX2 void decode_avx2(const uint8_t *in, size_t n, int k, double *out, bool add) {
    const size_t K = static_cast<size_t>(k);
    size_t i = 0;
    if (k == 8) {
        for (; i + 4 <= n; i += 4)
            store_dec64_avx2(out + i, _mm256_loadu_si256(reinterpret_cast<const __m256i *>(in + 8 * i)), add);
    } else {
        const __m256i shuf = shuf64_avx2(k, false);
        for (; K * i + 2 * K + 16 <= K * n; i += 4) {
            __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i *>(in + K * i));
            __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i *>(in + K * i + 2 * K));
            store_dec64_avx2(out + i, _mm256_shuffle_epi8(_mm256_set_m128i(hi, lo), shuf), add);
        }
    }
    decode_scalar(in + K * i, n - i, k, out + i, add);
}

/* ---------------------------------------------------------------- fp64, AVX-512
 * 8 doubles per step: one VBMI vpermb between the 64-bit lanes and the 8k packed bytes,
 * with masked stores (encode) and masked loads (decode): no access outside the payload. */
AVX512 inline __m512i round64_avx512(__m512i u, int s) {
    const __m512i exp = _mm512_set1_epi64(static_cast<long long>(kExp64));
    __m512i half = _mm512_set1_epi64(static_cast<long long>((uint64_t{1} << (s - 1)) - 1));
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi64(u, s), _mm512_set1_epi64(1));
    __m512i r = _mm512_add_epi64(u, _mm512_add_epi64(half, lsb));
    __mmask8 keep = _mm512_cmpeq_epi64_mask(_mm512_and_si512(u, exp), exp) |
                    _mm512_cmpeq_epi64_mask(_mm512_and_si512(r, exp), exp);
    return _mm512_mask_mov_epi64(r, keep, u);
}

AVX512 bool encode_avx512(const double *in, size_t n, int k, bool nearest, uint8_t *out) {
    const int s = 64 - 8 * k;
    const __m512i exp = _mm512_set1_epi64(static_cast<long long>(kExp64));
    alignas(64) uint8_t idx[64];
    for (int j = 0; j < 64; ++j) idx[j] = static_cast<uint8_t>(j < 8 * k ? (j / k) * 8 + 8 - k + j % k : 0);
    const __m512i perm = _mm512_load_si512(idx);
    const __mmask64 m = k == 8 ? ~0ull : (1ull << (8 * k)) - 1;
    __mmask8 bad = 0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m512i u = _mm512_loadu_si512(in + i);
        bad |= _mm512_cmpeq_epi64_mask(_mm512_and_si512(u, exp), exp);
        if (nearest && s) u = round64_avx512(u, s);
        _mm512_mask_storeu_epi8(out + static_cast<size_t>(k) * i, m, _mm512_permutexvar_epi8(perm, u));
    }
    bool tail_bad = encode_scalar(in + i, n - i, k, nearest, out + static_cast<size_t>(k) * i);
    return tail_bad || bad != 0;
}

AVX512 void decode_avx512(const uint8_t *in, size_t n, int k, double *out, bool add) {
    alignas(64) uint8_t idx[64];
    uint64_t nz = 0; /* output bytes that come from the payload (the rest are zero) */
    for (int j = 0; j < 64; ++j) {
        const int pos = j % 8;
        idx[j] = static_cast<uint8_t>(pos >= 8 - k ? (j / 8) * k + pos - (8 - k) : 0);
        if (pos >= 8 - k) nz |= 1ull << j;
    }
    const __m512i perm = _mm512_load_si512(idx);
    const __mmask64 m = k == 8 ? ~0ull : (1ull << (8 * k)) - 1;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m512i v = _mm512_maskz_permutexvar_epi8(nz, perm, _mm512_maskz_loadu_epi8(m, in + static_cast<size_t>(k) * i));
        __m512d f = _mm512_castsi512_pd(v);
        if (add) f = _mm512_add_pd(_mm512_loadu_pd(out + i), f);
        _mm512_storeu_pd(out + i, f);
    }
    decode_scalar(in + static_cast<size_t>(k) * i, n - i, k, out + i, add);
}

/* ---------------------------------------------------------------- dispatch + OpenMP */
template <class T> bool encode_block(const T *in, size_t n, int k, bool nearest, uint8_t *out, SimdLevel lvl) {
    switch (lvl) {
        case SimdLevel::avx512: return encode_avx512(in, n, k, nearest, out);
        case SimdLevel::avx2: return encode_avx2(in, n, k, nearest, out);
        default: return encode_scalar(in, n, k, nearest, out);
    }
}
template <class T> void decode_block(const uint8_t *in, size_t n, int k, T *out, bool add, SimdLevel lvl) {
    switch (lvl) {
        case SimdLevel::avx512: return decode_avx512(in, n, k, out, add);
        case SimdLevel::avx2: return decode_avx2(in, n, k, out, add);
        default: return decode_scalar(in, n, k, out, add);
    }
}

template <class T>
Status encode_t(const T *in, size_t n, int k, bool nearest, uint8_t *out, SimdLevel lvl, int threads) {
    if (k < 1 || k > static_cast<int>(sizeof(T))) return Status::invalid_arg;
    if (lvl > simd_detect()) lvl = simd_detect();
    const bool bad = blocks::any_of(n, threads, [&](size_t lo, size_t len) {
        return encode_block(in + lo, len, k, nearest, out + lo * k, lvl);
    });
    return bad ? Status::nonfinite : Status::ok;
}

template <class T> void decode_t(const uint8_t *in, size_t n, int k, T *out, bool add, SimdLevel lvl, int threads) {
    if (lvl > simd_detect()) lvl = simd_detect();
    blocks::any_of(n, threads, [&](size_t lo, size_t len) {
        decode_block(in + lo * k, len, k, out + lo, add, lvl);
        return false;
    });
}

}  // namespace

Status encode(const float *in, size_t n, int k, bool nearest, uint8_t *out, SimdLevel lvl, int threads) {
    return encode_t(in, n, k, nearest, out, lvl, threads);
}
Status encode(const double *in, size_t n, int k, bool nearest, uint8_t *out, SimdLevel lvl, int threads) {
    return encode_t(in, n, k, nearest, out, lvl, threads);
}
void decode(const uint8_t *in, size_t n, int k, float *out, bool add, SimdLevel lvl, int threads) {
    decode_t(in, n, k, out, add, lvl, threads);
}
void decode(const uint8_t *in, size_t n, int k, double *out, bool add, SimdLevel lvl, int threads) {
    decode_t(in, n, k, out, add, lvl, threads);
}

/* ---------------------------------------------------------------- CodecOps */
namespace {

/* fp32: 8..32 bits, fp64: 16..64 bits, in whole bytes */
Status bp_check(const CodecParams &p) {
    const bool d = p.elem == Elem::f64;
    if (p.bits % 8 || p.bits < (d ? 16 : 8) || p.bits > (d ? 64 : 32)) return Status::invalid_arg;
    if (p.variant != kTrunc && p.variant != kNearest) return Status::invalid_arg;
    return p.param == 0 ? Status::ok : Status::invalid_arg;
}
size_t bp_max_payload(size_t n, const CodecParams &p) { return n * (p.bits / 8); }
template <class T>
Status bp_encode(const T *in, size_t n, const CodecParams &p, uint8_t *out, size_t cap, size_t *len) {
    if (p.elem != elem_of(in)) return Status::invalid_arg;
    CMPI_CHECK(bp_check(p));
    size_t need = n * (p.bits / 8);
    if (cap < need) return Status::invalid_arg;
    Status s = encode(in, n, p.bits / 8, p.variant == kNearest, out, p.simd, p.threads);
    *len = need;
    return s;
}
template <class T>
Status bp_decode_common(const uint8_t *in, size_t len, size_t n, const CodecParams &p, T *out, bool add) {
    if (p.elem != elem_of(out) || bp_check(p) != Status::ok) return Status::corrupt;
    if (len != n * (p.bits / 8)) return Status::corrupt;
    decode(in, n, p.bits / 8, out, add, p.simd, p.threads);
    return Status::ok;
}
template <class T> using BpDecode = DecodeOps<T, bp_decode_common<T>>;

}  // namespace
}  // namespace compmpi::bitpack

namespace compmpi {
extern const CodecOps codec_bitpack_ops = {
    CodecId::bitpack, "bitpack",
    "keep the top bits/8 bytes of each fp32 (ADT) or fp64 (16..64 bits); rounding: trunc|nearest",
    CODEC_ADAPTIVE_BITS,
    16, 8, 32, 8,
    bitpack::bp_check, bitpack::bp_max_payload, nullptr, bitpack::bp_encode<float>,
    bitpack::BpDecode<float>::decode, bitpack::BpDecode<float>::decode_add, nullptr, nullptr, nullptr,
    /* fp64: sign, 11 exponent bits and the top 4..52 mantissa bits; 32 bits (ratio 2, as 16 bits for fp32) by default */
    32, 16, 64, 8,
    nullptr, bitpack::bp_encode<double>, bitpack::BpDecode<double>::decode, bitpack::BpDecode<double>::decode_add,
    nullptr, nullptr,
};
}  // namespace compmpi

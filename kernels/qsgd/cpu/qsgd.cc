// SPDX-License-Identifier: BSD-3-Clause
/* qsgd CPU kernels: bucket norms in fixed segment order, stochastic rounding with
 * Philox-4x32-10 draws (scalar, AVX2, AVX-512), fixed-width packing. OpenMP splits the
 * buffer into fixed blocks; every path and thread count writes identical bytes.
 *
 * Per element, with N the bucket's norm (fp32, rounded up) and s the level count:
 *   r = |v| (s / N)  (<= s, within an ulp, because |v| <= N),  l = floor(r),
 *   xi = min(s, l + [u24 < (r - l) 2^24]),  u24 the element's 24-bit uniform draw
 *   (common/philox.h: 16 bits from half a Philox word, 8 more only where the 16 do not decide),
 *   code = sign(v) * xi;   decode: code * (N / s). */
#include "qsgd/qsgd.h"

#include "common/simd_target.h" /* <immintrin.h> */

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <vector>

#include "common/blocks.h"
#include "common/bucket_stats.h"
#include "common/fields.h"
#include "common/maxabs.h"
#include "common/philox.h"

namespace compmpi::qsgd {
namespace {

constexpr float kTwo24 = 16777216.0f;

/* r = s |v| / N as (|v| * pre) * rs -- a multiply, not a divide: rs = s / (N pre), pre = 2^64
 * for tiny N (so that rs stays finite), else 1. r may exceed s by an ulp: xi is clamped. */
struct Scale {
    float pre, rs, sL;
};

inline Scale make_scale(float N, float sL) {
    const float pre = N < 0x1p-60f ? 0x1p64f : 1.0f;
    return Scale{pre, sL / (N * pre), sL};
}

/* The code of element i of value v with its 16-bit draw a. */
inline int8_t q_one(float v, const Scale &sc, const philox::Stream &st, uint64_t i, uint32_t a) {
    const float r = (std::fabs(v) * sc.pre) * sc.rs;
    const float l = std::floor(r);
    const float t = (r - l) * kTwo24;
    const float up = l + (philox::below(st, i, a, philox::ceil24(t)) ? 1.0f : 0.0f);
    const float xi = up < sc.sL ? up : sc.sL; /* = _mm*_min_ps(up, sL) */
    const int k = static_cast<int>(xi);
    return static_cast<int8_t>(std::signbit(v) ? -k : k);
}
inline int8_t q_one(float v, const Scale &sc, const philox::Stream &st, uint64_t i) {
    return q_one(v, sc, st, i, philox::draw16(st, i));
}

void q_scalar(const float *in, size_t i0, size_t i1, const Scale &sc, const philox::Stream &st, int8_t *codes) {
    size_t i = i0;
    for (; i < i1 && (i & 63); ++i) codes[i - i0] = q_one(in[i], sc, st, i);
    uint32_t a[64];
    for (; i + 64 <= i1; i += 64) {
        philox::group16_scalar(st, i >> 6, a);
        for (int j = 0; j < 64; ++j) codes[i - i0 + j] = q_one(in[i + j], sc, st, i + j, a[j]);
    }
    for (; i < i1; ++i) codes[i - i0] = q_one(in[i], sc, st, i);
}

CMPI_AVX2 void q_avx2(const float *in, size_t i0, size_t i1, const Scale &sc, const philox::Stream &st, int8_t *codes) {
    size_t i = i0;
    for (; i < i1 && (i & 63); ++i) codes[i - i0] = q_one(in[i], sc, st, i);
    const __m256 vpre = _mm256_set1_ps(sc.pre), vrs = _mm256_set1_ps(sc.rs), vs = _mm256_set1_ps(sc.sL);
    const __m256 two24 = _mm256_set1_ps(kTwo24), one = _mm256_set1_ps(1.0f);
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    const philox::KeysAvx2 keys = philox::keys_avx2(st);
    philox::Draws16Avx2 d;
    for (; i + 64 <= i1; i += 64) {
        __m256i a8[8];
        philox::draws16_avx2(st, keys, i >> 6, d, a8);
        for (int h = 0; h < 2; ++h) {
            for (int l = 0; l < 4; ++l) {
                const size_t e = i + 16 * l + 8 * h;
                __m256 v = _mm256_loadu_ps(in + e);
                __m256 r = _mm256_mul_ps(_mm256_mul_ps(_mm256_and_ps(v, absmask), vpre), vrs);
                __m256 fl = _mm256_floor_ps(r);
                __m256 t = _mm256_mul_ps(_mm256_sub_ps(r, fl), two24);
                __m256 up = _mm256_and_ps(_mm256_castsi256_ps(philox::below8_avx2(st, e, a8[2 * l + h], t)), one);
                __m256i xi = _mm256_cvttps_epi32(_mm256_min_ps(_mm256_add_ps(fl, up), vs));
                __m256i sign = _mm256_srai_epi32(_mm256_castps_si256(v), 31);
                __m256i c = _mm256_sub_epi32(_mm256_xor_si256(xi, sign), sign);
                __m128i c16 = _mm_packs_epi32(_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1));
                _mm_storel_epi64(reinterpret_cast<__m128i *>(codes + (e - i0)), _mm_packs_epi16(c16, c16));
            }
        }
    }
    for (; i < i1; ++i) codes[i - i0] = q_one(in[i], sc, st, i);
}

/* 16 codes (int32 lanes, |code| <= 127) from 16 values (elements e ..) and their draws, in integers:
 * R = ceil(r 2^24) holds floor(r) in bits 24.. and C = ceil(t) = ceil((r - floor(r)) 2^24) in
 * bits 0..23 -- r 2^24 is exact (a power of two; r <= s + ulp < 2^7, so R < 2^31) and
 * floor(r) 2^24 is an integer -- the same floor and C as q_one computes in floats.
 * kPre: the tiny-norm prescale (Scale::pre != 1) is applied. */
template <bool kPre>
CMPI_AVX512 inline __m512i q16_avx512(const float *in, const philox::Stream &st, uint64_t e, __m512i a, __m512 vpre,
                                      __m512 vrs, __m512i vs) {
    const __m512 two24 = _mm512_set1_ps(kTwo24);
    __m512 v = _mm512_loadu_ps(in + e);
    __m512 x = _mm512_abs_ps(v);
    if constexpr (kPre) x = _mm512_mul_ps(x, vpre);
    const __m512 r = _mm512_mul_ps(x, vrs);
    const __m512i R = _mm512_cvt_roundps_epi32(_mm512_mul_ps(r, two24), _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC);
    const __mmask16 up = philox::below16c_avx512(st, e, a, _mm512_and_si512(R, _mm512_set1_epi32(0xFFFFFF)));
    const __m512i fl = _mm512_srli_epi32(R, 24);
    __m512i xi = _mm512_min_epi32(_mm512_mask_add_epi32(fl, up, fl, _mm512_set1_epi32(1)), vs);
    __mmask16 neg = _mm512_cmplt_epi32_mask(_mm512_castps_si512(v), _mm512_setzero_si512());
    return _mm512_mask_sub_epi32(xi, neg, _mm512_setzero_si512(), xi);
}

/* 64 codes of group e / 64 in one register, as int8 in element order. The saturating packs
 * (exact: |code| <= 127) work inside 128-bit lanes, so lane L holds the 4-byte runs
 * c0[4L..], c1[4L..], c2[4L..], c3[4L..]; one dword permute (a 4 x 4 transpose) puts run
 * (k, L) at 4k + L. 4 operations instead of 4 vpmovdb and 3 inserts. */
template <bool kPre>
CMPI_AVX512 inline __m512i q64_avx512(const float *in, const philox::Stream &st, uint64_t e, const __m512i *a,
                                      __m512 vpre, __m512 vrs, __m512i vs) {
    const __m512i c0 = q16_avx512<kPre>(in, st, e, a[0], vpre, vrs, vs);
    const __m512i c1 = q16_avx512<kPre>(in, st, e + 16, a[1], vpre, vrs, vs);
    const __m512i c2 = q16_avx512<kPre>(in, st, e + 32, a[2], vpre, vrs, vs);
    const __m512i c3 = q16_avx512<kPre>(in, st, e + 48, a[3], vpre, vrs, vs);
    const __m512i b = _mm512_packs_epi16(_mm512_packs_epi32(c0, c1), _mm512_packs_epi32(c2, c3));
    const __m512i idx = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    return _mm512_permutexvar_epi32(idx, b);
}

/* Whole groups from i (a multiple of 64) while i + 64 <= end; returns where it stopped.
 * b = 0: codes as int8 at out + (e - i0); b > 0: packed b-bit fields at out + e / 8 * b. */
template <bool kPre, int b>
CMPI_AVX512 inline size_t q_groups_avx512(const float *in, size_t i, size_t end, const Scale &sc,
                                          const philox::Stream &st, const philox::KeysAvx512 &keys, uint8_t *out,
                                          size_t i0) {
    const __m512 vpre = _mm512_set1_ps(sc.pre), vrs = _mm512_set1_ps(sc.rs);
    const __m512i vs = _mm512_set1_epi32(static_cast<int>(sc.sL));
    philox::Draws16Avx512 d;
    for (; i + 64 <= end; i += 64) {
        __m512i a[4];
        philox::draws16_avx512(st, keys, i >> 6, d, a);
        const __m512i c = q64_avx512<kPre>(in, st, i, a, vpre, vrs, vs);
        if constexpr (b == 0)
            _mm512_storeu_si512(out + (i - i0), c);
        else
            fields::pack64_avx512<b>(c, out + i / 8 * b);
    }
    return i;
}
template <int b>
CMPI_AVX512 inline size_t q_groups_avx512(const float *in, size_t i, size_t end, const Scale &sc,
                                          const philox::Stream &st, const philox::KeysAvx512 &keys, uint8_t *out,
                                          size_t i0) {
    /* pre = 1 (every norm above 2^-60): x * 1 is x, so skipping the multiply changes no bit */
    return sc.pre == 1.0f ? q_groups_avx512<false, b>(in, i, end, sc, st, keys, out, i0)
                          : q_groups_avx512<true, b>(in, i, end, sc, st, keys, out, i0);
}

CMPI_AVX512 void q_avx512(const float *in, size_t i0, size_t i1, const Scale &sc, const philox::Stream &st,
                          int8_t *codes) {
    size_t i = i0;
    for (; i < i1 && (i & 63); ++i) codes[i - i0] = q_one(in[i], sc, st, i);
    const philox::KeysAvx512 keys = philox::keys_avx512(st);
    i = q_groups_avx512<0>(in, i, i1, sc, st, keys, reinterpret_cast<uint8_t *>(codes), i0);
    for (; i < i1; ++i) codes[i - i0] = q_one(in[i], sc, st, i);
}

/* AVX-512 block [lo0, hi) straight to the packed fields, each 64-element group stored as it
 * is produced (runs start on groups: one bucket, or B % 64 == 0); the keys once per block.
 * Same bytes as q_run + fields::pack. */
template <int b>
CMPI_AVX512 void q_block_avx512(const float *in, size_t lo0, size_t hi, size_t B, const float *norm, float sL,
                                const philox::Stream &st, uint8_t *codes) {
    const philox::KeysAvx512 keys = philox::keys_avx512(st);
    for (size_t lo = lo0; lo < hi;) {
        const size_t j = lo / B, end = std::min(hi, (j + 1) * B);
        size_t i = lo;
        if (norm[j] > 0) {
            i = q_groups_avx512<b>(in, i, end, make_scale(norm[j], sL), st, keys, codes, 0);
        } else { /* all-zero bucket */
            for (; i + 64 <= end; i += 64) fields::pack64_avx512<b>(_mm512_setzero_si512(), codes + i / 8 * b);
        }
        if (i < end) { /* < 64 left */
            alignas(64) int8_t c[64];
            if (norm[j] > 0)
                q_avx512(in, i, end, make_scale(norm[j], sL), st, c);
            else
                std::memset(c, 0, end - i);
            fields::pack_scalar(c, end - i, b, codes + i / 8 * b);
        }
        lo = end;
    }
}

void q_run(const float *in, size_t i0, size_t i1, float N, float sL, const philox::Stream &st, int8_t *codes,
           SimdLevel lvl) {
    if (!(N > 0)) { /* all-zero bucket */
        std::memset(codes, 0, i1 - i0);
        return;
    }
    by_level<q_avx512, q_avx2, q_scalar>(lvl, in, i0, i1, make_scale(N, sL), st, codes);
}

/* Every b-bit field k (|k| <= 2^(b-1)) times N / s stays finite: decoders reject other norms. */
inline bool norm_fits(float N, int b) {
    const float step = N / static_cast<float>((1 << (b - 1)) - 1);
    return static_cast<double>(step) * (1 << (b - 1)) <= FLT_MAX; /* exact: a power of two, in double */
}
inline bool norm_fits(double N, int b) {
    return std::ldexp(N / static_cast<double>((1 << (b - 1)) - 1), b - 1) <= DBL_MAX;
}

/* ---------------------------------------------------------------- CodecOps */
Status qs_check(const CodecParams &p) {
    if (p.bits < 2 || p.bits > 8) return Status::invalid_arg;
    return p.variant == 0 ? Status::ok : Status::invalid_arg;
}

/* both element types: the norms (fp32 or fp64, one per bucket), then the fields */
size_t qs_max_payload(size_t n, const CodecParams &p) {
    return (p.elem == Elem::f64 ? 8 : 4) * bstats::bucket_count(n, p.param) + fields::bytes(n, p.bits);
}

Status qs_encode(const float *in, size_t n, const CodecParams &p, uint8_t *out, size_t cap, size_t *len) {
    CMPI_CHECK(qs_check(p));
    if (p.elem != Elem::f32) return Status::invalid_arg;
    if (p.bucket && p.bucket != p.param) return Status::invalid_arg; /* bucket travels in param */
    const size_t need = qs_max_payload(n, p);
    if (cap < need) return Status::invalid_arg;
    const SimdLevel lvl = std::min(p.simd, simd_detect());
    const int b = p.bits;
    const size_t nb = bstats::bucket_count(n, p.param), B = nb <= 1 ? std::max<size_t>(n, 1) : p.param;
    std::vector<float> norm(nb);
    /* false if NaN/Inf, or a norm so close to FLT_MAX that a level could overflow */
    auto norm_from = [&](size_t j, const bstats::Moments &m) {
        norm[j] = bstats::float_up(std::sqrt(m.sumsq));
        return !m.bad && norm_fits(norm[j], b);
    };
    const bool fused = fields::fused_stats(nb, B);
    if (!fused) {
        std::vector<bstats::Moments> m;
        bstats::bucket_moments(in, n, B, true, lvl, p.threads, &m);
        for (size_t j = 0; j < nb; ++j)
            if (!norm_from(j, m[j])) return Status::nonfinite;
    }
    std::vector<uint8_t> bad(fused ? (n + fields::kBlock - 1) / fields::kBlock : 0, 0);
    uint8_t *codes = out + 4 * nb;
    const float sL = static_cast<float>((1 << (b - 1)) - 1);
    const philox::Stream st = philox::make_stream(p.seed, p.stream);
    /* small buckets: norms block by block inside the encode loop (one read of the data) */
    auto block_stats = [&](size_t k, size_t lo, size_t hi) {
        if (!fused) return;
        for (size_t j = lo / B; j * B < hi; ++j)
            bad[k] |= !norm_from(j, bstats::sumsq_of(in + j * B, std::min(B, n - j * B), lvl));
    };
    if (lvl == SimdLevel::avx512 && (nb <= 1 || B % 64 == 0)) {
        const size_t nblocks = (n + fields::kBlock - 1) / fields::kBlock;
#pragma omp parallel for num_threads(p.threads) schedule(static) if (n >= fields::kParallelMin && p.threads > 1)
        for (size_t k = 0; k < nblocks; ++k) {
            const size_t lo = k * fields::kBlock, hi = std::min(n, lo + fields::kBlock);
            block_stats(k, lo, hi);
            fields::with_width(b, [&](auto w) {
                q_block_avx512<decltype(w)::value>(in, lo, hi, B, norm.data(), sL, st, codes);
            });
        }
    } else {
        fields::encode_blocks(
            n, B, p.threads, block_stats,
            [&](size_t lo, size_t hi, size_t j, int8_t *c) { q_run(in, lo, hi, norm[j], sL, st, c, lvl); },
            [&](const int8_t *c, size_t cnt, size_t lo) { fields::pack(c, cnt, b, codes + lo / 8 * b, lvl); });
    }
    for (uint8_t x : bad)
        if (x) return Status::nonfinite;
    if (nb) std::memcpy(out, norm.data(), 4 * nb);
    *len = need;
    return Status::ok;
}

/* Every check of a payload (of floats or doubles, T) before any output is written: its steps
 * (norm / s) into *step. */
template <class T>
Status qs_steps(const uint8_t *in, size_t len, size_t n, const CodecParams &p, std::vector<T> *step) {
    const Elem elem = sizeof(T) == 8 ? Elem::f64 : Elem::f32;
    if (qs_check(p) != Status::ok || p.elem != elem || len != qs_max_payload(n, p)) return Status::corrupt;
    const size_t nb = bstats::bucket_count(n, p.param);
    step->resize(nb);
    if (nb) std::memcpy(step->data(), in, sizeof(T) * nb);
    const T sL = static_cast<T>((1 << (p.bits - 1)) - 1);
    for (T &v : *step) {
        if (!std::isfinite(v) || std::signbit(v) || !norm_fits(v, p.bits)) return Status::corrupt;
        v /= sL;
    }
    return Status::ok;
}

Status qs_decode_common(const uint8_t *in, size_t len, size_t n, const CodecParams &p, float *out, bool add) {
    CMPI_CHECK(qs_check(p));
    std::vector<float> step;
    CMPI_CHECK(qs_steps(in, len, n, p, &step));
    const size_t nb = step.size();
    const SimdLevel lvl = std::min(p.simd, simd_detect());
    fields::decode(in + 4 * nb, len - 4 * nb, n, p.bits, step.data(), p.param, out, add, lvl, p.threads);
    return Status::ok;
}

using QsDecode = DecodeOps<float, qs_decode_common>;
/* The sum of cnt payloads in index order, block by block (the bits of decode + decode_add). */
Status qs_decode_sum(const uint8_t *const *in, const size_t *len, int cnt, size_t n, const CodecParams &p, float *out) {
    CMPI_CHECK(qs_check(p));
    if (cnt < 1) return Status::invalid_arg;
    std::vector<std::vector<float>> step(static_cast<size_t>(cnt));
    std::vector<const uint8_t *> codes(static_cast<size_t>(cnt));
    std::vector<size_t> avail(static_cast<size_t>(cnt));
    std::vector<const float *> steps(static_cast<size_t>(cnt));
    for (int k = 0; k < cnt; ++k) {
        CMPI_CHECK(qs_steps(in[k], len[k], n, p, &step[k]));
        codes[k] = in[k] + 4 * step[k].size();
        avail[k] = len[k] - 4 * step[k].size();
        steps[k] = step[k].data();
    }
    fields::decode_sum(codes.data(), avail.data(), cnt, n, p.bits, steps.data(), p.param, out,
                       std::min(p.simd, simd_detect()), p.threads, p.stream_out);
    return Status::ok;
}

/* Phase 2 of the two-phase allreduce re-quantises a partial sum: at 8 bits (s = 127), the
 * widest this codec has, so that the second, unbiased rounding adds little variance. */
Status qs_reduced_params(const CodecParams &p, CodecParams *out) {
    const int P = std::max(p.nranks, out->nranks);
    *out = p;
    out->nranks = P;
    out->bits = 8;
    return Status::ok;
}

/* ---------------------------------------------------------------- fp64
 * Doubles (docs/codecs/qsgd.md, "fp64"): f64 norms (8 bytes per bucket), then the same b-bit
 * fields. Per bucket, in double: N = max(||v||, max |v|), the norm from sums of (v 2^-e)^2
 * (e the exponent of max |v|: exact scaling, no overflow or underflow) so |v_i| <= N holds;
 * per element r = s |v| / N (one division), l = floor(r), xi = min(s, l + [u24 < ceil((r - l)
 * 2^24)]) with the fp32 codec's Philox draws: E[xi] = r (+ < 2^-24), unbiased as for floats.
 * Decode: k (N / s) in double. Quantisation scalar, AVX2 and AVX-512 (the same codes); norms,
 * packing and decode scalar; OpenMP over the fixed blocks of fields.h. */
/* N of v[0..cnt): max(||v||, max|v|); false on NaN/Inf */
bool norm64(const double *v, size_t cnt, double *N) {
    const uint64_t m = maxabs::scalar(v, cnt);
    if (m >= 0x7FF0000000000000ull) return false;
    const double mx = std::bit_cast<double>(m);
    if (!(mx > 0)) {
        *N = 0;
        return true;
    }
    const int e = std::ilogb(mx);
    double sq = 0;
    for (size_t i = 0; i < cnt; ++i) {
        const double y = std::ldexp(v[i], -e);
        sq += y * y;
    }
    *N = std::max(std::ldexp(std::sqrt(sq), e), mx);
    return true;
}

inline int32_t q_one64(double v, double N, double sL, const philox::Stream &st, uint64_t i, uint32_t a) {
    const double r = sL * std::fabs(v) / N, l = std::floor(r), t = (r - l) * 0x1p24;
    const uint32_t C = static_cast<uint32_t>(std::ceil(t < 0x1p24 ? t : 0x1p24));
    const double up = l + (philox::below(st, i, a, C) ? 1.0 : 0.0);
    const int32_t k = static_cast<int32_t>(up < sL ? up : sL);
    return std::signbit(v) ? -k : k;
}

void q64_scalar(const double *in, size_t i0, size_t i1, double N, double sL, const philox::Stream &st,
                int8_t *codes) {
    uint32_t a[64];
    for (size_t i = i0; i < i1;) {
        const size_t q = i >> 6, e = std::min(i1, (q + 1) << 6);
        philox::group16_scalar(st, q, a);
        for (; i < e; ++i) codes[i - i0] = static_cast<int8_t>(q_one64(in[i], N, sL, st, i, a[i & 63]));
    }
}

/* The SIMD paths: q_one64's operations lane by lane ((s |v|) / N, floor, (r - l) 2^24 clamped
 * to 2^24, ceil exact, min with s), the same draws: the same codes. */
CMPI_AVX2 inline void q64_c4_avx2(__m256d v, __m256d vN, __m256d vsL, __m128i *C, __m128i *fl) {
    const __m256d absm = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7FFFFFFFFFFFFFFFll)), two24 = _mm256_set1_pd(0x1p24);
    const __m256d r = _mm256_div_pd(_mm256_mul_pd(vsL, _mm256_and_pd(v, absm)), vN);
    const __m256d l = _mm256_floor_pd(r);
    const __m256d t = _mm256_min_pd(_mm256_mul_pd(_mm256_sub_pd(r, l), two24), two24);
    *C = _mm256_cvtpd_epi32(_mm256_ceil_pd(t)); /* integral: exact */
    *fl = _mm256_cvttpd_epi32(l);
}
CMPI_AVX2 void q64_avx2(const double *in, size_t i0, size_t i1, double N, double sL, const philox::Stream &st,
                        int8_t *codes) {
    size_t i = i0;
    for (; i < i1 && (i & 63); ++i) codes[i - i0] = static_cast<int8_t>(q_one64(in[i], N, sL, st, i, philox::draw16(st, i)));
    const __m256d vN = _mm256_set1_pd(N), vsL = _mm256_set1_pd(sL);
    const __m256i hi32 = _mm256_setr_epi32(1, 3, 5, 7, 1, 3, 5, 7), one = _mm256_set1_epi32(1);
    const __m256i vs = _mm256_set1_epi32(static_cast<int>(sL));
    const philox::KeysAvx2 keys = philox::keys_avx2(st);
    philox::Draws16Avx2 d;
    for (; i + 64 <= i1; i += 64) {
        __m256i a8[8];
        philox::draws16_avx2(st, keys, i >> 6, d, a8);
        for (int l = 0; l < 4; ++l)
            for (int h = 0; h < 2; ++h) {
                const size_t e = i + 16 * l + 8 * h;
                const __m256d v0 = _mm256_loadu_pd(in + e), v1 = _mm256_loadu_pd(in + e + 4);
                __m128i C0, C1, f0, f1;
                q64_c4_avx2(v0, vN, vsL, &C0, &f0);
                q64_c4_avx2(v1, vN, vsL, &C1, &f1);
                const __m256i hit = philox::below8c_avx2(st, e, a8[2 * l + h], _mm256_set_m128i(C1, C0));
                const __m256i xi = _mm256_min_epi32(_mm256_add_epi32(_mm256_set_m128i(f1, f0), _mm256_and_si256(hit, one)), vs);
                const __m256i top = _mm256_set_m128i(
                    _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(_mm256_castpd_si256(v1), hi32)),
                    _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(_mm256_castpd_si256(v0), hi32)));
                const __m256i sign = _mm256_srai_epi32(top, 31);
                const __m256i c = _mm256_sub_epi32(_mm256_xor_si256(xi, sign), sign);
                const __m128i c16 = _mm_packs_epi32(_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1));
                _mm_storel_epi64(reinterpret_cast<__m128i *>(codes + (e - i0)), _mm_packs_epi16(c16, c16));
            }
    }
    if (i < i1) q64_scalar(in, i, i1, N, sL, st, codes + (i - i0));
}
CMPI_AVX512 inline void q64_c8_avx512(__m512d v, __m512d vN, __m512d vsL, __m256i *C, __m256i *fl) {
    const __m512d two24 = _mm512_set1_pd(0x1p24);
    const __m512d r = _mm512_div_pd(_mm512_mul_pd(vsL, _mm512_abs_pd(v)), vN);
    const __m512d l = _mm512_roundscale_pd(r, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    const __m512d t = _mm512_min_pd(_mm512_mul_pd(_mm512_sub_pd(r, l), two24), two24);
    *C = _mm512_cvt_roundpd_epi32(t, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC);
    *fl = _mm512_cvttpd_epi32(l);
}
CMPI_AVX512 void q64_avx512(const double *in, size_t i0, size_t i1, double N, double sL, const philox::Stream &st,
                            int8_t *codes) {
    size_t i = i0;
    for (; i < i1 && (i & 63); ++i) codes[i - i0] = static_cast<int8_t>(q_one64(in[i], N, sL, st, i, philox::draw16(st, i)));
    const __m512d vN = _mm512_set1_pd(N), vsL = _mm512_set1_pd(sL);
    const __m512i vs = _mm512_set1_epi32(static_cast<int>(sL)), one = _mm512_set1_epi32(1);
    const philox::KeysAvx512 keys = philox::keys_avx512(st);
    philox::Draws16Avx512 d;
    for (; i + 64 <= i1; i += 64) {
        __m512i a[4];
        philox::draws16_avx512(st, keys, i >> 6, d, a);
        for (int l = 0; l < 4; ++l) {
            const size_t e = i + 16 * l;
            const __m512d v0 = _mm512_loadu_pd(in + e), v1 = _mm512_loadu_pd(in + e + 8);
            __m256i C0, C1, f0, f1;
            q64_c8_avx512(v0, vN, vsL, &C0, &f0);
            q64_c8_avx512(v1, vN, vsL, &C1, &f1);
            const __mmask16 hit = philox::below16c_avx512(st, e, a[l], _mm512_inserti64x4(_mm512_castsi256_si512(C0), C1, 1));
            const __m512i fl = _mm512_inserti64x4(_mm512_castsi256_si512(f0), f1, 1);
            const __m512i xi = _mm512_min_epi32(_mm512_mask_add_epi32(fl, hit, fl, one), vs);
            const __mmask16 neg = static_cast<__mmask16>(
                _mm512_cmplt_epi64_mask(_mm512_castpd_si512(v0), _mm512_setzero_si512()) |
                (_mm512_cmplt_epi64_mask(_mm512_castpd_si512(v1), _mm512_setzero_si512()) << 8));
            const __m512i c = _mm512_mask_sub_epi32(xi, neg, _mm512_setzero_si512(), xi);
            _mm_storeu_si128(reinterpret_cast<__m128i *>(codes + (e - i0)), _mm512_cvtepi32_epi8(c));
        }
    }
    if (i < i1) q64_scalar(in, i, i1, N, sL, st, codes + (i - i0));
}

void q_run64(const double *in, size_t i0, size_t i1, double N, double sL, const philox::Stream &st, int8_t *codes,
             SimdLevel lvl) {
    if (!(N > 0)) {
        std::memset(codes, 0, i1 - i0);
        return;
    }
    switch (lvl) {
        case SimdLevel::avx512: return q64_avx512(in, i0, i1, N, sL, st, codes);
        case SimdLevel::avx2: return q64_avx2(in, i0, i1, N, sL, st, codes);
        default: return q64_scalar(in, i0, i1, N, sL, st, codes);
    }
}

Status qs_encode64(const double *in, size_t n, const CodecParams &p, uint8_t *out, size_t cap, size_t *len) {
    CMPI_CHECK(qs_check(p));
    if (p.elem != Elem::f64) return Status::invalid_arg;
    if (p.bucket && p.bucket != p.param) return Status::invalid_arg;
    const size_t need = qs_max_payload(n, p);
    if (cap < need) return Status::invalid_arg;
    const int b = p.bits;
    const size_t nb = bstats::bucket_count(n, p.param), B = nb <= 1 ? std::max<size_t>(n, 1) : p.param;
    std::vector<double> norm(nb);
    int bad = 0;
#pragma omp parallel for num_threads(p.threads) schedule(static) reduction(| : bad) if (n >= fields::kParallelMin && p.threads > 1)
    for (size_t j = 0; j < nb; ++j) {
        const size_t lo = j * B, cnt = std::min(B, n - lo);
        bad |= !norm64(in + lo, cnt, &norm[j]) || !norm_fits(norm[j], b);
    }
    if (bad) return Status::nonfinite;
    const double sL = static_cast<double>((1 << (b - 1)) - 1);
    const philox::Stream st = philox::make_stream(p.seed, p.stream);
    const SimdLevel lvl = std::min(p.simd, simd_detect());
    uint8_t *codes = out + 8 * nb;
    fields::encode_blocks(
        n, B, p.threads,
        [&](size_t lo, size_t hi, size_t j, int8_t *c) { q_run64(in, lo, hi, norm[j], sL, st, c, lvl); },
        [&](const int8_t *c, size_t cnt, size_t lo) { fields::pack_scalar(c, cnt, b, codes + lo / 8 * b); });
    if (nb) std::memcpy(out, norm.data(), 8 * nb);
    *len = need;
    return Status::ok;
}

/* out = (or +=, add) the sum of cnt payloads in index order, block by block: k (N / s) */
Status decode_sum64(const uint8_t *const *in, const size_t *len, int cnt, size_t n, const CodecParams &p, double *out,
                    bool add) {
    return fields::decode_sum64(
        in, len, cnt, n, p, out, add,
        [&](const uint8_t *b, size_t l, std::vector<double> *step) { return qs_steps(b, l, n, p, step); },
        [&](const uint8_t *codes, size_t avail, size_t i) { return fields::field(codes, avail, p.bits, i); });
}
Status qs_decode_sum64(const uint8_t *const *in, const size_t *len, int cnt, size_t n, const CodecParams &p,
                       double *out) {
    return decode_sum64(in, len, cnt, n, p, out, false);
}
Status qs_decode_common64(const uint8_t *in, size_t len, size_t n, const CodecParams &p, double *out, bool add) {
    return decode_sum64(&in, &len, 1, n, p, out, add);
}
using QsDecode64 = DecodeOps<double, qs_decode_common64>;

}  // namespace
}  // namespace compmpi::qsgd

namespace compmpi {
extern const CodecOps codec_qsgd_ops = {
    CodecId::qsgd, "qsgd",
    "stochastic s-level quantisation, norm-scaled per bucket (QSGD); bits = sign + level, s = 2^(bits-1)-1",
    CODEC_STOCHASTIC,
    4, 2, 8, 1,
    qsgd::qs_check, qsgd::qs_max_payload, nullptr, qsgd::qs_encode, qsgd::QsDecode::decode,
    qsgd::QsDecode::decode_add, qsgd::qs_reduced_params, qsgd::qs_decode_sum, nullptr,
    /* fp64: f64 norms, the same fields */
    4, 2, 8, 1,
    nullptr, qsgd::qs_encode64, qsgd::QsDecode64::decode, qsgd::QsDecode64::decode_add, qsgd::qs_decode_sum64,
    nullptr,
};
}  // namespace compmpi

// SPDX-License-Identifier: BSD-3-Clause
/* rangefloat: every fp32 as an N-bit range-based float (rangefloat/rangefloat.h).
 *
 * Payload (little-endian), exactly 12 + ceil(n*N/8) bytes:
 *   0   u8    m           mantissa bits chosen for this buffer (exponent bits e = N-1-m)
 *   1   3     zero
 *   4   f32   min|x|      smallest nonzero magnitude (0 if all values are zero)
 *   8   f32   max|x|      largest magnitude; fixes eps = 2^emin with the top binade at max|x|
 *   12  ...   codes       n codes of N bits, LSB first (rangefloat.h)
 *
 * Two passes over the input: range + binade histogram (fixed blocks, integer merge), then
 * quantise + pack (fixed blocks of 2^15 values, byte aligned because 2^15 is a multiple of
 * 8). The quantiser is integer arithmetic on the fp32 bits; the AVX2/AVX-512 paths are the
 * same loops compiled for wider vectors, so every path writes identical bytes. */
#include "rangefloat/rangefloat.h"

#include <immintrin.h>

#include <algorithm>
#include <vector>

/* GCC 12 reports the unmasked AVX-512 shift/convert intrinsics' internal undefined
 * pass-through operand as "may be used uninitialized" (a false positive in its headers). */
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace compmpi::rf {
namespace {

constexpr size_t kBlock = 1 << 15;       /* values per OpenMP work item (multiple of 8) */
constexpr size_t kParallelMin = 1 << 16; /* below this one thread is faster */
constexpr size_t kChunk = 512;           /* values quantised per inner step (multiple of 8) */

/* ---------------------------------------------------------------- chunk kernels
 * The AVX2/AVX-512 versions are the scalar quantiser (rangefloat.h, integer-only) written
 * with intrinsics lane by lane, so every path produces the same codes and the same floats. */
void codes_chunk_scalar(const float *in, size_t cnt, const Format &f, uint32_t *codes) {
    const Format g = f;
    for (size_t i = 0; i < cnt; ++i) codes[i] = encode_one(in[i], g);
}
void values_chunk_scalar(const uint32_t *codes, size_t cnt, const Format &f, float *out, bool add) {
    const Format g = f;
    if (add)
        for (size_t i = 0; i < cnt; ++i) out[i] += decode_one(codes[i], g);
    else
        for (size_t i = 0; i < cnt; ++i) out[i] = decode_one(codes[i], g);
}

#define AVX2 __attribute__((target("avx2")))
#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi")))

AVX2 void codes_chunk_avx2(const float *in, size_t cnt, const Format &f, uint32_t *codes) {
    const int s = 23 - f.m;
    const __m128i vs = _mm_cvtsi32_si128(s), vsign = _mm_cvtsi32_si128(32 - f.bits);
    const __m256i half = _mm256_set1_epi32(static_cast<int>((1u << (s - 1)) - 1)), one = _mm256_set1_epi32(1);
    const __m256i rebias = _mm256_set1_epi32(static_cast<int>(f.rebias)), cmax = _mm256_set1_epi32(static_cast<int>(f.cmax));
    const __m256i minnorm = _mm256_set1_epi32(static_cast<int>(f.minnorm)), absm = _mm256_set1_epi32(0x7FFFFFFF);
    const __m256i mmask = _mm256_set1_epi32(0x7FFFFF), hidden = _mm256_set1_epi32(0x800000);
    const __m256i shbase = _mm256_set1_epi32(150 + f.emin - f.m), c31 = _mm256_set1_epi32(31);
    size_t i = 0;
    for (; i + 8 <= cnt; i += 8) {
        const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(in + i));
        const __m256i a = _mm256_and_si256(u, absm);
        __m256i r = _mm256_add_epi32(_mm256_add_epi32(a, half), _mm256_and_si256(_mm256_srl_epi32(a, vs), one));
        __m256i cn = _mm256_min_epu32(_mm256_sub_epi32(_mm256_srl_epi32(r, vs), rebias), cmax);
        const __m256i be = _mm256_srli_epi32(a, 23);
        const __m256i isden = _mm256_cmpeq_epi32(be, _mm256_setzero_si256());
        const __m256i mant = _mm256_blendv_epi8(_mm256_or_si256(_mm256_and_si256(a, mmask), hidden), a, isden);
        __m256i sh = _mm256_sub_epi32(shbase, _mm256_max_epu32(be, one));
        sh = _mm256_min_epi32(_mm256_max_epi32(sh, one), c31);
        const __m256i hs = _mm256_sub_epi32(_mm256_sllv_epi32(one, _mm256_sub_epi32(sh, one)), one);
        const __m256i cs = _mm256_srlv_epi32(
            _mm256_add_epi32(_mm256_add_epi32(mant, hs), _mm256_and_si256(_mm256_srlv_epi32(mant, sh), one)), sh);
        const __m256i sub = _mm256_cmpgt_epi32(minnorm, a); /* both below 2^31 */
        const __m256i c = _mm256_blendv_epi8(cn, cs, sub);
        const __m256i sg = _mm256_srl_epi32(_mm256_andnot_si256(absm, u), vsign);
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(codes + i), _mm256_or_si256(c, sg));
    }
    codes_chunk_scalar(in + i, cnt - i, f, codes + i);
}

AVX2 void values_chunk_avx2(const uint32_t *codes, size_t cnt, const Format &f, float *out, bool add) {
    const __m256i cmax = _mm256_set1_epi32(static_cast<int>(f.cmax)), rebias = _mm256_set1_epi32(static_cast<int>(f.rebias));
    const __m128i vn = _mm_cvtsi32_si128(f.bits - 1), vm = _mm_cvtsi32_si128(f.m), vsh = _mm_cvtsi32_si128(23 - f.m);
    const __m256 unit = _mm256_set1_ps(f.sub_unit);
    size_t i = 0;
    for (; i + 8 <= cnt; i += 8) {
        const __m256i code = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(codes + i));
        const __m256i c = _mm256_and_si256(code, cmax);
        const __m256i sign = _mm256_slli_epi32(_mm256_srl_epi32(code, vn), 31);
        const __m256i un = _mm256_sll_epi32(_mm256_add_epi32(c, rebias), vsh);
        const __m256i us = _mm256_castps_si256(_mm256_mul_ps(_mm256_cvtepi32_ps(c), unit));
        const __m256i sub = _mm256_cmpeq_epi32(_mm256_srl_epi32(c, vm), _mm256_setzero_si256());
        __m256 v = _mm256_castsi256_ps(_mm256_or_si256(_mm256_blendv_epi8(un, us, sub), sign));
        if (add) v = _mm256_add_ps(_mm256_loadu_ps(out + i), v);
        _mm256_storeu_ps(out + i, v);
    }
    values_chunk_scalar(codes + i, cnt - i, f, out + i, add);
}

AVX512 void codes_chunk_avx512(const float *in, size_t cnt, const Format &f, uint32_t *codes) {
    const int s = 23 - f.m;
    const __m128i vs = _mm_cvtsi32_si128(s), vsign = _mm_cvtsi32_si128(32 - f.bits);
    const __m512i half = _mm512_set1_epi32(static_cast<int>((1u << (s - 1)) - 1)), one = _mm512_set1_epi32(1);
    const __m512i rebias = _mm512_set1_epi32(static_cast<int>(f.rebias)), cmax = _mm512_set1_epi32(static_cast<int>(f.cmax));
    const __m512i minnorm = _mm512_set1_epi32(static_cast<int>(f.minnorm)), absm = _mm512_set1_epi32(0x7FFFFFFF);
    const __m512i mmask = _mm512_set1_epi32(0x7FFFFF), hidden = _mm512_set1_epi32(0x800000);
    const __m512i shbase = _mm512_set1_epi32(150 + f.emin - f.m), c31 = _mm512_set1_epi32(31);
    size_t i = 0;
    for (; i + 16 <= cnt; i += 16) {
        const __m512i u = _mm512_loadu_si512(in + i);
        const __m512i a = _mm512_and_si512(u, absm);
        __m512i r = _mm512_add_epi32(_mm512_add_epi32(a, half), _mm512_and_si512(_mm512_srl_epi32(a, vs), one));
        __m512i cn = _mm512_min_epu32(_mm512_sub_epi32(_mm512_srl_epi32(r, vs), rebias), cmax);
        const __m512i be = _mm512_srli_epi32(a, 23);
        const __mmask16 isnorm = _mm512_test_epi32_mask(be, be);
        const __m512i mant = _mm512_mask_or_epi32(a, isnorm, _mm512_and_si512(a, mmask), hidden);
        __m512i sh = _mm512_sub_epi32(shbase, _mm512_max_epu32(be, one));
        sh = _mm512_min_epi32(_mm512_max_epi32(sh, one), c31);
        const __m512i hs = _mm512_sub_epi32(_mm512_sllv_epi32(one, _mm512_sub_epi32(sh, one)), one);
        const __m512i cs = _mm512_srlv_epi32(
            _mm512_add_epi32(_mm512_add_epi32(mant, hs), _mm512_and_si512(_mm512_srlv_epi32(mant, sh), one)), sh);
        const __mmask16 sub = _mm512_cmplt_epu32_mask(a, minnorm);
        const __m512i c = _mm512_mask_mov_epi32(cn, sub, cs);
        const __m512i sg = _mm512_srl_epi32(_mm512_andnot_si512(absm, u), vsign);
        _mm512_storeu_si512(codes + i, _mm512_or_si512(c, sg));
    }
    codes_chunk_scalar(in + i, cnt - i, f, codes + i);
}

AVX512 void values_chunk_avx512(const uint32_t *codes, size_t cnt, const Format &f, float *out, bool add) {
    const __m512i cmax = _mm512_set1_epi32(static_cast<int>(f.cmax)), rebias = _mm512_set1_epi32(static_cast<int>(f.rebias));
    const __m128i vn = _mm_cvtsi32_si128(f.bits - 1), vm = _mm_cvtsi32_si128(f.m), vsh = _mm_cvtsi32_si128(23 - f.m);
    const __m512 unit = _mm512_set1_ps(f.sub_unit);
    size_t i = 0;
    for (; i + 16 <= cnt; i += 16) {
        const __m512i code = _mm512_loadu_si512(codes + i);
        const __m512i c = _mm512_and_si512(code, cmax);
        const __m512i sign = _mm512_slli_epi32(_mm512_srl_epi32(code, vn), 31);
        const __m512i un = _mm512_sll_epi32(_mm512_add_epi32(c, rebias), vsh);
        const __m512i us = _mm512_castps_si512(_mm512_mul_ps(_mm512_cvtepi32_ps(c), unit));
        const __m512i hi = _mm512_srl_epi32(c, vm);
        const __mmask16 norm = _mm512_test_epi32_mask(hi, hi);
        __m512 v = _mm512_castsi512_ps(_mm512_or_si512(_mm512_mask_mov_epi32(us, norm, un), sign));
        if (add) v = _mm512_add_ps(_mm512_loadu_ps(out + i), v);
        _mm512_storeu_ps(out + i, v);
    }
    values_chunk_scalar(codes + i, cnt - i, f, out + i, add);
}

void codes_chunk(const float *in, size_t cnt, const Format &f, uint32_t *codes, SimdLevel l) {
    switch (l) {
        case SimdLevel::avx512: return codes_chunk_avx512(in, cnt, f, codes);
        case SimdLevel::avx2: return codes_chunk_avx2(in, cnt, f, codes);
        default: return codes_chunk_scalar(in, cnt, f, codes);
    }
}
void values_chunk(const uint32_t *codes, size_t cnt, const Format &f, float *out, bool add, SimdLevel l) {
    switch (l) {
        case SimdLevel::avx512: return values_chunk_avx512(codes, cnt, f, out, add);
        case SimdLevel::avx2: return values_chunk_avx2(codes, cnt, f, out, add);
        default: return values_chunk_scalar(codes, cnt, f, out, add);
    }
}

/* ---------------------------------------------------------------- blocks */
void encode_block(const float *in, size_t n, const Format &f, uint8_t *out, SimdLevel l) {
    uint32_t codes[kChunk];
    for (size_t lo = 0; lo < n; lo += kChunk) {
        const size_t cnt = std::min(kChunk, n - lo);
        codes_chunk(in + lo, cnt, f, codes, l);
        pack_codes(codes, cnt, f.bits, out + (lo / 8) * f.bits);
    }
}

void decode_block(const uint8_t *in, size_t n, const Format &f, float *out, bool add, SimdLevel l) {
    uint32_t codes[kChunk];
    for (size_t lo = 0; lo < n; lo += kChunk) {
        const size_t cnt = std::min(kChunk, n - lo);
        unpack_codes(in + (lo / 8) * f.bits, cnt, f.bits, codes);
        values_chunk(codes, cnt, f, out + lo, add, l);
    }
}

/* ---------------------------------------------------------------- range statistics
 * Exact min/max/NaN-Inf over every value (vectorised), the binade histogram that only
 * steers the fit over every kHistStride-th value (fixed positions: the same sample for
 * every thread count and path). */
constexpr size_t kHistStride = 8;
constexpr size_t kHistAllBelow = 1 << 16; /* small buffers histogram every value */

struct MinMax {
    uint32_t lo = 0x7F800000u, hi = 0, bad = 0;
};

void minmax_scalar(const float *in, size_t n, MinMax *r) {
    for (size_t i = 0; i < n; ++i) {
        const uint32_t a = f2u(in[i]) & 0x7FFFFFFFu;
        r->bad |= static_cast<uint32_t>(a >= 0x7F800000u);
        r->hi = std::max(r->hi, a);
        r->lo = std::min(r->lo, a ? a : 0x7F800000u);
    }
}

AVX2 void minmax_avx2(const float *in, size_t n, MinMax *r) {
    const __m256i absm = _mm256_set1_epi32(0x7FFFFFFF), inf = _mm256_set1_epi32(0x7F800000), z = _mm256_setzero_si256();
    __m256i lo = inf, hi = z;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i a = _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(in + i)), absm);
        hi = _mm256_max_epi32(hi, a);
        lo = _mm256_min_epi32(lo, _mm256_blendv_epi8(a, inf, _mm256_cmpeq_epi32(a, z)));
    }
    alignas(32) uint32_t l[8], h[8];
    _mm256_store_si256(reinterpret_cast<__m256i *>(l), lo);
    _mm256_store_si256(reinterpret_cast<__m256i *>(h), hi);
    for (int j = 0; j < 8; ++j) {
        r->lo = std::min(r->lo, l[j]);
        r->hi = std::max(r->hi, h[j]);
    }
    r->bad |= static_cast<uint32_t>(r->hi >= 0x7F800000u);
    minmax_scalar(in + i, n - i, r);
}

AVX512 void minmax_avx512(const float *in, size_t n, MinMax *r) {
    const __m512i absm = _mm512_set1_epi32(0x7FFFFFFF), inf = _mm512_set1_epi32(0x7F800000);
    __m512i lo = inf, hi = _mm512_setzero_si512();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512i a = _mm512_and_si512(_mm512_loadu_si512(in + i), absm);
        hi = _mm512_max_epi32(hi, a);
        lo = _mm512_mask_min_epi32(lo, _mm512_test_epi32_mask(a, a), lo, a);
    }
    alignas(64) uint32_t l[16], h[16]; /* (not _mm512_reduce_*: GCC 12 warns inside them) */
    _mm512_store_si512(l, lo);
    _mm512_store_si512(h, hi);
    for (int j = 0; j < 16; ++j) {
        r->lo = std::min(r->lo, l[j]);
        r->hi = std::max(r->hi, h[j]);
    }
    r->bad |= static_cast<uint32_t>(r->hi >= 0x7F800000u);
    minmax_scalar(in + i, n - i, r);
}

void minmax(const float *in, size_t n, MinMax *r, SimdLevel l) {
    switch (l) {
        case SimdLevel::avx512: return minmax_avx512(in, n, r);
        case SimdLevel::avx2: return minmax_avx2(in, n, r);
        default: return minmax_scalar(in, n, r);
    }
}

}  // namespace

bool gather_stats(const float *in, size_t n, Stats *out, int threads, SimdLevel lvl) {
    if (lvl > simd_detect()) lvl = simd_detect();
    const size_t nb = (n + kBlock - 1) / kBlock;
    const size_t stride = n < kHistAllBelow ? 1 : kHistStride;
    Stats total;
    int bad = 0;
#pragma omp parallel num_threads(threads) if (n >= kParallelMin && threads > 1) reduction(| : bad)
    {
        Stats local;
#pragma omp for schedule(static)
        for (size_t b = 0; b < nb; ++b) {
            const size_t lo = b * kBlock, hi = std::min(n, lo + kBlock);
            MinMax mm;
            minmax(in + lo, hi - lo, &mm, lvl);
            bad |= static_cast<int>(mm.bad);
            uint32_t h[kHistBins] = {};
            for (size_t i = lo; i < hi; i += stride) { /* lo is a multiple of the stride */
                const uint32_t a = f2u(in[i]) & 0x7FFFFFFFu;
                h[a >> 23] += a != 0;
            }
            for (int k = 0; k < kHistBins; ++k) local.hist[k] += h[k];
            local.amin = std::min(local.amin, mm.lo);
            local.amax = std::max(local.amax, mm.hi);
        }
#pragma omp critical(compmpi_rf_stats)
        total.merge(local); /* min/max/integer sums: the merge order does not matter */
    }
    /* the sample may miss the largest values, which dominate the squared error */
    if (stride > 1 && total.amax && total.amax < 0x7F800000u) ++total.hist[total.amax >> 23];
    *out = total;
    return bad != 0;
}

void quantize_pack(const float *in, size_t cnt, const Format &f, uint8_t *out, SimdLevel lvl, int threads) {
    if (lvl > simd_detect()) lvl = simd_detect();
    const size_t nb = (cnt + kBlock - 1) / kBlock;
#pragma omp parallel for num_threads(threads) schedule(static) if (cnt >= kParallelMin && threads > 1)
    for (size_t b = 0; b < nb; ++b) {
        const size_t lo = b * kBlock;
        encode_block(in + lo, std::min(kBlock, cnt - lo), f, out + (lo / 8) * f.bits, lvl);
    }
}

void unpack_dequant(const uint8_t *in, size_t cnt, const Format &f, float *out, bool add, SimdLevel lvl, int threads) {
    if (lvl > simd_detect()) lvl = simd_detect();
    const size_t nb = (cnt + kBlock - 1) / kBlock;
#pragma omp parallel for num_threads(threads) schedule(static) if (cnt >= kParallelMin && threads > 1)
    for (size_t b = 0; b < nb; ++b) {
        const size_t lo = b * kBlock;
        decode_block(in + (lo / 8) * f.bits, std::min(kBlock, cnt - lo), f, out + lo, add, lvl);
    }
}

/* ---------------------------------------------------------------- paper mode */
namespace {
struct SignedRange {
    float lo = 0, hi = 0;
    bool bad = false;
};
SignedRange signed_range(const float *in, size_t n, int threads) {
    const size_t nb = (n + kBlock - 1) / kBlock;
    float lo = 0, hi = 0; /* 0 included: max <= 0 means no positive value */
    int bad = 0;
#pragma omp parallel for num_threads(threads) schedule(static) if (n >= kParallelMin && threads > 1) \
    reduction(min : lo) reduction(max : hi) reduction(| : bad)
    for (size_t b = 0; b < nb; ++b) {
        for (size_t i = b * kBlock, e = std::min(n, i + kBlock); i < e; ++i) {
            const float v = in[i];
            bad |= (f2u(v) & 0x7F800000u) == 0x7F800000u;
            lo = std::min(lo, v);
            hi = std::max(hi, v);
        }
    }
    return {lo, hi, bad != 0};
}
}  // namespace

bool paper_fit(const float *in, size_t n, int N, PaperFormat *out, int threads) {
    const SignedRange r = signed_range(in, n, threads);
    if (r.bad) return false;
    const size_t stride = paper_sample_stride(n);
    *out = paper_fit_range(in, n, stride, stride > 1, r.lo, r.hi, N);
    return true;
}

namespace {
void paper_pack(const float *in, size_t cnt, const PaperFormat &f, uint8_t *out, int threads) {
    const size_t nb = (cnt + kBlock - 1) / kBlock;
    const PackFn pack = packer(f.bits);
#pragma omp parallel for num_threads(threads) schedule(static) if (cnt >= kParallelMin && threads > 1)
    for (size_t b = 0; b < nb; ++b) {
        uint32_t codes[kChunk];
        const size_t lo = b * kBlock, hi = std::min(cnt, lo + kBlock);
        for (size_t c = lo; c < hi; c += kChunk) {
            const size_t k = std::min(kChunk, hi - c);
            for (size_t j = 0; j < k; ++j) codes[j] = paper_encode_one(in[c + j], f);
            pack(codes, k, out + (c / 8) * f.bits);
        }
    }
}
void paper_unpack(const uint8_t *in, size_t cnt, const PaperFormat &f, float *out, bool add, int threads) {
    const size_t nb = (cnt + kBlock - 1) / kBlock;
    const UnpackFn unpack = unpacker(f.bits);
#pragma omp parallel for num_threads(threads) schedule(static) if (cnt >= kParallelMin && threads > 1)
    for (size_t b = 0; b < nb; ++b) {
        uint32_t codes[kChunk];
        const size_t lo = b * kBlock, hi = std::min(cnt, lo + kBlock);
        for (size_t c = lo; c < hi; c += kChunk) {
            const size_t k = std::min(kChunk, hi - c);
            unpack(in + (c / 8) * f.bits, k, codes);
            if (add)
                for (size_t j = 0; j < k; ++j) out[c + j] += paper_decode_one(codes[j], f);
            else
                for (size_t j = 0; j < k; ++j) out[c + j] = paper_decode_one(codes[j], f);
        }
    }
}
}  // namespace

/* ---------------------------------------------------------------- either mode */
Status quantize_mode(const float *in, size_t cnt, int N, int mode, uint8_t *hdr, uint8_t *codes, SimdLevel lvl,
                     int threads) {
    if (N < kBitsMin || N > kBitsMax || !mode_ok(mode)) return Status::invalid_arg;
    if (mode == kModePaper) {
        PaperFormat f;
        if (!paper_fit(in, cnt, N, &f, threads)) return Status::nonfinite;
        write_paper(hdr, f);
        paper_pack(in, cnt, f, codes, threads);
        return Status::ok;
    }
    Stats st;
    if (gather_stats(in, cnt, &st, threads, lvl)) return Status::nonfinite;
    const int m = fit_mantissa(st, N);
    write_range(hdr, m, st);
    quantize_pack(in, cnt, make_format(N, m, st.amax), codes, lvl, threads);
    return Status::ok;
}

Status read_header(const uint8_t *hdr, int N, int mode, Quant *q) {
    if (N < kBitsMin || N > kBitsMax || !mode_ok(mode)) return Status::corrupt;
    q->mode = static_cast<uint8_t>(mode);
    return mode == kModePaper ? read_paper(hdr, N, &q->pf) : read_range(hdr, N, &q->rs);
}

void dequantize_mode(const uint8_t *codes, size_t cnt, const Quant &q, float *out, bool add, SimdLevel lvl,
                     int threads) {
    if (q.mode == kModePaper) paper_unpack(codes, cnt, q.pf, out, add, threads);
    else unpack_dequant(codes, cnt, q.rs, out, add, lvl, threads);
}

Status encode(const float *in, size_t n, int N, uint8_t *out, SimdLevel lvl, int threads, int mode) {
    return quantize_mode(in, n, N, mode, out, out + kRangeHeaderBytes, lvl, threads);
}

Status decode(const uint8_t *in, size_t len, size_t n, int N, float *out, bool add, SimdLevel lvl, int threads,
              int mode) {
    if (N < kBitsMin || N > kBitsMax) return Status::corrupt;
    if (len != kRangeHeaderBytes + packed_bytes(n, N)) return Status::corrupt;
    Quant q;
    CMPI_CHECK(read_header(in, N, mode, &q));
    dequantize_mode(in + kRangeHeaderBytes, n, q, out, add, lvl, threads);
    return Status::ok;
}

/* ---------------------------------------------------------------- CodecOps */
namespace {

/* variant: the mode (kModeRangeSign = 0, kModePaper = 1) */
Status rf_check(const CodecParams &p) {
    if (p.bits < kBitsMin || p.bits > kBitsMax) return Status::invalid_arg;
    return mode_ok(p.variant) && p.param == 0 ? Status::ok : Status::invalid_arg;
}
size_t rf_max_payload(size_t n, const CodecParams &p) { return kRangeHeaderBytes + packed_bytes(n, p.bits); }
Status rf_encode(const float *in, size_t n, const CodecParams &p, uint8_t *out, size_t cap, size_t *len) {
    CMPI_CHECK(rf_check(p));
    const size_t need = rf_max_payload(n, p);
    if (cap < need) return Status::invalid_arg;
    CMPI_CHECK(encode(in, n, p.bits, out, p.simd, p.threads, p.variant));
    *len = need;
    return Status::ok;
}
Status rf_decode(const uint8_t *in, size_t len, size_t n, const CodecParams &p, float *out, bool add) {
    if (rf_check(p) != Status::ok) return Status::corrupt;
    return decode(in, len, n, p.bits, out, add, p.simd, p.threads, p.variant);
}
using RfDecode = DecodeOps<float, rf_decode>;

}  // namespace
}  // namespace compmpi::rf

namespace compmpi {
extern const CodecOps codec_rangefloat_ops = {
    CodecId::rangefloat, "rangefloat",
    "range-based N-bit float (Wang et al.): variant 0 range_sign (sign bit, exponent window fitted to [min|x|, max|x|], round to nearest), 1 paper (Algorithm 1: offset codes, truncation, tuned eps)",
    0,
    8, rf::kBitsMin, rf::kBitsMax, 1,
    rf::rf_check, rf::rf_max_payload, nullptr, rf::rf_encode, rf::RfDecode::decode, rf::RfDecode::decode_add,
    nullptr,
};
}  // namespace compmpi

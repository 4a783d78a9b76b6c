// SPDX-License-Identifier: BSD-3-Clause
/* topk CPU kernels (payload layout in topk/topk.h).
 *
 * Encode: NaN/Inf check, exact radix select on |x| bits (topk/select.h), then one write pass
 * per 65536-value segment: compare each 64-value word against the threshold (SIMD), take
 * ties in index order, store the bitmap word and compress the kept values (AVX-512
 * vcompressps / AVX2 permute tables / scalar bit loop). Decode: validate everything first
 * (popcounts, index order, finite values) so a corrupt payload never touches out, then expand
 * per segment from a popcount prefix sum. Every path writes identical bytes.
 * fp64: the same passes on 63-bit |x| keys and 8-byte values, one template for both element
 * types; the word kernels are overloads (AVX-512 vcompresspd/vexpandpd, AVX2 permute tables of
 * 4-lane masks, the scalar loop a template). */
#include "topk/topk.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "topk/select.h"

namespace compmpi::topk {
namespace {

using sparse::kSegPos;
using sparse::kSegWords;

/* The |x| bit pattern of an element type: unsigned word, sign-clearing mask, exponent. */
template <class T> struct Bits;
template <> struct Bits<float> {
    using U = uint32_t;
    static constexpr U kAbs = 0x7FFFFFFFu, kExp = 0x7F800000u;
};
template <> struct Bits<double> {
    using U = uint64_t;
    static constexpr U kAbs = 0x7FFFFFFFFFFFFFFFull, kExp = 0x7FF0000000000000ull;
};
template <class T> using Key = typename Bits<T>::U;

/* ---------------------------------------------------------------- word kernels
 * masks:    gt/eq bit masks of |x[j]| against T for j < cnt (cnt <= 64)
 * compress: store x[j] for the set bits of mask, in order; returns the count
 * expand:   out[j] (j < cnt) = next value for set bits, 0 (or untouched when add) else */
template <class T> void masks_scalar(const T *x, size_t cnt, Key<T> T_, uint64_t *gt, uint64_t *eq) {
    uint64_t g = 0, e = 0;
    for (size_t j = 0; j < cnt; ++j) {
        Key<T> a;
        std::memcpy(&a, x + j, sizeof(T));
        a &= Bits<T>::kAbs;
        g |= static_cast<uint64_t>(a > T_) << j;
        e |= static_cast<uint64_t>(a == T_) << j;
    }
    *gt = g;
    *eq = e;
}
template <class T> size_t compress_scalar(const T *x, uint64_t mask, uint8_t *dst) {
    size_t c = 0;
    for (; mask; mask &= mask - 1) std::memcpy(dst + sizeof(T) * c++, x + __builtin_ctzll(mask), sizeof(T));
    return c;
}
template <class T> size_t expand_scalar(const uint8_t *src, uint64_t mask, size_t cnt, T *out, bool add) {
    size_t c = 0;
    for (size_t j = 0; j < cnt; ++j) {
        T v = 0;
        if ((mask >> j) & 1) std::memcpy(&v, src + sizeof(T) * c++, sizeof(T));
        else if (add) continue;
        out[j] = add ? out[j] + v : v;
    }
    return c;
}

#define AVX2 __attribute__((target("avx2,popcnt,bmi")))
#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi,popcnt,bmi")))

/* AVX2 permutation tables: for an 8-bit mask, the lanes of its set bits in order (compress)
 * and each lane's rank among the set bits (expand). */
struct Lut {
    alignas(32) uint32_t comp[256][8];
    alignas(32) uint32_t exp[256][8];
    /* the same for 4 double lanes, as dword index pairs (vpermd) */
    alignas(32) uint32_t comp64[16][8];
    alignas(32) uint32_t exp64[16][8];
    Lut() {
        for (int m = 0; m < 256; ++m) {
            int r = 0;
            for (int j = 0; j < 8; ++j) comp[m][j] = exp[m][j] = 0;
            for (int j = 0; j < 8; ++j)
                if (m >> j & 1) {
                    comp[m][r] = static_cast<uint32_t>(j);
                    exp[m][j] = static_cast<uint32_t>(r++);
                }
        }
        for (int m = 0; m < 16; ++m) {
            int r = 0;
            for (int j = 0; j < 8; ++j) comp64[m][j] = exp64[m][j] = 0;
            for (int j = 0; j < 4; ++j)
                if (m >> j & 1) {
                    comp64[m][2 * r] = static_cast<uint32_t>(2 * j);
                    comp64[m][2 * r + 1] = static_cast<uint32_t>(2 * j + 1);
                    exp64[m][2 * j] = static_cast<uint32_t>(2 * r);
                    exp64[m][2 * j + 1] = static_cast<uint32_t>(2 * r + 1);
                    ++r;
                }
        }
    }
};
const Lut &lut() {
    static const Lut l;
    return l;
}

AVX2 inline __m256i lanes_below(int c) { /* lanes 0..c-1 all ones */
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(c), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
AVX2 inline __m256i lanes_of(uint32_t m8) { /* lane j all ones if bit j */
    const __m256i bits = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    return _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(static_cast<int>(m8)), bits), bits);
}

AVX2 void masks_avx2(const float *x, size_t cnt, uint32_t T, uint64_t *gt, uint64_t *eq) {
    const __m256i absm = _mm256_set1_epi32(0x7FFFFFFF), t = _mm256_set1_epi32(static_cast<int>(T));
    uint64_t g = 0, e = 0;
    size_t j = 0;
    for (; j + 8 <= cnt; j += 8) {
        const __m256i a = _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(x + j)), absm);
        g |= static_cast<uint64_t>(static_cast<uint32_t>(_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(a, t))))) << j;
        e |= static_cast<uint64_t>(static_cast<uint32_t>(_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(a, t))))) << j;
    }
    if (j < cnt) {
        uint64_t gg, ee;
        masks_scalar(x + j, cnt - j, T, &gg, &ee);
        g |= gg << j;
        e |= ee << j;
    }
    *gt = g;
    *eq = e;
}
AVX2 size_t compress_avx2(const float *x, uint64_t mask, uint8_t *dstb) {
    float *dst = reinterpret_cast<float *>(dstb); /* only touched through unaligned intrinsics */
    const Lut &L = lut();
    size_t c = 0;
    for (int j = 0; j < 64 && (mask >> j); j += 8) {
        const uint32_t m8 = static_cast<uint32_t>(mask >> j) & 0xFF;
        if (!m8) continue;
        const int pc = __builtin_popcount(m8);
        const __m256 v = _mm256_maskload_ps(x + j, lanes_of(m8)); /* reads kept lanes only */
        const __m256i perm = _mm256_load_si256(reinterpret_cast<const __m256i *>(L.comp[m8]));
        _mm256_maskstore_ps(dst + c, lanes_below(pc), _mm256_permutevar8x32_ps(v, perm));
        c += static_cast<size_t>(pc);
    }
    return c;
}
AVX2 size_t expand_avx2(const uint8_t *srcb, uint64_t mask, size_t cnt, float *out, bool add) {
    const float *src = reinterpret_cast<const float *>(srcb); /* unaligned intrinsics only */
    const Lut &L = lut();
    size_t j = 0, c = 0;
    for (; j + 8 <= cnt; j += 8) {
        const uint32_t m8 = static_cast<uint32_t>(mask >> j) & 0xFF;
        const int pc = __builtin_popcount(m8);
        const __m256 v = _mm256_maskload_ps(src + c, lanes_below(pc));
        const __m256i perm = _mm256_load_si256(reinterpret_cast<const __m256i *>(L.exp[m8]));
        const __m256i on = lanes_of(m8);
        const __m256 e = _mm256_and_ps(_mm256_permutevar8x32_ps(v, perm), _mm256_castsi256_ps(on));
        if (add) {
            if (m8) _mm256_maskstore_ps(out + j, on, _mm256_add_ps(_mm256_loadu_ps(out + j), e)); /* kept lanes only */
        } else {
            _mm256_storeu_ps(out + j, e);
        }
        c += static_cast<size_t>(pc);
    }
    if (j < cnt) c += expand_scalar(srcb + 4 * c, mask >> j, cnt - j, out + j, add);
    return c;
}

AVX512 void masks_avx512(const float *x, size_t cnt, uint32_t T, uint64_t *gt, uint64_t *eq) {
    const __m512i absm = _mm512_set1_epi32(0x7FFFFFFF), t = _mm512_set1_epi32(static_cast<int>(T));
    uint64_t g = 0, e = 0;
    for (size_t j = 0; j < cnt; j += 16) {
        const __mmask16 valid = cnt - j >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << (cnt - j)) - 1);
        const __m512i a = _mm512_and_si512(_mm512_maskz_loadu_epi32(valid, x + j), absm);
        g |= static_cast<uint64_t>(_mm512_mask_cmpgt_epi32_mask(valid, a, t)) << j;
        e |= static_cast<uint64_t>(_mm512_mask_cmpeq_epi32_mask(valid, a, t)) << j;
    }
    *gt = g;
    *eq = e;
}
AVX512 size_t compress_avx512(const float *x, uint64_t mask, uint8_t *dstb) {
    float *dst = reinterpret_cast<float *>(dstb); /* only touched through unaligned intrinsics */
    size_t c = 0;
    for (int j = 0; j < 64 && (mask >> j); j += 16) {
        const __mmask16 m = static_cast<__mmask16>(mask >> j);
        if (!m) continue;
        const int pc = __builtin_popcount(m);
        /* compress in a register + masked store: vcompressps to memory is slow on some cores */
        const __m512 v = _mm512_maskz_compress_ps(m, _mm512_maskz_loadu_ps(m, x + j));
        _mm512_mask_storeu_ps(dst + c, static_cast<__mmask16>((1u << pc) - 1), v);
        c += static_cast<size_t>(pc);
    }
    return c;
}
AVX512 size_t expand_avx512(const uint8_t *srcb, uint64_t mask, size_t cnt, float *out, bool add) {
    const float *src = reinterpret_cast<const float *>(srcb); /* unaligned intrinsics only */
    size_t c = 0;
    for (size_t j = 0; j < cnt; j += 16) {
        const __mmask16 valid = cnt - j >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << (cnt - j)) - 1);
        const __mmask16 m = static_cast<__mmask16>(mask >> j) & valid;
        const int pc = __builtin_popcount(m);
        const __m512 v = _mm512_maskz_expand_ps(m, _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << pc) - 1), src + c));
        if (add) {
            if (m) _mm512_mask_storeu_ps(out + j, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, out + j), v));
        } else {
            _mm512_mask_storeu_ps(out + j, valid, v);
        }
        c += static_cast<size_t>(pc);
    }
    return c;
}

/* ---- fp64 word kernels */
AVX2 inline __m256i lanes64_below(int c) { /* 64-bit lanes 0..c-1 all ones */
    return _mm256_cmpgt_epi64(_mm256_set1_epi64x(c), _mm256_setr_epi64x(0, 1, 2, 3));
}
AVX2 inline __m256i lanes64_of(uint32_t m4) { /* 64-bit lane j all ones if bit j */
    const __m256i bits = _mm256_setr_epi64x(1, 2, 4, 8);
    return _mm256_cmpeq_epi64(_mm256_and_si256(_mm256_set1_epi64x(m4), bits), bits);
}

AVX2 void masks_avx2(const double *x, size_t cnt, uint64_t T, uint64_t *gt, uint64_t *eq) {
    const __m256i absm = _mm256_set1_epi64x(0x7FFFFFFFFFFFFFFFll), t = _mm256_set1_epi64x(static_cast<long long>(T));
    uint64_t g = 0, e = 0;
    size_t j = 0;
    for (; j + 4 <= cnt; j += 4) { /* keys < 2^63: the signed compare is the unsigned one */
        const __m256i a = _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(x + j)), absm);
        g |= static_cast<uint64_t>(static_cast<uint32_t>(_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpgt_epi64(a, t))))) << j;
        e |= static_cast<uint64_t>(static_cast<uint32_t>(_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpeq_epi64(a, t))))) << j;
    }
    if (j < cnt) {
        uint64_t gg, ee;
        masks_scalar(x + j, cnt - j, T, &gg, &ee);
        g |= gg << j;
        e |= ee << j;
    }
    *gt = g;
    *eq = e;
}
AVX2 size_t compress_avx2(const double *x, uint64_t mask, uint8_t *dstb) {
    double *dst = reinterpret_cast<double *>(dstb); /* only touched through unaligned intrinsics */
    const Lut &L = lut();
    size_t c = 0;
    for (int j = 0; j < 64 && (mask >> j); j += 4) {
        const uint32_t m4 = static_cast<uint32_t>(mask >> j) & 0xF;
        if (!m4) continue;
        const int pc = __builtin_popcount(m4);
        const __m256d v = _mm256_maskload_pd(x + j, lanes64_of(m4)); /* reads kept lanes only */
        const __m256i perm = _mm256_load_si256(reinterpret_cast<const __m256i *>(L.comp64[m4]));
        const __m256d p = _mm256_castsi256_pd(_mm256_permutevar8x32_epi32(_mm256_castpd_si256(v), perm));
        _mm256_maskstore_pd(dst + c, lanes64_below(pc), p);
        c += static_cast<size_t>(pc);
    }
    return c;
}
AVX2 size_t expand_avx2(const uint8_t *srcb, uint64_t mask, size_t cnt, double *out, bool add) {
    const double *src = reinterpret_cast<const double *>(srcb); /* unaligned intrinsics only */
    const Lut &L = lut();
    size_t j = 0, c = 0;
    for (; j + 4 <= cnt; j += 4) {
        const uint32_t m4 = static_cast<uint32_t>(mask >> j) & 0xF;
        const int pc = __builtin_popcount(m4);
        const __m256d v = _mm256_maskload_pd(src + c, lanes64_below(pc));
        const __m256i perm = _mm256_load_si256(reinterpret_cast<const __m256i *>(L.exp64[m4]));
        const __m256i on = lanes64_of(m4);
        const __m256d e = _mm256_and_pd(_mm256_castsi256_pd(_mm256_permutevar8x32_epi32(_mm256_castpd_si256(v), perm)),
                                        _mm256_castsi256_pd(on));
        if (add) {
            if (m4) _mm256_maskstore_pd(out + j, on, _mm256_add_pd(_mm256_loadu_pd(out + j), e)); /* kept lanes only */
        } else {
            _mm256_storeu_pd(out + j, e);
        }
        c += static_cast<size_t>(pc);
    }
    if (j < cnt) c += expand_scalar(srcb + 8 * c, mask >> j, cnt - j, out + j, add);
    return c;
}

AVX512 void masks_avx512(const double *x, size_t cnt, uint64_t T, uint64_t *gt, uint64_t *eq) {
    const __m512i absm = _mm512_set1_epi64(0x7FFFFFFFFFFFFFFFll), t = _mm512_set1_epi64(static_cast<long long>(T));
    uint64_t g = 0, e = 0;
    for (size_t j = 0; j < cnt; j += 8) {
        const __mmask8 valid = cnt - j >= 8 ? 0xFF : static_cast<__mmask8>((1u << (cnt - j)) - 1);
        const __m512i a = _mm512_and_si512(_mm512_maskz_loadu_epi64(valid, x + j), absm);
        g |= static_cast<uint64_t>(_mm512_mask_cmpgt_epu64_mask(valid, a, t)) << j;
        e |= static_cast<uint64_t>(_mm512_mask_cmpeq_epu64_mask(valid, a, t)) << j;
    }
    *gt = g;
    *eq = e;
}
AVX512 size_t compress_avx512(const double *x, uint64_t mask, uint8_t *dstb) {
    double *dst = reinterpret_cast<double *>(dstb); /* only touched through unaligned intrinsics */
    size_t c = 0;
    for (int j = 0; j < 64 && (mask >> j); j += 8) {
        const __mmask8 m = static_cast<__mmask8>(mask >> j);
        if (!m) continue;
        const int pc = __builtin_popcount(m);
        const __m512d v = _mm512_maskz_compress_pd(m, _mm512_maskz_loadu_pd(m, x + j));
        _mm512_mask_storeu_pd(dst + c, static_cast<__mmask8>((1u << pc) - 1), v);
        c += static_cast<size_t>(pc);
    }
    return c;
}
AVX512 size_t expand_avx512(const uint8_t *srcb, uint64_t mask, size_t cnt, double *out, bool add) {
    const double *src = reinterpret_cast<const double *>(srcb); /* unaligned intrinsics only */
    size_t c = 0;
    for (size_t j = 0; j < cnt; j += 8) {
        const __mmask8 valid = cnt - j >= 8 ? 0xFF : static_cast<__mmask8>((1u << (cnt - j)) - 1);
        const __mmask8 m = static_cast<__mmask8>(mask >> j) & valid;
        const int pc = __builtin_popcount(m);
        const __m512d v = _mm512_maskz_expand_pd(m, _mm512_maskz_loadu_pd(static_cast<__mmask8>((1u << pc) - 1), src + c));
        if (add) {
            if (m) _mm512_mask_storeu_pd(out + j, m, _mm512_add_pd(_mm512_maskz_loadu_pd(m, out + j), v));
        } else {
            _mm512_mask_storeu_pd(out + j, valid, v);
        }
        c += static_cast<size_t>(pc);
    }
    return c;
}

template <class T> struct Kernels {
    void (*masks)(const T *, size_t, Key<T>, uint64_t *, uint64_t *);
    size_t (*compress)(const T *, uint64_t, uint8_t *);       /* packed side: any alignment */
    size_t (*expand)(const uint8_t *, uint64_t, size_t, T *, bool); /* returns values consumed */
};
template <class T> Kernels<T> kernels(SimdLevel l) {
    if (l > simd_detect()) l = simd_detect();
    switch (l) {
        case SimdLevel::avx512: return {masks_avx512, compress_avx512, expand_avx512};
        case SimdLevel::avx2: return {masks_avx2, compress_avx2, expand_avx2};
        default: return {masks_scalar<T>, compress_scalar<T>, expand_scalar<T>};
    }
}


/* ---------------------------------------------------------------- helpers */
template <class T> bool any_nonfinite_par(const T *x, size_t n, int threads) {
    const size_t nseg = sparse::segs_of(n);
    int bad = 0;
#pragma omp parallel for num_threads(threads) schedule(static) reduction(| : bad) if (n >= sparse::kParallelMin && threads > 1)
    for (size_t s = 0; s < nseg; ++s) {
        const size_t lo = s * kSegPos;
        bad |= any_nonfinite(x + lo, std::min(kSegPos, n - lo));
    }
    return bad != 0;
}

/* cnt values of type T at p (any alignment): none NaN/Inf */
template <class T> bool all_finite_bytes(const uint8_t *p, size_t cnt, int threads) {
    const size_t nseg = sparse::segs_of(cnt);
    int bad = 0;
#pragma omp parallel for num_threads(threads) schedule(static) reduction(| : bad) if (cnt >= sparse::kParallelMin && threads > 1)
    for (size_t s = 0; s < nseg; ++s) {
        const size_t lo = s * kSegPos, hi = std::min(cnt, lo + kSegPos);
        Key<T> b = 0;
        for (size_t i = lo; i < hi; ++i) {
            Key<T> u;
            std::memcpy(&u, p + sizeof(T) * i, sizeof(T));
            b |= static_cast<Key<T>>((u & Bits<T>::kExp) == Bits<T>::kExp);
        }
        bad |= static_cast<int>(b);
    }
    return bad == 0;
}

void put64(uint8_t *p, uint64_t v) { std::memcpy(p, &v, 8); }
uint64_t get64(const uint8_t *p) { uint64_t v; std::memcpy(&v, p, 8); return v; }

template <class T>
Status encode_t(const T *in, size_t n, double theta, uint8_t *out, size_t cap, size_t *len, SimdLevel lvl,
                int threads) {
    constexpr size_t vb = sizeof(T);
    if (!(theta >= 0.0 && theta < 1.0)) return Status::invalid_arg;
    const uint64_t k = sparse::keep_count(n, theta);
    const size_t need = payload_bytes(n, k, vb);
    if (cap < need) return Status::invalid_arg;
    const Key<T> *u = reinterpret_cast<const Key<T> *>(in);
    sparse::SelectionT<Key<T>> sel;
    /* the select's first pass histograms every |x|: NaN/Inf land in its top buckets */
    sparse::select_topk(n, k, [u](size_t i) { return u[i] & Bits<T>::kAbs; }, threads, &sel);
    if (sel.nonfinite || (k == 0 && any_nonfinite_par(in, n, threads))) return Status::nonfinite;

    const Form form = choose_form(n, k, vb);
    std::memset(out, 0, kHeaderBytes);
    out[0] = form;
    put64(out + 8, k);
    uint8_t *body = out + kHeaderBytes;
    const size_t nw = sparse::words_of(n), nseg = sparse::segs_of(n);
    const Kernels<T> K = kernels<T>(lvl);
    /* the packed side is bytes: blobs may sit at any offset of a receive buffer */
    uint8_t *vals = body + (form == kBitmap ? 8 * nw : form == kList ? 4 * k : 0);
    const bool keep_none = k == 0;

#pragma omp parallel for num_threads(threads) schedule(static) if (n >= sparse::kParallelMin && threads > 1)
    for (size_t s = 0; s < nseg; ++s) {
        uint64_t rem = sel.take[s];
        size_t c = sel.off[s]; /* rank of the next kept value */
        const size_t w_lo = s * kSegWords, w_hi = std::min(nw, w_lo + kSegWords);
        for (size_t w = w_lo; w < w_hi; ++w) {
            const size_t base = w * 64, cnt = std::min<size_t>(64, n - base);
            uint64_t gt = 0, eq = 0, word = 0;
            if (!keep_none) {
                K.masks(in + base, cnt, sel.T, &gt, &eq);
                word = gt | (eq ? sparse::take_ties(eq, &rem) : 0);
            }
            if (form == kBitmap) {
                put64(body + 8 * w, word);
                c += K.compress(in + base, word, vals + vb * c);
            } else if (form == kList) {
                K.compress(in + base, word, vals + vb * c);
                for (uint64_t m = word; m; m &= m - 1) {
                    const uint32_t i = static_cast<uint32_t>(base + __builtin_ctzll(m));
                    std::memcpy(body + 4 * c++, &i, 4);
                }
            } else {
                for (size_t j = 0; j < cnt; ++j) {
                    const T v = (word >> j) & 1 ? in[base + j] : T(0);
                    std::memcpy(vals + vb * (base + j), &v, vb);
                }
            }
        }
    }
    *len = need;
    return Status::ok;
}

template <class T>
Status decode_t(const uint8_t *in, size_t len, size_t n, T *out, bool add, SimdLevel lvl, int threads) {
    constexpr size_t vb = sizeof(T);
    if (len < kHeaderBytes) return Status::corrupt;
    const uint8_t form = in[0];
    for (int i = 1; i < 8; ++i)
        if (in[i]) return Status::corrupt;
    const uint64_t k = get64(in + 8);
    if (k > n || form > kDense || form != choose_form(n, k, vb) || len != payload_bytes(n, k, vb)) return Status::corrupt;
    const uint8_t *body = in + kHeaderBytes;
    const size_t nw = sparse::words_of(n), nseg = sparse::segs_of(n);
    const bool par = n >= sparse::kParallelMin && threads > 1;
    const Kernels<T> K = kernels<T>(lvl);
    const bool hw = std::min(lvl, simd_detect()) >= SimdLevel::avx2; /* POPCNT */

    if (form == kDense) {
        if (!all_finite_bytes<T>(body, n, threads)) return Status::corrupt;
#pragma omp parallel for num_threads(threads) schedule(static) if (par)
        for (size_t s = 0; s < nseg; ++s) {
            const size_t lo = s * kSegPos, hi = std::min(n, lo + kSegPos);
            if (!add) {
                std::memcpy(out + lo, body + vb * lo, (hi - lo) * vb);
                continue;
            }
            for (size_t i = lo; i < hi; ++i) {
                T v;
                std::memcpy(&v, body + vb * i, vb);
                out[i] += v;
            }
        }
        return Status::ok;
    }

    if (form == kList) {
        auto idx = [body](size_t i) { uint32_t v; std::memcpy(&v, body + 4 * i, 4); return v; };
        const uint8_t *vals = body + 4 * k;
        if (!all_finite_bytes<T>(vals, k, threads)) return Status::corrupt;
        int bad = 0;
        const size_t kseg = sparse::segs_of(k);
#pragma omp parallel for num_threads(threads) schedule(static) reduction(| : bad) if (k >= sparse::kParallelMin && threads > 1)
        for (size_t s = 0; s < kseg; ++s) {
            const size_t lo = s * kSegPos, hi = std::min<size_t>(k, lo + kSegPos);
            uint32_t b = 0;
            for (size_t i = lo; i < hi; ++i) {
                b |= static_cast<uint32_t>(idx(i) >= n);
                if (i + 1 < k) b |= static_cast<uint32_t>(idx(i + 1) <= idx(i));
            }
            bad |= static_cast<int>(b);
        }
        if (bad) return Status::corrupt;
        if (!add) {
#pragma omp parallel for num_threads(threads) schedule(static) if (par)
            for (size_t s = 0; s < nseg; ++s) {
                const size_t lo = s * kSegPos;
                std::memset(out + lo, 0, std::min(kSegPos, n - lo) * vb);
            }
        }
#pragma omp parallel for num_threads(threads) schedule(static) if (k >= sparse::kParallelMin && threads > 1)
        for (size_t s = 0; s < kseg; ++s) /* indices are distinct: no two threads touch one value */
            for (size_t i = s * kSegPos, hi = std::min<size_t>(k, i + kSegPos); i < hi; ++i) {
                T v;
                std::memcpy(&v, vals + vb * i, vb);
                if (add) out[idx(i)] += v;
                else out[idx(i)] = v;
            }
        return Status::ok;
    }

    /* bitmap: popcount per segment (validating the bits past n), prefix sum, expand */
    std::vector<uint64_t> cnt(nseg), off(nseg);
    const uint64_t tail = n % 64 ? ~((1ull << (n % 64)) - 1) : 0;
    int bad = 0;
#pragma omp parallel for num_threads(threads) schedule(static) reduction(| : bad) if (par)
    for (size_t s = 0; s < nseg; ++s) {
        const size_t w = s * kSegWords;
        cnt[s] = sparse::popcount_words(body + 8 * w, std::min(nw, w + kSegWords) - w, hw);
        if (s + 1 == nseg && (get64(body + 8 * (nw - 1)) & tail)) bad = 1;
    }
    uint64_t total = 0;
    for (size_t s = 0; s < nseg; ++s) {
        off[s] = total;
        total += cnt[s];
    }
    if (bad || total != k) return Status::corrupt;
    const uint8_t *vals = body + 8 * nw;
    if (!all_finite_bytes<T>(vals, k, threads)) return Status::corrupt;
#pragma omp parallel for num_threads(threads) schedule(static) if (par)
    for (size_t s = 0; s < nseg; ++s) {
        size_t c = off[s];
        for (size_t w = s * kSegWords, hi = std::min(nw, w + kSegWords); w < hi; ++w) {
            const uint64_t m = get64(body + 8 * w);
            const size_t base = w * 64;
            c += K.expand(vals + vb * c, m, std::min<size_t>(64, n - base), out + base, add);
        }
    }
    return Status::ok;
}

}  // namespace

Status encode(const float *in, size_t n, double theta, uint8_t *out, size_t cap, size_t *len, SimdLevel lvl,
              int threads) {
    return encode_t(in, n, theta, out, cap, len, lvl, threads);
}
Status encode(const double *in, size_t n, double theta, uint8_t *out, size_t cap, size_t *len, SimdLevel lvl,
              int threads) {
    return encode_t(in, n, theta, out, cap, len, lvl, threads);
}
Status decode(const uint8_t *in, size_t len, size_t n, float *out, bool add, SimdLevel lvl, int threads) {
    return decode_t(in, len, n, out, add, lvl, threads);
}
Status decode(const uint8_t *in, size_t len, size_t n, double *out, bool add, SimdLevel lvl, int threads) {
    return decode_t(in, len, n, out, add, lvl, threads);
}

/* ---------------------------------------------------------------- CodecOps */
namespace {

Status tk_check(const CodecParams &p) {
    return p.bits == 0 && p.variant == 0 && p.param == 0 ? Status::ok : Status::invalid_arg;
}
/* Exact for the encoder's theta; a decoder (theta = 0 from the header) gets the bound for
 * k = n, which is >= the size for every k. */
size_t tk_max_payload(size_t n, const CodecParams &p) {
    const double theta = p.theta >= 0.0f && p.theta < 1.0f ? p.theta : 0.0;
    return payload_bytes(n, sparse::keep_count(n, theta), elem_bytes(p.elem));
}
template <class T>
Status tk_encode(const T *in, size_t n, const CodecParams &p, uint8_t *out, size_t cap, size_t *len) {
    if (p.elem != elem_of(in)) return Status::invalid_arg;
    CMPI_CHECK(tk_check(p));
    return encode(in, n, p.theta, out, cap, len, p.simd, p.threads);
}
template <class T>
Status tk_decode_common(const uint8_t *in, size_t len, size_t n, const CodecParams &p, T *out, bool add) {
    if (p.elem != elem_of(out) || tk_check(p) != Status::ok) return Status::corrupt;
    return decode(in, len, n, out, add, p.simd, p.threads);
}
template <class T> using TkDecode = DecodeOps<T, tk_decode_common<T>>;

}  // namespace
}  // namespace compmpi::topk

namespace compmpi {
extern const CodecOps codec_topk_ops = {
    CodecId::topk, "topk",
    "magnitude top-k (Aji & Heafield): keep ceil((1-theta) n) values exactly, as index list, bitmap or dense",
    CODEC_SPARSE | CODEC_SPATIAL_SPARSE, /* decoded data is exactly sparse: the allreduce may sum it sparsely */
    0, 0, 0, 0,
    topk::tk_check, topk::tk_max_payload, nullptr, topk::tk_encode<float>, topk::TkDecode<float>::decode,
    topk::TkDecode<float>::decode_add, nullptr, nullptr, nullptr,
    /* fp64: the kept values as exact f64, no width */
    0, 0, 0, 0,
    nullptr, topk::tk_encode<double>, topk::TkDecode<double>::decode, topk::TkDecode<double>::decode_add, nullptr,
    nullptr,
};
}  // namespace compmpi

/* topk CPU kernels (payload layout in topk/topk.h).
 *
 * Encode: NaN/Inf check, exact radix select on |x| bits (topk/select.h), then one write pass
 * per 65536-value segment: compare each 64-value word against the threshold (SIMD), take
 * ties in index order, store the bitmap word and compress the kept values (AVX-512
 * vcompressps / AVX2 permute tables / scalar bit loop). Decode: validate everything first
 * (popcounts, index order, finite values) so a corrupt payload never touches out, then expand
 * per segment from a popcount prefix sum. Every path writes identical bytes. */
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

inline uint32_t f2u(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }

/* ---------------------------------------------------------------- word kernels
 * masks:    gt/eq bit masks of |x[j]| against T for j < cnt (cnt <= 64)
 * compress: store x[j] for the set bits of mask, in order; returns the count
 * expand:   out[j] (j < cnt) = next value for set bits, 0 (or untouched when add) else */
void masks_scalar(const float *x, size_t cnt, uint32_t T, uint64_t *gt, uint64_t *eq) {
    uint64_t g = 0, e = 0;
    for (size_t j = 0; j < cnt; ++j) {
        const uint32_t a = f2u(x[j]) & 0x7FFFFFFFu;
        g |= static_cast<uint64_t>(a > T) << j;
        e |= static_cast<uint64_t>(a == T) << j;
    }
    *gt = g;
    *eq = e;
}
size_t compress_scalar(const float *x, uint64_t mask, uint8_t *dst) {
    size_t c = 0;
    for (; mask; mask &= mask - 1) std::memcpy(dst + 4 * c++, x + __builtin_ctzll(mask), 4);
    return c;
}
size_t expand_scalar(const uint8_t *src, uint64_t mask, size_t cnt, float *out, bool add) {
    size_t c = 0;
    for (size_t j = 0; j < cnt; ++j) {
        float v = 0.0f;
        if ((mask >> j) & 1) std::memcpy(&v, src + 4 * c++, 4);
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

struct Kernels {
    void (*masks)(const float *, size_t, uint32_t, uint64_t *, uint64_t *);
    size_t (*compress)(const float *, uint64_t, uint8_t *);       /* packed side: any alignment */
    size_t (*expand)(const uint8_t *, uint64_t, size_t, float *, bool); /* returns values consumed */
};
Kernels kernels(SimdLevel l) {
    if (l > simd_detect()) l = simd_detect();
    switch (l) {
        case SimdLevel::avx512: return {masks_avx512, compress_avx512, expand_avx512};
        case SimdLevel::avx2: return {masks_avx2, compress_avx2, expand_avx2};
        default: return {masks_scalar, compress_scalar, expand_scalar};
    }
}


/* ---------------------------------------------------------------- helpers */
bool any_nonfinite_par(const float *x, size_t n, int threads) {
    const size_t nseg = sparse::segs_of(n);
    int bad = 0;
#pragma omp parallel for num_threads(threads) schedule(static) reduction(| : bad) if (n >= sparse::kParallelMin && threads > 1)
    for (size_t s = 0; s < nseg; ++s) {
        const size_t lo = s * kSegPos;
        bad |= any_nonfinite(x + lo, std::min(kSegPos, n - lo));
    }
    return bad != 0;
}

bool all_finite_bytes(const uint8_t *p, size_t cnt, int threads) {
    const size_t nseg = sparse::segs_of(cnt);
    int bad = 0;
#pragma omp parallel for num_threads(threads) schedule(static) reduction(| : bad) if (cnt >= sparse::kParallelMin && threads > 1)
    for (size_t s = 0; s < nseg; ++s) {
        const size_t lo = s * kSegPos, hi = std::min(cnt, lo + kSegPos);
        uint32_t b = 0;
        for (size_t i = lo; i < hi; ++i) {
            uint32_t u;
            std::memcpy(&u, p + 4 * i, 4);
            b |= static_cast<uint32_t>((u & 0x7F800000u) == 0x7F800000u);
        }
        bad |= static_cast<int>(b);
    }
    return bad == 0;
}

void put64(uint8_t *p, uint64_t v) { std::memcpy(p, &v, 8); }
uint64_t get64(const uint8_t *p) { uint64_t v; std::memcpy(&v, p, 8); return v; }

}  // namespace

Status encode(const float *in, size_t n, double theta, uint8_t *out, size_t cap, size_t *len, SimdLevel lvl,
              int threads) {
    if (!(theta >= 0.0 && theta < 1.0)) return Status::invalid_arg;
    const uint64_t k = sparse::keep_count(n, theta);
    const size_t need = payload_bytes(n, k);
    if (cap < need) return Status::invalid_arg;
    const uint32_t *u = reinterpret_cast<const uint32_t *>(in);
    sparse::Selection sel;
    /* the select's first pass histograms every |x|: NaN/Inf land in its top buckets */
    sparse::select_topk(n, k, [u](size_t i) { return u[i] & 0x7FFFFFFFu; }, threads, &sel);
    if (sel.nonfinite || (k == 0 && any_nonfinite_par(in, n, threads))) return Status::nonfinite;

    const Form form = choose_form(n, k);
    std::memset(out, 0, kHeaderBytes);
    out[0] = form;
    put64(out + 8, k);
    uint8_t *body = out + kHeaderBytes;
    const size_t nw = sparse::words_of(n), nseg = sparse::segs_of(n);
    const Kernels K = kernels(lvl);
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
                c += K.compress(in + base, word, vals + 4 * c);
            } else if (form == kList) {
                K.compress(in + base, word, vals + 4 * c);
                for (uint64_t m = word; m; m &= m - 1) {
                    const uint32_t i = static_cast<uint32_t>(base + __builtin_ctzll(m));
                    std::memcpy(body + 4 * c++, &i, 4);
                }
            } else {
                for (size_t j = 0; j < cnt; ++j) {
                    const float v = (word >> j) & 1 ? in[base + j] : 0.0f;
                    std::memcpy(vals + 4 * (base + j), &v, 4);
                }
            }
        }
    }
    *len = need;
    return Status::ok;
}

Status decode(const uint8_t *in, size_t len, size_t n, float *out, bool add, SimdLevel lvl, int threads) {
    if (len < kHeaderBytes) return Status::corrupt;
    const uint8_t form = in[0];
    for (int i = 1; i < 8; ++i)
        if (in[i]) return Status::corrupt;
    const uint64_t k = get64(in + 8);
    if (k > n || form > kDense || form != choose_form(n, k) || len != payload_bytes(n, k)) return Status::corrupt;
    const uint8_t *body = in + kHeaderBytes;
    const size_t nw = sparse::words_of(n), nseg = sparse::segs_of(n);
    const bool par = n >= sparse::kParallelMin && threads > 1;
    const Kernels K = kernels(lvl);
    const bool hw = std::min(lvl, simd_detect()) >= SimdLevel::avx2; /* POPCNT */

    if (form == kDense) {
        if (!all_finite_bytes(body, n, threads)) return Status::corrupt;
#pragma omp parallel for num_threads(threads) schedule(static) if (par)
        for (size_t s = 0; s < nseg; ++s) {
            const size_t lo = s * kSegPos, hi = std::min(n, lo + kSegPos);
            if (!add) {
                std::memcpy(out + lo, body + 4 * lo, (hi - lo) * sizeof(float));
                continue;
            }
            for (size_t i = lo; i < hi; ++i) {
                float v;
                std::memcpy(&v, body + 4 * i, 4);
                out[i] += v;
            }
        }
        return Status::ok;
    }

    if (form == kList) {
        auto idx = [body](size_t i) { uint32_t v; std::memcpy(&v, body + 4 * i, 4); return v; };
        const uint8_t *vb = body + 4 * k;
        if (!all_finite_bytes(vb, k, threads)) return Status::corrupt;
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
                std::memset(out + lo, 0, std::min(kSegPos, n - lo) * sizeof(float));
            }
        }
#pragma omp parallel for num_threads(threads) schedule(static) if (k >= sparse::kParallelMin && threads > 1)
        for (size_t s = 0; s < kseg; ++s) /* indices are distinct: no two threads touch one value */
            for (size_t i = s * kSegPos, hi = std::min<size_t>(k, i + kSegPos); i < hi; ++i) {
                float v;
                std::memcpy(&v, vb + 4 * i, 4);
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
    const uint8_t *vb = body + 8 * nw;
    if (!all_finite_bytes(vb, k, threads)) return Status::corrupt;
#pragma omp parallel for num_threads(threads) schedule(static) if (par)
    for (size_t s = 0; s < nseg; ++s) {
        size_t c = off[s];
        for (size_t w = s * kSegWords, hi = std::min(nw, w + kSegWords); w < hi; ++w) {
            const uint64_t m = get64(body + 8 * w);
            const size_t base = w * 64;
            c += K.expand(vb + 4 * c, m, std::min<size_t>(64, n - base), out + base, add);
        }
    }
    return Status::ok;
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
    return payload_bytes(n, sparse::keep_count(n, theta));
}
Status tk_encode(const float *in, size_t n, const CodecParams &p, uint8_t *out, size_t cap, size_t *len) {
    CMPI_CHECK(tk_check(p));
    return encode(in, n, p.theta, out, cap, len, p.simd, p.threads);
}
Status tk_decode(const uint8_t *in, size_t len, size_t n, const CodecParams &p, float *out) {
    if (tk_check(p) != Status::ok) return Status::corrupt;
    return decode(in, len, n, out, false, p.simd, p.threads);
}
Status tk_decode_add(const uint8_t *in, size_t len, size_t n, const CodecParams &p, float *acc) {
    if (tk_check(p) != Status::ok) return Status::corrupt;
    return decode(in, len, n, acc, true, p.simd, p.threads);
}

}  // namespace
}  // namespace compmpi::topk

namespace compmpi {
extern const CodecOps codec_topk_ops = {
    CodecId::topk, "topk",
    "magnitude top-k (Aji & Heafield): keep ceil((1-theta) n) values exactly, as index list, bitmap or dense",
    CODEC_SPARSE | CODEC_SPATIAL_SPARSE, /* decoded data is exactly sparse: the allreduce may sum it sparsely */
    0, 0, 0, 0,
    topk::tk_check, topk::tk_max_payload, nullptr, topk::tk_encode, topk::tk_decode, topk::tk_decode_add, nullptr,
};
}  // namespace compmpi

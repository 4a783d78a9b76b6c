// SPDX-License-Identifier: BSD-3-Clause
/* fft_topk CPU kernels (payload layout in fft_topk/fft_topk.h).
 *
 * Encode, per call:
 *   scan      NaN/Inf and max|x| (vectorised) -> prescale exponent sc
 *   blocks    copy (x 2^-sc) into a 64-byte aligned slot, in-place r2c (FFTW), keys
 *             |c|^2 bits + 1 (0 for padding) and their level-1 histogram  [parallel over blocks]
 *   select    exact top-k over the keys (topk/select.h)
 *   bitmap    threshold compare (SIMD), ties in position order, compact the kept (re, im)
 *             into rank order                                          [parallel over segments]
 *   quantise  range-fit the kept parts, quantise + pack (rangefloat.h)  [parallel over 2^15]
 * Decode: validate header, bitmap (popcounts, padding bits), lengths and an overflow bound;
 * dequantise; per block zero a slot, scatter the kept coefficients, in-place c2r, scale by
 * 2^sc / L into (or onto) out.
 *
 * Determinism: FFTW plans are made once per length with FFTW_ESTIMATE (no timing, so the same
 * plan in every process on the same CPU/FFTW build), or, for a length given to tune_plans /
 * adopt_plans, from wisdom one process measured and all share; under a mutex (FFTW's planner
 * is not thread-safe), and every transform runs on a slot with the plan's alignment (64 bytes), so a
 * block's coefficients do not depend on the thread that computes them; everything else is
 * integer counting or fixed-order. */
#include "fft_topk/fft_topk.h"

#include <fftw3.h>
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "common/aligned_buf.h"
#include "rangefloat/rangefloat.h"
#include "topk/select.h"

namespace compmpi::fft_topk {
namespace {

using rf::f2u;
using sparse::kSegWords;

/* ---------------------------------------------------------------- plans */
struct Plans {
    fftwf_plan r2c = nullptr, c2r = nullptr; /* in place */
    fftwf_plan c2r_oop = nullptr;             /* out of place: FFTW_ESTIMATE picks a faster c2r */
};

std::mutex g_plan_mu;

/* Plans per transform length; plans live to exit (replaced ones too: a copy returned by
 * plans_for may still be executing). Guarded by g_plan_mu. */
std::map<size_t, Plans> &plan_cache() {
    static std::map<size_t, Plans> *cache = new std::map<size_t, Plans>;
    return *cache;
}

/* Install plans for a length; the ones they replace are kept here, alive and reachable. */
void install_locked(size_t len, const Plans &p) {
    static std::vector<Plans> *retired = new std::vector<Plans>;
    auto &cache = plan_cache();
    auto it = cache.find(len);
    if (it != cache.end()) retired->push_back(it->second);
    cache[len] = p;
}

/* Plans for length len, made on (and valid for) 64-byte aligned arrays of 2*(len/2+1)
 * floats: in place on aligned_buf, out of place from aligned_buf to aligned_out. */
Plans plans_for(size_t len, float *aligned_buf, float *aligned_out = nullptr) {
    std::lock_guard<std::mutex> lk(g_plan_mu);
    auto &cache = plan_cache();
    auto it = cache.find(len);
    if (it != cache.end()) return it->second;
    Plans p;
    const int n = static_cast<int>(len);
    auto *c = reinterpret_cast<fftwf_complex *>(aligned_buf);
    /* FFTW_ESTIMATE never touches the arrays while planning */
    p.r2c = fftwf_plan_dft_r2c_1d(n, aligned_buf, c, FFTW_ESTIMATE);
    p.c2r = fftwf_plan_dft_c2r_1d(n, c, aligned_buf, FFTW_ESTIMATE);
    /* FFTW_ESTIMATE never touches the arrays: any aligned pointer pair will do */
    float *o = aligned_out ? aligned_out : aligned_buf + 16; /* (not executed on) */
    p.c2r_oop = fftwf_plan_dft_c2r_1d(n, c, o, FFTW_ESTIMATE | FFTW_DESTROY_INPUT);
    if (p.r2c && p.c2r && p.c2r_oop) cache.emplace(len, p);
    return p;
}

/* The three plans of length len with `flags`, made on scratch arrays of the slots' 64-byte
 * alignment (FFTW_MEASURE and FFTW_PATIENT overwrite the arrays while timing). All three or
 * none. Caller holds g_plan_mu. */
bool make_plans_locked(size_t len, unsigned flags, Plans *out) {
    const size_t m = 2 * (len / 2 + 1);
    AlignedBuf<float> qa, qo;
    float *a = qa.get(m), *o = qo.get(m);
    if (!a || !o) return false;
    std::memset(a, 0, m * sizeof(float));
    std::memset(o, 0, m * sizeof(float));
    auto *c = reinterpret_cast<fftwf_complex *>(a);
    const int n = static_cast<int>(len);
    Plans p;
    p.r2c = fftwf_plan_dft_r2c_1d(n, a, c, flags);
    p.c2r = p.r2c ? fftwf_plan_dft_c2r_1d(n, c, a, flags) : nullptr;
    p.c2r_oop = p.c2r ? fftwf_plan_dft_c2r_1d(n, c, o, flags | FFTW_DESTROY_INPUT) : nullptr;
    if (p.r2c && p.c2r && p.c2r_oop) {
        *out = p;
        return true;
    }
    for (fftwf_plan q : {p.r2c, p.c2r, p.c2r_oop})
        if (q) fftwf_destroy_plan(q);
    return false;
}

unsigned rigor_flags(PlanRigor r) {
    return r == PlanRigor::patient ? FFTW_PATIENT : r == PlanRigor::measure ? FFTW_MEASURE : FFTW_ESTIMATE;
}

/* bumped whenever installed plans change (tune/adopt/reset): probe() hashes again */
std::atomic<unsigned> g_plan_gen{0};

bool plannable(size_t len) { return len >= 1 && len <= static_cast<size_t>(INT32_MAX) - 2; }

/* ---------------------------------------------------------------- SIMD kernels */
#define AVX2 __attribute__((target("avx2,popcnt")))
#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi,popcnt")))

/* keys[j] = bits(re^2 + im^2) + 1 for j < cnt (c holds cnt interleaved complex numbers) */
void keys_scalar(const float *c, size_t cnt, uint32_t *keys) {
    for (size_t j = 0; j < cnt; ++j) {
        const float re = c[2 * j], im = c[2 * j + 1];
        const float m = re * re + im * im; /* no FMA (-ffp-contract=off): same bits as SIMD */
        keys[j] = f2u(m) + 1;
    }
}
AVX2 void keys_avx2(const float *c, size_t cnt, uint32_t *keys) {
    const __m256i perm = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7), one = _mm256_set1_epi32(1);
    size_t j = 0;
    for (; j + 8 <= cnt; j += 8) {
        __m256 a = _mm256_loadu_ps(c + 2 * j), b = _mm256_loadu_ps(c + 2 * j + 8);
        a = _mm256_mul_ps(a, a);
        b = _mm256_mul_ps(b, b);
        /* a = r0 i0 r1 i1 r2 i2 r3 i3 -> (r0 r1 r2 r3 | i0 i1 i2 i3) */
        a = _mm256_permutevar8x32_ps(a, perm);
        b = _mm256_permutevar8x32_ps(b, perm);
        const __m256 re = _mm256_permute2f128_ps(a, b, 0x20), im = _mm256_permute2f128_ps(a, b, 0x31);
        const __m256i k = _mm256_add_epi32(_mm256_castps_si256(_mm256_add_ps(re, im)), one);
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(keys + j), k);
    }
    keys_scalar(c + 2 * j, cnt - j, keys + j);
}
AVX512 void keys_avx512(const float *c, size_t cnt, uint32_t *keys) {
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    const __m512i one = _mm512_set1_epi32(1);
    size_t j = 0;
    for (; j + 16 <= cnt; j += 16) {
        __m512 a = _mm512_loadu_ps(c + 2 * j), b = _mm512_loadu_ps(c + 2 * j + 16);
        a = _mm512_mul_ps(a, a);
        b = _mm512_mul_ps(b, b);
        const __m512 re = _mm512_permutex2var_ps(a, even, b), im = _mm512_permutex2var_ps(a, odd, b);
        _mm512_storeu_si512(keys + j, _mm512_add_epi32(_mm512_castps_si512(_mm512_add_ps(re, im)), one));
    }
    keys_scalar(c + 2 * j, cnt - j, keys + j);
}

/* gt/eq masks of 64 keys against T */
void masks_scalar(const uint32_t *k, uint32_t T, uint64_t *gt, uint64_t *eq) {
    uint64_t g = 0, e = 0;
    for (int j = 0; j < 64; ++j) {
        g |= static_cast<uint64_t>(k[j] > T) << j;
        e |= static_cast<uint64_t>(k[j] == T) << j;
    }
    *gt = g;
    *eq = e;
}
AVX2 void masks_avx2(const uint32_t *k, uint32_t T, uint64_t *gt, uint64_t *eq) {
    const __m256i t = _mm256_set1_epi32(static_cast<int>(T)); /* keys < 2^31: signed compare */
    uint64_t g = 0, e = 0;
    for (int j = 0; j < 64; j += 8) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(k + j));
        g |= static_cast<uint64_t>(static_cast<uint32_t>(_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(v, t))))) << j;
        e |= static_cast<uint64_t>(static_cast<uint32_t>(_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(v, t))))) << j;
    }
    *gt = g;
    *eq = e;
}
AVX512 void masks_avx512(const uint32_t *k, uint32_t T, uint64_t *gt, uint64_t *eq) {
    const __m512i t = _mm512_set1_epi32(static_cast<int>(T));
    uint64_t g = 0, e = 0;
    for (int j = 0; j < 64; j += 16) {
        const __m512i v = _mm512_loadu_si512(k + j);
        g |= static_cast<uint64_t>(_mm512_cmpgt_epu32_mask(v, t)) << j;
        e |= static_cast<uint64_t>(_mm512_cmpeq_epu32_mask(v, t)) << j;
    }
    *gt = g;
    *eq = e;
}

/* dst = src (len floats); returns max(bits & 0x7FFFFFFF): >= 0x7F800000 iff NaN/Inf. One
 * pass that replaces the separate scan of the input (the loop vectorises per target). */
#define COMPMPI_COPY_AMAX(SUFFIX, ATTR)                                                \
    ATTR uint32_t copy_amax_##SUFFIX(const float *src, float *dst, size_t len) {       \
        const uint32_t *s = reinterpret_cast<const uint32_t *>(src);                  \
        uint32_t *d = reinterpret_cast<uint32_t *>(dst);                              \
        uint32_t m = 0;                                                               \
        for (size_t t = 0; t < len; ++t) {                                            \
            const uint32_t v = s[t];                                                  \
            d[t] = v;                                                                 \
            m = std::max(m, v & 0x7FFFFFFFu);                                         \
        }                                                                             \
        return m;                                                                     \
    }
COMPMPI_COPY_AMAX(scalar, )
COMPMPI_COPY_AMAX(avx2, __attribute__((target("avx2"))))
COMPMPI_COPY_AMAX(avx512, __attribute__((target("avx512f,avx512vl"))))
#undef COMPMPI_COPY_AMAX

struct Kernels {
    void (*keys)(const float *, size_t, uint32_t *);
    void (*masks)(const uint32_t *, uint32_t, uint64_t *, uint64_t *);
    uint32_t (*copy_amax)(const float *, float *, size_t);
};
Kernels kernels(SimdLevel l) {
    switch (l) {
        case SimdLevel::avx512: return {keys_avx512, masks_avx512, copy_amax_avx512};
        case SimdLevel::avx2: return {keys_avx2, masks_avx2, copy_amax_avx2};
        default: return {keys_scalar, masks_scalar, copy_amax_scalar};
    }
}

/* ---------------------------------------------------------------- helpers */
void put64(uint8_t *p, uint64_t v) { std::memcpy(p, &v, 8); }
uint64_t get64(const uint8_t *p) { uint64_t v; std::memcpy(&v, p, 8); return v; }

int ceil_log2(size_t v) {
    int e = 0;
    while ((size_t{1} << e) < v) ++e;
    return e;
}

/* Bound on |values| inside and out of the inverse transform (FLT_MAX = 3.4e38). The encoder
 * refuses inputs with 8 C max|x| above it (their decode could come near FLT_MAX); the decoder
 * rejects payloads whose coefficients could drive the inverse transform above it. */
constexpr double kOutBound = 1e38;

struct EncScratch {
    AlignedBuf<float> store;   /* 2 * Cp floats: every block's transform slot */
    AlignedBuf<uint32_t> keys; /* Cp */
    AlignedBuf<float> kept;    /* 2k: kept (re, im) in rank order */
};
struct DecScratch {
    AlignedBuf<float> vals;    /* 2k dequantised parts */
    AlignedBuf<uint64_t> rank; /* kept positions before each bitmap word */
};

}  // namespace

Layout layout(size_t n, uint32_t param) {
    Layout L;
    L.n = n;
    if (n == 0) return L;
    L.B = (param == 0 || param >= n) ? std::min(n, kMaxBlock) : param;
    L.nfull = n / L.B;
    L.tail = n % L.B;
    L.P = (L.B / 2 + 1 + 63) / 64 * 64;
    L.C = L.nfull * (L.B / 2 + 1) + (L.tail ? L.tail / 2 + 1 : 0);
    L.Cp = L.nfull * L.P + (L.tail ? (L.tail / 2 + 1 + 63) / 64 * 64 : 0);
    return L;
}

size_t payload_bytes(const Layout &L, uint64_t k, int N) { return kHeaderBytes + L.Cp / 8 + rf::packed_bytes(2 * k, N); }

void transforms_only(const float *x, size_t n, uint32_t param, float *y, int threads) {
    const Layout L = layout(n, param);
    static thread_local AlignedBuf<float> store;
    float *s = store.get(2 * L.Cp);
    if (!s) return;
    const size_t nb = L.nblocks();
#pragma omp parallel for num_threads(threads) schedule(static) if (nb > 1 && threads > 1 && n >= sparse::kParallelMin)
    for (size_t i = 0; i < nb; ++i) {
        float *slot = s + 2 * L.pos(i);
        const size_t len = L.len(i);
        const Plans p = plans_for(len, slot);
        std::memcpy(slot, x + i * L.B, len * sizeof(float));
        fftwf_execute_dft_r2c(p.r2c, slot, reinterpret_cast<fftwf_complex *>(slot));
        fftwf_execute_dft_c2r(p.c2r, reinterpret_cast<fftwf_complex *>(slot), slot);
        std::memcpy(y + i * L.B, slot, len * sizeof(float));
    }
}

Status encode(const float *in, size_t n, int N, uint32_t param, double theta, uint8_t *out, size_t cap,
              size_t *len, SimdLevel lvl, int threads, int mode) {
    if (N < rf::kBitsMin || N > rf::kBitsMax || !(theta >= 0.0 && theta < 1.0)) return Status::invalid_arg;
    if (!rf::mode_ok(mode)) return Status::invalid_arg;
    if (lvl > simd_detect()) lvl = simd_detect();
    const Layout L = layout(n, param);
    const uint64_t k = sparse::keep_count(L.C, theta);
    const size_t need = payload_bytes(L, k, N);
    if (cap < need) return Status::invalid_arg;

    std::memset(out, 0, kHeaderBytes);
    put64(out + 16, k);
    uint8_t *bitmap = out + kHeaderBytes;
    uint8_t *codes = bitmap + L.Cp / 8;
    if (n == 0) {
        CMPI_CHECK(rf::quantize_mode(nullptr, 0, N, mode, out, codes, lvl, threads));
        *len = need;
        return Status::ok;
    }

    static thread_local EncScratch S;
    float *store = S.store.get(2 * L.Cp);
    uint32_t *keys = S.keys.get(L.Cp);
    float *kept = S.kept.get(2 * k);
    if (!store || !keys || !kept) return Status::no_memory;
    const Kernels K = kernels(lvl);

    /* blocks: copy (scanning max|x| and NaN/Inf on the way), transform, keys, level-1
     * histogram. The transform runs on x * 2^-sc; sc depends on max|x|, which is known only
     * after every block was copied: the first pass assumes sc = 0 (every input below
     * ~2^62 / B) and a second pass with the prescale runs only if that was wrong. */
    const size_t nb = L.nblocks();
    std::vector<uint64_t> h1(sparse::kLevel1Buckets, 0);
    bool plan_fail = false;
    uint32_t amax = 0;
    auto blocks = [&](int sc) {
        const float pre = std::ldexp(1.0f, -sc);
        std::fill(h1.begin(), h1.end(), 0);
#pragma omp parallel num_threads(threads) if (nb > 1 && threads > 1 && n >= sparse::kParallelMin)
        {
            std::vector<uint64_t> local(sparse::kLevel1Buckets, 0);
            uint32_t m = 0;
#pragma omp for schedule(static)
            for (size_t i = 0; i < nb; ++i) {
                float *slot = store + 2 * L.pos(i);
                const size_t len_i = L.len(i), c_i = L.coefs(i), s_i = L.slots(i);
                const Plans p = plans_for(len_i, slot);
                if (!p.r2c) {
#pragma omp critical(compmpi_fft_fail)
                    plan_fail = true;
                    continue;
                }
                const float *src = in + i * L.B;
                if (sc)
                    for (size_t t = 0; t < len_i; ++t) slot[t] = src[t] * pre; /* exact: a power of two */
                else
                    m = std::max(m, K.copy_amax(src, slot, len_i));
                fftwf_execute_dft_r2c(p.r2c, slot, reinterpret_cast<fftwf_complex *>(slot));
                std::memset(slot + 2 * c_i, 0, 2 * (s_i - c_i) * sizeof(float)); /* padding positions */
                uint32_t *kk = keys + L.pos(i);
                K.keys(slot, c_i, kk);
                std::fill(kk + c_i, kk + s_i, 0u); /* never kept: real keys are >= 1 */
                /* the mask matters only in a pass the caller discards (NaN keys can have the
                 * sign bit set); real keys are < 2^31 */
                for (size_t j = 0; j < s_i; ++j) ++local[(kk[j] >> 20) & (sparse::kLevel1Buckets - 1)];
            }
#pragma omp critical(compmpi_fft_h1)
            {
                for (uint32_t j = 0; j < sparse::kLevel1Buckets; ++j) h1[j] += local[j];
                amax = std::max(amax, m);
            }
        }
    };
    blocks(0);
    if (plan_fail) return Status::no_memory;
    if (amax >= 0x7F800000u) return Status::nonfinite;
    const double xmax = rf::u2f(amax);
    if (8.0 * static_cast<double>(L.C) * xmax > kOutBound) return Status::unsupported;
    /* prescale so that |c| <= B max|x| 2^-sc <= 2^62 and |c|^2 stays finite */
    const int xexp = amax ? static_cast<int>(amax >> 23) - 126 : 0; /* max|x| < 2^xexp */
    const int sc = std::max(0, xexp + ceil_log2(std::max<size_t>(L.B, 1)) - 62);
    out[12] = static_cast<uint8_t>(sc);
    if (sc) blocks(sc);
    if (plan_fail) return Status::no_memory;
    /* keys over the padding (0) count in h1 but are below every real key, and k <= C */

    sparse::Selection sel;
    sparse::select_topk(L.Cp, k, [keys](size_t j) { return keys[j]; }, threads, &sel, h1.data());
    if (sel.nonfinite) return Status::unsupported; /* |c|^2 overflowed: cannot happen after the prescale */

    /* bitmap + kept values in rank order */
    const size_t nw = L.Cp / 64, nseg = sparse::segs_of(L.Cp);
#pragma omp parallel for num_threads(threads) schedule(static) if (L.Cp >= sparse::kParallelMin && threads > 1)
    for (size_t s = 0; s < nseg; ++s) {
        uint64_t rem = sel.take[s];
        size_t r = sel.off[s];
        for (size_t w = s * kSegWords, hi = std::min(nw, w + kSegWords); w < hi; ++w) {
            uint64_t gt = 0, eq = 0, word = 0;
            if (k) {
                K.masks(keys + 64 * w, sel.T, &gt, &eq);
                word = gt | (eq ? sparse::take_ties(eq, &rem) : 0);
            }
            put64(bitmap + 8 * w, word);
            for (uint64_t m = word; m; m &= m - 1) {
                const size_t j = 64 * w + __builtin_ctzll(m);
                kept[2 * r] = store[2 * j];
                kept[2 * r + 1] = store[2 * j + 1];
                ++r;
            }
        }
    }

    /* quantise the kept parts with the range-based float (either mode) fitted to them */
    const Status qs = rf::quantize_mode(kept, 2 * k, N, mode, out, codes, lvl, threads);
    if (qs != Status::ok) return qs == Status::nonfinite ? Status::unsupported : qs; /* cannot happen: finite */
    *len = need;
    return Status::ok;
}

namespace {

/* One payload: header and bitmap validated (begin), its codes dequantised as far as they
 * have arrived (deq codes of 2k). */
struct Parsed {
    const uint8_t *bitmap = nullptr, *codes = nullptr;
    const uint64_t *rank = nullptr; /* kept positions before each bitmap word */
    float *vals = nullptr;          /* 2k dequantised parts */
    rf::Quant q;
    uint64_t k = 0;
    size_t len = 0, deq = 0;
    int sc = 0;
};

/* The header and bitmap of a payload of len bytes (only its first prefix bytes are read):
 * header fields, the length for its k, padding bits zero, popcount == k; rank of every word. */
Status parse_prefix(const uint8_t *in, size_t len, const Layout &L, int N, int mode, SimdLevel lvl, DecScratch &B,
                    Parsed *P) {
    CMPI_CHECK(rf::read_header(in, N, mode, &P->q));
    const int sc = in[12];
    if (in[13] | in[14] | in[15]) return Status::corrupt;
    const uint64_t k = get64(in + 16);
    if (k > L.C || sc > 100 || len != payload_bytes(L, k, N)) return Status::corrupt;
    const uint8_t *bitmap = in + kHeaderBytes;
    const size_t nw = L.Cp / 64, nb = L.nblocks();
    uint64_t *rank = B.rank.get(nw + 1);
    float *vals = B.vals.get(2 * k);
    if (!rank || !vals) return Status::no_memory;
    const uint64_t total = sparse::rank_words(bitmap, nw, rank, lvl >= SimdLevel::avx2);
    bool bad = false;
    for (size_t i = 0; i < nb; ++i) { /* the words that reach into a block's padding */
        const size_t w0 = L.pos(i) / 64, c_i = L.coefs(i);
        for (size_t w = w0 + c_i / 64; w < w0 + L.slots(i) / 64; ++w) {
            const size_t first = 64 * (w - w0), valid = c_i > first ? c_i - first : 0;
            if (valid < 64 && (get64(bitmap + 8 * w) >> valid)) bad = true;
        }
    }
    if (bad || total != k) return Status::corrupt;
    P->bitmap = bitmap;
    P->codes = bitmap + L.Cp / 8;
    P->rank = rank;
    P->vals = vals;
    P->k = k;
    P->len = len;
    P->deq = 0;
    P->sc = sc;
    return Status::ok;
}

/* Codes of block i end before code index block_end(P, L, i). */
size_t block_end(const Parsed &P, const Layout &L, size_t i) { return 2 * P.rank[(L.pos(i) + L.slots(i)) / 64]; }

/* The overflow bound of block i of one payload: 2 sum(|re| + |im|) of its kept coefficients
 * (unscaled), which bounds the unnormalised inverse transform and every partial sum in it;
 * that and the output (times 2^sc / L) must stay far below FLT_MAX. */
bool block_bound(const Parsed &P, const Layout &L, size_t i, double *raw) {
    const size_t r0 = P.rank[L.pos(i) / 64], r1 = P.rank[(L.pos(i) + L.slots(i)) / 64];
    double sum = 0;
    for (size_t r = r0; r < r1; ++r) sum += std::fabs(static_cast<double>(P.vals[2 * r])) + std::fabs(static_cast<double>(P.vals[2 * r + 1]));
    *raw = 2.0 * sum;
    const double scaled = std::ldexp(*raw, P.sc) / static_cast<double>(L.len(i));
    return *raw <= kOutBound && scaled <= kOutBound;
}

/* dst[t] = src[t] * s with non-temporal stores (CodecParams::stream_out: a result too large
 * for the cache; its lines are not read from memory first): the bits of the plain loop. */
AVX512 void scale_stream_avx512(float *dst, const float *src, size_t cnt, float s) {
    size_t t = 0;
    const __m512 v = _mm512_set1_ps(s);
    for (; t < cnt && (reinterpret_cast<uintptr_t>(dst + t) & 63); ++t) dst[t] = src[t] * s;
    for (; t + 16 <= cnt; t += 16) _mm512_stream_ps(dst + t, _mm512_mul_ps(_mm512_loadu_ps(src + t), v));
    for (; t < cnt; ++t) dst[t] = src[t] * s;
    _mm_sfence();
}
AVX2 void scale_stream_avx2(float *dst, const float *src, size_t cnt, float s) {
    size_t t = 0;
    const __m256 v = _mm256_set1_ps(s);
    for (; t < cnt && (reinterpret_cast<uintptr_t>(dst + t) & 31); ++t) dst[t] = src[t] * s;
    for (; t + 8 <= cnt; t += 8) _mm256_stream_ps(dst + t, _mm256_mul_ps(_mm256_loadu_ps(src + t), v));
    for (; t < cnt; ++t) dst[t] = src[t] * s;
    _mm_sfence();
}

/* Block i of out (or out +=, add) = the inverse transform of sum_j f[j] spectrum_j (the cnt
 * spectra added in index order, f[j] = 2^(sc_j - sc) exact), times 2^sc / L. cnt == 1 with
 * f = {1} is the plain decode of one payload. */
bool block_sum(const Layout &L, const Parsed *const *parts, const float *f, int cnt, int sc, size_t i, float *slot,
               float *tmp, int inner_threads, float *out, bool add, bool stream, SimdLevel lvl) {
    const size_t len_i = L.len(i), s_i = L.slots(i);
    const Plans p = plans_for(len_i, slot, tmp);
    if (!p.c2r_oop) return false;
    const size_t w0 = L.pos(i) / 64, w1 = w0 + s_i / 64;
    const bool par = inner_threads > 1 && len_i >= sparse::kParallelMin;
    const size_t nsub = (w1 - w0 + kSegWords - 1) / kSegWords;
#pragma omp parallel for num_threads(inner_threads) schedule(static) if (par)
    for (size_t q = 0; q < nsub; ++q) {
        const size_t a = w0 + q * kSegWords, b = std::min(w1, a + kSegWords);
        std::memset(slot + 2 * 64 * (a - w0), 0, 2 * 64 * (b - a) * sizeof(float));
        for (int j = 0; j < cnt; ++j) {
            const Parsed &P = *parts[j];
            const float fj = f[j];
            for (size_t w = a; w < b; ++w) {
                size_t r = P.rank[w];
                for (uint64_t m = get64(P.bitmap + 8 * w); m; m &= m - 1, ++r) {
                    const size_t t = 64 * (w - w0) + __builtin_ctzll(m);
                    if (j == 0) {
                        slot[2 * t] = P.vals[2 * r] * fj;
                        slot[2 * t + 1] = P.vals[2 * r + 1] * fj;
                    } else {
                        slot[2 * t] += P.vals[2 * r] * fj;
                        slot[2 * t + 1] += P.vals[2 * r + 1] * fj;
                    }
                }
            }
        }
    }
    fftwf_execute_dft_c2r(p.c2r_oop, reinterpret_cast<fftwf_complex *>(slot), tmp);
    const float scale = static_cast<float>(std::ldexp(1.0, sc) / static_cast<double>(len_i));
    float *dst = out + i * L.B;
    const size_t nchunk = (len_i + sparse::kSegPos - 1) / sparse::kSegPos;
#pragma omp parallel for num_threads(inner_threads) schedule(static) if (par)
    for (size_t q = 0; q < nchunk; ++q) {
        const size_t a = q * sparse::kSegPos, b = std::min(len_i, a + sparse::kSegPos);
        if (add)
            for (size_t t = a; t < b; ++t) dst[t] += tmp[t] * scale;
        else if (stream && lvl >= SimdLevel::avx512)
            scale_stream_avx512(dst + a, tmp + a, b - a, scale);
        else if (stream && lvl >= SimdLevel::avx2)
            scale_stream_avx2(dst + a, tmp + a, b - a, scale);
        else
            for (size_t t = a; t < b; ++t) dst[t] = tmp[t] * scale;
    }
    return true;
}

/* The decoders' scratch per payload index, kept per thread (one SumStream per thread at a
 * time: decode_sum is one too). */
DecScratch &dec_scratch(int j) {
    static thread_local std::vector<std::unique_ptr<DecScratch>> bufs; /* (AlignedBuf does not copy) */
    while (bufs.size() <= static_cast<size_t>(j)) bufs.push_back(std::make_unique<DecScratch>());
    return *bufs[j];
}

}  // namespace

struct SumStream::Impl {
    Layout L;
    int cnt = 0, N = 0, mode = 0, threads = 1, sc = 0;
    SimdLevel lvl = SimdLevel::scalar;
    bool add = false, spectral = true, stream = false;
    bool may_refuse = false; /* some block's codes could still break its overflow bound */
    float *out = nullptr;
    std::vector<Parsed> parts;
    std::vector<const Parsed *> ptrs;
    std::vector<float> f; /* 2^(sc_j - sc) */
    std::vector<uint8_t> spec; /* per block of the current range: summed in the spectrum */
    size_t next = 0;           /* blocks written */

    /* Codes of payload j that avail bytes hold, as far as they can be dequantised apart:
     * whole groups of 8 codes (8 N bits: a byte boundary), or all once the payload is there. */
    size_t prefix() const { return kHeaderBytes + L.Cp / 8; } /* header and bitmap */
    size_t codes_in(int j, size_t avail) const {
        const Parsed &P = parts[j];
        if (avail >= P.len) return 2 * P.k;
        const size_t pre = prefix();
        if (avail <= pre) return 0;
        return std::min<size_t>(2 * P.k, (avail - pre) * 8 / static_cast<size_t>(N) / 8 * 8);
    }
    Status run(size_t b0, size_t b1);
};

SumStream::SumStream() : impl_(std::make_unique<Impl>()) {}
SumStream::~SumStream() = default;

size_t SumStream::prefix_bytes(size_t n, uint32_t param) { return kHeaderBytes + layout(n, param).Cp / 8; }

Status SumStream::begin(const uint8_t *const *in, const size_t *len, int cnt, size_t n, int N, uint32_t param,
                        float *out, bool add, SimdLevel lvl, int threads, int mode, bool spectral, bool stream) {
    Impl &m = *impl_;
    m = Impl{};
    if (N < rf::kBitsMin || N > rf::kBitsMax || cnt < 1 || n == 0) return Status::corrupt;
    if (lvl > simd_detect()) lvl = simd_detect();
    m.L = layout(n, param);
    m.cnt = cnt;
    m.N = N;
    m.mode = mode;
    m.threads = threads;
    m.lvl = lvl;
    m.add = add;
    m.spectral = spectral;
    m.stream = stream && !add;
    m.out = out;
    m.parts.resize(static_cast<size_t>(cnt));
    for (int j = 0; j < cnt; ++j) {
        if (len[j] < kHeaderBytes) return Status::corrupt;
        CMPI_CHECK(parse_prefix(in[j], len[j], m.L, N, mode, lvl, dec_scratch(j), &m.parts[j]));
        m.sc = std::max(m.sc, m.parts[j].sc);
        m.ptrs.push_back(&m.parts[j]);
    }
    for (int j = 0; j < cnt; ++j) m.f.push_back(std::ldexp(1.0f, m.parts[j].sc - m.sc)); /* exact, <= 1 */
    /* could a block's overflow bound fail once its codes arrive? Not if it holds with every
     * kept part at the largest magnitude the payload's quantiser can decode to */
    for (int j = 0; j < cnt && !m.may_refuse; ++j) {
        const Parsed &P = m.parts[j];
        const rf::Quant &q = P.q;
        const double vmax = q.mode == rf::kModePaper
                                ? std::max(std::fabs(rf::paper_decode_one(q.pf.P, q.pf)),
                                           std::fabs(rf::paper_decode_one(q.pf.cmax(), q.pf)))
                                : std::fabs(rf::decode_one(q.rs.cmax, q.rs)); /* magnitudes grow with the code */
        for (size_t i = 0; i < m.L.nblocks() && !m.may_refuse; ++i) {
            const double kept = static_cast<double>(P.rank[(m.L.pos(i) + m.L.slots(i)) / 64] - P.rank[m.L.pos(i) / 64]);
            const double raw = 4.0 * kept * vmax; /* 2 sum(|re| + |im|) */
            m.may_refuse = raw > kOutBound || std::ldexp(raw, P.sc) / static_cast<double>(m.L.len(i)) > kOutBound;
        }
    }
    return Status::ok;
}

bool SumStream::may_refuse() const { return impl_->may_refuse; }

size_t SumStream::need(int j) const {
    const Impl &m = *impl_;
    const Parsed &P = m.parts[j];
    if (m.next >= m.L.nblocks()) return P.len;
    const size_t e = block_end(P, m.L, m.next);
    if (e >= 2 * P.k) return P.len;
    return m.prefix() + (e + 7) / 8 * static_cast<size_t>(m.N); /* whole groups of 8 codes: N bytes each */
}

bool SumStream::done() const { return impl_->next >= impl_->L.nblocks(); }

Status SumStream::advance(const size_t *avail, size_t max_blocks) {
    Impl &m = *impl_;
    const size_t nb = m.L.nblocks();
    /* dequantise what arrived; the blocks whose codes are all there on every payload */
    size_t b1 = nb;
    for (int j = 0; j < m.cnt; ++j) {
        Parsed &P = m.parts[j];
        const size_t upto = m.codes_in(j, avail[j]);
        if (upto > P.deq) {
            rf::dequantize_mode(P.codes + P.deq / 8 * static_cast<size_t>(m.N), upto - P.deq, P.q, P.vals + P.deq,
                                false, m.lvl, m.threads);
            P.deq = upto;
        }
        size_t b = m.next;
        while (b < b1 && block_end(P, m.L, b) <= P.deq) ++b;
        b1 = b;
    }
    if (max_blocks < b1 - m.next) b1 = m.next + max_blocks;
    if (b1 == m.next) return Status::ok;
    return m.run(m.next, b1);
}

/* Blocks [b0, b1): every payload's overflow bound first (nothing of the range is written
 * if one fails), the summed spectrum's bound (if it could overflow -- only for contributions
 * near the encoder's refusal limit -- the block is summed in the data domain: one inverse
 * transform per payload, added in index order), then the inverse transforms. */
Status SumStream::Impl::run(size_t b0, size_t b1) {
    spec.assign(b1 - b0, 1);
    for (size_t i = b0; i < b1; ++i) {
        double total = 0;
        for (int j = 0; j < cnt; ++j) {
            double raw;
            if (!block_bound(parts[j], L, i, &raw)) return Status::corrupt;
            total += std::ldexp(raw, parts[j].sc); /* 2^sc_j-scaled bound */
        }
        const double r = std::ldexp(total, -sc), scaled = total / static_cast<double>(L.len(i));
        spec[i - b0] = spectral && r <= kOutBound && scaled <= kOutBound;
    }
    const float one = 1.0f;
    auto block = [&](size_t i, float *slot, float *tmp, int inner) -> bool {
        if (spec[i - b0] || cnt == 1) return block_sum(L, ptrs.data(), f.data(), cnt, sc, i, slot, tmp, inner, out, add, stream, lvl);
        for (int j = 0; j < cnt; ++j)
            if (!block_sum(L, &ptrs[j], &one, 1, parts[j].sc, i, slot, tmp, inner, out, add || j > 0,
                           stream && j == cnt - 1, lvl))
                return false;
        return true;
    };
    bool ok = true;
    if (L.nblocks() == 1) {
        static thread_local AlignedBuf<float> slot1, tmp1;
        float *slot = slot1.get(2 * L.slots(0)), *tmp = tmp1.get(2 * L.slots(0));
        if (!slot || !tmp) return Status::no_memory;
        ok = block(0, slot, tmp, threads);
    } else {
#pragma omp parallel num_threads(threads) if (threads > 1 && (b1 - b0) * L.B >= sparse::kParallelMin)
        {
            static thread_local AlignedBuf<float> tslot, ttmp;
            float *slot = tslot.get(2 * L.P), *tmp = ttmp.get(2 * L.P);
            bool mine = slot != nullptr && tmp != nullptr;
#pragma omp for schedule(static)
            for (size_t i = b0; i < b1; ++i)
                if (mine) mine = block(i, slot, tmp, 1);
            if (!mine) {
#pragma omp critical(compmpi_fft_fail)
                ok = false;
            }
        }
    }
    if (!ok) return Status::no_memory;
    next = b1;
    return Status::ok;
}

namespace {
}  // namespace

uint64_t probe(uint32_t param) {
    static std::mutex mu;
    static std::map<std::pair<uint32_t, unsigned>, uint64_t> done; /* (length, plans' generation) */
    const uint32_t b = param == 0 || param > 65536 ? (param == 0 ? 0u : 65536u) : param;
    std::lock_guard<std::mutex> lk(mu);
    const auto key = std::make_pair(b, g_plan_gen.load());
    auto it = done.find(key);
    if (it != done.end()) return it->second;
    const size_t n = (b ? b : 16384) + 1000;
    std::vector<float> x(n), y(n);
    uint32_t r = 0x9E3779B9u; /* xorshift32: the same values in every process */
    for (size_t i = 0; i < n; ++i) {
        r ^= r << 13, r ^= r >> 17, r ^= r << 5;
        x[i] = static_cast<float>(r >> 8) * 0x1p-24f - 0.5f + (i % 97 == 0 ? 4.0f : 0.0f);
    }
    const int N = 10;
    const Layout L = layout(n, b);
    std::vector<uint8_t> pay(payload_bytes(L, L.C, N));
    size_t len = 0;
    uint64_t h = 1469598103934665603ull;
    const Status se = encode(x.data(), n, N, b, 0.85, pay.data(), pay.size(), &len, SimdLevel::scalar, 1);
    const Status sd = se == Status::ok ? decode(pay.data(), len, n, N, b, y.data(), false, SimdLevel::scalar, 1)
                                       : se;
    if (sd != Status::ok) h ^= 0x5bd1e995u + static_cast<uint64_t>(sd); /* (cannot happen: fixed input) */
    for (float v : y) h = (h ^ f2u(v)) * 1099511628211ull;
    done.emplace(key, h);
    return h;
}

std::string tune_plans(size_t len, PlanRigor rigor) {
    if (rigor == PlanRigor::estimate || !plannable(len)) return {};
    std::lock_guard<std::mutex> lk(g_plan_mu);
    /* no fftwf_set_timelimit: wisdom from a planner that ran out of time is recorded at a
     * lower rigor, and the other processes' FFTW_WISDOM_ONLY planning then finds none
     * (tried: FFTW 3.3.10, limit 0.3 s, length 8192) */
    Plans p;
    if (!make_plans_locked(len, rigor_flags(rigor), &p)) return {};
    char *w = fftwf_export_wisdom_to_string();
    if (!w) return {};
    std::string text(w);
    std::free(w);
    install_locked(len, p);
    ++g_plan_gen;
    return text;
}

bool adopt_plans(size_t len, PlanRigor rigor, const std::string &wisdom) {
    if (rigor == PlanRigor::estimate || !plannable(len) || wisdom.empty()) return false;
    std::lock_guard<std::mutex> lk(g_plan_mu);
    if (!fftwf_import_wisdom_from_string(wisdom.c_str())) return false;
    Plans p;
    if (!make_plans_locked(len, rigor_flags(rigor) | FFTW_WISDOM_ONLY, &p)) return false;
    install_locked(len, p);
    ++g_plan_gen;
    return true;
}

void reset_plans(size_t len) {
    if (!plannable(len)) return;
    std::lock_guard<std::mutex> lk(g_plan_mu);
    /* FFTW_ESTIMATE planning uses wisdom where it has some (for the length and for the
     * sub-problems of other lengths): forget it, or the ESTIMATE plans would still be the
     * tuned ones here and not in a process that never had the wisdom */
    fftwf_forget_wisdom();
    Plans p;
    if (make_plans_locked(len, FFTW_ESTIMATE, &p)) install_locked(len, p);
    else if (plan_cache().count(len)) /* planned again, with FFTW_ESTIMATE, at the next use */
        install_locked(len, Plans{}), plan_cache().erase(len);
    ++g_plan_gen;
}

Status decode(const uint8_t *in, size_t len, size_t n, int N, uint32_t param, float *out, bool add, SimdLevel lvl,
              int threads, int mode, bool stream) {
    return decode_sum(&in, &len, 1, n, N, param, out, add, lvl, threads, mode, true, stream);
}

Status decode_sum(const uint8_t *const *in, const size_t *len, int cnt, size_t n, int N, uint32_t param, float *out,
                  bool add, SimdLevel lvl, int threads, int mode, bool spectral, bool stream) {
    if (N < rf::kBitsMin || N > rf::kBitsMax || cnt < 1) return Status::corrupt;
    for (int j = 0; j < cnt; ++j)
        if (len[j] < kHeaderBytes) return Status::corrupt;
    if (n == 0) { /* header checks only */
        const Layout L = layout(n, param);
        for (int j = 0; j < cnt; ++j) {
            rf::Quant f;
            CMPI_CHECK(rf::read_header(in[j], N, mode, &f));
            if (in[j][12] > 100 || (in[j][13] | in[j][14] | in[j][15]) || get64(in[j] + 16) > L.C ||
                len[j] != payload_bytes(L, get64(in[j] + 16), N))
                return Status::corrupt;
        }
        return Status::ok;
    }
    /* all of every payload there: one step over every block, which validates every payload
     * (header, bitmap, every block's bound) before anything is written -- the same verdict on
     * every rank, and `out` untouched on failure */
    SumStream s;
    CMPI_CHECK(s.begin(in, len, cnt, n, N, param, out, add, lvl, threads, mode, spectral, stream));
    return s.advance(len);
}

/* ---------------------------------------------------------------- CodecOps */
namespace {

Status ft_check(const CodecParams &p) {
    if (p.bits < rf::kBitsMin || p.bits > rf::kBitsMax) return Status::invalid_arg;
    /* variant: the range-based float's mode (rf::kModeRangeSign, rf::kModePaper) */
    return rf::mode_ok(p.variant) && p.param <= kMaxBlock ? Status::ok : Status::invalid_arg;
}
/* Exact for the encoder's theta; a decoder (theta = 0 from the header) gets the bound for
 * every coefficient kept, which is >= the size for any k. */
size_t ft_max_payload(size_t n, const CodecParams &p) {
    const double theta = p.theta >= 0.0f && p.theta < 1.0f ? p.theta : 0.0;
    const Layout L = layout(n, p.param);
    return payload_bytes(L, sparse::keep_count(L.C, theta), p.bits);
}
template <class T> Status ft_encode(const T *in, size_t n, const CodecParams &p, uint8_t *out, size_t cap, size_t *len) {
    CMPI_CHECK(ft_check(p));
    if (p.elem != elem_of(in)) return Status::invalid_arg;
    return encode(in, n, p.bits, p.param, p.theta, out, cap, len, p.simd, p.threads, p.variant);
}
/* decode (add: decode_add) and decode_sum of floats or doubles (T); floats may stream the output
 * (not onto an accumulator: stream_out has no effect with add) */
template <class T>
Status ft_decode_common(const uint8_t *in, size_t len, size_t n, const CodecParams &p, T *out, bool add) {
    if (ft_check(p) != Status::ok || p.elem != elem_of(out)) return Status::corrupt;
    if constexpr (sizeof(T) == 4)
        return decode(in, len, n, p.bits, p.param, out, add, p.simd, p.threads, p.variant, p.stream_out);
    else return decode(in, len, n, p.bits, p.param, out, add, p.simd, p.threads, p.variant);
}
template <class T> using FtDecode = DecodeOps<T, ft_decode_common<T>>;
template <class T>
Status ft_decode_sum(const uint8_t *const *in, const size_t *len, int cnt, size_t n, const CodecParams &p, T *out) {
    if (ft_check(p) != Status::ok || p.elem != elem_of(out)) return Status::corrupt;
    if constexpr (sizeof(T) == 4)
        return decode_sum(in, len, cnt, n, p.bits, p.param, out, false, p.simd, p.threads, p.variant, true,
                          p.stream_out);
    else return decode_sum(in, len, cnt, n, p.bits, p.param, out, false, p.simd, p.threads, p.variant);
}

}  // namespace
}  // namespace compmpi::fft_topk

namespace compmpi {
extern const CodecOps codec_fft_topk_ops = {
    CodecId::fft_topk, "fft_topk",
    "FFT sparsification (Wang et al.): keep the top (1-theta) frequencies, range-based N-bit float, bitmap + codes",
    CODEC_SPARSE,
    fft_topk::kBitsDefault, rf::kBitsMin, rf::kBitsMax, 1,
    fft_topk::ft_check, fft_topk::ft_max_payload, nullptr, fft_topk::ft_encode<float>,
    fft_topk::FtDecode<float>::decode, fft_topk::FtDecode<float>::decode_add, nullptr, fft_topk::ft_decode_sum<float>, nullptr,
    /* fp64: FFTW double transforms, the same layout and quantiser (bytes 12..13: int16 sc) */
    fft_topk::kBitsDefault, rf::kBitsMin, rf::kBitsMax, 1,
    nullptr, fft_topk::ft_encode<double>, fft_topk::FtDecode<double>::decode, fft_topk::FtDecode<double>::decode_add,
    fft_topk::ft_decode_sum<double>, nullptr,
};
}  // namespace compmpi

// SPDX-License-Identifier: BSD-3-Clause
/* fft_topk on doubles (issue 30; docs/codecs/fft_topk.md, "fp64"): FFTW's double-precision
 * transforms, the same layout, selection and quantiser as the fp32 codec (fft_topk.h).
 *
 * Encode, per call:
 *   scan      NaN/Inf and max|x| -> pre = the exponent of max|x| (signed: doubles far below
 *             and above fp32's range alike)
 *   blocks    (x 2^-pre) into a 64-byte aligned slot, in-place r2c (fftw_plan, FFTW_ESTIMATE),
 *             keys = bits(re^2 + im^2) + 1 in double (63-bit keys, 0 for padding)  [parallel]
 *   select    exact top-k over the 63-bit keys (topk/select.h, ties to the lower position)
 *   bitmap    kept (re, im) in rank order, each rounded to fp32 (|part| <= B after the
 *             prescale, so every part is a finite float)
 *   quantise  the fp32 range-based float of the kept parts (rangefloat.h), as for floats
 * Payload: the fp32 layout, with byte 12..13 an int16 sc (the parts are the quantised values
 * times 2^sc; sc = pre) and 14..15 zero. Decode (decode_sum: cnt payloads, in index order):
 * validate every payload first (header, sc, bitmap padding and popcount, length, an overflow
 * bound per block), dequantise, then per block add the kept parts of every payload times
 * 2^(sc_j - max sc) (exact in double) into one spectrum, one out-of-place c2r, and scale by
 * 2^(max sc) / L into (or onto) out.
 *
 * Determinism: FFTW_ESTIMATE plans only (no timing; the fp32 codec's tuned plans and wisdom
 * are single-precision FFTW state and never reach these), made under a mutex, executed on
 * 64-byte aligned slots; everything else is integer counting or fixed-order. */
#include <fftw3.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "common/aligned_buf.h"
#include "common/maxabs.h"
#include "fft_topk/fft_topk.h"
#include "rangefloat/rangefloat.h"
#include "topk/select.h"

namespace compmpi::fft_topk {
namespace {

using sparse::kSegWords;

struct Plans64 {
    fftw_plan r2c = nullptr, c2r_oop = nullptr;
};

std::mutex g_plan64_mu;

/* FFTW_ESTIMATE plans per length, made on 64-byte aligned arrays of 2 (len/2 + 1) doubles
 * (FFTW_ESTIMATE does not touch them); they live to exit. */
Plans64 plans64_for(size_t len) {
    static std::map<size_t, Plans64> *cache = new std::map<size_t, Plans64>;
    std::lock_guard<std::mutex> lk(g_plan64_mu);
    auto it = cache->find(len);
    if (it != cache->end()) return it->second;
    if (len < 1 || len > static_cast<size_t>(INT_MAX) - 2) return {};
    const size_t m = 2 * (len / 2 + 1);
    AlignedBuf<double> qa, qo;
    double *a = qa.get(m), *o = qo.get(m);
    if (!a || !o) return {};
    auto *c = reinterpret_cast<fftw_complex *>(a);
    const int n = static_cast<int>(len);
    Plans64 p;
    p.r2c = fftw_plan_dft_r2c_1d(n, a, c, FFTW_ESTIMATE);
    p.c2r_oop = fftw_plan_dft_c2r_1d(n, c, o, FFTW_ESTIMATE | FFTW_DESTROY_INPUT);
    if (p.r2c && p.c2r_oop) cache->emplace(len, p);
    return p;
}

inline uint64_t dbits(double d) { return std::bit_cast<uint64_t>(d); }
void put64(uint8_t *p, uint64_t v) { std::memcpy(p, &v, 8); }
uint64_t get64(const uint8_t *p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
}

/* Output bound (DBL_MAX = 1.8e308): the encoder refuses inputs with 8 C max|x| above it, the
 * decoder payloads whose coefficients could drive the output above it. */
constexpr double kOutBound64 = 1e307;
/* |sc| the decoder accepts: max|x| has an exponent in [-1074, 1023] */
constexpr int kScMax = 1100;

inline int sc_of(const uint8_t *in) {
    int16_t v;
    std::memcpy(&v, in + 12, 2);
    return v;
}

/* One validated payload and its dequantised parts. */
struct Parsed64 {
    const uint8_t *bitmap = nullptr;
    std::vector<uint64_t> rank;
    std::vector<float> vals;
    uint64_t k = 0;
    int sc = 0;
};

Status parse64(const uint8_t *in, size_t len, const Layout &L, int N, int mode, SimdLevel lvl, int threads,
               Parsed64 *P) {
    if (len < kHeaderBytes) return Status::corrupt;
    rf::Quant q;
    CMPI_CHECK(rf::read_header(in, N, mode, &q));
    const int sc = sc_of(in);
    if (in[14] | in[15]) return Status::corrupt;
    const uint64_t k = get64(in + 16);
    if (k > L.C || sc > kScMax || sc < -kScMax || len != payload_bytes(L, k, N)) return Status::corrupt;
    const uint8_t *bitmap = in + kHeaderBytes;
    const size_t nw = L.Cp / 64, nb = L.nblocks();
    P->rank.resize(nw + 1);
    const uint64_t total = sparse::rank_words(bitmap, nw, P->rank.data(), lvl >= SimdLevel::avx2);
    for (size_t i = 0; i < nb; ++i) { /* the words that reach into a block's padding */
        const size_t w0 = L.pos(i) / 64, c_i = L.coefs(i);
        for (size_t w = w0 + c_i / 64; w < w0 + L.slots(i) / 64; ++w) {
            const size_t first = 64 * (w - w0), valid = c_i > first ? c_i - first : 0;
            if (valid < 64 && (get64(bitmap + 8 * w) >> valid)) return Status::corrupt;
        }
    }
    if (total != k) return Status::corrupt;
    P->vals.resize(2 * k);
    rf::dequantize_mode(bitmap + L.Cp / 8, 2 * k, q, P->vals.data(), false, lvl, threads);
    P->bitmap = bitmap;
    P->k = k;
    P->sc = sc;
    return Status::ok;
}

/* 2 sum(|re| + |im|) of block i's kept parts (unscaled): bounds the unnormalised inverse */
double block_raw(const Parsed64 &P, const Layout &L, size_t i) {
    const size_t r0 = P.rank[L.pos(i) / 64], r1 = P.rank[(L.pos(i) + L.slots(i)) / 64];
    double s = 0;
    for (size_t r = r0; r < r1; ++r) s += std::fabs(static_cast<double>(P.vals[2 * r])) + std::fabs(static_cast<double>(P.vals[2 * r + 1]));
    return 2.0 * s;
}

}  // namespace

Status encode(const double *in, size_t n, int N, uint32_t param, double theta, uint8_t *out, size_t cap,
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
    uint8_t *bitmap = out + kHeaderBytes, *codes = bitmap + L.Cp / 8;
    if (n == 0) {
        CMPI_CHECK(rf::quantize_mode(nullptr, 0, N, mode, out, codes, lvl, threads));
        *len = need;
        return Status::ok;
    }

    /* max|x| and NaN/Inf */
    const bool par = n >= sparse::kParallelMin && threads > 1;
    const uint64_t amax = maxabs::parallel(in, n, lvl, threads);
    if (amax >= 0x7FF0000000000000ull) return Status::nonfinite;
    const double xmax = std::bit_cast<double>(amax);
    if (8.0 * static_cast<double>(L.C) * xmax > kOutBound64) return Status::unsupported;
    const int pre = xmax > 0 ? std::ilogb(xmax) : 0; /* the transform runs on x 2^-pre: |x| < 2 */
    const int16_t sc16 = static_cast<int16_t>(pre);
    std::memcpy(out + 12, &sc16, 2);

    static thread_local AlignedBuf<double> store_buf;
    static thread_local AlignedBuf<uint64_t> keys_buf;
    double *store = store_buf.get(2 * L.Cp);
    uint64_t *keys = keys_buf.get(L.Cp);
    std::vector<float> kept(2 * k);
    if (!store || !keys) return Status::no_memory;
    const size_t nb = L.nblocks();
    int fail = 0;
#pragma omp parallel for num_threads(threads) schedule(static) reduction(| : fail) if (nb > 1 && par)
    for (size_t i = 0; i < nb; ++i) {
        double *slot = store + 2 * L.pos(i);
        const size_t len_i = L.len(i), c_i = L.coefs(i), s_i = L.slots(i);
        const Plans64 p = plans64_for(len_i);
        if (!p.r2c) {
            fail = 1;
            continue;
        }
        const double *src = in + i * L.B;
        for (size_t t = 0; t < len_i; ++t) slot[t] = std::ldexp(src[t], -pre); /* exact but below 2^-1022 */
        fftw_execute_dft_r2c(p.r2c, slot, reinterpret_cast<fftw_complex *>(slot));
        std::memset(slot + 2 * c_i, 0, 2 * (s_i - c_i) * sizeof(double));
        uint64_t *kk = keys + L.pos(i);
        for (size_t j = 0; j < c_i; ++j) {
            const double re = slot[2 * j], im = slot[2 * j + 1];
            kk[j] = dbits(re * re + im * im) + 1; /* |c| <= B < 2^31: finite, below 2^63 */
        }
        std::fill(kk + c_i, kk + s_i, uint64_t{0}); /* never kept: real keys are >= 1 */
    }
    if (fail) return Status::no_memory;

    sparse::Selection64 sel;
    sparse::select_topk(L.Cp, k, [keys](size_t j) { return keys[j]; }, threads, &sel);
    if (sel.nonfinite) return Status::unsupported; /* cannot happen after the prescale */

    const size_t nw = L.Cp / 64, nseg = sparse::segs_of(L.Cp);
#pragma omp parallel for num_threads(threads) schedule(static) if (L.Cp >= sparse::kParallelMin && threads > 1)
    for (size_t s = 0; s < nseg; ++s) {
        uint64_t rem = sel.take[s];
        size_t r = sel.off[s];
        for (size_t w = s * kSegWords, hi = std::min(nw, w + kSegWords); w < hi; ++w) {
            uint64_t gt = 0, eq = 0, word = 0;
            if (k) {
                for (int j = 0; j < 64; ++j) {
                    gt |= static_cast<uint64_t>(keys[64 * w + j] > sel.T) << j;
                    eq |= static_cast<uint64_t>(keys[64 * w + j] == sel.T) << j;
                }
                word = gt | (eq ? sparse::take_ties(eq, &rem) : 0);
            }
            put64(bitmap + 8 * w, word);
            for (uint64_t m = word; m; m &= m - 1) {
                const size_t j = 64 * w + __builtin_ctzll(m);
                kept[2 * r] = static_cast<float>(store[2 * j]); /* |part| <= B: a finite float */
                kept[2 * r + 1] = static_cast<float>(store[2 * j + 1]);
                ++r;
            }
        }
    }
    const Status qs = rf::quantize_mode(kept.data(), 2 * k, N, mode, out, codes, lvl, threads);
    if (qs != Status::ok) return qs == Status::nonfinite ? Status::unsupported : qs;
    *len = need;
    return Status::ok;
}

Status decode_sum(const uint8_t *const *in, const size_t *len, int cnt, size_t n, int N, uint32_t param, double *out,
                  bool add, SimdLevel lvl, int threads, int mode) {
    if (N < rf::kBitsMin || N > rf::kBitsMax || cnt < 1 || !rf::mode_ok(mode)) return Status::corrupt;
    if (lvl > simd_detect()) lvl = simd_detect();
    const Layout L = layout(n, param);
    std::vector<Parsed64> parts(static_cast<size_t>(cnt));
    for (int j = 0; j < cnt; ++j) CMPI_CHECK(parse64(in[j], len[j], L, N, mode, lvl, threads, &parts[j]));
    if (n == 0) return Status::ok;
    int sc = -kScMax;
    for (const Parsed64 &P : parts) sc = std::max(sc, P.sc);
    /* every payload's bound for every block before anything is written (a payload past it is
     * corrupt), then the bound of their sum: a block whose summed spectrum could pass it is
     * summed in the data domain instead, one inverse transform per payload added in index
     * order, as the float form does (the sum of finite parts may then overflow as MPI's would) */
    const size_t nb = L.nblocks();
    std::vector<uint8_t> spec(nb, 1);
    for (size_t i = 0; i < nb; ++i) {
        double total = 0; /* in units of 2^sc */
        for (const Parsed64 &P : parts) {
            const double raw = block_raw(P, L, i);
            if (std::ldexp(raw, P.sc) / static_cast<double>(L.len(i)) > kOutBound64) return Status::corrupt;
            total += std::ldexp(raw, P.sc - sc);
        }
        spec[i] = std::ldexp(total, sc) / static_cast<double>(L.len(i)) <= kOutBound64;
    }
    std::vector<double> f(static_cast<size_t>(cnt));
    for (int j = 0; j < cnt; ++j) f[j] = std::ldexp(1.0, parts[j].sc - sc);
    int fail = 0;
#pragma omp parallel num_threads(threads) if (threads > 1 && nb > 1 && n >= sparse::kParallelMin)
    {
        static thread_local AlignedBuf<double> slot_buf, tmp_buf;
        double *slot = slot_buf.get(2 * L.P), *tmp = tmp_buf.get(2 * L.P);
#pragma omp for schedule(static) reduction(| : fail)
        for (size_t i = 0; i < nb; ++i) {
            const size_t len_i = L.len(i), s_i = L.slots(i);
            const Plans64 p = plans64_for(len_i);
            if (!slot || !tmp || !p.c2r_oop) {
                fail = 1;
                continue;
            }
            const size_t w0 = L.pos(i) / 64, w1 = w0 + s_i / 64;
            double *dst = out + i * L.B;
            /* payloads [j0, j1) summed in the spectrum (scaled by f, or by 1 when alone), one
             * inverse transform, scaled by 2^e / len into dst (added to it when acc) */
            auto transform = [&](int j0, int j1, int e, bool acc) {
                std::memset(slot, 0, 2 * s_i * sizeof(double));
                for (int j = j0; j < j1; ++j) { /* in index order */
                    const Parsed64 &P = parts[j];
                    const double fj = j1 - j0 == 1 ? 1.0 : f[j];
                    for (size_t w = w0; w < w1; ++w) {
                        size_t r = P.rank[w];
                        for (uint64_t m = get64(P.bitmap + 8 * w); m; m &= m - 1, ++r) {
                            const size_t t = 64 * (w - w0) + __builtin_ctzll(m);
                            slot[2 * t] += static_cast<double>(P.vals[2 * r]) * fj;
                            slot[2 * t + 1] += static_cast<double>(P.vals[2 * r + 1]) * fj;
                        }
                    }
                }
                fftw_execute_dft_c2r(p.c2r_oop, reinterpret_cast<fftw_complex *>(slot), tmp);
                const double scale = std::ldexp(1.0, e) / static_cast<double>(len_i);
                if (acc)
                    for (size_t t = 0; t < len_i; ++t) dst[t] += tmp[t] * scale;
                else
                    for (size_t t = 0; t < len_i; ++t) dst[t] = tmp[t] * scale;
            };
            if (spec[i] || cnt == 1)
                transform(0, cnt, sc, add);
            else
                for (int j = 0; j < cnt; ++j) transform(j, j + 1, parts[j].sc, add || j > 0);
        }
    }
    return fail ? Status::no_memory : Status::ok;
}

Status decode(const uint8_t *in, size_t len, size_t n, int N, uint32_t param, double *out, bool add, SimdLevel lvl,
              int threads, int mode) {
    return decode_sum(&in, &len, 1, n, N, param, out, add, lvl, threads, mode);
}

}  // namespace compmpi::fft_topk

// SPDX-License-Identifier: BSD-3-Clause
/* Range-based N-bit float (Wang et al., "FFT-based Gradient Sparsification for the Distributed
 * Training of Deep Neural Networks", HPDC 2020, Section 3.2.1; see docs/codecs/rangefloat.md)
 * in two modes, and the bit-packing helpers the rangefloat and fft_topk codecs share. The
 * mode is the codecs' header variant: kModeRangeSign (0, default) below, kModePaper (1) =
 * the paper's Algorithm 1 literally ("paper mode" further down).
 *
 * range_sign format RF(N, m, emin): 1 sign bit, e = N-1-m exponent bits, m mantissa bits. A magnitude
 * code c = E<<m | M (0 <= c < 2^(N-1)) means
 *     E >= 1:  2^(emin+E-1) * (1 + M/2^m)     (normal)
 *     E == 0:  2^(emin-m) * M                 (subnormal; c == 0 is exact zero)
 * The code of a value is sign<<(N-1) | c. eps = 2^emin is the smallest normal magnitude.
 *
 * Range fitting: the exponent window is anchored at the data's maximum magnitude (the top
 * binade holds max|x|) and extends 2^e - 2 binades down; e (hence m and eps) is chosen per
 * buffer from a histogram of binary exponents so that the predicted squared error of the
 * values above eps (mantissa rounding, grows 4x per exponent bit) and below eps (absolute
 * error of the subnormal grid, shrinks as eps falls) balance at their minimum sum.
 * emin >= -126 and e <= 7, so every code decodes to an exact fp32 (never Inf).
 *
 * Rounding: to nearest, ties to even (on the integer code), saturating at the largest code.
 * The quantiser is pure integer arithmetic on fp32 bit patterns: every CPU path and thread
 * count gives identical codes. */
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

#include "codec.h"

namespace compmpi::rf {

inline constexpr int kBitsMin = 4, kBitsMax = 16;
inline constexpr int kExpBitsMax = 7;
inline constexpr int kHistBins = 256;              /* fp32 biased exponent of |x| */
inline constexpr size_t kRangeHeaderBytes = 12;    /* u8 m, 3 x 0, f32 min|x|, f32 max|x| */

inline uint32_t f2u(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float u2f(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

/* Everything the quantiser and dequantiser need; derived from (N, m, max|x|). */
struct Format {
    int bits = 8;          /* N */
    int m = 0;             /* mantissa bits */
    int emin = 0;          /* eps = 2^emin */
    uint32_t cmax = 0;     /* largest magnitude code 2^(N-1) - 1 */
    uint32_t minnorm = 0;  /* fp32 bits of eps */
    uint32_t rebias = 0;   /* (emin + 126) << m */
    float sub_unit = 0;    /* 2^(emin - m): the subnormal step */
};

/* Exponent bits a given N may use: 1..min(7, N-1). */
inline int exp_bits_max(int N) { return std::min(kExpBitsMax, N - 1); }

inline Format make_format(int N, int m, uint32_t amax_bits) {
    Format f;
    const int e = N - 1 - m;
    const int emax = amax_bits >= 0x00800000u ? static_cast<int>(amax_bits >> 23) - 127 : -126;
    f.bits = N;
    f.m = m;
    f.emin = std::max(-126, emax - ((1 << e) - 2));
    f.cmax = (1u << (N - 1)) - 1;
    f.minnorm = static_cast<uint32_t>(f.emin + 127) << 23;
    f.rebias = static_cast<uint32_t>(f.emin + 126) << m;
    f.sub_unit = std::ldexp(1.0f, f.emin - m); /* >= 2^-140: an exact fp32 */
    return f;
}

/* Magnitude code of |x| given as fp32 bits (finite, sign bit clear). Branch-free (both
 * paths computed, one selected) so that the chunk loops vectorise. */
inline uint32_t encode_mag(uint32_t u, const Format &f) {
    /* at or above eps: round the fp32 mantissa to m bits (ties to even) and rebias */
    const int s = 23 - f.m;
    const uint32_t r = u + ((1u << (s - 1)) - 1) + ((u >> s) & 1u);
    uint32_t cn = (r >> s) - f.rebias;
    cn = cn > f.cmax ? f.cmax : cn;
    /* below eps: round |x| / 2^(emin-m) to an integer (ties to even), in integers; a shift
     * of 31 leaves 0 because the 24-bit mantissa is below 2^30 */
    const uint32_t be = u >> 23;
    const uint32_t mant = be ? ((u & 0x7FFFFFu) | 0x800000u) : u;
    int sh = 150 + f.emin - f.m - static_cast<int>(be ? be : 1u);
    sh = sh < 1 ? 1 : (sh > 31 ? 31 : sh); /* in range for the path not taken as well */
    const uint32_t cs = (mant + ((1u << (sh - 1)) - 1) + ((mant >> sh) & 1u)) >> sh;
    return u >= f.minnorm ? cn : cs;
}

inline uint32_t encode_one(float x, const Format &f) {
    const uint32_t u = f2u(x);
    return ((u >> 31) << (f.bits - 1)) | encode_mag(u & 0x7FFFFFFFu, f);
}

/* fp32 value of a full N-bit code (any code is valid). Branch-free like encode_mag. */
inline float decode_one(uint32_t code, const Format &f) {
    const uint32_t c = code & f.cmax;
    const uint32_t sign = (code >> (f.bits - 1)) << 31;
    const uint32_t un = (c + f.rebias) << (23 - f.m);
    const uint32_t us = f2u(static_cast<float>(static_cast<int32_t>(c)) * f.sub_unit);
    return u2f(((c >> f.m) ? un : us) | sign);
}

/* ---------------------------------------------------------------- statistics and fit */
/* Range and binade histogram of the magnitudes a buffer will quantise. Integer counts and
 * min/max only, so merging per-block partials in any order gives the same result. */
struct Stats {
    uint32_t amin = 0x7F800000u; /* smallest nonzero |x| (fp32 bits); 0x7F800000 = none */
    uint32_t amax = 0;
    uint64_t hist[kHistBins] = {};
    void add(uint32_t a) { /* a: |x| bits, finite */
        if (a) {
            amin = std::min(amin, a);
            amax = std::max(amax, a);
            ++hist[a >> 23];
        }
    }
    void merge(const Stats &o) {
        amin = std::min(amin, o.amin);
        amax = std::max(amax, o.amax);
        for (int b = 0; b < kHistBins; ++b) hist[b] += o.hist[b];
    }
    uint32_t amin_bits() const { return amin == 0x7F800000u ? 0 : amin; }
};

/* Predicted squared error of quantising the histogrammed values with m mantissa bits. */
inline double predicted_sq_error(const Stats &s, int N, int m) {
    const Format f = make_format(N, m, s.amax);
    double err = 0;
    for (int b = 1; b < kHistBins - 1; ++b) { /* b = 0: fp32 denormals, b = 255: never */
        if (!s.hist[b]) continue;
        const int ub = b - 127;
        const double cnt = static_cast<double>(s.hist[b]);
        if (ub >= f.emin) {
            err += cnt * std::ldexp(1.0, 2 * (ub - m)) / 12.0; /* uniform rounding error */
        } else {
            const double ulp2 = std::ldexp(1.0, 2 * (f.emin - m)), x2 = std::ldexp(7.0 / 3.0, 2 * ub);
            err += cnt * std::min(ulp2 / 12.0, x2); /* on the subnormal grid, or flushed to 0 */
        }
    }
    if (s.hist[0]) err += static_cast<double>(s.hist[0]) * std::ldexp(1.0, -252); /* negligible */
    return err;
}

/* range_sign fit: the mantissa width whose eps balances underflow error against rounding
 * error; ties go to more mantissa bits. (Not the paper's Algorithm 1: see paper mode.) */
inline int fit_mantissa(const Stats &s, int N) {
    int best_m = N - 2;
    double best = HUGE_VAL;
    for (int e = 1; e <= exp_bits_max(N); ++e) {
        const int m = N - 1 - e;
        const double err = predicted_sq_error(s, N, m);
        if (err < best) {
            best = err;
            best_m = m;
        }
    }
    return best_m;
}

/* The 12-byte range header: u8 m, 3 zero bytes, f32 min nonzero |x|, f32 max |x|. */
inline void write_range(uint8_t *out, int m, const Stats &s) {
    out[0] = static_cast<uint8_t>(m);
    out[1] = out[2] = out[3] = 0;
    const uint32_t lo = s.amin_bits(), hi = s.amax;
    std::memcpy(out + 4, &lo, 4);
    std::memcpy(out + 8, &hi, 4);
}

/* Validate a range header for N-bit codes and derive the format. */
inline Status read_range(const uint8_t *in, int N, Format *f, float *amin = nullptr, float *amax = nullptr) {
    const int m = in[0];
    if (in[1] | in[2] | in[3]) return Status::corrupt;
    const int e = N - 1 - m;
    if (m > N - 2 || e < 1 || e > exp_bits_max(N)) return Status::corrupt;
    uint32_t lo, hi;
    std::memcpy(&lo, in + 4, 4);
    std::memcpy(&hi, in + 8, 4);
    if (lo >= 0x7F800000u || hi >= 0x7F800000u) return Status::corrupt; /* NaN/Inf/negative */
    if (lo > hi || ((lo == 0) != (hi == 0))) return Status::corrupt;
    *f = make_format(N, m, hi);
    if (amin) *amin = u2f(lo);
    if (amax) *amax = u2f(hi);
    return Status::ok;
}

/* ---------------------------------------------------------------- paper mode
 * Algorithm 1 of Wang et al. (HPDC'20, Section 3.2.1), "offset-based N-bit floating point",
 * transcribed literally (docs/codecs/rangefloat.md, "paper mode"):
 *   init(min, max):     pbase_binary = eps >> (23-m)
 *   32bit_to_Nbit(x):   if x > max: x = max;  Nbit = (x >> (23-m)) - pbase_binary + 1
 *   Nbit_to_32bit(c):   x = (c + pbase_binary - 1) << (23-m)
 * on the fp32 bit patterns: the right shift truncates (no rounding). No sign bit: codes
 * 1..P are the positive numbers eps, ..., max; "the negative numbers follow the same rule"
 * after them: code P + j is minus the magnitude of positive code j, so 2^N-1 ("1..1") is
 * the most negative number. Code 0 is zero: the algorithm leaves codes <= 0 undefined, and
 * everything below eps in magnitude truncates to it. eps (pbase) is tuned so that 1..1
 * decodes to min (the smallest pbase whose 1..1 reaches min), which makes P ~ 2^N/2 for a
 * symmetric range; m is tuned over [1, N] by the squared error on the data. min and max
 * are the buffer's own (signed) extremes. Payload header (12 bytes, same size as the
 * range_sign mode's): u8 m, 3 x 0, u32 pbase_binary, u32 P. */
inline constexpr uint8_t kModeRangeSign = 0, kModePaper = 1; /* the codecs' header variant */

struct PaperFormat {
    int bits = 8;       /* N */
    int m = 1;          /* mantissa bits kept by the shift */
    uint32_t pbase = 1; /* eps >> (23-m): the pattern code 1 stands for */
    uint32_t P = 1;     /* positive codes 1..P; negative codes P+1..2^N-1 */
    uint32_t cmax() const { return (1u << bits) - 1; }
};

/* Largest shifted pattern that is a finite fp32 for mantissa width m. */
inline uint32_t paper_qlimit(int m) { return 0x7F7FFFFFu >> (23 - m); }

inline uint32_t paper_encode_one(float x, const PaperFormat &f) {
    const int s = 23 - f.m;
    const uint32_t u = f2u(x);
    const uint32_t q = (u & 0x7FFFFFFFu) >> s; /* 32bit_binary = 32bit_float >> (23-m) */
    if (q < f.pbase) return 0;                  /* below eps (and +-0): zero */
    const uint32_t c = q - f.pbase + 1;         /* Nbit = 32bit_binary - pbase_binary + 1 */
    if (!(u >> 31)) return std::min(c, f.P);    /* x > max: x = max (code P is max, truncated) */
    return std::min(f.P + c, f.cmax());         /* negative: same rule after the P positives */
}

inline float paper_decode_one(uint32_t c, const PaperFormat &f) {
    const int s = 23 - f.m;
    if (c == 0) return 0.0f;
    if (c <= f.P) return u2f((c + f.pbase - 1) << s); /* 32bit = (Nbit + pbase - 1) << (23-m) */
    return u2f(((c - f.P + f.pbase - 1) << s) | 0x80000000u);
}

/* Every code an exact finite fp32 (m in 1..min(N, 23), pbase >= 1, 1 <= P <= 2^N-1, the
 * largest positive and negative patterns below FLT_MAX's). */
inline bool paper_valid(const PaperFormat &g) {
    if (g.m < 1 || g.m > std::min(g.bits, 23)) return false;
    const uint32_t qlim = paper_qlimit(g.m);
    if (g.pbase < 1 || g.pbase > qlim || g.P < 1 || g.P > g.cmax()) return false;
    if (static_cast<uint64_t>(g.pbase) + g.P - 1 > qlim) return false; /* top positive */
    return g.P == g.cmax() || static_cast<uint64_t>(g.cmax() - g.P) + g.pbase - 1 <= qlim; /* 1..1 */
}

/* eps tuning for (N, m, min, max): the smallest pbase whose code 1..1 decodes to <= min
 * (covers min), found by bisection (decoding 1..1 moves monotonically with pbase); when no
 * pbase reaches min, the largest allowed. P = q(max) - pbase + 1 (1 if max <= 0). */
inline PaperFormat paper_tune(int N, int m, float min, float max) {
    PaperFormat f;
    f.bits = N;
    f.m = m;
    const int s = 23 - m;
    const uint32_t cmax = f.cmax(), qlim = paper_qlimit(m);
    const uint32_t qtop = max > 0 ? f2u(max) >> s : 0; /* q(max); 0: no positive value */
    const float need = min < 0 ? -min : 0.0f;            /* |min| the code 1..1 must reach */
    /* P(pbase) = qtop - pbase + 1 (1 without positives); allowed: pbase >= 1, P >= 1,
     * P <= cmax - 1 (one negative code at least), every pattern a finite fp32 */
    auto P_of = [&](uint32_t pb) { return qtop ? qtop - pb + 1 : 1u; };
    auto neg_top = [&](uint32_t pb) { return static_cast<uint64_t>(cmax - P_of(pb)) + pb - 1; }; /* 1..1 */
    uint32_t lo = 1, hi = qtop ? qtop : qlim;
    if (qtop && qtop + 2 > cmax) lo = std::max<uint32_t>(lo, qtop + 2 - cmax); /* P <= cmax - 1 */
    { /* neg_top(pb) <= qlim: cmax - qtop + 2 pb - 2 (qtop > 0), or cmax + pb - 2 (qtop = 0) */
        const int64_t lim = qtop ? (static_cast<int64_t>(qlim) + qtop + 2 - cmax) / 2
                                 : static_cast<int64_t>(qlim) + 2 - cmax;
        if (lim < static_cast<int64_t>(hi)) hi = static_cast<uint32_t>(std::max<int64_t>(lim, lo));
    }
    if (hi < lo) hi = lo;
    /* smallest pb in [lo, hi] with decode(1..1) <= min, i.e. neg_top(pb) << s >= |min| */
    auto covers = [&](uint32_t pb) { return neg_top(pb) <= qlim && u2f(static_cast<uint32_t>(neg_top(pb)) << s) >= need; };
    uint32_t a = lo, b = hi;
    if (!covers(b)) {
        a = b; /* min out of reach: the widest negative range */
    } else {
        while (a < b) {
            const uint32_t mid = a + (b - a) / 2;
            if (covers(mid)) b = mid;
            else a = mid + 1;
        }
    }
    f.pbase = a;
    f.P = P_of(a);
    return f;
}

inline void write_paper(uint8_t *out, const PaperFormat &f) {
    out[0] = static_cast<uint8_t>(f.m);
    out[1] = out[2] = out[3] = 0;
    std::memcpy(out + 4, &f.pbase, 4);
    std::memcpy(out + 8, &f.P, 4);
}

inline Status read_paper(const uint8_t *in, int N, PaperFormat *f) {
    PaperFormat g;
    g.bits = N;
    g.m = in[0];
    if (in[1] | in[2] | in[3]) return Status::corrupt;
    if (g.m < 1 || g.m > std::min(N, 23)) return Status::corrupt;
    std::memcpy(&g.pbase, in + 4, 4);
    std::memcpy(&g.P, in + 8, 4);
    if (!paper_valid(g)) return Status::corrupt;
    *f = g;
    return Status::ok;
}

/* The fit's sample: every value below 2^16 values, else every stride-th plus min and max. */
inline size_t paper_sample_stride(size_t n) { return n < (size_t{1} << 16) ? 1 : std::max<size_t>(8, n >> 18); }

/* m and eps for the signed range [lo, hi] (the buffer's own, 0 included) by the squared error
 * of every m over x[0], x[step], ... (cnt values), plus lo and hi when `extremes`, summed in
 * index order: the same choice everywhere. Inline: the CUDA module fits on the host from a
 * sample gathered on the device (step 1 there, the CPU's stride here). */
inline PaperFormat paper_fit_range(const float *x, size_t cnt, size_t step, bool extremes, float lo, float hi, int N) {
    double best = HUGE_VAL;
    PaperFormat bestf = paper_tune(N, std::min(N, 23), lo, hi); /* always valid */
    for (int m = 1; m <= std::min(N, 23); ++m) {
        const PaperFormat f = paper_tune(N, m, lo, hi);
        if (!paper_valid(f)) continue; /* 2^N codes of m bits run past FLT_MAX (small m, large N) */
        double err = 0;
        auto add = [&](float v) {
            const double d = static_cast<double>(v) - paper_decode_one(paper_encode_one(v, f), f);
            err += d * d;
        };
        for (size_t i = 0; i < cnt; i += step) add(x[i]);
        if (extremes) add(lo), add(hi);
        if (err <= best) { /* ties: more mantissa bits */
            best = err;
            bestf = f;
        }
    }
    return bestf;
}

/* Fit m and eps to n values (their signed min/max and sampled squared error); false if any
 * value is NaN/Inf. */
bool paper_fit(const float *in, size_t n, int N, PaperFormat *out, int threads);

/* Either mode's quantiser: the 12-byte header written/read by the mode. */
struct Quant {
    uint8_t mode = kModeRangeSign;
    Format rs;        /* range_sign */
    PaperFormat pf;   /* paper */
};
inline bool mode_ok(int mode) { return mode == kModeRangeSign || mode == kModePaper; }

/* ---------------------------------------------------------------- bit packing */
/* Codes of N bits (4..16) packed LSB first: code i occupies bits [i*N, i*N+N) of the stream.
 * Eight codes fill exactly N bytes, so runs that start at a multiple of 8 codes start on a
 * byte and can be packed in parallel. */
inline size_t packed_bytes(size_t count, int N) { return (count * static_cast<size_t>(N) + 7) / 8; }

/* Pack cnt codes (cnt <= 8) into packed_bytes(cnt, N) bytes. */
inline void pack_group(const uint32_t *codes, size_t cnt, int N, uint8_t *out) {
    unsigned __int128 acc = 0;
    for (size_t j = 0; j < cnt; ++j) acc |= static_cast<unsigned __int128>(codes[j]) << (j * N);
    uint8_t tmp[16];
    std::memcpy(tmp, &acc, 16);
    std::memcpy(out, tmp, packed_bytes(cnt, N));
}

/* Unpack cnt codes (cnt <= 8) from packed_bytes(cnt, N) bytes. */
inline void unpack_group(const uint8_t *in, size_t cnt, int N, uint32_t *codes) {
    uint8_t tmp[16] = {};
    std::memcpy(tmp, in, packed_bytes(cnt, N));
    unsigned __int128 acc;
    std::memcpy(&acc, tmp, 16);
    const uint32_t mask = (1u << N) - 1;
    for (size_t j = 0; j < cnt; ++j) codes[j] = static_cast<uint32_t>(acc >> (j * N)) & mask;
}

/* Full groups with N known at compile time (shifts and sizes become constants). */
template <int N> inline void pack_group_n(const uint32_t *codes, uint8_t *out) {
    if constexpr (N == 8) {
        for (int j = 0; j < 8; ++j) out[j] = static_cast<uint8_t>(codes[j]);
    } else if constexpr (N == 16) {
        for (int j = 0; j < 8; ++j) {
            const uint16_t v = static_cast<uint16_t>(codes[j]);
            std::memcpy(out + 2 * j, &v, 2);
        }
    } else if constexpr (N <= 8) {
        uint64_t acc = 0;
        for (int j = 0; j < 8; ++j) acc |= static_cast<uint64_t>(codes[j]) << (j * N);
        std::memcpy(out, &acc, N);
    } else { /* 8 < N < 16: codes 0..3 in lo, 4..7 in hi (4N <= 64 bits each) */
        uint64_t lo = 0, hi = 0;
        for (int j = 0; j < 4; ++j) lo |= static_cast<uint64_t>(codes[j]) << (j * N);
        for (int j = 0; j < 4; ++j) hi |= static_cast<uint64_t>(codes[4 + j]) << (j * N);
        const uint64_t w0 = lo | (hi << (4 * N)), w1 = hi >> (64 - 4 * N); /* 4N < 64 */
        std::memcpy(out, &w0, 8);
        std::memcpy(out + 8, &w1, N - 8);
    }
}

template <int N> inline void unpack_group_n(const uint8_t *in, uint32_t *codes) {
    constexpr uint32_t mask = (1u << N) - 1;
    if constexpr (N == 8) {
        for (int j = 0; j < 8; ++j) codes[j] = in[j];
    } else if constexpr (N == 16) {
        for (int j = 0; j < 8; ++j) {
            uint16_t v;
            std::memcpy(&v, in + 2 * j, 2);
            codes[j] = v;
        }
    } else if constexpr (N <= 8) {
        uint64_t acc = 0;
        std::memcpy(&acc, in, N);
        for (int j = 0; j < 8; ++j) codes[j] = static_cast<uint32_t>(acc >> (j * N)) & mask;
    } else { /* 8 < N < 16 */
        uint64_t w0, w1 = 0;
        std::memcpy(&w0, in, 8);
        std::memcpy(&w1, in + 8, N - 8);
        const uint64_t hi = (w0 >> (4 * N)) | (w1 << (64 - 4 * N));
        for (int j = 0; j < 4; ++j) codes[j] = static_cast<uint32_t>(w0 >> (j * N)) & mask;
        for (int j = 0; j < 4; ++j) codes[4 + j] = static_cast<uint32_t>(hi >> (j * N)) & mask;
    }
}

/* Pack cnt codes into packed_bytes(cnt, N) bytes. */
template <int N> inline void pack_codes_n(const uint32_t *codes, size_t cnt, uint8_t *out) {
    size_t i = 0;
    for (; i + 8 <= cnt; i += 8) pack_group_n<N>(codes + i, out + (i / 8) * N);
    if (i < cnt) pack_group(codes + i, cnt - i, N, out + (i / 8) * N);
}
template <int N> inline void unpack_codes_n(const uint8_t *in, size_t cnt, uint32_t *codes) {
    size_t i = 0;
    for (; i + 8 <= cnt; i += 8) unpack_group_n<N>(in + (i / 8) * N, codes + i);
    if (i < cnt) unpack_group(in + (i / 8) * N, cnt - i, N, codes + i);
}

using PackFn = void (*)(const uint32_t *, size_t, uint8_t *);
using UnpackFn = void (*)(const uint8_t *, size_t, uint32_t *);
template <int... Ns> constexpr PackFn pack_table(int N, std::integer_sequence<int, Ns...>) {
    PackFn t[] = {pack_codes_n<Ns + kBitsMin>...};
    return t[N - kBitsMin];
}
template <int... Ns> constexpr UnpackFn unpack_table(int N, std::integer_sequence<int, Ns...>) {
    UnpackFn t[] = {unpack_codes_n<Ns + kBitsMin>...};
    return t[N - kBitsMin];
}
/* The packer/unpacker for N bits (kBitsMin <= N <= kBitsMax). */
inline PackFn packer(int N) { return pack_table(N, std::make_integer_sequence<int, kBitsMax - kBitsMin + 1>{}); }
inline UnpackFn unpacker(int N) { return unpack_table(N, std::make_integer_sequence<int, kBitsMax - kBitsMin + 1>{}); }

inline void pack_codes(const uint32_t *codes, size_t cnt, int N, uint8_t *out) { packer(N)(codes, cnt, out); }
inline void unpack_codes(const uint8_t *in, size_t cnt, int N, uint32_t *codes) { unpacker(N)(in, cnt, codes); }

/* Read w <= 32 bits at bit offset pos of a stream of nbytes bytes (pos + w <= 8 * nbytes). */
inline uint32_t get_bits(const uint8_t *in, size_t nbytes, uint64_t pos, int w) {
    const size_t byte = static_cast<size_t>(pos >> 3);
    uint64_t v = 0;
    if (byte + 8 <= nbytes) std::memcpy(&v, in + byte, 8);
    else std::memcpy(&v, in + byte, nbytes - byte);
    return static_cast<uint32_t>(v >> (pos & 7)) & static_cast<uint32_t>((1ull << w) - 1);
}

/* ---------------------------------------------------------------- kernels (cpu/rangefloat.cc) */
/* Range statistics of n floats (exact min/max; the histogram samples every 8th value once
 * n >= 2^16); true if any is NaN/Inf. */
bool gather_stats(const float *in, size_t n, Stats *out, int threads, SimdLevel lvl);
/* cnt values -> packed_bytes(cnt, f.bits) bytes of codes, and back (decode: out = values,
 * or out += values when add). Fixed blocks of 2^15 values over the threads given. */
void quantize_pack(const float *in, size_t cnt, const Format &f, uint8_t *out, SimdLevel lvl, int threads);
void unpack_dequant(const uint8_t *in, size_t cnt, const Format &f, float *out, bool add, SimdLevel lvl, int threads);
/* Either mode: fit cnt values, write the 12-byte header to hdr and the packed codes to
 * codes (Status::nonfinite for NaN/Inf); read a header and dequantise (decode: out = values,
 * or out += values when add). */
Status quantize_mode(const float *in, size_t cnt, int N, int mode, uint8_t *hdr, uint8_t *codes, SimdLevel lvl,
                     int threads);
Status read_header(const uint8_t *hdr, int N, int mode, Quant *q);
void dequantize_mode(const uint8_t *codes, size_t cnt, const Quant &q, float *out, bool add, SimdLevel lvl,
                     int threads);
/* The rangefloat payload: 12 + packed_bytes(n, N) bytes. */
Status encode(const float *in, size_t n, int N, uint8_t *out, SimdLevel lvl, int threads, int mode = kModeRangeSign);
Status decode(const uint8_t *in, size_t len, size_t n, int N, float *out, bool add, SimdLevel lvl, int threads,
              int mode = kModeRangeSign);

}  // namespace compmpi::rf

namespace compmpi {
extern const CodecOps codec_rangefloat_ops;
}

// SPDX-License-Identifier: BSD-3-Clause
/* q8 CPU kernels: scalar, AVX2 and AVX-512 (F/BW/VL/VBMI), chosen at run time; OpenMP
 * splits large buffers into fixed blocks. Every path writes identical bytes (tests/unit).
 *
 * Encode, two passes:
 *   1. max-abs: integer max of the |x| bit patterns (== float max for finite values; a
 *      result >= 0x7F800000 means NaN/Inf), per block, then over blocks (order-free).
 *   2. the scale s: max-abs, or for the exponent-offset types (static tree, mantissa) the
 *      smallest 10^k whose top value holds the max-abs (q8.h);
 *   3. y = min(|x| * (1/s), 16) in fp32, then the code the type's rule gives (nearest entry,
 *      or the paper's binary search, q8.h) without a search: the rule is a step function of
 *      y with at most 127 boundaries; the top 16 bits of y (exponent + 7 mantissa bits)
 *      index a table whose entry holds the codes below and above the boundary inside the
 *      bucket (if any) and that boundary's low 16 bits, so
 *         code = (bits(y) & 0xFFFF) > low16 ? hi : lo
 *      is an exact float comparison against the boundary. The table is checked at build
 *      time to hold at most one boundary per bucket. The SIMD step per 8 codes is one
 *      gather plus: an unsigned 16-bit max and compare (y's low half <= the boundary's),
 *      a byte subtract that turns the compare into a vpshufb control selecting byte 3 (lo)
 *      or byte 2 (hi) of the entry, and the sign merged in.
 * Decode: 256-entry table (magnitude * scale, sign in bit 7). AVX-512 VBMI looks up 64
 * codes at once, one vpermi2b per byte plane of the fp32 result.
 */
#include "q8/q8.h"

#include "common/blocks.h"
#include "common/maxabs.h"

#include "common/simd_target.h" /* <immintrin.h> */

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "base/log.h"

namespace compmpi::q8 {
namespace {

/* Bucket key = bits(y) >> 16: 7 mantissa bits per binade, every binade from 0 up to 2^4
 * (y >= 0 is clamped to kYMax = 16, above every magnitude at scale 1), so the key needs no
 * offset or lower clamp: 67 KiB per type, of which data touches a few binades. */
constexpr int kKeyShift = 16;
constexpr float kYMax = 16.0f;
constexpr int kLutSize = (0x41800000 >> kKeyShift) + 1; /* key of y = 16.0, plus one */

/* How the encoder picks the entry (docs/codecs/q8.md, "Rounding"). */
enum Rule : uint8_t {
    kNearest,   /* nearest magnitude, ties to the smaller */
    kSearch126, /* the paper's binary search over the 126 tree values (dynamic tree) */
    kSearch128, /* the paper's binary search over a sorted 128-entry table */
};
Rule rule_of(int type) {
    switch (type) {
        case kDynamicTree: return kSearch126;
        case kLinear:
        case kStaticTree:
        case kMantissa: return kSearch128;
        default: return kNearest;
    }
}

/* A table that breaks its invariants is a bug in this file, not a run-time condition. */
[[noreturn]] void table_bug(const char *what, int type, int at) {
    log_error("q8: internal table error (%s) in type %d at %d", what, type, at);
    std::abort();
}

inline uint32_t fbits(float f) { return std::bit_cast<uint32_t>(f); }
inline float bitsf(uint32_t u) { return std::bit_cast<float>(u); }

struct Tables {
    float mag[kNumTypes][128];
    /* decision rule at scale 1: y > thr[t][i] for exactly i of the nthr[t] sorted thresholds
     * -> code step_code[t][i] */
    int nthr[kNumTypes];
    uint32_t thr[kNumTypes][127];
    uint8_t step_code[kNumTypes][128];
    /* bucket table: bits 0..15 low 16 bits of the bucket's threshold (0xFFFF: none), 16..23
     * code above it, 24..31 code at or below it */
    uint32_t lut[kNumTypes][kLutSize];
    /* offset types: fp32(10^k) and the largest max-abs that offset k holds */
    float offs[kOffsetMax - kOffsetMin + 1];
    uint32_t bound[kNumTypes][kOffsetMax - kOffsetMin + 1];
};

/* numerator / denominator of each exact magnitude: integers, one correctly rounded
 * division, so every machine builds the same fp32 table (no libm). */
double exact(int type, int m) {
    if (m < 0 || m > 127) return NAN;
    const double p10[9] = {1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8};
    const int E = m >> 4, f = m & 15; /* E:3 f:4 layouts */
    switch (type) {
        case kDynamicTree:
        case kDynamicTreeNearest: {
            if (m == 0) return 0.0;
            const int k = 31 - __builtin_clz(static_cast<unsigned>(m)); /* tree bits */
            const int n = 6 - k;                                         /* leading zeros: 10^-n */
            if (k == 0) return 11.0 / (20.0 * p10[6]);                   /* 0.55e-6 */
            const int h = 1 << (k - 1), j = m - (1 << k);
            /* first split of (0.1, 1) at 0.45, then halves; leaf midpoints */
            const int num = j < h ? 4 * h + 7 * (2 * j + 1) : 18 * h + 11 * (2 * (j - h) + 1);
            return static_cast<double>(num) / (40.0 * h * p10[n]);
        }
        case kLinear:
        case kLinearNearest: return m / 127.0;
        case kStaticTree: /* node f of the tree: start points of (0.1,0.45)/8 and (0.45,1)/8 */
            return static_cast<double>(f < 8 ? 16 + 7 * f : 72 + 11 * (f - 8)) / (160.0 * p10[7 - E]);
        case kMantissa: return f / p10[7 - E];
        case kStaticTreeMaxabs: /* 10^(E-7) (0.1 + 0.9 (2f+1) / 32) */
            return m == 0 ? 0.0 : static_cast<double>(32 + 9 * (2 * f + 1)) / (320.0 * p10[7 - E]);
        case kMantissaMaxabs: /* 10^(E-7) (0.1 + 0.9 f / 16) */
            return m == 0 ? 0.0 : static_cast<double>(16 + 9 * f) / (160.0 * p10[7 - E]);
    }
    return NAN;
}

/* Largest float t with 2t <= a + b: y <= t is at least as close to a as to b. */
float threshold(float a, float b) {
    double s = static_cast<double>(a) + b; /* exact: neighbours are close in magnitude */
    float t = static_cast<float>(s / 2);
    while (2.0 * t > s) t = std::nextafter(t, 0.0f);
    while (2.0 * std::nextafter(t, INFINITY) <= s) t = std::nextafter(t, INFINITY);
    return t;
}

void build_type(Tables &T, int type) {
    float *mag = T.mag[type];
    for (int m = 0; m < 128; ++m) mag[m] = static_cast<float>(exact(type, m));
    /* the sorted table the search runs on, and the smallest code of each value */
    float S[128];
    std::copy(mag, mag + 128, S);
    std::sort(S, S + 128);
    auto code_of_value = [&](float v) {
        for (int m = 0; m < 128; ++m)
            if (mag[m] == v) return m;
        table_bug("value without a code", type, 0);
    };
    /* boundary between S[i] and S[i+1] ("y > b -> above"):
     *   nearest       the midpoint;
     *   search128     the binary search of the published implementation ends on an odd
     *                 probe p with bracket (S[p-1], S[p+1]]: it picks the nearer of S[p-1],
     *                 S[p] below S[p], and S[p] above it, so the boundary is the midpoint
     *                 for even i and S[i+1] itself for odd i;
     *   search126     the same over the 126 tree values S[2..127] (probes even, 0 included
     *                 as the midpoint), the two entries below them by the midpoint. */
    const Rule rule = rule_of(type);
    auto boundary = [&](int i) -> float {
        bool mid = true;
        if (rule == kSearch128) mid = (i % 2) == 0;
        if (rule == kSearch126 && i >= 2) {
            const int t = i - 2; /* index in the 126-entry tree table */
            mid = (t % 2) == 1 || t == 0;
        }
        return mid ? threshold(S[i], S[i + 1]) : S[i + 1];
    };
    int nb = 0;
    T.step_code[type][0] = static_cast<uint8_t>(code_of_value(S[0]));
    for (int i = 0; i < 127; ++i) {
        if (S[i + 1] == S[i]) continue; /* equal entries: the value does not change */
        const uint32_t b = fbits(boundary(i));
        if (nb && b <= T.thr[type][nb - 1]) table_bug("boundaries not increasing", type, i);
        T.thr[type][nb] = b;
        T.step_code[type][++nb] = static_cast<uint8_t>(code_of_value(S[i + 1]));
    }
    T.nthr[type] = nb;
    const uint32_t *tb = T.thr[type];
    for (int key = 0; key < kLutSize; ++key) {
        const uint32_t lo = static_cast<uint32_t>(key) << kKeyShift, hi = lo | 0xFFFFu;
        int base = 0, inside = 0;
        uint32_t low = 0xFFFFu;
        for (int i = 0; i < nb; ++i) {
            if (tb[i] < lo) ++base;
            else if (tb[i] < hi) ++inside, low = tb[i] & 0xFFFFu;
        }
        if (inside > 1) table_bug("bucket holds more than one threshold", type, key);
        const uint32_t clo = T.step_code[type][base], chi = T.step_code[type][base + inside];
        T.lut[type][key] = clo << 24 | chi << 16 | low;
    }
    if (has_offset(type)) {
        float top = 0;
        for (int m = 0; m < 128; ++m) top = std::max(top, mag[m]);
        for (int k = kOffsetMin; k <= kOffsetMax; ++k) {
            const float b = top * T.offs[k - kOffsetMin];
            if (!std::isfinite(b)) table_bug("offset out of range", type, k);
            T.bound[type][k - kOffsetMin] = fbits(b);
        }
    }
}

const Tables &tables() {
    static const Tables *t = [] {
        auto *p = new Tables();
        char buf[16];
        for (int k = kOffsetMin; k <= kOffsetMax; ++k) { /* strtof rounds correctly */
            std::snprintf(buf, sizeof buf, "1e%d", k);
            p->offs[k - kOffsetMin] = std::strtof(buf, nullptr);
        }
        for (int type = 0; type < kNumTypes; ++type) build_type(*p, type);
        return p;
    }();
    return *t;
}

#define AVX2 __attribute__((target("avx2")))
#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi")))

/* ---------------------------------------------------------------- encode */
struct EncCtx {
    const uint32_t *lut;
    float inv;   /* 1 / scale (finite), or 0 when scale is 0 */
    float scale; /* used by the division fallback */
    bool divide; /* 1/scale overflows: y = |x| / scale, scalar, on every path */
};

inline uint8_t code_scalar(uint32_t u, float y, const uint32_t *lut) {
    uint32_t yu = fbits(std::min(y, kYMax));
    uint32_t e = lut[yu >> kKeyShift];
    uint32_t c = (yu & 0xFFFFu) > (e & 0xFFFFu) ? (e >> 16) & 0xFFu : e >> 24;
    return static_cast<uint8_t>(c | ((u >> 24) & 0x80u));
}

void encode_scalar(const float *in, size_t n, const EncCtx &c, uint8_t *out) {
    for (size_t i = 0; i < n; ++i) {
        uint32_t u = fbits(in[i]);
        float a = bitsf(u & 0x7FFFFFFFu);
        out[i] = code_scalar(u, c.divide ? a / c.scale : a * c.inv, c.lut);
    }
}

AVX2 inline __m256i code_avx2(const float *p, __m256 inv, const uint32_t *lut) {
    const __m256i absm = _mm256_set1_epi32(0x7FFFFFFF), sbit = _mm256_set1_epi32(0x80);
    /* vpshufb control per entry (dword j of a 128-bit lane): byte 0 selects the entry's byte 2
     * (4j + 2; + 1 = its byte 3), bytes 1..3 zero the rest */
    const __m256i ctl = _mm256_setr_epi32(static_cast<int>(0x80808002u), static_cast<int>(0x80808006u),
                                          static_cast<int>(0x8080800Au), static_cast<int>(0x8080800Eu),
                                          static_cast<int>(0x80808002u), static_cast<int>(0x80808006u),
                                          static_cast<int>(0x8080800Au), static_cast<int>(0x8080800Eu));
    __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p));
    __m256 y = _mm256_min_ps(_mm256_mul_ps(_mm256_castsi256_ps(_mm256_and_si256(u, absm)), inv), _mm256_set1_ps(kYMax));
    __m256i yu = _mm256_castps_si256(y);
    __m256i e = _mm256_i32gather_epi32(reinterpret_cast<const int *>(lut), _mm256_srli_epi32(yu, kKeyShift), 4);
    /* low halves: all ones where y's <= the boundary's (unsigned); the high halves' result
     * only lands in control bytes 2..3, which stay >= 0x80 (zero) either way */
    __m256i le = _mm256_cmpeq_epi16(_mm256_max_epu16(yu, e), e);
    __m256i c = _mm256_shuffle_epi8(e, _mm256_sub_epi8(ctl, le));
    return _mm256_or_si256(c, _mm256_and_si256(_mm256_srli_epi32(u, 24), sbit));
}

AVX2 void encode_avx2(const float *in, size_t n, const EncCtx &c, uint8_t *out) {
    const __m256 inv = _mm256_set1_ps(c.inv);
    const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256i a = code_avx2(in + i, inv, c.lut), b = code_avx2(in + i + 8, inv, c.lut);
        __m256i d = code_avx2(in + i + 16, inv, c.lut), e = code_avx2(in + i + 24, inv, c.lut);
        __m256i q = _mm256_packus_epi16(_mm256_packus_epi32(a, b), _mm256_packus_epi32(d, e));
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(out + i), _mm256_permutevar8x32_epi32(q, perm));
    }
    encode_scalar(in + i, n - i, c, out + i);
}

/* ---------------------------------------------------------------- decode */
struct DecCtx {
    alignas(64) uint32_t tab[256]; /* fp32 bits of sign * magnitude * scale */
    alignas(64) uint8_t plane[4][128]; /* byte b of tab[m], m < 128 */
};

void decode_scalar(const uint8_t *in, size_t n, const DecCtx &d, float *out, bool add) {
    for (size_t i = 0; i < n; ++i) {
        float v = bitsf(d.tab[in[i]]);
        out[i] = add ? out[i] + v : v;
    }
}

AVX2 void decode_avx2(const uint8_t *in, size_t n, const DecCtx &d, float *out, bool add) {
    const float *tab = reinterpret_cast<const float *>(d.tab);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i idx = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(in + i)));
        __m256 v = _mm256_i32gather_ps(tab, idx, 4);
        if (add) v = _mm256_add_ps(_mm256_loadu_ps(out + i), v);
        _mm256_storeu_ps(out + i, v);
    }
    decode_scalar(in + i, n - i, d, out + i, add);
}

AVX512 inline void store_dec_avx512(float *p, __m512i v, bool add) {
    __m512 f = _mm512_castsi512_ps(v);
    if (add) f = _mm512_add_ps(_mm512_loadu_ps(p), f);
    _mm512_storeu_ps(p, f);
}
/* p = acc + v with a non-temporal store (p 64-byte aligned) */
AVX512 inline void stream_dec_avx512(float *p, const float *acc, __m512i v) {
    _mm512_stream_ps(p, _mm512_add_ps(_mm512_loadu_ps(acc), _mm512_castsi512_ps(v)));
}

/* 64 codes per step. The byte unpacks below work inside 128-bit lanes, so the codes are
 * first permuted (P[16L + 4q + r] = c[16q + 4L + r]) to make unpack result q hold floats
 * 16q..16q+15 in order. NT: out[i] = acc[i] + value with non-temporal stores (out 64-byte
 * aligned; the last payload of a streamed sum); else out[i] (+)= value. */
template <bool NT>
AVX512 void decode_avx512_t(const uint8_t *in, size_t n, const DecCtx &d, float *out, bool add, const float *acc) {
    alignas(64) uint8_t pidx[64];
    for (int L = 0; L < 4; ++L)
        for (int q = 0; q < 4; ++q)
            for (int r = 0; r < 4; ++r) pidx[16 * L + 4 * q + r] = static_cast<uint8_t>(16 * q + 4 * L + r);
    const __m512i perm = _mm512_load_si512(pidx), sbit = _mm512_set1_epi8(static_cast<char>(0x80));
    __m512i t0a = _mm512_load_si512(d.plane[0]), t0b = _mm512_load_si512(d.plane[0] + 64);
    __m512i t1a = _mm512_load_si512(d.plane[1]), t1b = _mm512_load_si512(d.plane[1] + 64);
    __m512i t2a = _mm512_load_si512(d.plane[2]), t2b = _mm512_load_si512(d.plane[2] + 64);
    __m512i t3a = _mm512_load_si512(d.plane[3]), t3b = _mm512_load_si512(d.plane[3] + 64);
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        __m512i c = _mm512_permutexvar_epi8(perm, _mm512_loadu_si512(in + i));
        /* vpermi2b uses index bits 0..6: bit 7 (the sign) is ignored by the lookups */
        __m512i b0 = _mm512_permutex2var_epi8(t0a, c, t0b), b1 = _mm512_permutex2var_epi8(t1a, c, t1b);
        __m512i b2 = _mm512_permutex2var_epi8(t2a, c, t2b), b3 = _mm512_permutex2var_epi8(t3a, c, t3b);
        b3 = _mm512_ternarylogic_epi32(b3, c, sbit, 0xF8); /* b3 | (c & 0x80) */
        __m512i w01l = _mm512_unpacklo_epi8(b0, b1), w01h = _mm512_unpackhi_epi8(b0, b1);
        __m512i w23l = _mm512_unpacklo_epi8(b2, b3), w23h = _mm512_unpackhi_epi8(b2, b3);
        const __m512i v0 = _mm512_unpacklo_epi16(w01l, w23l), v1 = _mm512_unpackhi_epi16(w01l, w23l);
        const __m512i v2 = _mm512_unpacklo_epi16(w01h, w23h), v3 = _mm512_unpackhi_epi16(w01h, w23h);
        if constexpr (NT) {
            stream_dec_avx512(out + i, acc + i, v0);
            stream_dec_avx512(out + i + 16, acc + i + 16, v1);
            stream_dec_avx512(out + i + 32, acc + i + 32, v2);
            stream_dec_avx512(out + i + 48, acc + i + 48, v3);
        } else {
            store_dec_avx512(out + i, v0, add);
            store_dec_avx512(out + i + 16, v1, add);
            store_dec_avx512(out + i + 32, v2, add);
            store_dec_avx512(out + i + 48, v3, add);
        }
    }
    if constexpr (NT) {
        _mm_sfence();
        for (; i < n; ++i) out[i] = acc[i] + bitsf(d.tab[in[i]]);
    } else {
        decode_scalar(in + i, n - i, d, out + i, add);
    }
}
AVX512 void decode_avx512(const uint8_t *in, size_t n, const DecCtx &d, float *out, bool add) {
    decode_avx512_t<false>(in, n, d, out, add, nullptr);
}

/* ---------------------------------------------------------------- dispatch + OpenMP */
using blocks::kBlock; /* elements per OpenMP work item (common/blocks.h) */

void encode_block(const float *in, size_t n, const EncCtx &c, uint8_t *out, SimdLevel lvl) {
    if (c.divide) return encode_scalar(in, n, c, out);
    /* The AVX-512 level encodes with the AVX2 kernel: the step is bound by the table gather,
     * and on Zen 4 the 512-bit gather (and a 256-bit AVX-512VL variant with vpmovdb) measured
     * 3-10% slower than this one. */
    return by_level<encode_avx2, encode_avx2, encode_scalar>(lvl, in, n, c, out);
}
void decode_block(const uint8_t *in, size_t n, const DecCtx &d, float *out, bool add, SimdLevel lvl) {
    by_level<decode_avx512, decode_avx2, decode_scalar>(lvl, in, n, d, out, add);
}

bool type_ok(int type) { return type >= 0 && type < kNumTypes; }

/* maxabs (bits) of the buffer, or nonfinite */
Status scan_max(const float *in, size_t n, SimdLevel lvl, int threads, uint32_t *mx_out) {
    const uint32_t mx = maxabs::parallel(in, n, lvl, threads);
    if (mx >= 0x7F800000u) return Status::nonfinite;
    *mx_out = mx;
    return Status::ok;
}

void encode_codes(const float *in, size_t n, int type, float scale, uint8_t *out, SimdLevel lvl, int threads) {
    EncCtx c;
    c.lut = tables().lut[type];
    c.scale = scale;
    c.inv = scale != 0.0f ? 1.0f / scale : 0.0f;
    c.divide = std::isinf(c.inv);
    std::memcpy(out, &scale, kScaleBytes);
    uint8_t *codes = out + kScaleBytes;
    blocks::for_each(n, threads, [&](size_t lo, size_t len) { encode_block(in + lo, len, c, codes + lo, lvl); });
}

}  // namespace

bool has_offset(int type) { return type == kStaticTree || type == kMantissa; }
float offset_scale(int k) { return k < kOffsetMin || k > kOffsetMax ? 0.0f : tables().offs[k - kOffsetMin]; }
const float *magnitudes(int type) { return type_ok(type) ? tables().mag[type] : nullptr; }
double magnitude_exact(int type, int m) { return type_ok(type) && m >= 0 && m < 128 ? exact(type, m) : NAN; }

int code_of(int type, float y) {
    if (!type_ok(type) || !(y >= 0.0f)) return -1;
    const Tables &T = tables();
    const uint32_t yu = fbits(std::min(y, kYMax));
    const uint32_t *tb = T.thr[type];
    const int i = static_cast<int>(std::lower_bound(tb, tb + T.nthr[type], yu) - tb); /* #{t < y} */
    return T.step_code[type][i];
}

Status scale_of(const float *in, size_t n, int type, SimdLevel lvl, int threads, float *scale_out) {
    if (!type_ok(type)) return Status::invalid_arg;
    if (lvl > simd_detect()) lvl = simd_detect();
    uint32_t mx = 0;
    CMPI_CHECK(scan_max(in, n, lvl, threads, &mx));
    float scale = bitsf(mx);
    if (has_offset(type)) { /* the smallest exponent offset whose top value holds max |x| */
        const uint32_t *bound = tables().bound[type];
        int k = kOffsetMin;
        while (k < kOffsetMax && mx > bound[k - kOffsetMin]) ++k;
        scale = offset_scale(k);
    }
    *scale_out = scale;
    return Status::ok;
}

Status encode(const float *in, size_t n, int type, uint8_t *out, SimdLevel lvl, int threads, float fixed_scale) {
    if (!type_ok(type)) return Status::invalid_arg;
    if (lvl > simd_detect()) lvl = simd_detect();
    float scale = fixed_scale;
    if (!(scale >= 0)) CMPI_CHECK(scale_of(in, n, type, lvl, threads, &scale));
    encode_codes(in, n, type, scale, out, lvl, threads);
    return Status::ok;
}

Status encode_offset(const float *in, size_t n, int type, int k, uint8_t *out, SimdLevel lvl, int threads) {
    if (!type_ok(type) || !has_offset(type) || k < kOffsetMin || k > kOffsetMax) return Status::invalid_arg;
    if (lvl > simd_detect()) lvl = simd_detect();
    uint32_t mx = 0;
    CMPI_CHECK(scan_max(in, n, lvl, threads, &mx));
    encode_codes(in, n, type, offset_scale(k), out, lvl, threads);
    return Status::ok;
}

namespace {
/* A payload's scale checked and its decode table built, before any output is written. */
Status dec_ctx(const uint8_t *in, int type, DecCtx *d) {
    if (!type_ok(type)) return Status::corrupt;
    float scale;
    std::memcpy(&scale, in, kScaleBytes);
    if (!std::isfinite(scale) || std::signbit(scale)) return Status::corrupt;
    if (has_offset(type)) { /* only an exponent offset 10^k */
        const float *offs = tables().offs;
        if (!std::binary_search(offs, offs + (kOffsetMax - kOffsetMin + 1), scale)) return Status::corrupt;
    }
    const float *mag = tables().mag[type];
    for (int m = 0; m < 128; ++m) {
        uint32_t v = fbits(mag[m] * scale);
        d->tab[m] = v;
        d->tab[m + 128] = v | 0x80000000u;
        for (int b = 0; b < 4; ++b) d->plane[b][m] = static_cast<uint8_t>(v >> (8 * b));
    }
    return Status::ok;
}
}  // namespace

Status decode(const uint8_t *in, size_t n, int type, float *out, bool add, SimdLevel lvl, int threads) {
    DecCtx d;
    CMPI_CHECK(dec_ctx(in, type, &d));
    if (lvl > simd_detect()) lvl = simd_detect();
    const uint8_t *codes = in + kScaleBytes;
    blocks::for_each(n, threads, [&](size_t lo, size_t len) { decode_block(codes + lo, len, d, out + lo, add, lvl); });
    return Status::ok;
}

Status decode_sum(const uint8_t *const *in, int cnt, size_t n, int type, float *out, SimdLevel lvl, int threads,
                  bool stream) {
    if (cnt < 1) return Status::invalid_arg;
    std::vector<DecCtx> d(static_cast<size_t>(cnt));
    for (int k = 0; k < cnt; ++k) CMPI_CHECK(dec_ctx(in[k], type, &d[k]));
    if (lvl > simd_detect()) lvl = simd_detect();
    /* stream: payloads 0..cnt-2 summed into a block of scratch (in L2), the last one added
     * from there into out with non-temporal stores: out is written once and never read, so
     * no read-for-ownership of its lines. The additions are the same, in the same order. */
    const bool nt = stream && cnt >= 2 && lvl == SimdLevel::avx512 && (reinterpret_cast<uintptr_t>(out) & 3) == 0;
    blocks::for_each(n, threads, [&](size_t lo, size_t len) {
        if (!nt) {
            for (int k = 0; k < cnt; ++k) decode_block(in[k] + kScaleBytes + lo, len, d[k], out + lo, k > 0, lvl);
            return;
        }
        static thread_local std::vector<float> acc; /* one block, grow-only */
        if (acc.size() < kBlock) acc.resize(kBlock);
        for (int k = 0; k + 1 < cnt; ++k) decode_block(in[k] + kScaleBytes + lo, len, d[k], acc.data(), k > 0, lvl);
        /* a scalar head up to out's next 64-byte boundary, then 64 codes per step */
        const uint8_t *last = in[cnt - 1] + kScaleBytes + lo;
        const DecCtx &dl = d[static_cast<size_t>(cnt - 1)];
        float *o = out + lo;
        size_t h = (64 - (reinterpret_cast<uintptr_t>(o) & 63)) / 4 % 16;
        h = std::min(h, len);
        for (size_t i = 0; i < h; ++i) o[i] = acc[i] + bitsf(dl.tab[last[i]]);
        decode_avx512_t<true>(last + h, len - h, dl, o + h, true, acc.data() + h);
    });
    return Status::ok;
}

/* ---------------------------------------------------------------- fp64
 * Doubles use the fp32 payload: an fp32 scale s and the same codes. The scale is computed in
 * double (max |x| exactly, then rounded up to fp32 so that no |x| / s exceeds 1; the offset
 * types compare max |x| with their bounds in double); y = |x| / s is computed in double and
 * decided by the fp32 rule. For an fp32 boundary t, y > t iff RU(y) > t, RU = rounding up to
 * fp32; so the codes are those of the fp32 tables applied to the exact double y, and the
 * encoder reuses the fp32 kernels on RU(y) (sign kept) with scale 1. Decoded value =
 * magnitude(fp32) * s(fp32), a product exact in double. */
namespace {

constexpr size_t kChunk64 = 1024; /* doubles turned into RU(y) floats at a time (L1) */

inline float ru_float(double y) {
    float f = static_cast<float>(y);
    if (static_cast<double>(f) < y) f = std::nextafter(f, INFINITY);
    return f;
}

/* y[i] = +-RU(|x[i]| / s) with x[i]'s sign; s == 0: +-0 */
void to_y_scalar(const double *x, size_t n, double s, float *y) {
    for (size_t i = 0; i < n; ++i) {
        const float f = s > 0 ? ru_float(std::fabs(x[i]) / s) : 0.0f;
        y[i] = std::signbit(x[i]) ? -f : f;
    }
}
AVX2 void to_y_avx2(const double *x, size_t n, double s, float *y) {
    const __m256d absm = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7FFFFFFFFFFFFFFFll)), sv = _mm256_set1_pd(s);
    const __m256i lo = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6), hi = _mm256_setr_epi32(1, 3, 5, 7, 1, 3, 5, 7);
    const __m128i sbit = _mm_set1_epi32(static_cast<int>(0x80000000u));
    size_t i = 0;
    for (; s > 0 && i + 4 <= n; i += 4) {
        const __m256d v = _mm256_loadu_pd(x + i), q = _mm256_div_pd(_mm256_and_pd(v, absm), sv);
        __m128i f = _mm_castps_si128(_mm256_cvtpd_ps(q)); /* nearest (MXCSR), then up where below */
        const __m256d below = _mm256_cmp_pd(_mm256_cvtps_pd(_mm_castsi128_ps(f)), q, _CMP_LT_OQ);
        f = _mm_sub_epi32(f, _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(_mm256_castpd_si256(below), lo)));
        const __m128i sg = _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(_mm256_castpd_si256(v), hi));
        _mm_storeu_si128(reinterpret_cast<__m128i *>(y + i), _mm_or_si128(f, _mm_and_si128(sg, sbit)));
    }
    to_y_scalar(x + i, n - i, s, y + i);
}
AVX512 void to_y_avx512(const double *x, size_t n, double s, float *y) {
    const __m512d sv = _mm512_set1_pd(s);
    const __m256i sbit = _mm256_set1_epi32(static_cast<int>(0x80000000u));
    size_t i = 0;
    for (; s > 0 && i + 8 <= n; i += 8) {
        const __m512d v = _mm512_loadu_pd(x + i);
        const __m256 f = _mm512_cvt_roundpd_ps(_mm512_div_pd(_mm512_abs_pd(v), sv), _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC);
        const __m256i sg = _mm512_cvtepi64_epi32(_mm512_srli_epi64(_mm512_castpd_si512(v), 32));
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(y + i), _mm256_or_si256(_mm256_castps_si256(f), _mm256_and_si256(sg, sbit)));
    }
    to_y_scalar(x + i, n - i, s, y + i);
}

void encode_block64(const double *in, size_t n, double s, const EncCtx &c, uint8_t *out, SimdLevel lvl) {
    alignas(64) float y[kChunk64];
    for (size_t lo = 0; lo < n; lo += kChunk64) {
        const size_t len = std::min(kChunk64, n - lo);
        by_level<to_y_avx512, to_y_avx2, to_y_scalar>(lvl, in + lo, len, s, y);
        encode_block(y, len, c, out + lo, lvl);
    }
}

struct DecCtx64 {
    alignas(64) double tab[256]; /* sign * magnitude * scale, exact */
};

void decode64_scalar(const uint8_t *in, size_t n, const DecCtx64 &d, double *out, bool add) {
    for (size_t i = 0; i < n; ++i) out[i] = add ? out[i] + d.tab[in[i]] : d.tab[in[i]];
}
AVX2 void decode64_avx2(const uint8_t *in, size_t n, const DecCtx64 &d, double *out, bool add) {
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        int32_t c4;
        std::memcpy(&c4, in + i, 4);
        __m256d v = _mm256_i32gather_pd(d.tab, _mm_cvtepu8_epi32(_mm_cvtsi32_si128(c4)), 8);
        if (add) v = _mm256_add_pd(_mm256_loadu_pd(out + i), v);
        _mm256_storeu_pd(out + i, v);
    }
    decode64_scalar(in + i, n - i, d, out + i, add);
}
AVX512 void decode64_avx512(const uint8_t *in, size_t n, const DecCtx64 &d, double *out, bool add) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m512d v = _mm512_i32gather_pd(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(in + i))), d.tab, 8);
        if (add) v = _mm512_add_pd(_mm512_loadu_pd(out + i), v);
        _mm512_storeu_pd(out + i, v);
    }
    decode64_scalar(in + i, n - i, d, out + i, add);
}
void decode_block64(const uint8_t *in, size_t n, const DecCtx64 &d, double *out, bool add, SimdLevel lvl) {
    by_level<decode64_avx512, decode64_avx2, decode64_scalar>(lvl, in, n, d, out, add);
}

Status dec_ctx64(const uint8_t *in, int type, DecCtx64 *d) {
    DecCtx f;
    CMPI_CHECK(dec_ctx(in, type, &f)); /* the fp32 checks of the scale */
    float scale;
    std::memcpy(&scale, in, kScaleBytes);
    const float *mag = tables().mag[type];
    for (int m = 0; m < 128; ++m) {
        d->tab[m] = static_cast<double>(mag[m]) * static_cast<double>(scale); /* 24 + 24 bits: exact */
        d->tab[m + 128] = -d->tab[m];
    }
    return Status::ok;
}

}  // namespace

Status scale_of(const double *in, size_t n, int type, SimdLevel lvl, int threads, float *scale_out) {
    if (!type_ok(type)) return Status::invalid_arg;
    if (lvl > simd_detect()) lvl = simd_detect();
    const uint64_t mx = maxabs::parallel(in, n, lvl, threads);
    if (mx >= 0x7FF0000000000000ull) return Status::nonfinite;
    const double m = std::bit_cast<double>(mx);
    if (m > static_cast<double>(FLT_MAX)) return Status::nonfinite; /* no fp32 scale holds it: exact path */
    float scale = ru_float(m);
    if (has_offset(type)) {
        const uint32_t *bound = tables().bound[type];
        int k = kOffsetMin;
        while (k < kOffsetMax && m > static_cast<double>(bitsf(bound[k - kOffsetMin]))) ++k;
        scale = offset_scale(k);
    }
    *scale_out = scale;
    return Status::ok;
}

Status encode(const double *in, size_t n, int type, uint8_t *out, SimdLevel lvl, int threads, float fixed_scale) {
    if (!type_ok(type)) return Status::invalid_arg;
    if (lvl > simd_detect()) lvl = simd_detect();
    float scale = fixed_scale;
    if (!(scale >= 0)) CMPI_CHECK(scale_of(in, n, type, lvl, threads, &scale));
    if (!std::isfinite(scale)) return Status::invalid_arg;
    EncCtx c;
    c.lut = tables().lut[type];
    c.scale = 1.0f;
    c.inv = 1.0f;
    c.divide = false;
    std::memcpy(out, &scale, kScaleBytes);
    uint8_t *codes = out + kScaleBytes;
    blocks::for_each(n, threads,
                     [&](size_t lo, size_t len) { encode_block64(in + lo, len, scale, c, codes + lo, lvl); });
    return Status::ok;
}

Status decode(const uint8_t *in, size_t n, int type, double *out, bool add, SimdLevel lvl, int threads) {
    DecCtx64 d;
    CMPI_CHECK(dec_ctx64(in, type, &d));
    if (lvl > simd_detect()) lvl = simd_detect();
    const uint8_t *codes = in + kScaleBytes;
    blocks::for_each(n, threads,
                     [&](size_t lo, size_t len) { decode_block64(codes + lo, len, d, out + lo, add, lvl); });
    return Status::ok;
}

Status decode_sum(const uint8_t *const *in, int cnt, size_t n, int type, double *out, SimdLevel lvl, int threads) {
    if (cnt < 1) return Status::invalid_arg;
    std::vector<DecCtx64> d(static_cast<size_t>(cnt));
    for (int k = 0; k < cnt; ++k) CMPI_CHECK(dec_ctx64(in[k], type, &d[k]));
    if (lvl > simd_detect()) lvl = simd_detect();
    blocks::for_each(n, threads, [&](size_t lo, size_t len) {
        for (int k = 0; k < cnt; ++k) decode_block64(in[k] + kScaleBytes + lo, len, d[k], out + lo, k > 0, lvl);
    });
    return Status::ok;
}

/* ---------------------------------------------------------------- CodecOps */
namespace {

Status q8_check(const CodecParams &p) {
    if (p.bits != 8 || !type_ok(p.variant) || p.param != 0) return Status::invalid_arg;
    return Status::ok;
}
/* both element types: the same payload, 4-byte fp32 scale + n codes */
size_t q8_max_payload(size_t n, const CodecParams &) { return kScaleBytes + n; }
template <class T>
Status q8_encode(const T *in, size_t n, const CodecParams &p, uint8_t *out, size_t cap, size_t *len) {
    CMPI_CHECK(q8_check(p));
    if (p.elem != elem_of(in) || cap < kScaleBytes + n) return Status::invalid_arg;
    CMPI_CHECK(encode(in, n, p.variant, out, p.simd, p.threads, p.fixed_scale));
    *len = kScaleBytes + n;
    return Status::ok;
}
template <class T>
Status q8_decode_sum(const uint8_t *const *in, const size_t *len, int cnt, size_t n, const CodecParams &p, T *out) {
    if (q8_check(p) != Status::ok || p.elem != elem_of(out)) return Status::corrupt;
    for (int k = 0; k < cnt; ++k)
        if (len[k] != kScaleBytes + n || len[k] < n) return Status::corrupt;
    if constexpr (sizeof(T) == 4) return decode_sum(in, cnt, n, p.variant, out, p.simd, p.threads, p.stream_out);
    else return decode_sum(in, cnt, n, p.variant, out, p.simd, p.threads);
}
template <class T> Status q8_whole_scale(const T *in, size_t n, const CodecParams &p, float *scale) {
    CMPI_CHECK(q8_check(p));
    if (p.elem != elem_of(in)) return Status::invalid_arg;
    return scale_of(in, n, p.variant, p.simd, p.threads, scale);
}
template <class T> Status q8_decode_common(const uint8_t *in, size_t len, size_t n, const CodecParams &p, T *out, bool add) {
    if (q8_check(p) != Status::ok || p.elem != elem_of(out)) return Status::corrupt;
    if (len != kScaleBytes + n || len < n) return Status::corrupt;
    return decode(in, n, p.variant, out, add, p.simd, p.threads);
}
template <class T> using Q8Decode = DecodeOps<T, q8_decode_common<T>>;

}  // namespace
}  // namespace compmpi::q8

namespace compmpi {
extern const CodecOps codec_q8_ops = {
    CodecId::q8, "q8",
    "Dettmers' 8-bit data types (dynamic tree, linear, static tree, mantissa; Table 1 rounding or "
    "nearest), max-abs or exponent-offset scale; q8_type selects",
    0,
    8, 8, 8, 8,
    q8::q8_check, q8::q8_max_payload, nullptr, q8::q8_encode<float>, q8::Q8Decode<float>::decode,
    q8::Q8Decode<float>::decode_add, nullptr, q8::q8_decode_sum<float>, q8::q8_whole_scale<float>,
    /* fp64: the fp32 payload (fp32 scale, the same codes), decided on the double |x| / s */
    8, 8, 8, 8,
    nullptr, q8::q8_encode<double>, q8::Q8Decode<double>::decode, q8::Q8Decode<double>::decode_add,
    q8::q8_decode_sum<double>, q8::q8_whole_scale<double>,
};
}  // namespace compmpi

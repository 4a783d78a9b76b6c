// SPDX-License-Identifier: BSD-3-Clause
/* fp16 and bf16 CPU kernels: scalar reference conversions, AVX2 (+F16C) and AVX-512 paths
 * (F16C / AVX-512F vcvtps2ph for fp16; AVX-512 BF16 vcvtne2ps2bf16 when the CPU has it,
 * integer rounding otherwise), chosen at run time; OpenMP over fixed blocks. Every path
 * writes identical bytes (tests/unit/test_fp16.cc).
 *
 * fp16 encode = max-abs pass (integer max of |x| bits: order-free, >= 0x7F800000 means
 * NaN/Inf) + convert pass; bf16 encode is one pass (no scale). */
#include "fp16/fp16.h"

#include "common/blocks.h"
#include "common/maxabs.h"

#include "common/simd_target.h" /* <immintrin.h> */

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

namespace compmpi::half {
namespace {

constexpr uint32_t kExp = 0x7F800000u, kAbs = 0x7FFFFFFFu;
constexpr int kMinK = -126, kMaxK = 113;     /* scale 2^k, see fp16.h */
constexpr float kClampTop = 32752.0f;        /* largest fp16 below 2^15 */
constexpr uint32_t kBf16Sat = 0x7F7F7FFFu;   /* largest fp32 that rounds to bf16 0x7F7F */

inline uint32_t fbits(float f) { return std::bit_cast<uint32_t>(f); }
inline float bitsf(uint32_t u) { return std::bit_cast<float>(u); }

}  // namespace

/* ---------------------------------------------------------------- scalar reference */
uint16_t fp16_from_float(float f) {
    const uint32_t u = fbits(f), sign = (u >> 16) & 0x8000u, a = u & kAbs;
    if (a >= kExp) return static_cast<uint16_t>(sign | 0x7C00u | (a > kExp ? 0x200u | ((a >> 13) & 0x3FFu) : 0));
    if (a >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u); /* >= 65520: Inf */
    if (a >= 0x38800000u) {                                              /* normal fp16 */
        uint32_t r = a + 0xFFFu + ((a >> 13) & 1u);
        return static_cast<uint16_t>(sign | ((r - 0x38000000u) >> 13));
    }
    if (a <= 0x33000000u) return static_cast<uint16_t>(sign); /* <= 2^-25: ties to even 0 */
    /* subnormal fp16: round(|f| * 2^24) = mant >> s, nearest even */
    const uint32_t mant = (a & 0x7FFFFFu) | 0x800000u, s = 126u - (a >> 23);
    const uint32_t r = (mant + (1u << (s - 1)) - 1u + ((mant >> s) & 1u)) >> s;
    return static_cast<uint16_t>(sign | r);
}

float fp16_to_float(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
    if (e == 0) {
        const float v = static_cast<float>(m) * 0x1p-24f; /* exact */
        return bitsf(fbits(v) | sign);
    }
    if (e == 31) return bitsf(sign | kExp | (m << 13) | (m ? 0x400000u : 0)); /* NaN made quiet */
    return bitsf(sign | ((e + 112u) << 23) | (m << 13));
}

uint16_t bf16_from_float(float f) {
    const uint32_t u = fbits(f);
    if ((u & kAbs) < 0x00800000u) return static_cast<uint16_t>((u >> 16) & 0x8000u); /* denormal: signed 0 */
    if ((u & kAbs) > kBf16Sat) return static_cast<uint16_t>(u >> 16);                 /* would round to Inf */
    return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

float bf16_to_float(uint16_t b) { return bitsf(static_cast<uint32_t>(b) << 16); }

namespace {

#define AVX2 __attribute__((target("avx2,f16c")))
#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi")))
#define AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi,avx512bf16")))

/* ---------------------------------------------------------------- fp16 kernels */
struct F16Enc {
    float inv; /* 2^-k */
    float lim; /* clamp of |x * inv| */
};

void f16_encode_scalar(const float *in, size_t n, const F16Enc &c, uint16_t *out) {
    for (size_t i = 0; i < n; ++i) out[i] = fp16_from_float(std::clamp(in[i] * c.inv, -c.lim, c.lim));
}
void f16_decode_scalar(const uint16_t *in, size_t n, float s, float *out, bool add) {
    for (size_t i = 0; i < n; ++i) {
        float v = fp16_to_float(in[i]) * s;
        out[i] = add ? out[i] + v : v;
    }
}

AVX2 inline __m128i f16_cvt_avx2(const float *p, __m256 inv, __m256 lim, __m256 nlim) {
    __m256 y = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(_mm256_loadu_ps(p), inv), nlim), lim);
    return _mm256_cvtps_ph(y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
AVX2 void f16_encode_avx2(const float *in, size_t n, const F16Enc &c, uint16_t *out) {
    const __m256 inv = _mm256_set1_ps(c.inv), lim = _mm256_set1_ps(c.lim), nlim = _mm256_set1_ps(-c.lim);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        _mm_storeu_si128(reinterpret_cast<__m128i *>(out + i), f16_cvt_avx2(in + i, inv, lim, nlim));
        _mm_storeu_si128(reinterpret_cast<__m128i *>(out + i + 8), f16_cvt_avx2(in + i + 8, inv, lim, nlim));
    }
    f16_encode_scalar(in + i, n - i, c, out + i);
}
AVX2 void f16_decode_avx2(const uint16_t *in, size_t n, float s, float *out, bool add) {
    const __m256 sv = _mm256_set1_ps(s);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(in + i))), sv);
        if (add) v = _mm256_add_ps(_mm256_loadu_ps(out + i), v);
        _mm256_storeu_ps(out + i, v);
    }
    f16_decode_scalar(in + i, n - i, s, out + i, add);
}

AVX512 inline __m256i f16_cvt_avx512(const float *p, __m512 inv, __m512 lim, __m512 nlim) {
    __m512 y = _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(_mm512_loadu_ps(p), inv), nlim), lim);
    return _mm512_cvtps_ph(y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
AVX512 void f16_encode_avx512(const float *in, size_t n, const F16Enc &c, uint16_t *out) {
    const __m512 inv = _mm512_set1_ps(c.inv), lim = _mm512_set1_ps(c.lim), nlim = _mm512_set1_ps(-c.lim);
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(out + i), f16_cvt_avx512(in + i, inv, lim, nlim));
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(out + i + 16), f16_cvt_avx512(in + i + 16, inv, lim, nlim));
    }
    f16_encode_scalar(in + i, n - i, c, out + i);
}
AVX512 void f16_decode_avx512(const uint16_t *in, size_t n, float s, float *out, bool add) {
    const __m512 sv = _mm512_set1_ps(s);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(in + i))), sv);
        if (add) v = _mm512_add_ps(_mm512_loadu_ps(out + i), v);
        _mm512_storeu_ps(out + i, v);
    }
    f16_decode_scalar(in + i, n - i, s, out + i, add);
}

/* ---------------------------------------------------------------- bf16 kernels */
bool bf16_encode_scalar(const float *in, size_t n, uint16_t *out) {
    uint32_t bad = 0;
    for (size_t i = 0; i < n; ++i) {
        bad |= static_cast<uint32_t>((fbits(in[i]) & kExp) == kExp);
        out[i] = bf16_from_float(in[i]);
    }
    return bad != 0;
}
void bf16_decode_scalar(const uint16_t *in, size_t n, float *out, bool add) {
    for (size_t i = 0; i < n; ++i) {
        float v = bf16_to_float(in[i]);
        out[i] = add ? out[i] + v : v;
    }
}

/* integer rounding: zero for denormals (sign kept), truncation above kBf16Sat */
AVX2 inline __m256i bf16_round_avx2(const float *p, __m256i *bad) {
    const __m256i exp = _mm256_set1_epi32(static_cast<int>(kExp)), abs = _mm256_set1_epi32(static_cast<int>(kAbs));
    const __m256i one = _mm256_set1_epi32(1), half = _mm256_set1_epi32(0x7FFF), sgn = _mm256_set1_epi32(INT32_MIN);
    __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p));
    __m256i a = _mm256_and_si256(u, abs);
    *bad = _mm256_or_si256(*bad, _mm256_cmpeq_epi32(_mm256_and_si256(u, exp), exp));
    __m256i r = _mm256_add_epi32(u, _mm256_add_epi32(half, _mm256_and_si256(_mm256_srli_epi32(u, 16), one)));
    /* a and the bounds are < 2^31: signed compares are exact */
    r = _mm256_blendv_epi8(r, u, _mm256_cmpgt_epi32(a, _mm256_set1_epi32(static_cast<int>(kBf16Sat))));
    r = _mm256_blendv_epi8(r, _mm256_and_si256(u, sgn), _mm256_cmpgt_epi32(_mm256_set1_epi32(0x00800000), a));
    return _mm256_srli_epi32(r, 16);
}
AVX2 bool bf16_encode_avx2(const float *in, size_t n, uint16_t *out) {
    __m256i bad = _mm256_setzero_si256();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i a = bf16_round_avx2(in + i, &bad), b = bf16_round_avx2(in + i + 8, &bad);
        __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xD8);
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(out + i), p);
    }
    bool tail_bad = bf16_encode_scalar(in + i, n - i, out + i);
    return tail_bad || !_mm256_testz_si256(bad, bad);
}
AVX2 void bf16_decode_avx2(const uint16_t *in, size_t n, float *out, bool add) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(in + i)));
        __m256 v = _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
        if (add) v = _mm256_add_ps(_mm256_loadu_ps(out + i), v);
        _mm256_storeu_ps(out + i, v);
    }
    bf16_decode_scalar(in + i, n - i, out + i, add);
}

AVX512 inline __m512i bf16_round_avx512(const float *p, __mmask16 *bad) {
    const __m512i exp = _mm512_set1_epi32(static_cast<int>(kExp)), abs = _mm512_set1_epi32(static_cast<int>(kAbs));
    const __m512i one = _mm512_set1_epi32(1), half = _mm512_set1_epi32(0x7FFF), sgn = _mm512_set1_epi32(INT32_MIN);
    __m512i u = _mm512_loadu_si512(p);
    __m512i a = _mm512_and_si512(u, abs);
    *bad |= _mm512_cmpeq_epi32_mask(_mm512_and_si512(u, exp), exp);
    __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(half, _mm512_and_si512(_mm512_srli_epi32(u, 16), one)));
    r = _mm512_mask_mov_epi32(r, _mm512_cmpgt_epu32_mask(a, _mm512_set1_epi32(static_cast<int>(kBf16Sat))), u);
    r = _mm512_mask_mov_epi32(r, _mm512_cmplt_epu32_mask(a, _mm512_set1_epi32(0x00800000)), _mm512_and_si512(u, sgn));
    return _mm512_srli_epi32(r, 16);
}
AVX512 bool bf16_encode_avx512(const float *in, size_t n, uint16_t *out) {
    __mmask16 bad = 0;
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(out + i), _mm512_cvtepi32_epi16(bf16_round_avx512(in + i, &bad)));
    bool tail_bad = bf16_encode_scalar(in + i, n - i, out + i);
    return tail_bad || bad != 0;
}

/* vcvtne2ps2bf16 rounds to nearest even and reads denormals as zero; clamping |x| to
 * kBf16Sat first gives the truncation rule for values that would round to Inf. */
AVX512BF16 inline __m512 bf16_clamp(const float *p, __mmask16 *bad) {
    const __m512i exp = _mm512_set1_epi32(static_cast<int>(kExp));
    const __m512 top = _mm512_set1_ps(bitsf(kBf16Sat)), ntop = _mm512_set1_ps(-bitsf(kBf16Sat));
    __m512 x = _mm512_loadu_ps(p);
    *bad |= _mm512_cmpeq_epi32_mask(_mm512_and_si512(_mm512_castps_si512(x), exp), exp);
    return _mm512_min_ps(_mm512_max_ps(x, ntop), top);
}
AVX512BF16 bool bf16_encode_native(const float *in, size_t n, uint16_t *out) {
    __mmask16 bad = 0;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512 lo = bf16_clamp(in + i, &bad), hi = bf16_clamp(in + i + 16, &bad);
        _mm512_storeu_si512(out + i, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
    }
    bool tail_bad = bf16_encode_scalar(in + i, n - i, out + i);
    return tail_bad || bad != 0;
}
AVX512 void bf16_decode_avx512(const uint16_t *in, size_t n, float *out, bool add) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i h = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(in + i)));
        __m512 v = _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));
        if (add) v = _mm512_add_ps(_mm512_loadu_ps(out + i), v);
        _mm512_storeu_ps(out + i, v);
    }
    bf16_decode_scalar(in + i, n - i, out + i, add);
}

/* ---------------------------------------------------------------- dispatch + OpenMP */
/* OpenMP: common/blocks.h's fixed blocks (a multiple of 32 elements) */
bool has_f16c() {
    return cpu_has(CpuFeature::f16c);
}

/* AVX2 here means AVX2 + F16C (every AVX2 CPU we know of has both; checked anyway). */
SimdLevel clamp_level(SimdLevel lvl) {
    if (lvl > simd_detect()) lvl = simd_detect();
    if (lvl == SimdLevel::avx2 && !has_f16c()) lvl = SimdLevel::scalar;
    return lvl;
}

}  // namespace

bool bf16_native_available() {
    return simd_detect() >= SimdLevel::avx512 && cpu_has(CpuFeature::avx512bf16);
}

Status fp16_encode(const float *in, size_t n, uint8_t *out, SimdLevel lvl, int threads) {
    lvl = clamp_level(lvl);
    const uint32_t mx = maxabs::parallel(in, n, lvl, threads);
    if (mx >= kExp) return Status::nonfinite;
    /* floor(log2(max)): the exponent field; denormals and 0 fall under the lower clamp */
    const int e = static_cast<int>(mx >> 23) - 127;
    const int k = mx ? std::clamp(e - 14, kMinK, kMaxK) : 0;
    const float scale = std::ldexp(1.0f, k);
    F16Enc c{std::ldexp(1.0f, -k), k == kMaxK ? kClampTop : 65504.0f};
    std::memcpy(out, &scale, kScaleBytes);
    uint16_t *h = reinterpret_cast<uint16_t *>(out + kScaleBytes);
    blocks::for_each(n, threads, [&](size_t lo, size_t len) {
        by_level<f16_encode_avx512, f16_encode_avx2, f16_encode_scalar>(lvl, in + lo, len, c, h + lo);
    });
    return Status::ok;
}

Status fp16_decode(const uint8_t *in, size_t n, float *out, bool add, SimdLevel lvl, int threads) {
    float s;
    std::memcpy(&s, in, kScaleBytes);
    const uint32_t sb = fbits(s), field = sb >> 23;
    if ((sb & 0x807FFFFFu) != 0 || static_cast<int>(field) < kMinK + 127 || static_cast<int>(field) > kMaxK + 127)
        return Status::corrupt;
    lvl = clamp_level(lvl);
    const uint16_t *h = reinterpret_cast<const uint16_t *>(in + kScaleBytes);
    blocks::for_each(n, threads, [&](size_t lo, size_t len) {
        by_level<f16_decode_avx512, f16_decode_avx2, f16_decode_scalar>(lvl, h + lo, len, s, out + lo, add);
    });
    return Status::ok;
}

Status bf16_encode(const float *in, size_t n, uint8_t *out, SimdLevel lvl, int threads, bool bf16_native) {
    lvl = clamp_level(lvl);
    const bool native = bf16_native && lvl == SimdLevel::avx512 && bf16_native_available();
    uint16_t *h = reinterpret_cast<uint16_t *>(out);
    const bool bad = blocks::any_of(n, threads, [&](size_t lo, size_t len) {
        return native                      ? bf16_encode_native(in + lo, len, h + lo)
               : lvl == SimdLevel::avx512 ? bf16_encode_avx512(in + lo, len, h + lo)
               : lvl == SimdLevel::avx2   ? bf16_encode_avx2(in + lo, len, h + lo)
                                          : bf16_encode_scalar(in + lo, len, h + lo);
    });
    return bad ? Status::nonfinite : Status::ok;
}

void bf16_decode(const uint8_t *in, size_t n, float *out, bool add, SimdLevel lvl, int threads) {
    lvl = clamp_level(lvl);
    const uint16_t *h = reinterpret_cast<const uint16_t *>(in);
    blocks::for_each(n, threads, [&](size_t lo, size_t len) {
        by_level<bf16_decode_avx512, bf16_decode_avx2, bf16_decode_scalar>(lvl, h + lo, len, out + lo, add);
    });
}

/* ---------------------------------------------------------------- CodecOps */
namespace {

Status h_check(const CodecParams &p) {
    return p.bits == 16 && p.variant == 0 && p.param == 0 ? Status::ok : Status::invalid_arg;
}
size_t f16_max_payload(size_t n, const CodecParams &) { return kScaleBytes + 2 * n; }
size_t b16_max_payload(size_t n, const CodecParams &) { return 2 * n; }

Status f16_encode_op(const float *in, size_t n, const CodecParams &p, uint8_t *out, size_t cap, size_t *len) {
    CMPI_CHECK(h_check(p));
    if (cap < kScaleBytes + 2 * n) return Status::invalid_arg;
    CMPI_CHECK(fp16_encode(in, n, out, p.simd, p.threads));
    *len = kScaleBytes + 2 * n;
    return Status::ok;
}
Status f16_decode_common(const uint8_t *in, size_t len, size_t n, const CodecParams &p, float *out, bool add) {
    if (h_check(p) != Status::ok || n > (SIZE_MAX - kScaleBytes) / 2 || len != kScaleBytes + 2 * n) return Status::corrupt;
    return fp16_decode(in, n, out, add, p.simd, p.threads);
}
using F16Decode = DecodeOps<float, f16_decode_common>;

Status b16_encode_op(const float *in, size_t n, const CodecParams &p, uint8_t *out, size_t cap, size_t *len) {
    CMPI_CHECK(h_check(p));
    if (cap < 2 * n) return Status::invalid_arg;
    CMPI_CHECK(bf16_encode(in, n, out, p.simd, p.threads));
    *len = 2 * n;
    return Status::ok;
}
Status b16_decode_common(const uint8_t *in, size_t len, size_t n, const CodecParams &p, float *out, bool add) {
    if (h_check(p) != Status::ok || n > SIZE_MAX / 2 || len != 2 * n) return Status::corrupt;
    bf16_decode(in, n, out, add, p.simd, p.threads);
    return Status::ok;
}
using B16Decode = DecodeOps<float, b16_decode_common>;

}  // namespace
}  // namespace compmpi::half

namespace compmpi {
extern const CodecOps codec_fp16_ops = {
    CodecId::fp16, "fp16",
    "IEEE half precision, round to nearest even, after a power-of-two scale that keeps max|x| in [2^14, 2^15)",
    0,
    16, 16, 16, 16,
    half::h_check, half::f16_max_payload, nullptr, half::f16_encode_op,
    half::F16Decode::decode, half::F16Decode::decode_add, nullptr,
};
extern const CodecOps codec_bf16_ops = {
    CodecId::bf16, "bf16",
    "bfloat16, round to nearest even (fp32 denormals to zero, no rounding up to Inf)",
    0,
    16, 16, 16, 16,
    half::h_check, half::b16_max_payload, nullptr, half::b16_encode_op,
    half::B16Decode::decode, half::B16Decode::decode_add, nullptr,
};
}  // namespace compmpi

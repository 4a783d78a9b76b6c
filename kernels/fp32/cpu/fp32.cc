// SPDX-License-Identifier: BSD-3-Clause
/* fp32: doubles narrowed to floats (docs/codecs/fp32.md). A codec for fp64 data only.
 *
 * Payload: n x fp32, little-endian: element i = the double rounded to the nearest float, ties
 * to even -- exactly static_cast<float>, the hardware conversion in the current rounding mode
 * (round-to-nearest-even unless the application changed it; every path converts alike).
 * Header: bits 32 (or 0), variant 0, param 0, elem fp64.
 *
 * A double whose magnitude rounds above FLT_MAX would become Inf: encode refuses it with
 * Status::nonfinite, so the collective takes the exact path for the call, as for NaN/Inf input
 * (the blob is flagged BLOB_NONFINITE). Doubles below the float range round to float
 * denormals or to a signed zero: absolute error <= 2^-150 there, relative <= 2^-24 above 2^-126.
 *
 * On floats the codec has no meaning: check() refuses elem fp32 (a blob claiming it is corrupt),
 * encode of floats is Status::unsupported, the fp32 decoders refuse everything, and the flag
 * CODEC_FP64_ONLY makes codec_has_elem(c, Elem::f32) false.
 *
 * Kernels: scalar (cvtsd2ss), AVX2 (vcvtpd2ps, 4 per step), AVX-512 (vcvtpd2ps, 8 per step);
 * decode widens exactly (vcvtps2pd). OpenMP over common/blocks.h's blocks. Encode checks each
 * float for an all-ones exponent (NaN/Inf input, or overflow); decode checks the payload for
 * one before the first write (max |bits|, common/maxabs.h). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <algorithm>
#include <cstring>

#include "codec.h"
#include "common/blocks.h"
#include "common/maxabs.h"
#include "common/simd_target.h"

namespace compmpi::narrow {
namespace {

constexpr uint32_t kExp = 0x7F800000u;

/* ---------------------------------------------------------------- encode */
bool encode_scalar(const double *in, size_t n, uint8_t *out) {
    uint32_t bad = 0;
    for (size_t i = 0; i < n; ++i) {
        const float f = static_cast<float>(in[i]);
        uint32_t u;
        std::memcpy(&u, &f, 4);
        bad |= static_cast<uint32_t>((u & kExp) == kExp);
        std::memcpy(out + 4 * i, &u, 4);
    }
    return bad != 0;
}

CMPI_AVX2 bool encode_avx2(const double *in, size_t n, uint8_t *out) {
    const __m128i exp = _mm_set1_epi32(static_cast<int>(kExp));
    __m128i bad = _mm_setzero_si128();
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const __m128i f = _mm_castps_si128(_mm256_cvtpd_ps(_mm256_loadu_pd(in + i)));
        bad = _mm_or_si128(bad, _mm_cmpeq_epi32(_mm_and_si128(f, exp), exp));
        _mm_storeu_si128(reinterpret_cast<__m128i *>(out + 4 * i), f);
    }
    return encode_scalar(in + i, n - i, out + 4 * i) || !_mm_testz_si128(bad, bad);
}

CMPI_AVX512 bool encode_avx512(const double *in, size_t n, uint8_t *out) {
    const __m256i exp = _mm256_set1_epi32(static_cast<int>(kExp));
    __mmask8 bad = 0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i f = _mm256_castps_si256(_mm512_cvtpd_ps(_mm512_loadu_pd(in + i)));
        bad |= _mm256_cmpeq_epi32_mask(_mm256_and_si256(f, exp), exp);
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(out + 4 * i), f);
    }
    return encode_scalar(in + i, n - i, out + 4 * i) || bad != 0;
}

/* ---------------------------------------------------------------- decode */
void decode_scalar(const uint8_t *in, size_t n, double *out, bool add) {
    for (size_t i = 0; i < n; ++i) {
        float f;
        std::memcpy(&f, in + 4 * i, 4);
        out[i] = add ? out[i] + static_cast<double>(f) : static_cast<double>(f);
    }
}

CMPI_AVX2 void decode_avx2(const uint8_t *in, size_t n, double *out, bool add) {
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        __m256d d = _mm256_cvtps_pd(_mm_castsi128_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(in + 4 * i))));
        if (add) d = _mm256_add_pd(_mm256_loadu_pd(out + i), d);
        _mm256_storeu_pd(out + i, d);
    }
    decode_scalar(in + 4 * i, n - i, out + i, add);
}

CMPI_AVX512 void decode_avx512(const uint8_t *in, size_t n, double *out, bool add) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m512d d = _mm512_cvtps_pd(_mm256_castsi256_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(in + 4 * i))));
        if (add) d = _mm512_add_pd(_mm512_loadu_pd(out + i), d);
        _mm512_storeu_pd(out + i, d);
    }
    decode_scalar(in + 4 * i, n - i, out + i, add);
}

}  // namespace

/* Narrow n doubles into 4n bytes; nonfinite if any input is NaN/Inf or overflows fp32 (the
 * bytes are still written, identically on every path). */
Status encode(const double *in, size_t n, uint8_t *out, SimdLevel lvl, int threads) {
    lvl = std::min(lvl, simd_detect());
    const bool bad = blocks::any_of(n, threads, [&](size_t lo, size_t len) {
        return by_level<encode_avx512, encode_avx2, encode_scalar>(lvl, in + lo, len, out + 4 * lo);
    });
    return bad ? Status::nonfinite : Status::ok;
}

/* Widen 4n bytes into n doubles (or add them); corrupt, writing nothing, if a float is NaN/Inf. */
Status decode(const uint8_t *in, size_t n, double *out, bool add, SimdLevel lvl, int threads) {
    lvl = std::min(lvl, simd_detect());
    const float *f = reinterpret_cast<const float *>(in); /* read through unaligned loads only */
    const bool bad = blocks::any_of(n, threads, [&](size_t lo, size_t len) {
        return maxabs::block(f + lo, len, lvl) >= kExp;
    });
    if (bad) return Status::corrupt;
    blocks::any_of(n, threads, [&](size_t lo, size_t len) {
        by_level<decode_avx512, decode_avx2, decode_scalar>(lvl, in + 4 * lo, len, out + lo, add);
        return false;
    });
    return Status::ok;
}

/* ---------------------------------------------------------------- CodecOps */
namespace {

Status fp32_check(const CodecParams &p) {
    if (p.elem != Elem::f64) return Status::invalid_arg; /* narrowing floats to floats: no meaning */
    return (p.bits == 0 || p.bits == 32) && p.variant == 0 && p.param == 0 ? Status::ok : Status::invalid_arg;
}
size_t fp32_max_payload(size_t n, const CodecParams &) { return 4 * n; }

Status fp32_encode_f32(const float *, size_t, const CodecParams &, uint8_t *, size_t, size_t *) {
    return Status::unsupported;
}
Status fp32_decode_f32(const uint8_t *, size_t, size_t, const CodecParams &, float *) { return Status::corrupt; }

Status fp32_encode(const double *in, size_t n, const CodecParams &p, uint8_t *out, size_t cap, size_t *len) {
    CMPI_CHECK(fp32_check(p));
    if (cap < 4 * n) return Status::invalid_arg;
    const Status s = encode(in, n, out, p.simd, p.threads);
    *len = 4 * n;
    return s;
}
Status fp32_decode_common(const uint8_t *in, size_t len, size_t n, const CodecParams &p, double *out, bool add) {
    if (fp32_check(p) != Status::ok || n > SIZE_MAX / 4 || len != 4 * n) return Status::corrupt;
    return decode(in, n, out, add, p.simd, p.threads);
}
using Fp32Decode = DecodeOps<double, fp32_decode_common>;

}  // namespace
}  // namespace compmpi::narrow

namespace compmpi {
extern const CodecOps codec_fp32_ops = {
    CodecId::fp32, "fp32",
    "fp64 data only: each double rounded to the nearest float (static_cast<float>); a double beyond the float range "
    "sends the call to the exact path",
    CODEC_FP64_ONLY,
    0, 0, 0, 0,
    narrow::fp32_check, narrow::fp32_max_payload, nullptr, narrow::fp32_encode_f32, narrow::fp32_decode_f32,
    narrow::fp32_decode_f32, nullptr, nullptr, nullptr,
    /* fp64: 32 bits, the only width */
    32, 32, 32, 8,
    nullptr, narrow::fp32_encode, narrow::Fp32Decode::decode, narrow::Fp32Decode::decode_add, nullptr, nullptr,
};
}  // namespace compmpi

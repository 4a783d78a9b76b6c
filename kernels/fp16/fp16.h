// SPDX-License-Identifier: BSD-3-Clause
/* fp16 and bf16: each fp32 cast to a 16-bit float, round to nearest even.
 *
 * fp16 (IEEE binary16) payload, n elements, little-endian:
 *   off 0  4 bytes   fp32 scale s = 2^k, k in [-126, 113] (exponent field 1..240, mantissa 0)
 *   off 4  2n bytes  h_i = fp16(x_i / s)
 * k = floor(log2 max|x|) - 14 (clamped), so max|x| / s lies in [2^14, 2^15): no value can
 * overflow fp16's 65504, and the data keep 29 binades of normal fp16 below their max.
 * Decode: x_i = float(h_i) * s, exact. When k = 113 (max|x| >= 2^127) |x / s| is first
 * clamped to 32752, the largest fp16 below 2^15, so that no value decodes to Inf.
 *
 * bf16 payload: 2n bytes, b_i = top half of x_i rounded to nearest even; bf16 has fp32's
 * exponent range, so no scale. fp32 denormals encode as signed zero (what AVX-512 BF16's
 * vcvtne2ps2bf16 does; every path does the same), and a value whose rounding would reach
 * Inf is truncated instead (|x| > 0x7F7F7FFF as bits encodes as 0x7F7F).
 *
 * Header: bits = 16, variant = 0, param = 0 for both. */
#pragma once
#include <cstddef>
#include <cstdint>

#include "codec.h"

namespace compmpi::half {

inline constexpr size_t kScaleBytes = 4;

/* Scalar reference conversions (the SIMD paths match them bit for bit). */
uint16_t fp16_from_float(float f); /* IEEE round to nearest even, overflow -> Inf */
float fp16_to_float(uint16_t h);   /* exact; NaN comes back quiet, as with F16C */
uint16_t bf16_from_float(float f); /* the bf16 rule above; NaN/Inf unspecified */
float bf16_to_float(uint16_t b);

/* Whether the CPU runs the native AVX-512 BF16 encoder (used when lvl is avx512). */
bool bf16_native_available();

/* Kernels, all threads given. fp16 payload = kScaleBytes + 2n bytes, bf16 = 2n bytes.
 * Encoders return nonfinite if the input holds NaN/Inf (output unspecified); the fp16
 * decoder returns corrupt for a scale that is not 2^k, k in [-126, 113], writing nothing.
 * bf16_native = false forces the integer-rounding path at the avx512 level (tests). */
Status fp16_encode(const float *in, size_t n, uint8_t *out, SimdLevel lvl, int threads);
Status fp16_decode(const uint8_t *in, size_t n, float *out, bool add, SimdLevel lvl, int threads);
Status bf16_encode(const float *in, size_t n, uint8_t *out, SimdLevel lvl, int threads, bool bf16_native = true);
void bf16_decode(const uint8_t *in, size_t n, float *out, bool add, SimdLevel lvl, int threads);

}  // namespace compmpi::half

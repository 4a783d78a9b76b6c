/* q8: Dettmers' 8-bit data types ("8-Bit Approximations for Parallelism in Deep Learning",
 * ICLR 2016). Values are divided by the buffer's max-abs and mapped to the NEAREST entry of
 * one of four fixed 256-entry tables; decode is a table lookup times the max-abs.
 *
 * Payload (little-endian), n elements:
 *   off 0  4 bytes  fp32 scale = max |x| (finite, >= 0, sign bit clear)
 *   off 4  n bytes  code of element i: bit 7 = sign, bits 0..6 = magnitude code m
 * Header: bits = 8, variant = data type (kDynamicTree..kMantissa, the order of the q8_type
 * setting), param = 0. Decoded value = sign * table(variant)[m] * scale.
 *
 * Every type is sign + 7-bit magnitude with magnitudes strictly increasing in m and
 * m = 0 meaning 0, so one encoder serves all four (docs/codecs/q8.md has the tables):
 *   dynamic_tree  m = 0^E 1 f (E leading zeros, indicator bit, k = 6-E fraction bits):
 *                 10^-E * (0.1 + 0.9 (f + 1/2) / 2^k); m = 0 -> 0
 *   linear        m / 127
 *   static_tree   m = e:3 | f:4:  10^(e-7) * (0.1 + 0.9 (f + 1/2) / 16); m = 0 -> 0
 *   mantissa      m = e:3 | f:4:  10^(e-7) * (0.1 + 0.9 f / 16);          m = 0 -> 0
 */
#pragma once
#include <cstddef>
#include <cstdint>

#include "codec.h"

namespace compmpi::q8 {

enum Type : uint8_t { kDynamicTree = 0, kLinear = 1, kStaticTree = 2, kMantissa = 3 };
inline constexpr int kNumTypes = 4;
inline constexpr size_t kScaleBytes = 4;

/* The 128 magnitudes of a type (index = magnitude code), strictly increasing, [0] = 0,
 * all <= 1; built once, on first use. nullptr for an unknown type. */
const float *magnitudes(int type);
/* The exact values in double, as the formulas above give them (for tests and docs). */
double magnitude_exact(int type, int m);

/* Encode n floats into kScaleBytes + n bytes. Returns nonfinite (output unspecified) if
 * the input holds NaN/Inf. Every SIMD level and thread count writes the same bytes. */
Status encode(const float *in, size_t n, int type, uint8_t *out, SimdLevel lvl, int threads);
/* Decode a payload of kScaleBytes + n bytes into out (or add into it); corrupt if the
 * scale is negative, NaN or Inf (nothing is written then). */
Status decode(const uint8_t *in, size_t n, int type, float *out, bool add, SimdLevel lvl, int threads);

}  // namespace compmpi::q8

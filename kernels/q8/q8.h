// SPDX-License-Identifier: BSD-3-Clause
/* q8: Dettmers' 8-bit data types ("8-Bit Approximations for Parallelism in Deep Learning",
 * ICLR 2016; /work/shared/papers/001_*, Section 4 and Table 1), docs/codecs/q8.md.
 *
 * Payload (little-endian), n elements:
 *   off 0  4 bytes  fp32 scale s (finite, >= 0, sign bit clear)
 *   off 4  n bytes  code of element i: bit 7 = sign, bits 0..6 = magnitude code m
 * Header: bits = 8, variant = type (Type below, = the index of the q8_type setting), param = 0.
 * Decoded value = sign * magnitudes(variant)[m] * s.
 *
 * The scale is what the paper uses for the type:
 *   dynamic tree, linear and the *_maxabs / *_nearest variants: s = max |x| of the buffer
 *     (Section 4.1: "normalize a matrix by dividing by its absolute maximum value");
 *   static tree, mantissa: s = 10^k, the exponent offset (Table 1 caption: "exponent offset
 *     of 10^1", 10^2 for N(0, 10^2)); the encoder picks the smallest k in [kOffsetMin,
 *     kOffsetMax] whose top value s * magnitude(127) is >= max |x| ("fitting offsets for the
 *     exponent"), encode_offset() takes a fixed k. The decoder accepts only exact fp32(10^k).
 *
 * Magnitudes at s = 1 (code m, 7 bits; exact rationals, docs/codecs/q8.md):
 *   dynamic_tree (0, 4)  m = 0^n 1 f: n leading zeros (exponent 10^-n), indicator bit, 6-n bits
 *                        f of a bisection tree over (0.1, 1) whose first split is at 0.45:
 *                        leaf midpoint * 10^-n; m = 1 (n = 6, no tree bit): 0.55e-6; m = 0: 0
 *   linear (1, 5)        m / 127
 *   static_tree (2)      m = E:3 f:4: tree node f over (0.1, 1) (first split 0.45, then halves:
 *                        interval start points) * 10^(E-7)
 *   mantissa (3)         m = E:3 f:4: the integer f (0..15) * 10^(E-7)
 *   static_tree_maxabs (6)  E:3 f:4: 10^(E-7) * (0.1 + 0.9 (f + 1/2) / 16); m = 0 -> 0
 *   mantissa_maxabs (7)     E:3 f:4: 10^(E-7) * (0.1 + 0.9 f / 16);        m = 0 -> 0
 * Rounding: types 0-3 select the entry as the paper's binary search on the sorted table does
 * in its published implementation (docs/codecs/q8.md, "Rounding"); 4-7 the nearest entry
 * (ties to the smaller magnitude). Every code byte is valid. */
#pragma once
#include <cstddef>
#include <cstdint>

#include "codec.h"

namespace compmpi::q8 {

enum Type : uint8_t {
    kDynamicTree = 0,
    kLinear = 1,
    kStaticTree = 2,
    kMantissa = 3,
    kDynamicTreeNearest = 4,
    kLinearNearest = 5,
    kStaticTreeMaxabs = 6,
    kMantissaMaxabs = 7,
};
inline constexpr int kNumTypes = 8;
inline constexpr size_t kScaleBytes = 4;
/* exponent offsets 10^k the static tree and mantissa types can carry (fp32(10^k) and
 * 1/fp32(10^k) normal, top value finite) */
inline constexpr int kOffsetMin = -29, kOffsetMax = 37;

/* true for the types whose scale is an exponent offset 10^k (static_tree, mantissa) */
bool has_offset(int type);
/* fp32(10^k), correctly rounded; 0 outside [kOffsetMin, kOffsetMax] */
float offset_scale(int k);

/* The 128 magnitudes of a type at scale 1 (index = magnitude code); built once, on first
 * use. Not monotone in the code for mantissa. nullptr for an unknown type. */
const float *magnitudes(int type);
/* The exact values in double, as the formulas above give them (for tests and docs). */
double magnitude_exact(int type, int m);
/* The decision rule at scale 1: the code the encoder writes for y = |x| / s >= 0 (scalar
 * reference of the table encoder; y above the largest magnitude gives the top entry). */
int code_of(int type, float y);

/* Encode n floats into kScaleBytes + n bytes. Returns nonfinite (output unspecified) if
 * the input holds NaN/Inf. Every SIMD level and thread count writes the same bytes. */
Status encode(const float *in, size_t n, int type, uint8_t *out, SimdLevel lvl, int threads,
              float fixed_scale = -1); /* >= 0: use this scale (q8_whole_scale of the whole contribution) */
/* Static tree / mantissa with a fixed exponent offset 10^k (values above the top entry
 * saturate); invalid_arg for other types or k outside [kOffsetMin, kOffsetMax]. */
Status encode_offset(const float *in, size_t n, int type, int k, uint8_t *out, SimdLevel lvl, int threads);
/* out = the sum of cnt payloads decoded, in index order (the bits of decode + decode(add)),
 * block by block; every payload checked before out is written. */
Status decode_sum(const uint8_t *const *in, int cnt, size_t n, int type, float *out, SimdLevel lvl, int threads,
                  bool stream = false); /* stream: non-temporal stores of the result (CodecParams::stream_out) */
/* Decode a payload of kScaleBytes + n bytes into out (or add into it); corrupt if the
 * scale is not valid for the type (nothing is written then). */
Status decode(const uint8_t *in, size_t n, int type, float *out, bool add, SimdLevel lvl, int threads);

/* fp64 (docs/codecs/q8.md, "fp64"): the same payload (fp32 scale + n codes). The scale is
 * max |x| in double rounded up to fp32 (the offset types: the smallest 10^k whose top value
 * holds max |x|, compared in double); max |x| > FLT_MAX -> nonfinite (no fp32 scale holds it:
 * the exact path). Codes: the fp32 rule applied to the exact double |x| / s. Decoded value
 * = magnitude * s, exact in double. */
Status scale_of(const double *in, size_t n, int type, SimdLevel lvl, int threads, float *scale);
Status encode(const double *in, size_t n, int type, uint8_t *out, SimdLevel lvl, int threads, float fixed_scale = -1);
Status decode(const uint8_t *in, size_t n, int type, double *out, bool add, SimdLevel lvl, int threads);
Status decode_sum(const uint8_t *const *in, int cnt, size_t n, int type, double *out, SimdLevel lvl, int threads);

}  // namespace compmpi::q8

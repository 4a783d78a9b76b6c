// SPDX-License-Identifier: BSD-3-Clause
/* bitpack (Approximate Data Transfer, Zhuang et al.): keep the top k = bits/8 bytes of each
 * fp32 (k = 1..4) or fp64 (k = 2..8: sign, 11 exponent bits, the top 8k - 12 mantissa bits).
 * Payload: element i's kept bytes at [i*k, i*k+k), least significant kept byte first (so
 * k = 2 of an fp32 is exactly the bfloat16 bit pattern). Decode zero-fills the dropped bytes.
 * variant 0 truncates (the paper); variant 1 rounds to nearest even, except that a value
 * whose rounding would reach the Inf/NaN exponent is truncated instead. k = 4 of an fp32 and
 * k = 8 of an fp64 are lossless. */
#pragma once
#include <cstddef>
#include <cstdint>

#include "codec.h"

namespace compmpi::bitpack {

inline constexpr uint8_t kTrunc = 0, kNearest = 1;

/* Kernels for one SIMD level, all threads given. encode returns nonfinite if any input is
 * NaN/Inf (the bytes are still written, identically on every path). */
Status encode(const float *in, size_t n, int k, bool nearest, uint8_t *out, SimdLevel lvl, int threads);
void decode(const uint8_t *in, size_t n, int k, float *out, bool add, SimdLevel lvl, int threads);
/* The same on doubles, k = 1..8 (the codec accepts 2..8). */
Status encode(const double *in, size_t n, int k, bool nearest, uint8_t *out, SimdLevel lvl, int threads);
void decode(const uint8_t *in, size_t n, int k, double *out, bool add, SimdLevel lvl, int threads);

}  // namespace compmpi::bitpack

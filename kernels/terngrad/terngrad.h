// SPDX-License-Identifier: BSD-3-Clause
/* terngrad (Wen et al., "TernGrad: Ternary Gradients to Reduce Communication in Distributed
 * Deep Learning", NIPS 2017): each value becomes s * sign(g) * b, b ~ Bernoulli(|g|/s),
 * after clipping g to [-c sigma, c sigma]; s = max |clipped g| per buffer (or per bucket of
 * `param` elements), shared across ranks by a MAX reduction (prepare / shared_scale).
 *
 * Header: bits, variant, param = bucket size (0: one bucket).
 * Payload: nb fp32 scalers (one per bucket, little-endian), then the codes:
 *   variant 0 base4 : 2-bit two's complement fields (0 -> 0, 1 -> +s, 3 -> -s; 2 is corrupt),
 *                     4 per byte, element i at bits 2(i%4) of byte i/4.          bits = 2
 *   variant 1 base3 : 5 per byte, byte = sum_j (k_{5m+j} + 1) 3^j over the elements present
 *                     (missing trailing digits 0); a byte > 242 is corrupt.      bits = 2
 *   variant 2 levels: phase 2 of the two-phase allreduce: `bits`-bit two's complement
 *                     integers k, value s * k (2 <= bits <= 16), from reduced_params().
 * Details, settings and measurements: docs/codecs/terngrad.md. */
#pragma once
#include <cstddef>
#include <cstdint>

#include "codec.h"

namespace compmpi::terngrad {

inline constexpr uint8_t kBase4 = 0, kBase3 = 1, kLevels = 2;
inline constexpr int kMaxLevelBits = 16;

/* Bits of the levels variant that carries sums of `nranks` ternary values exactly:
 * ceil(log2(2 P + 1)); 0 if P is too large for kMaxLevelBits. */
int level_bits(int nranks);

}  // namespace compmpi::terngrad

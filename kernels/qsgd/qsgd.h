// SPDX-License-Identifier: BSD-3-Clause
/* qsgd (Alistarh et al., "QSGD: Communication-Efficient SGD via Gradient Quantization and
 * Encoding", NIPS 2017): stochastic s-level quantisation, norm-scaled,
 *   Q(v_i) = ||v||_2 * sign(v_i) * xi_i / s,  xi_i = floor(r) + Bernoulli(r - floor(r)),
 *   r = s |v_i| / ||v||_2,  s = 2^(bits-1) - 1,
 * per bucket of `param` elements (0: one bucket for the buffer). Unbiased; the paper's Lemma
 * 3.1 bounds E||Q(v) - v||^2 <= min(d/s^2, sqrt(d)/s) ||v||^2 for a bucket of d elements.
 *
 * Header: bits (2..8), variant 0, param = bucket size.
 * Payload: nb fp32 norms (one per bucket, little-endian, rounded up so |v_i| <= norm), then
 * sign(v_i) xi_i as `bits`-bit two's complement fields (kernels/common/fields.h).
 * reduced_params (phase 2 of the two-phase allreduce, a partial sum): the same bucket at
 * 8 bits, an unbiased second rounding with little variance.
 * Details: docs/codecs/qsgd.md. */
#pragma once
#include <cstdint>

#include "codec.h"

namespace compmpi::qsgd {

/* Bucket the policy uses when no bucket is configured (the paper's 512). */
inline constexpr uint32_t kDefaultBucket = 512;

/* The paper's variance bound (Lemma 3.1): E||Q(v) - v||^2 <= omega ||v||^2 with
 * omega = min(d / s^2, sqrt(d) / s) for a bucket of d elements, s = 2^(bits-1) - 1.
 * bucket 0 (one norm per buffer) has no bound independent of the buffer: +inf.
 * Error feedback needs omega < 1 (a contraction: the residual stays bounded); at the
 * default 4 bits and bucket 512 omega = 3.2, and feedback diverges (docs/codecs/qsgd.md). */
inline double variance_bound(int bits, uint64_t bucket) {
    if (bucket == 0 || bits < 2) return __builtin_inf();
    const double d = static_cast<double>(bucket), s = static_cast<double>((1 << (bits - 1)) - 1);
    const double a = d / (s * s), b = __builtin_sqrt(d) / s;
    return a < b ? a : b;
}

}  // namespace compmpi::qsgd

// SPDX-License-Identifier: BSD-3-Clause
/* Deterministic l2-norm of floats: the same bits for the same data on every rank, whatever
 * the thread count (fixed blocks of kNormBlock, each summed in a fixed order into 8 double
 * accumulators, blocks added in order). awp compares norms across calls and ranks
 * (src/runtime/policy.h); the CUDA backend gives the same bits (docs/gpu.md). */
#pragma once
#include <cstddef>

namespace compmpi {

double l2_norm_det(const float *x, size_t n, int threads);
/* The same for doubles (each square summed in double: exact products are not needed for a norm). */
double l2_norm_det(const double *x, size_t n, int threads);

}  // namespace compmpi

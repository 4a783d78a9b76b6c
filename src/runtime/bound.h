// SPDX-License-Identifier: BSD-3-Clause
/* Error-bounded mode (setting error_bound; docs/error_bound.md): for one call, the cheapest
 * deterministic codec and width that provably keep every element of the collective's result
 * within the bound of the exact result.
 *
 * The proof composes each codec's round-trip model (kernels/error_model.h) over the shape of
 * the algorithm that may run (BoundShape): along any one value's path from a contribution to
 * the result there are at most L encodes and K floating-point additions (unit roundoff eps of
 * the element type), and W counts, over the encodes whose error reaches one element, the
 * contributions each encoded value sums. With A = sum over ranks of |x_r[i]|:
 *   relative model, |y| in [normal_min, max_value] or y = 0 at every encode (rel mode checks
 *   it at each encode, coll_encode, and takes the exact path otherwise):
 *       |R - S| <= ((1 + u)^L (1 + eps)^K - 1) A
 *   absolute, with M = max |x| over every rank's data (one MAX-allreduce per call) and the
 *   codec's linear bound slope B + floor:
 *       |R - S| <= ((1 + eps)^K - 1) A + (1 + eps)^K (slope M W + floor W),  A <= P M
 *   (for relative-model codecs the first form plus the subnormal floor, whichever is smaller).
 * Every rank computes the same choice from the same inputs (settings, P, the MAX-reduced M). */
#pragma once
#include <cstddef>
#include <string>

#include "codec.h"
#include "runtime/args.h"
#include "base/settings.h"

namespace compmpi {

struct BoundShape {
    int L = 0;        /* encodes along one value's path */
    int K = 0;        /* additions along one value's path */
    double W = 0;     /* sum over the encodes reaching one element of the contributions each sums */
    bool reduce = false; /* the result sums P contributions (A <= P M), else it is one value (A = M) */
};

/* The shape of collective `kind` over P ranks, allreduce_algorithm alg (the setting's value:
 * auto covers every algorithm auto may run, hierarchical leaders included). */
BoundShape bound_shape(Coll kind, int P, int alg);

/* What the planner may choose from; the settings the user set explicitly are kept. */
struct BoundOptions {
    double bound = 0;          /* the setting: > 0 abs, < 0 rel */
    Elem elem = Elem::f32;
    int codec = -1;            /* an explicit codec id, or -1: bitpack, fp32 (doubles), zfp and sz (abs) */
    int bits = 0;              /* an explicit width, or 0 */
    int variant = -1;          /* an explicit bitpack rounding, or -1 (nearest) */
    int sz_variant = 1;        /* sz's predictor (setting sz_mode): kernels/sz/sz.h */
    bool variable_ok = true;   /* the collective takes payloads of data-dependent size (not reduce-scatter) */
};

struct BoundChoice {
    bool ok = false;
    const CodecOps *codec = nullptr;
    CodecParams params;        /* bits, variant, elem; range_lo/range_hi for the encode check */
    double proven = 0;         /* the bound the choice guarantees (abs: absolute; rel: factor of A) */
    std::string why;           /* !ok: why no choice holds the bound */
};

/* The choice for a call of shape sh over P ranks; maxabs: M (abs mode; ignored for rel). */
BoundChoice bound_choose(const BoundOptions &o, const BoundShape &sh, int P, double maxabs);

struct CommState;
struct Plan;
/* The error-bounded step of one call (caller holds st.mu; every rank of the communicator calls
 * it alike): in abs mode a MAX-allreduce of max |x| over the ranks' data (in[0..n_in): this
 * rank's contribution; a bcast's non-root passes n_in = 0), then bound_choose; the choice
 * replaces plan's codec and parameters (awp off). Returns MPI_SUCCESS with *pass = true when
 * the call must go to MPI unchanged (data not finite, or no codec holds the bound: warned
 * once per communicator and reason), an MPI error code if the allreduce failed. */
int bound_apply(const CollArgs &a, CommState &st, Plan &plan, const void *in, size_t n_in, bool *pass);

}  // namespace compmpi

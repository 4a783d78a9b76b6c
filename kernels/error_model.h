// SPDX-License-Identifier: BSD-3-Clause
/* What one encode-decode round trip of a deterministic codec can change in a value: the
 * error-bounded mode (src/runtime/bound.h, docs/error_bound.md) composes these into a proven
 * bound on a whole collective. Only codecs whose round trip is a fixed function of the value
 * (and of its 4-value block for zfp) have a model; stochastic or data-scaled codecs (q8,
 * terngrad, qsgd, topk, fft_topk, sparse, fp16, bf16, rangefloat) answer false.
 *
 * Relative model (bitpack, fp32, none): for every finite y with |y| <= max_value,
 *     |decode(encode(y)) - y| <= rel * max(|y|, normal_min),
 * so for y = 0 or |y| >= normal_min the error is at most rel |y|. Derivation per codec in
 * error_model.cc; docs/error_bound.md.
 * Absolute model (zfp fixed rate, sz, and every relative one): for values whose 4-value block has
 * max |y| <= B, |decode(encode(y)) - y| <= abs_error(B). */
#pragma once
#include <cstddef>

#include "codec.h"

namespace compmpi {

struct ErrorModel {
    double rel = -1;        /* < 0: no relative model */
    double normal_min = 0;  /* below it (y != 0) the relative model degrades to an absolute floor */
    double max_value = 0;   /* the model holds for |y| <= max_value */
};

/* The relative model of codec c with parameters p (elem p.elem); false if it has none. */
bool codec_error_model(const CodecOps &c, const CodecParams &p, ErrorModel *m);
/* A bound on |decode(encode(y)) - y| for blocks whose max |y| <= B, or -1 when c/p has no
 * model or B is beyond its range. Monotone in B. */
double codec_abs_error(const CodecOps &c, const CodecParams &p, double B);
/* A bound on abs_error that is linear in B: codec_abs_error(c, p, B) <= slope * B + floor for
 * every B in range (used to sum errors over partial sums of many magnitudes); false if none. */
bool codec_abs_error_linear(const CodecOps &c, const CodecParams &p, double *slope, double *floor, double *max_value);

/* Whether any value of in[0..n) is nonzero with |x| outside [lo, hi] (the relative model's
 * strict range: an encode that meets one takes the exact path). NaN is not counted. */
bool outside_range_any(const float *in, size_t n, double lo, double hi);
bool outside_range_any(const double *in, size_t n, double lo, double hi);
/* max |x| over in[0..n); +inf if any value is NaN/Inf. */
double max_abs_of(const float *in, size_t n);
double max_abs_of(const double *in, size_t n);

}  // namespace compmpi

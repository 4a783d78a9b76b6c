/* Policy: turns settings and per-buffer history into a Plan (codec + params) for one call,
 * and observes the call's result afterwards. Decisions use only data every rank shares
 * (the settings, which ranks agree on, and the collective's result, which is bit-identical
 * everywhere), so every rank makes the same decision without communicating. */
#pragma once
#include <cstddef>

#include "codec.h"
#include "state.h"
#include "stats.h"

namespace compmpi {

struct Plan {
    const CodecOps *codec = nullptr;
    CodecParams params;
    AwpState *awp = nullptr; /* set when the awp policy tracks this buffer */
};

/* Caller holds st.mu. */
Status policy_plan(CommState &st, Coll kind, const void *key_addr, size_t count, Plan *plan);
/* l2norm: the backend's deterministic norm of `result` (host or device data). */
void policy_observe(CommState &st, const Plan &plan, const float *result, size_t n,
                    double (*l2norm)(void *, const float *, size_t), void *ctx);

/* Codec parameters named by the settings (bits, variant, ...). */
Status codec_params_from_settings(const CodecOps &c, const Settings &s, CodecParams *p);

/* Deterministic l2-norm: the same bits for the same data whatever the thread count. */
double l2_norm_det(const float *x, size_t n, int threads);

/* The awp state machine (Zhuang et al., Algorithm 1), exposed for unit tests: records a
 * new norm and raises bits by step after `interval` consecutive relative changes < T.
 * After a raise the next call only records its norm (a norm measured at another width is
 * not compared). */
void awp_update(AwpState *a, double norm, double threshold, int interval, int step, int max_bits);

}  // namespace compmpi

// SPDX-License-Identifier: BSD-3-Clause
/* Policy: turns settings and per-key history into a Plan (codec + params) for one call, and
 * observes a norm afterwards. Decisions use only data every rank shares (the settings, which
 * ranks agree on; keys made of call arguments every rank passes alike; norms that are
 * bit-identical everywhere), so every rank makes the same decision without communicating. */
#pragma once
#include <bitset>
#include <cstddef>
#include <string>

#include "codec.h"
#include "norm.h"
#include "runtime/state.h"
#include "base/stats.h"

namespace compmpi {

struct Plan {
    const CodecOps *codec = nullptr;
    CodecParams params;
    AwpState *awp = nullptr; /* set when the awp policy tracks this call's key: observe it */
    /* the entropy stage (setting entropy): -1 as the setting says (zstd: on; off, auto: off),
     * 0 off, 1 on (entropy=auto: the cost model's decision, the same on every rank) */
    int entropy = -1;
    /* set by the run: a timed algorithm choice nested in it (allreduce_algorithm=auto,
     * hierarchy=auto) ran one of its exploring calls on this rank: the call's time is not yet
     * the algorithm's, and the cost model does not learn from it */
    bool nested_exploring = false;
};

/* One call's plan, in stages: the settings' codec and parameters (static), then awp's width
 * for the call's key. Every input is shared by all ranks (agreed settings; the key is the
 * collective, the count as passed to MPI and the bcast root, never an address), so every
 * rank plans the same bytes on the wire. Caller holds st.mu. root: bcast root, else -1. */
Status policy_plan(CommState &st, Coll kind, size_t count, int root, Plan *plan, Elem elem = Elem::f32);
/* After a successful call: feed awp the norm of this call (see docs/design.md "whose norm":
 * bcast, the root's fp32 input as carried in the frame; allreduce/allgather, the result).
 * No-op when plan.awp is null. */
void policy_observe(CommState &st, const Plan &plan, double norm);

/* The codec a call on elements of type e runs (docs/codecs/lossless.md, "Lossy only where
 * asked"): the settings' codec, unless it is lossy and e is not among lossy_types -- then the
 * lossless codec. error_bound mode keeps the settings' codec (its planner chooses codecs that
 * hold the bound for both types). The first time an explicit lossy setting is narrowed this
 * way, a note says how to opt the type in. Depends on the agreed settings only. */
const CodecOps *policy_codec(const Settings &s, Elem e);

/* Codec parameters named by the settings (bits, variant, ...), for elements of type elem
 * (bits 0: the codec's default width for that type). */
Status codec_params_from_settings(const CodecOps &c, const Settings &s, CodecParams *p, Elem elem = Elem::f32);


/* ---- awp: Adaptive Weight Precision (Zhuang et al., Algorithm 1; constants Section V-A) ---- */

/* The constants the awp rule runs with. */
struct AwpConfig {
    int rule = 0;          /* awp_rule setting: paper or legacy_abs */
    double threshold = 0;  /* T */
    int interval = 1;      /* INTERVAL */
    int step = 8;          /* N */
    int start_bits = 8;    /* bits every key starts at */
};
/* A named preset of Section V-A (awp_preset=alexnet|vgg|resnet); nullptr for custom. */
struct AwpPreset {
    const char *name;
    double threshold;
    int interval, step, start_bits;
};
const AwpPreset *awp_preset(int preset);
/* The constants for s: its named preset's, or the awp_* settings with awp_preset=custom. */
AwpConfig awp_config(const Settings &s);

/* Checks that depend on which settings were named (env/attribute/hint layers): with a
 * named preset the awp_threshold/awp_interval/awp_step/awp_start_bits settings are refused
 * rather than silently overridden; awp_rule=legacy_abs needs a positive T (|delta| < T
 * never holds otherwise). */
Status policy_check_settings(const Settings &s, const std::bitset<kNumSettings> &named, std::string *err);

/* One call of the awp state machine: records `norm` (|W_b|) and may raise a->bits, capped at
 * max_bits. Dispatches on cfg.rule:
 *   paper       Algorithm 1 literally: delta = (|W_b| - |W_(b-1)|) / |W_(b-1)| (signed, IEEE
 *               double: a zero previous norm gives +Inf or NaN, which never count);
 *               delta < T adds one to the counter; the counter reaching INTERVAL raises the
 *               bits by N and is reset; nothing else resets it. Every call after the first
 *               is compared (the first has no |W_(b-1)| and only records).
 *   legacy_abs  libcompmpi's earlier rule: |delta| < T counts, any other call resets the
 *               counter, and the call after a raise only records its norm. */
void awp_update(AwpState *a, double norm, const AwpConfig &cfg, int max_bits);

}  // namespace compmpi

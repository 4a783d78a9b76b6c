// SPDX-License-Identifier: BSD-3-Clause
#include "runtime/policy.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <vector>

#include "base/log.h"
#include "lossless/lossless.h"
#include "qsgd/qsgd.h"
#include "rangefloat/rangefloat.h"
#include "runtime/schedule.h"
#include "terngrad/terngrad.h"
#include "runtime/verdict.h"
#include "sz/sz.h"
#include "zfp/zfp.h"

namespace compmpi {

namespace {
/* awp keys of fp64 calls: the collective offset by this (src/runtime/state.h AwpKey) */
constexpr int kAwpFp64 = 1 << 8;
/* rangefloat_mode -> the header variant of rangefloat and fft_topk (rangefloat.h) */
uint8_t rf_mode(const Settings &s) {
    return s.rangefloat_mode == enum_value(SettingId::rangefloat_mode, "paper") ? rf::kModePaper : rf::kModeRangeSign;
}
}  // namespace

Status codec_params_from_settings(const CodecOps &c, const Settings &s, CodecParams *p, Elem elem) {
    p->elem = elem;
    p->bits = static_cast<uint8_t>(codec_bits_for(c, static_cast<int>(s.bits), elem));
    p->variant = 0;
    p->param = 0;
    p->seed = static_cast<uint64_t>(s.seed);
    p->theta = static_cast<float>(s.theta);
    p->clip = static_cast<float>(s.terngrad_clip);
    p->bucket = static_cast<uint32_t>(s.terngrad_bucket);
    p->block = static_cast<uint32_t>(s.fft_block);
    /* codec-specific header fields named by settings: one case per codec */
    switch (c.id) {
        case CodecId::bitpack:
            p->variant = s.rounding == rounding_kind::nearest ? 1 : 0;
            break;
        case CodecId::none:
            p->bits = 0;
            break;
        case CodecId::q8:
            /* always 8 bits; the q8_type index is the header variant (kernels/q8/q8.h,
             * checked by tests/unit/test_q8.cc) */
            p->bits = 8;
            p->variant = static_cast<uint8_t>(s.q8_type);
            break;
        case CodecId::terngrad:
            /* no adjustable width: 2 whatever `bits` says; packing names the variant, the
             * bucket travels in param (kernels/terngrad/terngrad.h) */
            p->bits = 2;
            p->variant = s.terngrad_packing == enum_value(SettingId::terngrad_packing, "base3") ? terngrad::kBase3
                                                                                              : terngrad::kBase4;
            p->param = p->bucket;
            break;
        case CodecId::qsgd:
            /* qsgd_bucket (default 512, the paper's); 0 = one norm for the buffer */
            p->bucket = static_cast<uint32_t>(s.qsgd_bucket);
            p->param = p->bucket;
            break;
        case CodecId::topk:
            /* values travel as exact fp32: no width; theta stays encode-side (p->theta) */
            p->bits = 0;
            break;
        case CodecId::fft_topk:
            /* the decoder needs the block layout: fft_block travels in param (0 = one
             * transform per buffer); bits = the range-based float width (default 10) */
            p->param = p->block;
            p->variant = rf_mode(s);
            break;
        case CodecId::rangefloat:
            p->variant = rf_mode(s);
            break;
        case CodecId::lossless:
            /* no width; the transform is the header variant, the block size (log2) its param;
             * the zstd level stays encode-side (kernels/lossless/lossless.h) */
            p->bits = 0;
            p->variant = s.lossless_mode == enum_value(SettingId::lossless_mode, "delta") ? lossless::kDelta
                                                                                        : lossless::kShuffle;
            p->param = lossless::kBlockLog2;
            p->level = static_cast<int>(s.lossless_level);
            break;
        case CodecId::sz:
            /* no width; the bound travels in param (float bits), the predictor in variant
             * (kernels/sz/sz.h); error_bound replaces both per call (src/runtime/bound.cc) */
            p->bits = 0;
            p->variant = s.sz_mode == enum_value(SettingId::sz_mode, "plain") ? sz::kPlain : sz::kLorenzo;
            p->param = sz::eb_param(static_cast<float>(s.sz_bound));
            break;
        case CodecId::zfp:
            /* fixed rate: bits is the rate; fixed accuracy: the tolerance travels in param
             * (kernels/zfp/zfp.h) */
            if (s.zfp_tolerance > 0) {
                p->bits = 0;
                p->variant = zfp::kFixedAccuracy;
                p->param = zfp::tolerance_param(static_cast<float>(s.zfp_tolerance));
            }
            break;
        default:
            break;
    }
    return c.check(*p);
}

const CodecOps *policy_codec(const Settings &s, Elem e) {
    const CodecOps *c = codec_by_id(s.codec);
    if (!c || (c->flags & CODEC_LOSSLESS) || error_bound_on(s.error_bound)) return c;
    const int bit = e == Elem::f64 ? lossy_kind::fp64 : lossy_kind::fp32;
    if ((s.lossy_types >> bit) & 1u) return c;
    /* a setting the user chose (not the defaults' awp over bitpack) no longer reaches this type */
    static std::atomic<bool> said[2];
    if ((s.bits || s.codec != static_cast<int>(CodecId::bitpack) || s.policy != policy_kind::awp) &&
        !said[e == Elem::f64].exchange(true))
        log_info("codec=%s%s is lossy and lossy_types does not list %s: %s data is compressed losslessly instead "
                 "(codec lossless, bit-exact, where the cost model finds it pays); set COMPMPI_LOSSY_TYPES=fp32,fp64 "
                 "(hint compmpi_lossy_types) to compress %s with codec %s too",
                 c->name, s.bits ? (" bits=" + std::to_string(s.bits)).c_str() : "", elem_name(e), elem_name(e),
                 elem_name(e), c->name);
    return codec_by_id(static_cast<int>(CodecId::lossless));
}

/* ---- awp ---- */

namespace {
constexpr int kPresetCustom = enum_value(SettingId::awp_preset, "custom");
constexpr int kRulePaper = enum_value(SettingId::awp_rule, "paper");
constexpr int kRuleLegacyAbs = enum_value(SettingId::awp_rule, "legacy_abs");

/* Zhuang et al., Section V-A: "The obtained values of T are -5x10^-2, -2x10^-3 and -2x10^-5
 * for Alexnet, VGG and Resnet, respectively. We set the INTERVAL parameter to 4000 for both
 * AlexNet and VGG and 2000 for Resnet. [...] We set N to 8 [...] AWP initially applies 8-bit
 * precision to all layers." Indexed by the awp_preset value. */
constexpr AwpPreset kPresets[] = {
    {"alexnet", -5e-2, 4000, 8, 8},
    {"vgg", -2e-3, 4000, 8, 8},
    {"resnet", -2e-5, 2000, 8, 8},
};
static_assert(enum_value(SettingId::awp_preset, "alexnet") == 0 && enum_value(SettingId::awp_preset, "vgg") == 1 &&
              enum_value(SettingId::awp_preset, "resnet") == 2 && kPresetCustom == 3,
              "kPresets follows the order of awp_preset's values");

/* Algorithm 1, lines 6-13, for one layer (here: one call key). */
void awp_update_paper(AwpState *a, double norm, const AwpConfig &cfg, int max_bits) {
    if (a->have_norm) {
        const double delta = (norm - a->last_norm) / a->last_norm; /* line 6 */
        if (delta < cfg.threshold) a->counter += 1;                 /* lines 7-9 */
        if (a->counter == cfg.interval) {                           /* lines 10-13 */
            const int raised = std::min(max_bits, a->bits + cfg.step);
            if (raised != a->bits) ++a->raises;
            a->bits = raised;
            a->counter = 0;
        }
    }
    a->last_norm = norm;
    a->have_norm = true;
}

/* The rule libcompmpi used before it followed the paper (awp_rule=legacy_abs). */
void awp_update_legacy_abs(AwpState *a, double norm, const AwpConfig &cfg, int max_bits) {
    if (a->have_norm && std::isfinite(norm)) {
        double prev = a->last_norm;
        double delta = prev > 0 ? std::fabs(norm - prev) / prev : (norm == 0 ? 0.0 : HUGE_VAL);
        if (delta < cfg.threshold) {
            if (++a->counter >= cfg.interval && a->bits < max_bits) {
                a->bits = std::min(max_bits, a->bits + cfg.step);
                a->counter = 0;
                ++a->raises;
                /* the norm at the new width is not comparable with the old one */
                a->have_norm = false;
                return;
            }
        } else {
            a->counter = 0;
        }
    }
    a->last_norm = norm;
    a->have_norm = std::isfinite(norm);
}

/* Stage 2 of a plan: awp's width for the call's key. */
void plan_awp(CommState &st, Coll kind, size_t count, int root, Plan *plan) {
    const Settings &s = st.settings;
    if (s.policy != policy_kind::awp || !(plan->codec->flags & CODEC_ADAPTIVE_BITS)) return;
    /* every rank sees the same key sequence, so every rank restarts the table together */
    if (st.awp.size() >= kMaxTrackedBuffers) st.awp.clear(), verdict_invalidate();
    /* doubles keep a state apart from floats of the same shape (kind offset by kAwpFp64) */
    const bool d = plan->params.elem == Elem::f64;
    AwpKey key{static_cast<int>(kind) + (d ? kAwpFp64 : 0), kind == Coll::bcast ? root : -1,
               static_cast<uint64_t>(count)};
    auto [it, fresh] = st.awp.try_emplace(key);
    /* the paper's 8-bit start is below the narrowest fp64 width (a sign and 11 exponent bits
     * need 16): doubles start at the codec's narrowest fp64 width (docs/configuration.md) */
    if (fresh)
        it->second.bits = d ? std::clamp<int>(awp_config(s).start_bits, plan->codec->bits64_min, plan->codec->bits64_max)
                            : std::clamp<int>(awp_config(s).start_bits, plan->codec->bits_min, plan->codec->bits_max);
    plan->awp = &it->second;
    plan->params.bits = static_cast<uint8_t>(it->second.bits);
}
}  // namespace

const AwpPreset *awp_preset(int preset) {
    return preset >= 0 && preset < kPresetCustom ? &kPresets[preset] : nullptr;
}

AwpConfig awp_config(const Settings &s) {
    AwpConfig c;
    c.rule = static_cast<int>(s.awp_rule);
    if (const AwpPreset *p = awp_preset(static_cast<int>(s.awp_preset))) {
        c.threshold = p->threshold;
        c.interval = p->interval;
        c.step = p->step;
        c.start_bits = p->start_bits;
    } else {
        c.threshold = s.awp_threshold;
        c.interval = static_cast<int>(s.awp_interval);
        c.step = static_cast<int>(s.awp_step);
        c.start_bits = static_cast<int>(s.awp_start_bits);
    }
    return c;
}

Status policy_check_settings(const Settings &s, const std::bitset<kNumSettings> &named, std::string *err) {
    if (const AwpPreset *p = awp_preset(static_cast<int>(s.awp_preset))) {
        for (SettingId id : {SettingId::awp_threshold, SettingId::awp_interval, SettingId::awp_step,
                             SettingId::awp_start_bits})
            if (named[static_cast<int>(id)]) {
                if (err) {
                    char b[160];
                    std::snprintf(b, sizeof b, " (T = %g, INTERVAL = %d, N = %d, start %d bits)", p->threshold,
                                  p->interval, p->step, p->start_bits);
                    *err = std::string("setting '") + kSettings[static_cast<int>(id)].name +
                           "' applies only with awp_preset=custom; awp_preset=" + p->name +
                           " fixes the constants of Zhuang et al." + b +
                           ". Set awp_preset=custom to use your own, or drop the setting";
                }
                return Status::invalid_arg;
            }
    }
    const AwpConfig c = awp_config(s);
    if (c.rule == kRuleLegacyAbs && !(c.threshold > 0)) {
        if (err)
            *err = "awp_rule=legacy_abs compares |delta| with T, which never counts for T = " +
                   std::to_string(c.threshold) + " <= 0: set awp_preset=custom and a positive awp_threshold";
        return Status::invalid_arg;
    }
    return Status::ok;
}

void awp_update(AwpState *a, double norm, const AwpConfig &cfg, int max_bits) {
    ++a->calls;
    if (cfg.rule == kRulePaper) awp_update_paper(a, norm, cfg, max_bits);
    else awp_update_legacy_abs(a, norm, cfg, max_bits);
}

/* Stage 1 of a plan: the settings' codec and parameters; then the stages that adapt them
 * per call (awp; a schedule of another parameter would be one more stage beside it). */
Status policy_plan(CommState &st, Coll kind, size_t count, int root, Plan *plan, Elem elem) {
    const Settings &s = st.settings;
    plan->codec = policy_codec(s, elem);
    if (!plan->codec) return Status::invalid_arg;
    if (!codec_has_elem(*plan->codec, elem)) return Status::unsupported;
    CMPI_CHECK(codec_params_from_settings(*plan->codec, s, &plan->params, elem));
    /* θ schedule (src/runtime/schedule.h): from the call count of this shape, alike on every rank */
    const ThetaSchedule sch = theta_schedule_from(s);
    if (sch.kind != ThetaScheduleKind::none && (plan->codec->id == CodecId::topk || plan->codec->id == CodecId::fft_topk))
        plan->params.theta = static_cast<float>(theta_at(sch, st.sched.next(static_cast<int>(kind), count)));
    plan->awp = nullptr;
    plan_awp(st, kind, count, root, plan);
    return plan->codec->check(plan->params);
}

void policy_observe(CommState &st, const Plan &plan, double norm) {
    if (!plan.awp) return;
    const int before = plan.awp->bits;
    awp_update(plan.awp, norm, awp_config(st.settings),
               plan.params.elem == Elem::f64 ? plan.codec->bits64_max : plan.codec->bits_max);
    if (plan.awp->bits != before) verdict_invalidate(); /* the cost model's key of this shape changed */
}

}  // namespace compmpi

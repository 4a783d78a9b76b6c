#include "policy.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "qsgd/qsgd.h"
#include "rangefloat/rangefloat.h"
#include "schedule.h"
#include "terngrad/terngrad.h"

namespace compmpi {

namespace {
constexpr size_t kNormBlock = 1 << 14;
/* rangefloat_mode -> the header variant of rangefloat and fft_topk (rangefloat.h) */
uint8_t rf_mode(const Settings &s) {
    return s.rangefloat_mode == enum_value(SettingId::rangefloat_mode, "paper") ? rf::kModePaper : rf::kModeRangeSign;
}
}  // namespace

Status codec_params_from_settings(const CodecOps &c, const Settings &s, CodecParams *p) {
    p->bits = static_cast<uint8_t>(s.bits ? s.bits : c.bits_default);
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
        default:
            break;
    }
    return c.check(*p);
}

double l2_norm_det(const float *x, size_t n, int threads) {
    const size_t nb = (n + kNormBlock - 1) / kNormBlock;
    std::vector<double> part(nb);
#pragma omp parallel for num_threads(threads) schedule(static) if (n >= (1u << 18) && threads > 1)
    for (size_t b = 0; b < nb; ++b) {
        const size_t lo = b * kNormBlock, hi = std::min(n, lo + kNormBlock);
        double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        size_t i = lo;
        for (; i + 8 <= hi; i += 8)
            for (int j = 0; j < 8; ++j) acc[j] += static_cast<double>(x[i + j]) * x[i + j];
        for (; i < hi; ++i) acc[0] += static_cast<double>(x[i]) * x[i];
        part[b] = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    }
    double s = 0;
    for (double v : part) s += v;
    return std::sqrt(s);
}

void awp_update(AwpState *a, double norm, double threshold, int interval, int step, int max_bits) {
    ++a->calls;
    if (a->have_norm && std::isfinite(norm)) {
        double prev = a->last_norm;
        double delta = prev > 0 ? std::fabs(norm - prev) / prev : (norm == 0 ? 0.0 : HUGE_VAL);
        if (delta < threshold) {
            if (++a->stalls >= interval && a->bits < max_bits) {
                a->bits = std::min(max_bits, a->bits + step);
                a->stalls = 0;
                ++a->raises;
                /* the norm at the new width is not comparable with the old one */
                a->have_norm = false;
                return;
            }
        } else {
            a->stalls = 0;
        }
    }
    a->last_norm = norm;
    a->have_norm = std::isfinite(norm);
}

Status policy_plan(CommState &st, Coll kind, const void *key_addr, size_t count, Plan *plan) {
    const Settings &s = st.settings;
    plan->codec = codec_by_id(s.codec);
    if (!plan->codec) return Status::invalid_arg;
    CMPI_CHECK(codec_params_from_settings(*plan->codec, s, &plan->params));
    /* θ schedule (src/schedule.h): from the call count of this shape, alike on every rank */
    const ThetaSchedule sch = theta_schedule_from(s);
    if (sch.kind != ThetaScheduleKind::none && (plan->codec->id == CodecId::topk || plan->codec->id == CodecId::fft_topk))
        plan->params.theta = static_cast<float>(theta_at(sch, st.sched.next(static_cast<int>(kind), count)));
    plan->awp = nullptr;
    if (s.policy == policy_kind::awp && (plan->codec->flags & CODEC_ADAPTIVE_BITS)) {
        if (st.awp.size() >= kMaxTrackedBuffers) st.awp.clear();
        BufferKey key{reinterpret_cast<uintptr_t>(key_addr), count};
        auto [it, fresh] = st.awp.try_emplace(key);
        if (fresh) it->second.bits = static_cast<int>(std::clamp<int64_t>(s.awp_start_bits, plan->codec->bits_min,
                                                                          plan->codec->bits_max));
        plan->awp = &it->second;
        plan->params.bits = static_cast<uint8_t>(it->second.bits);
    }
    return plan->codec->check(plan->params);
}

void policy_observe(CommState &st, const Plan &plan, const float *result, size_t n,
                    double (*l2norm)(void *, const float *, size_t), void *ctx) {
    if (!plan.awp) return;
    const Settings &s = st.settings;
    double norm = l2norm(ctx, result, n);
    awp_update(plan.awp, norm, s.awp_threshold, static_cast<int>(s.awp_interval), static_cast<int>(s.awp_step),
               plan.codec->bits_max);
}

}  // namespace compmpi

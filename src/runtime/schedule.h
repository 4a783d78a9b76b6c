// SPDX-License-Identifier: BSD-3-Clause
/* θ schedules for the sparsifiers (topk, fft_topk): the fraction dropped as a function of
 * the call count (Wang et al., HPDC'20, Theorem 3.5 and Section 4.1; docs/codecs/topk.md,
 * "θ schedule").
 *
 * t = the number of earlier compressed calls of the same shape (collective, result element
 * count) on the communicator. Every rank makes the same sequence of eligible calls, so every
 * rank computes the same t and the same θ_t: nothing local (buffer addresses, timing, data)
 * enters. θ_t uses θ0 = theta, θend = theta_end, T = theta_calls, γ = theta_gamma:
 *   none        θ_t = θ0
 *   paper       θ_t = θend + (θ0 - θend) sqrt(T / (T + t))
 *               Theorem 3.5: θ_t^2 = L η_t with the diminishing step η_t = η0 T / (T + t)
 *               (Σ η_t = ∞, Σ η_t^2 < ∞); θ0^2 = L η0 fixes L η0, so θ_t = θ0 sqrt(η_t / η0)
 *   paper_step  θ_t = θend + (θ0 - θend) sqrt(γ)^floor(t / T)
 *               the same condition under a step learning rate η_t = η0 γ^floor(t/T) (the
 *               paper's training setups divide η by 10 at fixed epochs: "shrink θ along
 *               with the learning rate η for the condition θ_t^2 = L η_t", Section 4.1)
 *   linear      θ_t = θ0 + (θend - θ0) min(1, t / T)
 *   step        θ_t = θ0 for t < T, θend from then on (Figure 13: θ from 0.9 to 0 at the
 *               30th epoch recovers SGD's accuracy)
 * Arithmetic in double with correctly rounded operations only (+, -, *, /, sqrt; the power
 * by repeated squaring): the same bits on every IEEE machine. */
#pragma once
#include <cstddef>
#include <cstdint>
#include <unordered_map>

#include "base/settings.h"

namespace compmpi {

enum class ThetaScheduleKind : int { none = 0, paper, paper_step, linear, step };

struct ThetaSchedule {
    ThetaScheduleKind kind = ThetaScheduleKind::none;
    double start = 0, end = 0, gamma = 0.1;
    uint64_t calls = 1; /* T */
};

/* The schedule the settings name. */
ThetaSchedule theta_schedule_from(const Settings &s);
/* θ_t for call t (0-based), clamped to [0, 0.9999] (the range of the theta setting). */
double theta_at(const ThetaSchedule &sch, uint64_t t);

/* Call counts per collective shape, one table per communicator (CommState::sched). */
struct ScheduleState {
    std::unordered_map<uint64_t, uint64_t> calls; /* key: shape_key(kind, count) */
    /* t for this call of the shape, counting it; the table restarts past kMaxShapes shapes
     * (every rank sees the same shapes in the same order, so every rank restarts alike). */
    uint64_t next(int coll_kind, size_t count);
    static constexpr size_t kMaxShapes = 4096;
};

}  // namespace compmpi

// SPDX-License-Identifier: BSD-3-Clause
#include "runtime/schedule.h"
#include "base/settings.h"

#include <algorithm>
#include <cmath>

namespace compmpi {

ThetaSchedule theta_schedule_from(const Settings &s) {
    ThetaSchedule r;
    const int k = s.theta_schedule;
    if (k == enum_value(SettingId::theta_schedule, "paper")) r.kind = ThetaScheduleKind::paper;
    else if (k == enum_value(SettingId::theta_schedule, "paper_step")) r.kind = ThetaScheduleKind::paper_step;
    else if (k == enum_value(SettingId::theta_schedule, "linear")) r.kind = ThetaScheduleKind::linear;
    else if (k == enum_value(SettingId::theta_schedule, "step")) r.kind = ThetaScheduleKind::step;
    r.start = s.theta;
    r.end = s.theta_end;
    r.gamma = s.theta_gamma;
    r.calls = static_cast<uint64_t>(std::max<int64_t>(1, s.theta_calls));
    return r;
}

namespace {
/* b^e by repeated squaring: only correctly rounded multiplications */
double ipow(double b, uint64_t e) {
    double r = 1.0;
    while (e) {
        if (e & 1) r *= b;
        b *= b;
        e >>= 1;
    }
    return r;
}
}  // namespace

double theta_at(const ThetaSchedule &sch, uint64_t t) {
    const double T = static_cast<double>(sch.calls), tt = static_cast<double>(t);
    double th = sch.start;
    switch (sch.kind) {
        case ThetaScheduleKind::none: break;
        case ThetaScheduleKind::paper: th = sch.end + (sch.start - sch.end) * std::sqrt(T / (T + tt)); break;
        case ThetaScheduleKind::paper_step:
            th = sch.end + (sch.start - sch.end) * ipow(std::sqrt(sch.gamma), t / sch.calls);
            break;
        case ThetaScheduleKind::linear: th = sch.start + (sch.end - sch.start) * std::min(1.0, tt / T); break;
        case ThetaScheduleKind::step: th = t < sch.calls ? sch.start : sch.end; break;
    }
    return std::clamp(th, 0.0, 0.9999);
}

static_assert(coll_kind::reduce_scatter < 32, "ScheduleState::next keys the kind in 5 bits");

uint64_t ScheduleState::next(int coll_kind, size_t count) {
    if (calls.size() >= kMaxShapes) calls.clear();
    const uint64_t key = (static_cast<uint64_t>(count) << 5) ^ static_cast<uint64_t>(coll_kind & 31);
    /* 5 bits: every Coll kind (allreduce ... reduce_scatter, persistent ones) its own counter */
    return calls[key]++;
}

}  // namespace compmpi

// SPDX-License-Identifier: BSD-3-Clause
#include "runtime/costmodel.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>

#include "base/fault.h"
#include "runtime/args.h"
#include "runtime/policy.h"
#include "runtime/state.h"
#include "runtime/verdict.h"
#include "base/mpi_next.h"

namespace compmpi {

namespace {

/* Per decided call, log2(predicted / measured) in bins of 1/16 (4.4%) over [-4, 4); the
 * end bins take everything beyond. Their median is the model's error for a typical call,
 * which a few slow calls (a descheduled rank on a shared VM) do not move as they move the
 * mean. */
inline constexpr int kErrBins = 128, kErrPerOctave = 16;
/* Per (collective, class) counters; doubles kept as nanoseconds in integers so they can be
 * atomics without a lock. */
struct ClassStats {
    std::atomic<uint64_t> comp{0}, plain{0}, explore{0};
    std::atomic<uint64_t> ns_pred{0}, ns_meas{0};   /* decided calls only */
    std::atomic<uint64_t> err_bin[kErrBins] = {};
};
ClassStats g_cls[static_cast<int>(Coll::count_)][kCostClasses];

/* A class time scaled to `bytes` (linear within a class; samples are stored scaled to the
 * class's lower bound). */
double scaled(double t_class, int cls, size_t bytes) { return t_class * static_cast<double>(bytes) / std::ldexp(1.0, cls); }

}  // namespace

bool cost_entry_verdict(const CostEntry &e, double margin) {
    const int force = COMPMPI_FAULT_ON() ? fault_cost_force() : 0;
    return force > 0 || (force == 0 && cost_entry_compresses(e, margin));
}

CostTrace &cost_trace() {
    static thread_local CostTrace t;
    return t;
}

double &cost_handoff_s() {
    static thread_local double s = 0;
    return s;
}

int cost_size_class(size_t bytes) {
    const int c = bytes ? 63 - __builtin_clzll(static_cast<unsigned long long>(bytes)) : 0;
    return c < kCostClasses ? c : kCostClasses - 1;
}

CostDecision cost_decide(CommState &st, Coll kind, size_t bytes, int codec, int bits, double margin,
                         double *predicted_s, bool *final) {
    *predicted_s = 0;
    if (final) *final = false;
    if (!st.cost) st.cost = std::make_unique<CostModel>();
    const int cls = cost_size_class(bytes);
    CostEntry &e = st.cost->at({static_cast<int>(kind), cls, codec, bits});
    /* alternate plain and compressed samples so slow first calls (connection set-up, page
     * faults in fresh buffers) do not all land on one side; each side's first kCostWarmup
     * samples are such calls and are not used */
    /* samples that choose compression are confirmed by more (kCostConfirm; not where the
     * test-only fault fixes the outcome) */
    if (cost_entry_decided(e) && e.confirm == 0 && !(COMPMPI_FAULT_ON() && fault_cost_force()) &&
        cost_entry_compresses(e, margin))
        e.confirm = kCostConfirm;
    if (!cost_entry_decided(e)) return e.n_plain <= e.n_comp ? CostDecision::explore_plain : CostDecision::explore_comp;
    /* the second round, once the calls of this class run in steady state: its samples replace
     * the first round's, with no warm-up, and its decision is final. Counted in decided calls,
     * which every rank makes alike. */
    if (e.round == 0 && ++e.decided_calls > kCostRecheck) {
        e = CostEntry{};
        e.round = 1;
        e.n_plain = e.n_comp = kCostWarmup;
        verdict_invalidate();
        return CostDecision::explore_plain;
    }
    if (final) *final = e.round == 1;
    /* decided from the agreed (slowest rank's) times: the same on every rank; predicted from
     * this rank's own samples, comparable with its own measured time (COMPMPI_STATS).
     * Test-only: COMPMPI_FAULT=cost_plain/cost_compress fixes the outcome (src/base/fault.h). */
    if (cost_entry_verdict(e, margin)) {
        *predicted_s = scaled(e.local_comp / (e.n_comp - kCostWarmup), cls, bytes);
        return CostDecision::compress;
    }
    *predicted_s = scaled(e.local_plain / (e.n_plain - kCostWarmup), cls, bytes);
    return CostDecision::plain;
}

int cost_record(CommState &st, MPI_Comm comm, Coll kind, size_t bytes, int codec, int bits, CostDecision d,
                double local_s) {
    double t = local_s;
    int rc = mpi_next::Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, comm);
    if (rc != MPI_SUCCESS) return rc;
    cost_learn(st, kind, bytes, codec, bits, d, t, local_s);
    return MPI_SUCCESS;
}

void cost_learn(CommState &st, Coll kind, size_t bytes, int codec, int bits, CostDecision d, double t,
                double local_s) {
    verdict_invalidate(); /* a decision may follow from this sample */
    if (!st.cost) st.cost = std::make_unique<CostModel>();
    const int cls = cost_size_class(bytes);
    CostEntry &e = st.cost->at({static_cast<int>(kind), cls, codec, bits});
    const double to_class = std::ldexp(1.0, cls) / static_cast<double>(std::max<size_t>(bytes, 1));
    const double at_class = t * to_class;
    const bool plain = d == CostDecision::explore_plain;
    double &sum = plain ? e.sum_plain : e.sum_comp, &lo = plain ? e.min_plain : e.min_comp,
           &hi = plain ? e.max_plain : e.max_comp, &local = plain ? e.local_plain : e.local_comp;
    int &cnt = plain ? e.n_plain : e.n_comp;
    g_cls[static_cast<int>(kind)][cls].explore++;
    if (cnt++ < kCostWarmup) return; /* a warm-up sample: counted, not used */
    const bool first = cnt == kCostWarmup + 1;
    lo = first ? at_class : std::min(lo, at_class);
    hi = first ? at_class : std::max(hi, at_class);
    sum += at_class;
    local += (local_s < 0 ? t : local_s) * to_class;
}

void cost_stats_add(Coll kind, size_t bytes, CostDecision d, double predicted_s, double measured_s) {
    ClassStats &s = g_cls[static_cast<int>(kind)][cost_size_class(bytes)];
    (d == CostDecision::compress ? s.comp : s.plain)++;
    s.ns_pred += static_cast<uint64_t>(predicted_s * 1e9);
    s.ns_meas += static_cast<uint64_t>(measured_s * 1e9);
    if (predicted_s > 0 && measured_s > 0) {
        const double b = std::floor(std::log2(predicted_s / measured_s) * kErrPerOctave) + kErrBins / 2;
        s.err_bin[static_cast<int>(std::clamp(b, 0.0, kErrBins - 1.0))].fetch_add(1, std::memory_order_relaxed);
    }
}

void cost_stats_reset() {
    for (auto &row : g_cls)
        for (ClassStats &s : row) {
            s.comp = s.plain = s.explore = s.ns_pred = s.ns_meas = 0;
            for (auto &b : s.err_bin) b = 0;
        }
}

void cost_stats_report(MPI_Comm world) {
    constexpr int nc = static_cast<int>(Coll::count_), kF = 5 + kErrBins;
    static uint64_t local[nc][kCostClasses][kF], sum[nc][kCostClasses][kF];
    for (int c = 0; c < nc; ++c)
        for (int k = 0; k < kCostClasses; ++k) {
            const ClassStats &s = g_cls[c][k];
            uint64_t v[5] = {s.comp, s.plain, s.explore, s.ns_pred, s.ns_meas};
            for (int f = 0; f < 5; ++f) local[c][k][f] = v[f];
            for (int f = 0; f < kErrBins; ++f) local[c][k][5 + f] = s.err_bin[f].load(std::memory_order_relaxed);
        }
    int rank = 0, size = 1;
    mpi_next::Comm_rank(world, &rank);
    mpi_next::Comm_size(world, &size);
    if (mpi_next::Reduce(local, sum, nc * kCostClasses * kF, MPI_UINT64_T, MPI_SUM, 0, world) != MPI_SUCCESS || rank != 0)
        return;
    for (int c = 0; c < nc; ++c)
        for (int k = 0; k < kCostClasses; ++k) {
            const uint64_t *v = sum[c][k];
            const uint64_t decided = v[0] + v[1];
            if (!decided && !v[2]) continue;
            /* per-rank means: every rank counts each call once */
            const double calls = static_cast<double>(decided) / size;
            const double pred = v[3] * 1e-9 / size, meas = v[4] * 1e-9 / size;
            const double err = meas > 0 ? (pred - meas) / meas : 0;
            /* the median call's predicted / measured, at its bin's centre */
            uint64_t n_err = 0, acc = 0;
            for (int f = 0; f < kErrBins; ++f) n_err += v[5 + f];
            double med = 0;
            for (int f = 0; f < kErrBins && n_err; ++f)
                if ((acc += v[5 + f]) * 2 >= n_err) {
                    med = std::exp2((f - kErrBins / 2 + 0.5) / kErrPerOctave) - 1;
                    break;
                }
            char cls[32];
            const double b = std::ldexp(1.0, k);
            if (b >= 1 << 20) std::snprintf(cls, sizeof cls, "%gMiB", b / (1 << 20));
            else if (b >= 1 << 10) std::snprintf(cls, sizeof cls, "%gKiB", b / (1 << 10));
            else std::snprintf(cls, sizeof cls, "%gB", b);
            std::fprintf(stderr,
                         "compmpi-stats-model: coll=%s class=%s compressed=%llu exact=%llu explored=%llu "
                         "predicted_s=%.6f measured_s=%.6f model_error=%+.1f%% median_error=%+.1f%%\n",
                         coll_name(static_cast<Coll>(c)), cls, (unsigned long long)(v[0] / size),
                         (unsigned long long)(v[1] / size), (unsigned long long)(v[2] / size), pred, meas,
                         calls > 0 ? 100.0 * err : 0.0, 100.0 * med);
        }
    std::fflush(stderr);
}

/* Have the BLOCKING calls of this communicator already found the exact collective faster for
 * this call's class and plan? Their table changes only inside blocking calls, which every rank
 * makes in the same program order, so the answer is the same on every rank at issue time and
 * the call goes to PMPI_I* on the user's communicator. Otherwise the non-blocking calls' own
 * measurements decide (NbChannel). */
bool cost_blocking_exact(CommState &st, const CollArgs &a) {
    const Settings &s = st.settings;
    if (!cost_gated(s) || !st.cost) return false;
    const size_t n = static_cast<size_t>(coll_elements(a));
    Plan plan;
    if (policy_plan(st, a.kind, n, a.root, &plan, a.elem) != Status::ok) return false;
    const size_t bytes = n * elem_bytes(a.elem);
    auto it = st.cost->entries.find({static_cast<int>(a.kind), cost_size_class(bytes),
                                     cost_codec_key(plan.codec->id, a.elem), plan.params.bits});
    if (it == st.cost->entries.end()) return false;
    const CostEntry &e = it->second;
    return cost_entry_decided(e) && !cost_entry_verdict(e, s.cost_margin);
}

}  // namespace compmpi

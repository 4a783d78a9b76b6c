// SPDX-License-Identifier: BSD-3-Clause
/* Which dense allreduce runs (setting allreduce_algorithm; docs/design.md "Choosing the dense
 * allreduce"): the one named, or under auto the alpha-beta prediction of both, with alpha and
 * beta measured on this communicator's links, and where that prediction is not clear, both
 * algorithms timed on the first calls.
 *
 *   auto, one node (nodes <= 1) or < 4 ranks ......... two-phase
 *   auto, across nodes:
 *     alpha*beta = link_alpha_beta, or (0) measured once on this communicator:
 *        ranks 2i <-> 2i+1 (a rank left over waits)     PMPI_Sendrecv 8 B, then 1 MiB,
 *                                                       untimed once, then 3 times each
 *        alpha = fastest 8 B exchange, 1/beta = (fastest 1 MiB - alpha) / (1 MiB - 8)
 *        PMPI_Allreduce(MAX) of (alpha, 1/beta) over the communicator: every rank holds the
 *        same numbers (the slowest pair's), so every rank makes the same choice
 *     cost(algorithm) = messages * alpha*beta + bytes, this call's exact blob sizes, per
 *     rank (allreduce_cost);
 *     link_alpha_beta given: halving-doubling when 10% (kAutoMargin) below two-phase;
 *     measured: the cheaper when the costs differ by more than kAutoClear (4x); else
 *       explore: the first calls of this (n, codec parameters) alternate two-phase and
 *       halving-doubling, each after a barrier, its time agreed by MAX over the ranks; the
 *       first call of each is a warm-up, then 2 samples each (6 calls); where the samples
 *       overlap (the faster one's worst not below the other's best) one more round of each,
 *       up to 4; then the one with the faster best sample, for every later call (at most
 *       kMaxAutoChoices choices per communicator, then the model).
 *   hierarchy=auto, allreduce_algorithm=auto, a dense codec, the hierarchy applies (several
 *   nodes, one with several ranks; coll_allreduce_nodes):
 *       the same timed choice between the hierarchical algorithm and the flat one (what the
 *       lines above choose over all ranks); calls where a choice nested in a candidate
 *       explored (the flat one's, or the leaders') are no samples; ties keep the hierarchy;
 *       at most kMaxExploreCalls exploring calls. Before the first of them (measured links
 *       only, not with link_alpha_beta set) the stage model (allreduce_model.cc) predicts both,
 *       node reduce and bcast, the leaders' links and the codec at each one's core share
 *       included; where the ranks span several hosts, predictions more than kAutoClear apart
 *       decide alone.
 *     The model alone was >10% off the best algorithm in emulated clusters (docs/scale.md):
 *     it counts neither pipelined segments' exchanges nor what MPI's alltoall and
 *     allgather make of a message schedule; the measured time counts everything.
 *
 * The probe runs over the private point-to-point duplicate (coll_p2p_comm), never the user's
 * communicator; on the hierarchy's leaders it measures the links between nodes. Its cost is
 * one-time: 4 exchanges of 1 MiB and 4 of 8 B per pair (on 100 Gbit/s ~0.4 ms; on the
 * emulated 200 Mbit/s links of docs/scale.md ~0.2 s). */
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <vector>

#include "coll.h"
#include "base/fault.h"
#include "base/settings.h"
#include "base/mpi_next.h"

namespace compmpi {

namespace {

/* measured alpha*beta: model costs this far apart decide alone. The model's worst miss seen
 * (docs/scale.md): 16 ranks, terngrad, 1 MiB, predicted halving-doubling 2.1x cheaper,
 * measured 1.3x slower (MPICH sends an alltoall of small chunks all at once, the model counts
 * its P - 1 messages one after another) */
constexpr double kAutoClear = 4.0;
constexpr int kSamples = 2;   /* t, h, t, h, t, h: one warm-up and two samples each */
constexpr int kMaxExtra = 4;  /* rounds added where the samples overlap */
/* a choice's exploring calls at most: its own 2 * (1 + kSamples + kMaxExtra) = 14, and a
 * nested choice's (the flat candidate's two-phase against halving-doubling, or the leaders'),
 * 14 calls of that candidate, so 28 of the outer choice's */
constexpr int kMaxExploreCalls = 48;
constexpr size_t kMaxAutoChoices = 64;
constexpr int kDense = 0, kNodes = 1; /* CollState::AutoChoice::kind */
std::atomic<bool> g_link_skewed{false};         /* COMPMPI_FAULT=link_skew fired on this rank (test-only) */
constexpr size_t kProbeBytes = size_t{1} << 20; /* >= 10 alpha*beta for alpha*beta up to ~100 KB */
constexpr int kProbeReps = 3;
constexpr int kProbeTag = 9;

/* Seconds of one exchange of `bytes` both ways with `partner` (MPI_PROC_NULL: none). */
Status exchange(CollCtx &c, MPI_Comm comm, std::vector<uint8_t> &s, std::vector<uint8_t> &r, size_t bytes, int partner,
                double *secs) {
    const double t0 = mpi_next::Wtime();
    const int rc = mpi_next::Sendrecv(s.data(), static_cast<int>(bytes), MPI_BYTE, partner, kProbeTag, r.data(),
                                 static_cast<int>(bytes), MPI_BYTE, partner, kProbeTag, comm, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return c.mpi_err = rc, Status::mpi_error;
    *secs = mpi_next::Wtime() - t0;
    return Status::ok;
}

/* Measure alpha and beta between pairs of ranks of c.comm and agree on them (see the top). */
Status probe(CollCtx &c, double *alpha, double *beta) {
    MPI_Comm comm;
    CMPI_CHECK(coll_p2p_comm(c, &comm));
    const int partner = (c.rank ^ 1) < c.size ? (c.rank ^ 1) : MPI_PROC_NULL;
    std::vector<uint8_t> s(kProbeBytes, 0x5a), r(kProbeBytes);
    double small = HUGE_VAL, large = HUGE_VAL, t;
    {
        ScopedTimer tm(c.stats->ns_comm);
        for (int rep = -1; rep < kProbeReps; ++rep) { /* rep -1: connections, first-use costs */
            CMPI_CHECK(exchange(c, comm, s, r, 8, partner, &t));
            if (rep >= 0) small = std::min(small, t);
            CMPI_CHECK(exchange(c, comm, s, r, kProbeBytes, partner, &t));
            if (rep >= 0) large = std::min(large, t);
        }
    }
    double v[2] = {0, 0}; /* alpha, seconds per byte; a rank without a partner adds nothing */
    if (partner != MPI_PROC_NULL) {
        v[0] = small;
        v[1] = std::max(large - small, 0.0) / static_cast<double>(kProbeBytes - 8);
        if (COMPMPI_FAULT_ON() && fault_fire(FaultKind::link_skew, FaultWhere::any)) g_link_skewed = true;
        if (g_link_skewed) v[0] *= 1000;
    }
    const int rc = mpi_next::Allreduce(MPI_IN_PLACE, v, 2, MPI_DOUBLE, MPI_MAX, comm);
    if (rc != MPI_SUCCESS) return c.mpi_err = rc, Status::mpi_error;
    *alpha = v[0];
    *beta = 1.0 / std::max(v[1], 1e-13); /* (at most 10 TB/s: a probe lost in the noise) */
    return Status::ok;
}

}  // namespace

Status coll_link_probe(CollCtx &c, double *alpha, double *beta) { return probe(c, alpha, beta); }

Status allreduce_alpha_beta(CollCtx &c, double *alpha_beta) {
    if (c.settings->link_alpha_beta > 0)
        return *alpha_beta = static_cast<double>(c.settings->link_alpha_beta), Status::ok;
    for (const auto &l : c.st->links)
        if (l.comm == c.comm) return *alpha_beta = l.alpha * l.beta, Status::ok;
    double alpha = 0, beta = 0;
    CMPI_CHECK(probe(c, &alpha, &beta));
    c.st->links.push_back({c.comm, alpha, beta});
    if (stats_enabled()) {
        char line[200];
        std::snprintf(line, sizeof line,
                      "compmpi-stats-link: ranks=%d alpha_s=%.3e beta_Bps=%.3e alpha_beta_bytes=%.0f (measured)",
                      c.size, alpha, beta, alpha * beta);
        stats_note(line);
    }
    *alpha_beta = alpha * beta;
    return Status::ok;
}

AllreduceCost allreduce_cost(const CollCtx &c, size_t n, bool halving) {
    if (halving) return allreduce_halving_cost(c, n);
    AllreduceCost k;
    const int P = c.size;
    if (P < 2) return k;
    /* two-phase, as coll_allreduce_twophase chooses its path (one segment) */
    CodecParams p2 = c.params;
    p2.nranks = P;
    const CodecOps *codec2 = c.codec;
    CodecParams pr = c.params;
    pr.nranks = P;
    const bool reduced = c.codec->reduced_params && c.codec->reduced_params(pr, &p2) == Status::ok;
    if (!reduced) p2 = c.params;
    if (!reduced && coll_quantise_once(*c.codec)) {
        codec2 = codec_by_id(static_cast<int>(CodecId::none));
        p2 = coll_exact_params(c.params);
    }
    const size_t q = (n + static_cast<size_t>(P) - 1) / static_cast<size_t>(P);
    if (coll_quantise_once(*c.codec)) {
        const size_t gather = blob_max_bytes(*c.codec, n, c.params);
        if (gather <= blob_max_bytes(*c.codec, q, c.params) + blob_max_bytes(*codec2, q, p2)) {
            k.messages = P - 1;
            k.bytes = static_cast<double>(gather) * (P - 1);
            return k;
        }
    }
    size_t lo, base;
    chunk_range(n, P, 0, &lo, &base);
    k.messages = 2.0 * (P - 1);
    k.bytes =
        static_cast<double>(coll_blob_stride(*c.codec, base, c.params) + coll_blob_stride(*codec2, base, p2)) * (P - 1);
    return k;
}

namespace {

uint64_t codec_key(const CollCtx &c) {
    return static_cast<uint64_t>(c.codec->id) | static_cast<uint64_t>(c.params.bits) << 8 |
           static_cast<uint64_t>(c.params.variant) << 16 | static_cast<uint64_t>(c.params.param) << 24 |
           static_cast<uint64_t>(c.params.bucket) << 40;
}

/* The timed choice of this call (nullptr: table full, follow the model / keep the hierarchy). */
CollState::AutoChoice *auto_choice(CollCtx &c, int kind, size_t n) {
    const uint64_t key = codec_key(c);
    for (auto &e : c.st->auto_choices)
        if (e.comm == c.comm && e.kind == kind && e.n == n && e.codec == key) return &e;
    if (c.st->auto_choices.size() >= kMaxAutoChoices) return nullptr;
    c.st->auto_choices.push_back({c.comm, kind, n, key});
    return &c.st->auto_choices.back();
}

/* The model's verdict: 1 halving-doubling, 0 two-phase, -1 not clear (explore). */
Status model_choice(CollCtx &c, size_t n, int *verdict) {
    double ab = 0;
    CMPI_CHECK(allreduce_alpha_beta(c, &ab));
    const AllreduceCost h = allreduce_cost(c, n, true), t = allreduce_cost(c, n, false);
    const double th = h.messages * ab + h.bytes, tt = t.messages * ab + t.bytes;
    if (c.settings->link_alpha_beta > 0) return *verdict = th < (1.0 - kAutoMargin) * tt, Status::ok;
    *verdict = th * kAutoClear < tt ? 1 : tt * kAutoClear < th ? 0 : -1;
    return Status::ok;
}

template <class T>
Status run(CollCtx &c, const T *in, T *out, size_t n, bool halving) {
    if (!halving) return coll_allreduce_twophase(c, in, out, n);
    c.stats->halving++;
    return coll_allreduce_halving(c, in, out, n);
}

/* One exploring call of e ends: t = candidate k's time agreed by MAX over the ranks;
 * unsettled = a choice nested in the candidate explored during the call on some rank (agreed
 * too), so the time is not a sample of what the candidate will run. A candidate's first
 * settled call is its warm-up; after kSamples samples of each, the faster best sample wins,
 * unless the samples overlap (the faster candidate's worst is not below the other's best):
 * then one more round of each, up to kMaxExtra rounds, and the best sample decides. Ties go
 * to candidate 0. Pure arithmetic on agreed numbers: every rank decides alike. */
void sample(CollState::AutoChoice &e, int k, double t, bool unsettled) {
    ++e.explored;
    if (!unsettled) {
        if (!e.warm[k]) {
            e.warm[k] = 1;
        } else {
            e.best[k] = e.samples[k] ? std::min(e.best[k], t) : t;
            e.worst[k] = e.samples[k] ? std::max(e.worst[k], t) : t;
            ++e.samples[k];
        }
    }
    const int f = e.samples[1] && (!e.samples[0] || e.best[1] < e.best[0]) ? 1 : 0; /* the faster */
    const int want = kSamples + e.extra;
    if (e.samples[0] >= want && e.samples[1] >= want) {
        if (e.worst[f] >= e.best[1 - f] && e.extra < kMaxExtra) {
            ++e.extra;
            return;
        }
        e.decided = f;
    } else if (e.explored >= kMaxExploreCalls) { /* nested choices took the calls: what was measured */
        e.decided = e.samples[0] && e.samples[1] ? f : 0;
    }
}

/* The barrier before an exploring call (over the private duplicate: never the user's
 * communicator) */
Status explore_begin(CollCtx &c, MPI_Comm *comm) {
    CMPI_CHECK(coll_p2p_comm(c, comm));
    const int rc = mpi_next::Barrier(*comm);
    if (rc != MPI_SUCCESS) return c.mpi_err = rc, Status::mpi_error;
    return Status::ok;
}

/* Agree on a call's time and whether a nested choice explored in it (MAX over the ranks). */
Status explore_agree(CollCtx &c, MPI_Comm comm, double *t, bool *unsettled) {
    double v[2] = {*t, c.exploring ? 1.0 : 0.0};
    const int rc = mpi_next::Allreduce(MPI_IN_PLACE, v, 2, MPI_DOUBLE, MPI_MAX, comm);
    if (rc != MPI_SUCCESS) return c.mpi_err = rc, Status::mpi_error;
    *t = v[0];
    *unsettled = v[1] > 0;
    return Status::ok;
}

/* One explored call of the dense choice: barrier, the algorithm, its time agreed by MAX
 * (only when it succeeded: the status is the same on every rank). */
template <class T>
Status explore(CollCtx &c, CollState::AutoChoice &e, const T *in, T *out, size_t n) {
    MPI_Comm comm;
    CMPI_CHECK(explore_begin(c, &comm));
    const int alg = e.explored % 2;
    c.exploring = false; /* (no choice is nested in these two) */
    const double t0 = mpi_next::Wtime();
    const Status s = run(c, in, out, n, alg == 1);
    double t = mpi_next::Wtime() - t0;
    if (s != Status::ok) return ++e.explored, s;
    if (g_link_skewed && alg == 0) t *= 1000; /* (test-only: COMPMPI_FAULT=link_skew) */
    bool unsettled = false;
    CMPI_CHECK(explore_agree(c, comm, &t, &unsettled));
    sample(e, alg, t, unsettled);
    c.exploring = true;
    if (e.decided >= 0 && stats_enabled()) {
        char line[240];
        std::snprintf(line, sizeof line,
                      "compmpi-stats-auto: ranks=%d floats=%zu twophase_s=%.6f halving_doubling_s=%.6f "
                      "extra_rounds=%d -> %s",
                      c.size, n, e.best[0], e.best[1], e.extra, e.decided ? "halving_doubling" : "twophase");
        stats_note(line);
    }
    return Status::ok;
}

template <class T>
Status run_hierarchical(CollCtx &c, const void *sendbuf, T *out, size_t n, const HierComms &h, bool sparse,
                        bool *hierarchical) {
    *hierarchical = true;
    if (h.node_rank != 0) c.ef_res = nullptr, c.ef_new = nullptr; /* only leaders carry residuals */
    return coll_allreduce_hierarchical(c, sendbuf, out, n, h, sparse);
}

}  // namespace

Status allreduce_use_halving(CollCtx &c, size_t n, int nodes, bool *halving) {
    const int a = c.settings->allreduce_algorithm;
    *halving = a == enum_value(SettingId::allreduce_algorithm, "halving_doubling");
    if (a != enum_value(SettingId::allreduce_algorithm, "auto")) return Status::ok;
    /* auto: on one node the two-phase algorithm (MPICH's shared-memory collectives,
     * pipelined); across nodes the alpha-beta model (a verdict of -1, not clear: two-phase
     * here; coll_allreduce_dense explores instead) */
    if (nodes <= 1 || c.size < 4) return Status::ok;
    int v = 0;
    CMPI_CHECK(model_choice(c, n, &v));
    *halving = v == 1;
    return Status::ok;
}

template <class T>
Status coll_allreduce_dense(CollCtx &c, const T *in, T *out, size_t n, int nodes) {
    const bool autom = c.settings->allreduce_algorithm == enum_value(SettingId::allreduce_algorithm, "auto");
    if (!autom || nodes <= 1 || c.size < 4) {
        bool halving = false;
        CMPI_CHECK(allreduce_use_halving(c, n, nodes, &halving));
        return run(c, in, out, n, halving);
    }
    CollState::AutoChoice *e = auto_choice(c, kDense, n);
    if (e && e->decided >= 0) return run(c, in, out, n, e->decided == 1);
    int v = 0;
    CMPI_CHECK(model_choice(c, n, &v));
    if (v >= 0 || !e) return run(c, in, out, n, v == 1);
    return explore(c, *e, in, out, n);
}

/* hierarchy=auto where the hierarchy applies: hierarchical (candidate 0) or flat (1), timed
 * as the dense choice is (sample()); the flat candidate is whatever coll_allreduce_dense runs
 * (itself perhaps exploring: those calls are no samples), the hierarchical one likewise among
 * the leaders. */
template <class T>
Status coll_allreduce_nodes(CollCtx &c, const void *sendbuf, const T *in, T *out, size_t n, const HierComms &h,
                            bool sparse, bool *hierarchical) {
    const bool timed = !sparse && c.settings->hierarchy == enum_value(SettingId::hierarchy, "auto") &&
                       c.settings->allreduce_algorithm == enum_value(SettingId::allreduce_algorithm, "auto");
    CollState::AutoChoice *e = timed ? auto_choice(c, kNodes, n) : nullptr;
    if (e && !e->modelled && e->explored == 0 && c.settings->link_alpha_beta == 0) {
        /* the stage model first (measured links only): where the predictions are kAutoClear
         * apart it decides alone, as the dense choice's model does */
        e->modelled = true;
        bool one_host = true;
        CMPI_CHECK(allreduce_nodes_predict(c, in, n, h, e->predicted, &one_host));
        /* every rank on one host: the nodes are emulated (node_size, namespaces), their links
         * the same memory and cores, and predictions some 2-4x apart there swing with the load:
         * the model predicts, the timing decides */
        bool may = !one_host;
        if (COMPMPI_FAULT_ON()) { /* (test-only: COMPMPI_FAULT=hier_skew fixes which one decides, and how) */
            const int f = fault_hier_predicted(true, &e->predicted[0]);
            fault_hier_predicted(false, &e->predicted[1]);
            may = f == 2 || (f == 1 && may);
        }
        const double ph = e->predicted[0], pf = e->predicted[1];
        if (may && ph > 0 && pf > 0 && (ph * kAutoClear < pf || pf * kAutoClear < ph))
            e->decided = ph * kAutoClear < pf ? 0 : 1;
        if (stats_enabled()) { /* decided: a compmpi-stats-hier line; else the timing's line follows */
            char line[240];
            std::snprintf(line, sizeof line,
                          "compmpi-stats-hier%s: ranks=%d nodes=%d floats=%zu predicted_hier_s=%.6f "
                          "predicted_flat_s=%.6f (model) -> %s",
                          e->decided >= 0 ? "" : "-model", c.size, h.nodes, n, ph, pf,
                          e->decided == 1 ? "flat" : e->decided == 0 ? "hierarchical" : "timed");
            stats_note(line);
        }
    }
    if (!e || e->decided == 0) return run_hierarchical(c, sendbuf, out, n, h, sparse, hierarchical);
    *hierarchical = false;
    if (e->decided == 1) return coll_allreduce_dense(c, in, out, n, h.nodes);
    MPI_Comm comm;
    CMPI_CHECK(explore_begin(c, &comm));
    const int k = e->explored % 2;
    c.exploring = false;
    const double t0 = mpi_next::Wtime();
    const Status s = k == 0 ? run_hierarchical(c, sendbuf, out, n, h, sparse, hierarchical)
                            : coll_allreduce_dense(c, in, out, n, h.nodes);
    double t = mpi_next::Wtime() - t0;
    if (s != Status::ok) return ++e->explored, s;
    bool unsettled = false;
    CMPI_CHECK(explore_agree(c, comm, &t, &unsettled));
    if (COMPMPI_FAULT_ON()) t = fault_hier_sample(k == 0, t); /* (test-only: COMPMPI_FAULT=hier_skew) */
    sample(*e, k, t, unsettled);
    c.exploring = true;
    if (e->decided >= 0 && stats_enabled()) {
        char line[360];
        std::snprintf(line, sizeof line,
                      "compmpi-stats-hier: ranks=%d nodes=%d floats=%zu hierarchical_s=%.6f flat_s=%.6f "
                      "predicted_hier_s=%.6f predicted_flat_s=%.6f samples=%d,%d extra_rounds=%d calls=%d -> %s",
                      c.size, h.nodes, n, e->best[0], e->best[1], e->predicted[0], e->predicted[1], e->samples[0],
                      e->samples[1], e->extra, e->explored, e->decided ? "flat" : "hierarchical");
        stats_note(line);
    }
    return Status::ok;
}

template Status coll_allreduce_dense(CollCtx &, const float *, float *, size_t, int);
template Status coll_allreduce_dense(CollCtx &, const double *, double *, size_t, int);

template Status coll_allreduce_nodes(CollCtx &, const void *, const float *, float *, size_t, const HierComms &,
                                     bool, bool *);
template Status coll_allreduce_nodes(CollCtx &, const void *, const double *, double *, size_t, const HierComms &,
                                     bool, bool *);

}  // namespace compmpi

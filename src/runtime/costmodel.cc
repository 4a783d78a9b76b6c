// SPDX-License-Identifier: BSD-3-Clause
#include "runtime/costmodel.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>

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

namespace {

/* The decisions taken in this process (the last per key) and the replay table: process-wide,
 * read at MPI_Finalize (cost_record) and consulted at a class's first call (cost_replay). */
std::mutex g_dec_mu;
std::map<CostDecisionKey, bool> g_taken, g_replay;

CostDecisionKey key_of(const CommState &st, Coll kind, int cls, int codec, int bits) {
    return CostDecisionKey{static_cast<int>(kind), cls, codec, bits, st.size};
}

void settle(CommState &st, CostEntry &e, Coll kind, int cls, int codec, int bits, bool compressed) {
    e.phase = compressed ? CostPhase::compressed : CostPhase::exact;
    e.pairs = e.wins = e.losses = 0;
    verdict_invalidate();
    std::lock_guard<std::mutex> lk(g_dec_mu);
    g_taken[key_of(st, kind, cls, codec, bits)] = compressed;
}

}  // namespace

double cost_cross_wins(const CostEntry &e) {
    const int n = std::min(e.pairs, kCostMaxPairs);
    if (n == 0) return 0;
    int won = 0;
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) won += e.comp[j] < e.plain[i] * (1.0 - e.margin);
    return static_cast<double>(won) / (n * n);
}

CostDecision cost_decide(CommState &st, Coll kind, size_t bytes, int codec, int bits, double margin,
                         double *predicted_s, bool *final) {
    *predicted_s = 0;
    if (final) *final = false;
    if (!st.cost) st.cost = std::make_unique<CostModel>();
    const int cls = cost_size_class(bytes);
    CostEntry &e = st.cost->at({static_cast<int>(kind), cls, codec, bits});
    e.margin = margin;
    if (!e.looked_up) { /* a class's first call: a replayed decision (agreed at MPI_Init) */
        e.looked_up = true;
        std::lock_guard<std::mutex> lk(g_dec_mu);
        auto it = g_replay.find(key_of(st, kind, cls, codec, bits));
        if (it != g_replay.end()) {
            e.phase = it->second ? CostPhase::compressed : CostPhase::exact;
            e.replayed = true;
            g_taken[it->first] = it->second;
        }
    }
    switch (e.phase) {
        case CostPhase::warmup:
        case CostPhase::decide:
        case CostPhase::confirm:
        case CostPhase::recheck: return e.pending ? CostDecision::explore_comp : CostDecision::explore_plain;
        case CostPhase::exact:
            if (final) *final = true;
            if (e.n_local_plain) *predicted_s = scaled(e.local_plain / e.n_local_plain, cls, bytes);
            return CostDecision::plain;
        case CostPhase::compressed: break;
    }
    /* the steady-state re-checks, at decided calls 64, 128, 256, ... (counted alike on every
     * rank); none for a replayed decision or where the test-only fault fixes the outcome */
    if (!e.replayed && !(COMPMPI_FAULT_ON() && fault_cost_force()) && ++e.decided_calls >= e.next_recheck) {
        e.next_recheck *= 2;
        e.phase = CostPhase::recheck;
        e.pairs = e.wins = e.losses = 0;
        verdict_invalidate();
        return CostDecision::explore_plain;
    }
    if (final) *final = e.replayed;
    if (e.n_local_comp) *predicted_s = scaled(e.local_comp / e.n_local_comp, cls, bytes);
    return CostDecision::compress;
}

int cost_record(CommState &st, MPI_Comm comm, Coll kind, size_t bytes, int codec, int bits, CostDecision d,
                double local_s, bool nested_exploring) {
    double v[2] = {local_s, nested_exploring ? 1.0 : 0.0};
    int rc = mpi_next::Allreduce(MPI_IN_PLACE, v, 2, MPI_DOUBLE, MPI_MAX, comm);
    if (rc != MPI_SUCCESS) return rc;
    double t = v[0];
    if (COMPMPI_FAULT_ON()) { /* test-only cost_noise / cost_skew: on the agreed time, alike on every rank */
        const CostEntry *e = st.cost ? &st.cost->at({static_cast<int>(kind), cost_size_class(bytes), codec, bits})
                                     : nullptr;
        const uint64_t n = (static_cast<uint64_t>(kind) << 48) ^ (static_cast<uint64_t>(cost_size_class(bytes)) << 40) ^
                           (static_cast<uint64_t>(codec) << 24) ^ (static_cast<uint64_t>(bits) << 16) ^
                           static_cast<uint64_t>(e ? e->explored : 0);
        t *= fault_cost_factor(d == CostDecision::explore_plain, n);
    }
    cost_learn(st, kind, bytes, codec, bits, d, t, local_s, v[1] > 0);
    return MPI_SUCCESS;
}

void cost_learn(CommState &st, Coll kind, size_t bytes, int codec, int bits, CostDecision d, double t,
                double local_s, bool unsettled) {
    verdict_invalidate(); /* a decision may follow from this sample */
    if (!st.cost) st.cost = std::make_unique<CostModel>();
    const int cls = cost_size_class(bytes);
    CostEntry &e = st.cost->at({static_cast<int>(kind), cls, codec, bits});
    const double to_class = std::ldexp(1.0, cls) / static_cast<double>(std::max<size_t>(bytes, 1));
    const double at_class = t * to_class, local = (local_s < 0 ? t : local_s) * to_class;
    g_cls[static_cast<int>(kind)][cls].explore++;
    e.explored++;
    if (cost_entry_decided(e)) return; /* not asked for (a unit test's extra sample) */
    if (unsettled) { /* the algorithm inside was still choosing itself: drop the pair */
        e.pending = false;
        return;
    }
    if (d == CostDecision::explore_plain) { /* the pair's first half */
        e.pending = true;
        e.pending_plain = at_class;
        e.pending_local = local;
        return;
    }
    if (!e.pending) return; /* a compressed sample with no exact one: not a pair */
    e.pending = false;
    const double p = e.pending_plain, c = at_class;
    if (e.phase == CostPhase::warmup) {
        if (++e.pairs >= kCostWarmupPairs) e.phase = CostPhase::decide, e.pairs = 0;
        return;
    }
    e.local_plain += e.pending_local, e.n_local_plain++;
    e.local_comp += local, e.n_local_comp++;
    const bool won = c < p * (1.0 - e.margin);
    const int force = COMPMPI_FAULT_ON() ? fault_cost_force() : 0;
    switch (e.phase) {
        case CostPhase::decide:
            e.plain[e.pairs] = p, e.comp[e.pairs] = c;
            ++e.pairs;
            (won ? e.wins : e.losses)++;
            if (force) {
                if (e.pairs >= kCostForcedPairs) settle(st, e, kind, cls, codec, bits, force > 0);
            } else if (e.losses >= kCostLosePairs) {
                settle(st, e, kind, cls, codec, bits, false);
            } else if (e.wins >= kCostWinPairs && cost_cross_wins(e) >= kCostCrossWin) {
                e.phase = CostPhase::confirm;
                e.pairs = e.wins = e.losses = 0;
            } else if (e.pairs >= kCostMaxPairs) {
                settle(st, e, kind, cls, codec, bits, false);
            }
            break;
        case CostPhase::confirm:
            ++e.pairs;
            if (!won) settle(st, e, kind, cls, codec, bits, false);
            else if (e.pairs >= kCostConfirmPairs) settle(st, e, kind, cls, codec, bits, true);
            break;
        case CostPhase::recheck:
            ++e.pairs;
            (won ? e.wins : e.losses)++;
            if (e.losses >= kCostRecheckLose) settle(st, e, kind, cls, codec, bits, false);
            else if (e.wins >= kCostRecheckKeep) settle(st, e, kind, cls, codec, bits, true);
            break;
        default: break;
    }
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
    return it->second.phase == CostPhase::exact;
}

/* ---- record / replay (settings cost_record, cost_replay; docs/design.md) ---- */

namespace {

constexpr int kDecisionsVersion = 1;
constexpr const char *kHeader = "compmpi-cost-decisions";

uint64_t fnv(uint64_t h, const std::string &v) {
    for (unsigned char ch : v) h = (h ^ ch) * 1099511628211ull;
    return h;
}

}  // namespace

uint64_t cost_settings_hash(const Settings &s) {
    /* what decides a class's plan and its verdict; a fault is not a setting (a run forced one
     * way can be replayed under another) */
    const SettingId ids[] = {SettingId::cost_model, SettingId::cost_margin, SettingId::policy,
                             SettingId::codec,      SettingId::bits,        SettingId::min_bytes,
                             SettingId::lossy_types, SettingId::collectives, SettingId::entropy};
    uint64_t h = 1469598103934665603ull;
    for (SettingId id : ids)
        h = fnv(h, std::string(kSettings[static_cast<int>(id)].name) + "=" + setting_format(id, s) + ";");
    return h;
}

std::string cost_decision_line(const CostDecisionKey &k, bool compressed) {
    const char *codec = codec_id_name(k.codec & 0xff);
    char line[256];
    /* the entropy stage's decisions (kCostStageKey) name it: entropy=zstd, else nothing */
    std::snprintf(line, sizeof line, "coll=%s class=%d codec=%s%s elem=%s bits=%d comm_size=%d decision=%s",
                  coll_name(static_cast<Coll>(k.coll)), k.cls, codec ? codec : "?",
                  (k.codec & kCostStageKey) ? " entropy=zstd" : "", elem_name(static_cast<Elem>((k.codec >> 8) & 0xf)),
                  k.bits, k.comm_size, compressed ? "compressed" : "exact");
    return line;
}

bool cost_decision_parse(const char *line, CostDecisionKey *k, bool *compressed) {
    std::istringstream in(line);
    std::string tok;
    int have = 0, elem = -1, codec = -1, stage = 0;
    while (in >> tok) {
        const size_t eq = tok.find('=');
        if (eq == std::string::npos) return false;
        const std::string key = tok.substr(0, eq), v = tok.substr(eq + 1);
        char *end = nullptr;
        auto num = [&](int *out) {
            const long x = std::strtol(v.c_str(), &end, 10);
            if (v.empty() || *end || x < 0 || x > (1 << 20)) return false;
            *out = static_cast<int>(x);
            return true;
        };
        if (key == "coll") {
            int c = -1;
            for (int i = 0; i < static_cast<int>(Coll::count_); ++i)
                if (v == coll_name(static_cast<Coll>(i))) c = i;
            if (c < 0) return false;
            k->coll = c, have |= 1;
        } else if (key == "class") {
            if (!num(&k->cls) || k->cls >= kCostClasses) return false;
            have |= 2;
        } else if (key == "codec") {
            if ((codec = codec_id_by_name(v.c_str())) < 0) return false;
            have |= 4;
        } else if (key == "entropy") {
            if (v != "zstd" || stage) return false;
            stage = kCostStageKey;
        } else if (key == "elem") {
            elem = v == "fp32" ? 0 : v == "fp64" ? 1 : -1;
            if (elem < 0) return false;
            have |= 8;
        } else if (key == "bits") {
            if (!num(&k->bits)) return false;
            have |= 16;
        } else if (key == "comm_size") {
            if (!num(&k->comm_size)) return false;
            have |= 32;
        } else if (key == "decision") {
            if (v != "compressed" && v != "exact") return false;
            *compressed = v == "compressed", have |= 64;
        } else {
            return false;
        }
    }
    if (have != 127) return false;
    k->codec = codec | (elem << 8) | stage;
    return true;
}

void cost_replay_set(const std::map<CostDecisionKey, bool> &table) {
    std::lock_guard<std::mutex> lk(g_dec_mu);
    g_replay = table;
}

std::map<CostDecisionKey, bool> cost_decisions_taken() {
    std::lock_guard<std::mutex> lk(g_dec_mu);
    return g_taken;
}

namespace {

/* Read and check a decisions file; *why names what is wrong. */
bool read_decisions(const std::string &path, int ranks, uint64_t hash, std::map<CostDecisionKey, bool> *t,
                    std::string *why) {
    std::ifstream f(path);
    if (!f) return *why = "cannot open it", false;
    std::string line;
    if (!std::getline(f, line)) return *why = "it is empty", false;
    int version = -1, r = -1;
    unsigned long long h = 0;
    char head[64] = "";
    if (std::sscanf(line.c_str(), "%63s version=%d ranks=%d settings=%llx", head, &version, &r, &h) != 4 ||
        std::strcmp(head, kHeader) != 0)
        return *why = "no '" + std::string(kHeader) + " version=... ranks=... settings=...' header", false;
    if (version != kDecisionsVersion)
        return *why = "version " + std::to_string(version) + ", this library reads " + std::to_string(kDecisionsVersion), false;
    if (r != ranks) return *why = "recorded with " + std::to_string(r) + " ranks, this run has " + std::to_string(ranks), false;
    if (h != hash) {
        char b[256];
        std::snprintf(b, sizeof b, "settings hash %016llx, this run's is %016llx (one of cost_model, cost_margin, policy, "
                      "codec, bits, min_bytes, lossy_types, collectives differs)", h, static_cast<unsigned long long>(hash));
        return *why = b, false;
    }
    for (int n = 2; std::getline(f, line); ++n) {
        if (line.empty()) continue;
        CostDecisionKey k;
        bool comp = false;
        if (!cost_decision_parse(line.c_str(), &k, &comp))
            return *why = "line " + std::to_string(n) + " is not a decision: '" + line + "'", false;
        (*t)[k] = comp;
    }
    return true;
}

}  // namespace

void cost_decisions_init(const Settings &s, MPI_Comm world) {
    int rank = 0, size = 1;
    mpi_next::Comm_rank(world, &rank);
    mpi_next::Comm_size(world, &size);
    std::map<CostDecisionKey, bool> table;
    std::string why;
    /* 0: no replay asked; 1: asked, refused here; else the table's hash (>= 2) */
    uint64_t h = 0;
    if (!s.cost_replay.empty()) {
        if (read_decisions(s.cost_replay, size, cost_settings_hash(s), &table, &why)) {
            h = 1469598103934665603ull;
            for (const auto &kv : table) h = fnv(h, cost_decision_line(kv.first, kv.second) + "\n");
            h |= 2;
        } else {
            h = 1;
        }
    }
    /* agreed over ranks: every rank replays the same table, or none does */
    uint64_t v[2] = {h, ~h}, m[2] = {0, 0};
    if (mpi_next::Allreduce(v, m, 2, MPI_UINT64_T, MPI_MAX, world) != MPI_SUCCESS) return;
    const uint64_t hmax = m[0], hmin = ~m[1];
    if (hmax == 0) return; /* no rank asked */
    if (hmin == hmax && hmin >= 2) {
        cost_replay_set(table);
        return;
    }
    if (rank == 0) {
        std::fprintf(stderr, "libcompmpi: cost_replay=%s refused: %s; the cost model measures as usual\n",
                     s.cost_replay.c_str(),
                     h == 1   ? why.c_str()
                     : h == 0 ? "rank 0 was not given cost_replay"
                              : "the ranks did not all read the same decisions from it");
        std::fflush(stderr);
    }
}

void cost_decisions_finalize(const Settings &s, MPI_Comm world) {
    int rank = 0, size = 1;
    mpi_next::Comm_rank(world, &rank);
    mpi_next::Comm_size(world, &size);
    if (rank != 0) return;
    const std::map<CostDecisionKey, bool> taken = cost_decisions_taken();
    if (stats_enabled())
        for (const auto &kv : taken)
            std::fprintf(stderr, "compmpi-stats-decision: %s\n", cost_decision_line(kv.first, kv.second).c_str());
    if (s.cost_record.empty()) return;
    std::FILE *f = std::fopen(s.cost_record.c_str(), "w");
    bool ok = f != nullptr;
    if (f) {
        ok = std::fprintf(f, "%s version=%d ranks=%d settings=%016llx\n", kHeader, kDecisionsVersion, size,
                          static_cast<unsigned long long>(cost_settings_hash(s))) > 0;
        for (const auto &kv : taken) ok = ok && std::fprintf(f, "%s\n", cost_decision_line(kv.first, kv.second).c_str()) > 0;
        ok = std::fclose(f) == 0 && ok;
    }
    if (!ok) std::fprintf(stderr, "libcompmpi: cost_record=%s: could not write the decisions\n", s.cost_record.c_str());
    std::fflush(stderr);
}

}  // namespace compmpi

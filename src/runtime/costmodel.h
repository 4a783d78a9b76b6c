// SPDX-License-Identifier: BSD-3-Clause
/* The cost model: decides per call whether compressing pays, from times measured on this
 * communicator, so that preloading libcompmpi never makes a program slower.
 *
 * What it measures. For every (collective, size class, plan) it keeps the times of the exact
 * PMPI collective and of the compressed algorithm for that plan (codec, width), from timed
 * calls of that size class, taken in pairs (below). A size class is a power-of-two
 * bucket of the per-rank payload (bytes in [2^k, 2^(k+1))); times are scaled linearly to the
 * call's size within its class. The time of one call is the slowest rank's (an agreement
 * PMPI_Allreduce(MAX) of one double after each timed call), so these are collective times
 * and every rank holds the same numbers: every decision made from them is identical on all
 * ranks by construction.
 *
 * How it decides (issue 42: decisions that are right under noise). The first calls of a class
 * explore in PAIRS: exact, then compressed (real calls of the application, nothing synthetic
 * is sent), each after a PMPI_Barrier so that a late rank's arrival is not part of the
 * sample. A pair is WON by compression when its compressed sample beat its exact one by the
 * margin `cost_margin`. Two warm-up pairs are discarded; then the class is decided
 *   compressed once >= kCostWinPairs pairs are won AND >= kCostCrossWin of all cross
 *     comparisons (every compressed sample of the round against every exact one) are won,
 *     and then all of kCostConfirmPairs more pairs are won (one lost: exact);
 *   exact after kCostLosePairs lost pairs, or after kCostMaxPairs pairs without a
 *     compressed decision. Exact is final for the class.
 * A class decided compressed is re-checked in steady state after kCostRecheckFirst decided
 * calls, then after twice as many, ... (64, 128, 256, ...): kCostRecheckPairs pairs, kept
 * with kCostRecheckKeep won, back to exact (final) after kCostRecheckLose lost. A single
 * noisy sample (a scheduler tick on an exact call) can win one pair, not six and the cross
 * comparisons and four confirming pairs (unit test: +-65% noise on a class where exact is
 * 1.3x faster, 10,000 seeds). The predicted time of the chosen path is the mean of this
 * rank's own used samples of that side. Each decided call is timed locally and the prediction
 * and the measurement are added to the statistics (COMPMPI_STATS: compmpi-stats-model lines),
 * with no extra message. Why measured end to end rather than from link and codec speeds
 * alone: the exact collective's time on shared memory or on a given network is whatever the
 * MPI's algorithm selection makes it, and codecs slow down when the cores are shared; the
 * components (achieved MPI bandwidth bytes/t_plain, codec GB/s from t_encode/t_decode) are
 * derived from the same measurements and printed beside the decision (docs/design.md).
 *
 * Record / replay (settings cost_record, cost_replay): the decisions of a run are written by
 * rank 0 at MPI_Finalize and can be replayed by a later run, which then explores none of the
 * recorded classes (docs/design.md, "Record and replay").
 *
 * A pair whose call ran an exploring call of a timed algorithm choice nested in it (on any
 * rank: allreduce_algorithm=auto, hierarchy=auto) is dropped: such a sample times a candidate,
 * perhaps the slower one, not the algorithm the class would run (docs/design.md).
 *
 * Scope: host buffers of the flat algorithms (two-phase, sparse, bcast, allgather); device
 * buffers and the hierarchical allreduce are always compressed when eligible (docs). */
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>

#include <mpi.h>

#include "base/settings.h"
#include "base/stats.h"
#include "codec.h"

namespace compmpi {

struct CommState;

enum class CostDecision : int {
    compress,      /* the model predicts compression pays */
    plain,         /* the model predicts the exact collective is faster */
    explore_plain, /* measuring: run exactly and time it (agreed) */
    explore_comp,  /* measuring: run compressed and time it (agreed) */
};
inline bool cost_explores(CostDecision d) { return d == CostDecision::explore_plain || d == CostDecision::explore_comp; }
inline bool cost_runs_plain(CostDecision d) { return d == CostDecision::plain || d == CostDecision::explore_plain; }

/* The rule's constants (the header comment above; docs/design.md). */
inline constexpr int kCostWarmupPairs = 2;   /* discarded: first-use costs (MPI set-up, page faults) */
inline constexpr int kCostWinPairs = 6;      /* pairs compression must win before it is confirmed */
inline constexpr double kCostCrossWin = 0.9; /* and this share of the round's cross comparisons */
inline constexpr int kCostLosePairs = 3;     /* lost pairs that decide exact */
inline constexpr int kCostMaxPairs = 8;      /* pairs after which the class is exact if not compressed */
inline constexpr int kCostConfirmPairs = 4;  /* more pairs, every one won, to confirm compression */
inline constexpr int kCostRecheckFirst = 64; /* decided compressed calls before the first re-check */
inline constexpr int kCostRecheckPairs = 4;  /* pairs of a re-check: */
inline constexpr int kCostRecheckKeep = 3;   /*   kept compressed with this many won */
inline constexpr int kCostRecheckLose = 2;   /*   back to exact after this many lost */
/* Under the test-only COMPMPI_FAULT=cost_plain/cost_compress the outcome is fixed: the class
 * explores its warm-up pairs and this many more, then decides as the fault says (no
 * confirmation, no re-check). */
inline constexpr int kCostForcedPairs = 3;
inline constexpr int kCostClasses = 48;
/* Explored calls (both sides) of a class: the bounds tests assert. */
inline constexpr int kCostExploreExactMin = 2 * (kCostWarmupPairs + kCostLosePairs);                        /* 10 */
inline constexpr int kCostExploreExactMax = 2 * (kCostWarmupPairs + kCostMaxPairs);                         /* 20 */
inline constexpr int kCostExploreCompMin = 2 * (kCostWarmupPairs + kCostWinPairs + kCostConfirmPairs);      /* 24 */
inline constexpr int kCostExploreCompMax = 2 * (kCostWarmupPairs + kCostMaxPairs + kCostConfirmPairs);      /* 28 */
inline constexpr int kCostExploreForced = 2 * (kCostWarmupPairs + kCostForcedPairs);                        /* 10 */

enum class CostPhase : uint8_t { warmup, decide, confirm, recheck, exact, compressed };

/* What one entry knows. Samples are agreed (slowest rank's) times scaled to 2^class bytes. */
struct CostEntry {
    CostPhase phase = CostPhase::warmup;
    int pairs = 0, wins = 0, losses = 0; /* completed pairs of the current phase */
    bool pending = false;                /* the exact half of a pair is taken, the compressed one next */
    double pending_plain = 0, pending_local = 0;
    double plain[kCostMaxPairs] = {}, comp[kCostMaxPairs] = {}; /* the decide phase's pairs */
    /* this rank's own times of the used samples (not warm-ups), for the prediction */
    double local_plain = 0, local_comp = 0;
    int n_local_plain = 0, n_local_comp = 0;
    int explored = 0;         /* explored calls, both sides */
    long decided_calls = 0;   /* compressed calls decided, for the re-checks */
    long next_recheck = kCostRecheckFirst;
    double margin = 0.05;     /* the margin of the last decision asked (cost_decide) */
    bool looked_up = false;   /* the replay table was consulted */
    bool replayed = false;    /* decided by cost_replay: fixed, never re-checked */
};

inline bool cost_entry_decided(const CostEntry &e) {
    return e.phase == CostPhase::exact || e.phase == CostPhase::compressed;
}
/* The share of cross comparisons compression won among the decide phase's pairs. */
double cost_cross_wins(const CostEntry &e);

struct CostModel {
    /* (collective, size class, codec id, bits) -> entry */
    std::map<std::tuple<int, int, int, int>, CostEntry> entries;
    /* the entry of the previous call: a training loop repeats the same few shapes, and
     * every call pays for this lookup (map nodes do not move) */
    std::tuple<int, int, int, int> last_key{-1, -1, -1, -1};
    CostEntry *last = nullptr;
    CostEntry &at(const std::tuple<int, int, int, int> &key) {
        if (last && key == last_key) return *last;
        last_key = key;
        return *(last = &entries[key]);
    }
};

/* Does the model decide for these settings? (settings.def: cost_model: auto gates every
 * policy but static, on gates static too, off none) */
inline bool cost_gated(const Settings &s) {
    return s.cost_model == cost_model_kind::on ||
           (s.cost_model == cost_model_kind::auto_ && s.policy != policy_kind::static_);
}

struct CollArgs;
/* Have the BLOCKING calls of st's communicator already found the exact collective faster for
 * a's class and plan? (a non-blocking or persistent call then goes to PMPI at once:
 * src/runtime/eligibility.h, eligibility_entry). Caller holds st.mu. */
bool cost_blocking_exact(CommState &st, const CollArgs &a);

/* The codec part of an entry's key: the codec id and the element type (an fp64 plan is
 * another plan: its own samples). */
inline int cost_codec_key(CodecId codec, Elem e) { return static_cast<int>(codec) | (static_cast<int>(e) << 8); }
/* The entropy stage's own decision for a codec key (entropy=auto, src/runtime/run.cc): its
 * "exact" side is the compressed call without the stage, its "compressed" side with it. */
inline constexpr int kCostStageKey = 1 << 12;

/* Size class of a payload: floor(log2(bytes)). */
int cost_size_class(size_t bytes);

/* The decision for one eligible call on host buffers; *predicted_s is the predicted time of
 * the chosen path (0 while exploring); *final (if given): the decision will not change (exact,
 * or replayed). Caller holds st.mu; identical on every rank. */
CostDecision cost_decide(CommState &st, Coll kind, size_t bytes, int codec, int bits, double margin,
                         double *predicted_s, bool *final = nullptr);

/* After a call the model asked to explore: agree on the slowest rank's time (collective over
 * comm) and learn it (through the test-only timing faults cost_noise / cost_skew). Returns the
 * MPI error code of the agreement (MPI_SUCCESS normally). nested_exploring: on this rank a timed
 * algorithm choice inside the call explored (Plan::nested_exploring); agreed with the time: the
 * sample is then no sample of the algorithm the class would run, and its pair is dropped. */
int cost_record(CommState &st, MPI_Comm comm, Coll kind, size_t bytes, int codec, int bits, CostDecision d,
                double local_s, bool nested_exploring = false);
/* The learning step alone, given the agreed time and this rank's own (unit tests drive the
 * model with it; local_s < 0: the same as the agreed time). Explored calls come in pairs:
 * explore_plain, then explore_comp. unsettled (agreed): a nested algorithm choice was exploring
 * in this call: the pair it belongs to is dropped (the class explores another). */
void cost_learn(CommState &st, Coll kind, size_t bytes, int codec, int bits, CostDecision d, double agreed_s,
                double local_s = -1, bool unsettled = false);

/* Record / replay of decisions (settings cost_record / cost_replay; docs/design.md).
 * cost_decisions_init: at MPI_Init, collective over MPI_COMM_WORLD: reads cost_replay's file
 * on every rank, checks it (version, ranks, settings hash), agrees over ranks (MIN/MAX of its
 * hash) and loads it, or refuses it with one line on stderr (rank 0) and the model measures.
 * cost_decisions_finalize: at MPI_Finalize: rank 0 writes cost_record's file; with statistics
 * on, prints every decision as a compmpi-stats-decision: line (same format). */
void cost_decisions_init(const Settings &s, MPI_Comm world);
void cost_decisions_finalize(const Settings &s, MPI_Comm world);
/* The hash of the settings that affect decisions (the file's header). */
uint64_t cost_settings_hash(const Settings &s);
/* One decision line's text (without the prefix), and its parser; for the unit tests. */
struct CostDecisionKey {
    int coll = 0, cls = 0, codec = 0, bits = 0, comm_size = 0;
    bool operator<(const CostDecisionKey &o) const {
        return std::tie(coll, cls, codec, bits, comm_size) < std::tie(o.coll, o.cls, o.codec, o.bits, o.comm_size);
    }
};
std::string cost_decision_line(const CostDecisionKey &k, bool compressed);
bool cost_decision_parse(const char *line, CostDecisionKey *k, bool *compressed);
/* Replace the replay table (unit tests; cost_decisions_init loads it from the file). */
void cost_replay_set(const std::map<CostDecisionKey, bool> &table);
/* The decisions taken so far in this process (last one per key). */
std::map<CostDecisionKey, bool> cost_decisions_taken();

/* What the model did in the last call this thread ran through the compressed path's entry
 * (src/boundary/interpose.cc, run_on): the progress thread of the non-blocking calls reads it after
 * each operation to learn that a class was decided exact (src/runtime/progress.cc). */
struct CostTrace {
    bool gated = false; /* the model decided this call (else: not gated, or never reached) */
    CostDecision d = CostDecision::compress;
    bool final = false; /* the decision will not change (the re-check is done) */
};
CostTrace &cost_trace();
/* Seconds this thread adds to its own time of an explored compressed call before the ranks
 * agree on it: the hand-off a compressed non-blocking call pays (the progress thread's
 * wake-up), which the exact path, issued directly as PMPI_I*, never pays. 0 on the
 * application's threads. */
double &cost_handoff_s();

/* Statistics per (collective, size class): decided calls and their predicted and measured
 * times, printed by stats_report (compmpi-stats-model lines). Process-wide, lock-free. */
void cost_stats_add(Coll kind, size_t bytes, CostDecision d, double predicted_s, double measured_s);
void cost_stats_report(MPI_Comm world);
void cost_stats_reset();

}  // namespace compmpi

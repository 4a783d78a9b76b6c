// SPDX-License-Identifier: BSD-3-Clause
/* The cost model: decides per call whether compressing pays, from times measured on this
 * communicator, so that preloading libcompmpi never makes a program slower.
 *
 * What it measures. For every (collective, size class, plan) it keeps the times of the exact
 * PMPI collective and of the compressed algorithm for that plan (codec, width), from
 * `kCostSamples` timed calls each of that size class. A size class is a power-of-two
 * bucket of the per-rank payload (bytes in [2^k, 2^(k+1))); times are scaled linearly to the
 * call's size within its class. The time of one call is the slowest rank's (an agreement
 * PMPI_Allreduce(MAX) of one double after each timed call), so these are collective times
 * and every rank holds the same numbers: every decision made from them is identical on all
 * ranks by construction.
 *
 * How it decides. The first calls of a class explore: plain, compressed, plain, compressed
 * (real calls of the application, exact or compressed as usual; nothing synthetic is sent),
 * each after a PMPI_Barrier so that a late rank's arrival is not part of the sample.
 * After that, the plan runs compressed only if its SLOWEST sample beat the exact
 * collective's FASTEST sample by the margin `cost_margin` (on a noisy machine compression
 * must win consistently; where it only sometimes wins, the exact collective is the safe
 * choice), and still does after kCostConfirm more samples per side, else exactly. The predicted time of the chosen path is the mean of its samples. Each decided call is timed locally and the prediction
 * and the measurement are added to the statistics (COMPMPI_STATS: compmpi-stats-model lines),
 * with no extra message. Why measured end to end rather than from link and codec speeds
 * alone: the exact collective's time on shared memory or on a given network is whatever the
 * MPI's algorithm selection makes it, and codecs slow down when the cores are shared; the
 * components (achieved MPI bandwidth bytes/t_plain, codec GB/s from t_encode/t_decode) are
 * derived from the same measurements and printed beside the decision (docs/design.md).
 *
 * Scope: host buffers of the flat algorithms (two-phase, sparse, bcast, allgather); device
 * buffers and the hierarchical allreduce are always compressed when eligible (docs). */
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
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

/* What one entry knows: collective times in seconds for the class's lower bound size. */
struct CostEntry {
    /* sums, minima and maxima over the used samples (warm-ups excluded) of the agreed times,
     * scaled to 2^class bytes; local_*: the sums of this rank's own times of those calls */
    double sum_plain = 0, min_plain = 0, max_plain = 0, local_plain = 0;
    double sum_comp = 0, min_comp = 0, max_comp = 0, local_comp = 0;
    int n_plain = 0, n_comp = 0; /* samples taken, warm-ups included */
    int round = 0;               /* 0: first calls of the class; 1: the steady-state re-check */
    int confirm = 0;             /* more used samples per side: asked for once the first chose compression */
    int decided_calls = 0;       /* calls decided by round 0 */
};

/* Per side and entry: kCostWarmup samples taken and not used, then kCostSamples used. The
 * first calls of a size pay first-use costs: the exact collective's first one MPI's set-up,
 * the first compressed one its workspaces' page faults (up to 7x a later call here). At 1-4
 * MiB on shared memory the SECOND exact call is still 1.3-2.6x the steady time (measured
 * here, all three collectives: a 1 MiB allreduce took 600-920, 430-630 (once 1280), 165-215
 * and 155-250 us in its first four calls; 4 MiB 2080-6320, 1990-3220, 960-1240 and 1050-1180
 * us), which made the predicted time of the exact path 1.6-2.2x the measured one in runs of
 * 80 calls; so two calls per side are
 * warm-ups. Three used samples would make the max/min rule below stricter: it kept 16 MiB
 * allreduces exact where compression was 13-20% faster (measured), so two are used. */
inline constexpr int kCostWarmup = 2;
inline constexpr int kCostSamples = 2;
/* Even after the warm-up, the first calls of a size can run several times slower than the
 * same calls later (measured here: a 16 KiB exact allreduce 14-18 us in its first calls,
 * 5 us once the job runs steadily, which made compression at 8 us look faster). So after
 * kCostRecheck calls decided by the first round, the class is sampled once more (kCostSamples
 * per side, no warm-up) and that decision is final. */
inline constexpr int kCostRecheck = 64;
/* A round whose samples choose compression takes kCostConfirm more per side (alternating, no
 * warm-up) and decides from all of them: one scheduler tick (4 ms here) landing on both exact
 * samples of a 0.5 ms collective made compression look 3x faster than it was (measured: a
 * 4 MiB allgather on 2 ranks of shared memory decided compressed in 1 of 8 jobs and ran 14-21x
 * slower until the re-check). A class that stays exact explores no more than before. */
inline constexpr int kCostConfirm = 2;
inline constexpr int kCostClasses = 48;

/* The rule, in one place: an entry has decided once both sides have their samples; it then
 * compresses only if the slowest used compressed sample beat the fastest exact one by the
 * margin. */
inline bool cost_entry_decided(const CostEntry &e) {
    const int need = kCostWarmup + kCostSamples + e.confirm;
    return e.n_plain >= need && e.n_comp >= need;
}
inline bool cost_entry_compresses(const CostEntry &e, double margin) { return e.max_comp < e.min_plain * (1.0 - margin); }
/* The same, with the test-only COMPMPI_FAULT=cost_plain/cost_compress applied (src/base/fault.h):
 * what every decision uses. */
bool cost_entry_verdict(const CostEntry &e, double margin);

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

/* Size class of a payload: floor(log2(bytes)). */
int cost_size_class(size_t bytes);

/* The decision for one eligible call on host buffers; *predicted_s is the predicted time of
 * the chosen path (0 while exploring); *final (if given): the decision will not change (the
 * re-check is done). Caller holds st.mu; identical on every rank. */
CostDecision cost_decide(CommState &st, Coll kind, size_t bytes, int codec, int bits, double margin,
                         double *predicted_s, bool *final = nullptr);

/* After a call the model asked to explore: agree on the slowest rank's time (collective over
 * comm) and learn it. Returns the MPI error code of the agreement (MPI_SUCCESS normally). */
int cost_record(CommState &st, MPI_Comm comm, Coll kind, size_t bytes, int codec, int bits, CostDecision d,
                double local_s);
/* The learning step alone, given the agreed time and this rank's own (unit tests drive the
 * model with it; local_s < 0: the same as the agreed time). */
void cost_learn(CommState &st, Coll kind, size_t bytes, int codec, int bits, CostDecision d, double agreed_s,
                double local_s = -1);

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

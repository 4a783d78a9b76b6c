// SPDX-License-Identifier: BSD-3-Clause
/* Fault injection, TEST-ONLY: compiled in, off unless the environment variable COMPMPI_FAULT
 * names a fault (docs/configuration.md, "Test-only: COMPMPI_FAULT"; tests/mpi/t_fault.c).
 *
 *   COMPMPI_FAULT=KIND:rank=R:call=N[:where=W]
 *     encode_fail   rank R's encoder "fails" (the blob is flagged BLOB_ABANDON, as a real
 *                   encoder error flags it)
 *     corrupt_blob  one blob rank R encoded is corrupted after encoding, before sending (its
 *                   header's element count is changed: a receiver's validation must catch it)
 *     mpi_error     one PMPI call of a compressed algorithm on rank R returns MPI_ERR_OTHER
 *                   (the call itself runs, so no peer is left inside it); W names which:
 *                   alltoall, allgather, bcast, allreduce, reduce, ialltoall, iallgather,
 *                   wait, any (default any)
 *     fft_differ    rank R's fft_topk probe hash (state_agree_fft) is changed, as if its CPU
 *                   or FFTW build differed from the others' (call= not needed: it fires at
 *                   the first probe)
 *     link_skew     rank R's link probe (allreduce_algorithm=auto across nodes,
 *                   coll/allreduce/allreduce_choice.cc) measures 1000x its alpha (latency),
 *                   and its explored two-phase calls 1000x their time, as a slow link would
 *                   (call= not needed: fires at the first probe); every rank must still
 *                   choose the same algorithm (halving-doubling)
 *     fft_adopt     rank R (not 0) does not adopt rank 0's fft_plan wisdom at MPI_Init, as
 *                   if its FFTW could not plan from it (call= not needed): every rank must go
 *                   back to FFTW_ESTIMATE plans (fft_topk::reset_plans)
 *     truncate_blob one blob rank R encoded reaches its receivers cut short: its header claims one
 *                   payload byte more than the slot (or message) carries, and where the sender
 *                   states the length (the sparse allgather) it states half the payload
 *     corrupt_payload one bit of the payload of a blob rank R encoded (not the header) is flipped
 *                   after encoding, before sending (the middle byte's top bit): what a decoder's
 *                   own validation catches, or not (docs/hardening.md, "Fault injection")
 *     rank_abort    rank R calls PMPI_Abort(MPI_COMM_WORLD, 71) right after one PMPI call of a
 *                   compressed algorithm (where=W as for mpi_error): the peers are mid-collective
 *     rank_kill     likewise, but rank R dies by SIGKILL (a crash, the OOM killer): no MPI_Abort
 *     alloc_fail    one host workspace allocation of rank R (Buffer::get) returns null
 *     alloc_throw   an allocation inside rank R's compressed algorithm throws std::bad_alloc (at
 *                   its next encode)
 *     stage_mpi     every rank, every call (no rank= or call=; it never fires): the MPI calls
 *                   that compressed algorithms make on float data (exact fallbacks of
 *                   segments, the hierarchy's node reduce / leader allreduce / node bcast)
 *                   run on host copies, as for device data with an MPI that is not
 *                   CUDA-aware (coll_mpi_floats), so CI machines without a GPU run that path
 *     cost_plain,   every rank, every call (no rank= or call=): the cost model measures as
 *     cost_compress always (the exploring calls run, both sides timed and agreed) but then
 *                   decides exact / compressed for every class whatever the times said, so
 *                   tests of what follows a decision (the non-blocking calls' direct path,
 *                   "results change only in calls decided to compress") do not depend on
 *                   the machine's speed
 *     cost_noise    every rank, every call (no rank= or call=): each agreed sample of the cost
 *                   model is multiplied by a factor uniform in [1-A, 1+A], a function of the
 *                   seed and the sample (the same on every rank). Fields seed=S (default 1),
 *                   amp=A (default 0.65, 0 <= A < 1)
 *     cost_skew     every rank, every call: toward=compressed (default) multiplies every exact
 *                   sample by F, toward=exact every compressed sample; factor=F (default 100, > 0)
 *                   (tests/mpi/cost_replay.sh: a run forced one way, replayed under the other)
 *     hier_skew     every rank, every call (no rank= or call=): each agreed sample of the timed
 *                   choice between the hierarchical and the flat allreduce (hierarchy=auto,
 *                   coll/allreduce/allreduce_choice.cc) is changed after the agreement, alike
 *                   on every rank: toward=flat (default) multiplies every hierarchical sample by
 *                   F, toward=hierarchical every flat sample; factor=F (default 100, > 0);
 *                   toward=tie sets every sample of both to 1 ms, so the samples always
 *                   overlap (the bounded extra rounds, then the tie rule: hierarchical).
 *                   The stage model's predictions (made before the timing, allreduce_model.cc)
 *                   then never decide; model=1: the fault changes the predictions instead of
 *                   the samples, the same way, and lets them decide on one host too
 *   R is the rank in MPI_COMM_WORLD; N counts this rank's compressed collectives from 1 (every
 *   call that entered a compressed algorithm, all communicators together). The fault fires
 *   once, at the first matching hook of call N or of a later call (a bcast's receivers never
 *   encode: encode_fail on a receiver fires at its next encode).
 *
 * Cost when off: each hook is one load and one predictable branch (COMPMPI_FAULT_ON()). Only
 * the host backend is hooked (device blobs live in device memory). */
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace compmpi {

enum class FaultKind : int {
    none = 0, encode_fail, corrupt_blob, mpi_error, fft_differ, stage_mpi, fft_adopt,
    cost_plain, cost_compress, link_skew,
    truncate_blob, corrupt_payload, rank_abort, rank_kill, alloc_fail, alloc_throw,
    cost_noise, cost_skew, hier_skew
};
enum class FaultWhere : int { any = 0, alltoall, allgather, bcast, allreduce, reduce, ialltoall, iallgather, wait };

/* Non-zero while a fault is armed and has not fired yet; read by the hooks. */
extern std::atomic<int> g_fault_armed;

#define COMPMPI_FAULT_ON() (__builtin_expect(::compmpi::g_fault_armed.load(std::memory_order_relaxed) != 0, 0))

/* Slow paths, called only when COMPMPI_FAULT_ON(). */
void fault_call_begin(const char *coll);           /* a compressed collective starts */
bool fault_fire(FaultKind kind, FaultWhere where); /* true once: inject now (prints one warning) */
int fault_mpi_rc(FaultWhere where, int rc);        /* rc, or MPI_ERR_OTHER when injecting; or
                                                    * rank_abort / rank_kill: never returns */
/* alloc_fail: true once, where a workspace allocation must report failure. */
bool fault_alloc_fail();

/* COMPMPI_FAULT=stage_mpi is set (read only when COMPMPI_FAULT_ON()). */
bool fault_stage_mpi();
/* COMPMPI_FAULT=cost_plain / cost_compress: -1 / +1 (0 otherwise; read only when COMPMPI_FAULT_ON()). */
int fault_cost_force();

/* COMPMPI_FAULT=cost_noise / cost_skew (read only when COMPMPI_FAULT_ON()): the factor to
 * apply to the n-th agreed sample of the cost model, plain (exact) or compressed; 1 otherwise. */
double fault_cost_factor(bool plain, uint64_t n);
/* cost_noise's factor for seed and draw n: uniform in [1-amp, 1+amp], a pure function (the unit
 * tests' noisy sampler uses it too). */
double fault_noise_factor(uint64_t seed, double amp, uint64_t n);
/* COMPMPI_FAULT=hier_skew (read only when COMPMPI_FAULT_ON()): the agreed sample t of the
 * hierarchical (hierarchical = true) or the flat candidate, as the fault changes it; t otherwise. */
double fault_hier_sample(bool hierarchical, double t);
/* The same for the stage model's prediction *t of a candidate: 1 no hier_skew (the usual rule
 * applies), 0 the model may not decide (hier_skew on the samples), 2 it may, even on one host
 * (hier_skew:model=1; *t as the fault changes it). */
int fault_hier_predicted(bool hierarchical, double *t);
/* A decision mode fault (cost_plain, cost_compress, cost_noise, cost_skew, hier_skew) is set. */
bool fault_cost_mode();

/* A fault that keeps per-call records is armed: the memos of exact verdicts stay off
 * (src/runtime/verdict.h). The cost-model modes only change decisions, which the memos
 * replay like any other, so tests of the direct path can force it. */
#define COMPMPI_FAULT_RECORDS_CALLS() (COMPMPI_FAULT_ON() && !::compmpi::fault_cost_mode())

/* For tests: the fault's state (0 armed, 1 fired, -1 none configured). */
int fault_state();

}  // namespace compmpi

/* A PMPI call's return code, through the mpi_error fault. */
#define COMPMPI_FAULT_MPI(where, rc_expr)                                                                   \
    (COMPMPI_FAULT_ON() ? ::compmpi::fault_mpi_rc(::compmpi::FaultWhere::where, (rc_expr)) : (rc_expr))

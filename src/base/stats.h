// SPDX-License-Identifier: BSD-3-Clause
/* Statistics per collective, process-wide, lock-free. Printed (summed over ranks) by rank 0
 * at MPI_Finalize when COMPMPI_STATS=1, one line per collective:
 *   compmpi-stats: coll=allreduce compressed=.. passthrough=.. bytes_in=.. bytes_wire=..
 *     bytes_uncompressed_wire=.. ratio=.. t_encode_s=.. t_decode_s=.. t_comm_s=.. fallback_nonfinite=..
 *     fallback_error=.. hierarchical=.. halving=.. sparse_twophase=.. decode_overlapped=..
 * and one line of pass-through reasons:
 *   compmpi-stats-passthrough: coll=allreduce <reason>=<calls> ...                         */
#pragma once
#include <mpi.h>

#include <atomic>
#include <string>
#include <vector>
#include <chrono>
#include <cstdint>

#include "base/mpi_family.h" /* CallClock */

namespace compmpi {

/* The blocking collectives, then the non-blocking entry points (src/runtime/progress.h): the
 * same order as the `collectives` setting's list, so a kind's bit is its value. */
enum class Coll : int { allreduce = 0, allgather = 1, bcast = 2, iallreduce = 3, iallgather = 4, ibcast = 5,
                      allreduce_init = 6, allgather_init = 7, bcast_init = 8,
                      reduce_scatter_block = 9, reduce_scatter = 10, ireduce_scatter_block = 11, ireduce_scatter = 12,
                      reduce_scatter_block_init = 13, reduce_scatter_init = 14, count_ };
const char *coll_name(Coll c);

/* Reasons a call passes through; the eligibility table (src/runtime/eligibility.cc) names them. */
inline constexpr int kMaxReasons = 32;

struct CollStats {
    std::atomic<uint64_t> compressed{0}, passthrough{0};
    std::atomic<uint64_t> bytes_in{0};                /* user payload bytes of compressed calls */
    std::atomic<uint64_t> bytes_wire{0};              /* bytes this rank handed to MPI to send */
    std::atomic<uint64_t> bytes_uncompressed_wire{0}; /* what the same algorithm sends uncompressed */
    std::atomic<uint64_t> ns_encode{0}, ns_decode{0}, ns_comm{0};
    std::atomic<uint64_t> fallback_nonfinite{0}, fallback_error{0};
    std::atomic<uint64_t> hierarchical{0};    /* allreduces that ran the hierarchical algorithm */
    std::atomic<uint64_t> halving{0};         /* dense allreduces that ran halving-doubling (leaders' too) */
    std::atomic<uint64_t> sparse_twophase{0}; /* sparse allreduces that took SparCML's two-phase path */
    std::atomic<uint64_t> decode_overlapped{0}; /* fft_topk allreduces decoded while their exchange ran */
    /* bytes the cost model's measuring compressed runs handed to MPI (their results are
     * discarded: the exact call that follows gives the result); not in bytes_wire */
    std::atomic<uint64_t> explore_bytes_wire{0};
    std::atomic<uint64_t> reason[kMaxReasons]{};
};

CollStats &stats(Coll c);
/* c's own counters, whatever this thread counts as (reports, resets). */
CollStats &stats_counters(Coll c);
/* Whether the statistics are printed at MPI_Finalize: COMPMPI_STATS on any rank, agreed at
 * MPI_Init (work done only for them, such as timing calls the cost model has decided, is
 * skipped otherwise, alike on every rank). */
bool stats_enabled();
void stats_enable(bool on);
/* This thread's calls count as entry point `e` (a progress thread running a non-blocking
 * operation); Coll::count_ restores counting by the collective passed to stats(). */
void stats_set_entry(Coll e);
/* The raw per-thread entry (-1: none), saved and restored around a fiber's run. */
int stats_entry_raw();
void stats_entry_raw_set(int e);
/* A line the statistics print as it is (rank 0's notes only), e.g. a one-time cost at
 * MPI_Init or a measurement an algorithm made once; stats_notes() reads them back. */
void stats_note(const std::string &line);
std::vector<std::string> stats_notes();
/* Printing them (with the pass-through reasons' names and the cost model's lines) is the
 * runtime's: src/runtime/report.h. */

/* Elapsed nanoseconds added to a counter on scope exit (CallClock: the steady clock;
 * under SimGrid SMPI the simulated one, src/mpi_family.h). */
class ScopedTimer {
  public:
    explicit ScopedTimer(std::atomic<uint64_t> &acc) : acc_(acc), t0_(CallClock::now()) {}
    ~ScopedTimer() {
        acc_.fetch_add(static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                           CallClock::now() - t0_).count()),
                       std::memory_order_relaxed);
    }
    ScopedTimer(const ScopedTimer &) = delete;
    ScopedTimer &operator=(const ScopedTimer &) = delete;

  private:
    std::atomic<uint64_t> &acc_;
    CallClock::time_point t0_;
};

}  // namespace compmpi

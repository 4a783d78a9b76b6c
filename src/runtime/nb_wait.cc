// SPDX-License-Identifier: BSD-3-Clause
/* Waits on our non-blocking and persistent requests sleep while the progress thread works
 * (docs/design.md, "Waiting sleeps"). */
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "runtime/channel.h"
#include "runtime/progress.h"

namespace compmpi {

namespace {

/* The application's thread waiting for a request of ours sleeps until the progress thread
 * completes it, instead of spinning in MPI's wait beside the thread that does the work (two
 * busy threads per rank: with a rank per core the scheduler takes the CPU from one of them
 * for whole ticks, 4 ms here, and explored samples came out 10-40x the collective's time).
 * Operations queued and not yet completed, by their generalized request. */
struct Waiters {
    std::mutex mu;
    std::condition_variable cv;
    std::unordered_map<MPI_Request, std::shared_ptr<NbOp>> pending; /* guarded by mu */
};
/* never destroyed: a process that exits (MPI_Abort from a progress thread) while the
 * application's thread sleeps here must not block in the condition variable's destructor */
Waiters &g_w = *new Waiters;

}  // namespace

namespace nb_wait_detail {
std::atomic<int> g_n_pending{0};
}  // namespace nb_wait_detail
using nb_wait_detail::g_n_pending;

void nb_wait_register(const std::shared_ptr<NbOp> &op) {
    std::lock_guard<std::mutex> lk(g_w.mu);
    const auto [it, added] = g_w.pending.try_emplace(op->greq, op);
    if (added) g_n_pending.fetch_add(1, std::memory_order_relaxed);
    /* the handle's previous operation: complete in MPI (MPI reuses only a freed, complete
     * request's handle), its nb_wait_done not yet run; that one will leave this entry alone */
    else it->second = op;
}

/* After MPI_Grequest_complete: a wait that found op here returns only then (done). */
void nb_wait_done(NbOp &op) {
    {
        std::lock_guard<std::mutex> lk(g_w.mu);
        op.done.store(true, std::memory_order_release);
        const auto it = g_w.pending.find(op.greq);
        if (it != g_w.pending.end() && it->second.get() == &op) {
            g_w.pending.erase(it);
            g_n_pending.fetch_sub(1, std::memory_order_relaxed);
        }
    }
    g_w.cv.notify_all();
}

void nb_wait_detail::sleep_on(int n, const MPI_Request *reqs) {
    for (int i = 0; i < n; ++i) {
        std::shared_ptr<NbOp> op;
        {
            std::lock_guard<std::mutex> lk(g_w.mu);
            const auto it = g_w.pending.find(reqs[i]);
            if (it == g_w.pending.end()) continue; /* not ours, or already complete */
            op = it->second;
        }
        /* inline progress: nothing else would complete it; MPI's wait (mpi_next's polling
         * wait, pumping the fibers) does */
        if (op->on_fiber) continue;
        /* a short spin first: a small operation completes sooner than a sleep and wake-up;
         * then MPI's wait finds the request complete (the thread marks it done only after
         * MPI_Grequest_complete: MPICH's MPI_Waitall must not find it incomplete) */
        const auto t0 = std::chrono::steady_clock::now();
        while (!op->done.load(std::memory_order_acquire) &&
               std::chrono::steady_clock::now() - t0 < std::chrono::microseconds(20))
            __builtin_ia32_pause();
        std::unique_lock<std::mutex> lk(g_w.mu);
        g_w.cv.wait(lk, [&] { return op->done.load(std::memory_order_acquire); });
    }
}

}  // namespace compmpi

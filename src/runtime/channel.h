// SPDX-License-Identifier: BSD-3-Clause
/* The progress channels of the non-blocking and persistent collectives (src/runtime/progress.h):
 * what progress.cc (the channels, their threads, non-blocking calls) and persistent.cc
 * (persistent requests) share. Internal to the runtime. */
#pragma once
#include <mpi.h>

#include <chrono>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "base/fiber.h"
#include "runtime/args.h"
#include "runtime/costmodel.h"
#include "runtime/state.h"
#include "runtime/verdict.h"

namespace compmpi {

/* MPI_(I)reduce_scatter's recvcounts array, owned by the operation: the progress thread
 * reads it after the call returned, so the user's array is copied at issue (P entries). */
struct OwnedCounts {
    std::vector<int> c;
    std::vector<MPI_Count> c_large;
    void take(CollArgs &a, int P) {
        if (a.recvcounts) c.assign(a.recvcounts, a.recvcounts + P), a.recvcounts = c.data();
        if (a.recvcounts_c) c_large.assign(a.recvcounts_c, a.recvcounts_c + P), a.recvcounts_c = c_large.data();
    }
};

/* The class of an operation for the cost model's exact verdict (see "Measured, then
 * direct" in docs/design.md): what every rank knows at issue time. Non-blocking calls: the
 * entry point, the size class of the payload and the user communicator's settings epoch;
 * a persistent request is its own class. */
struct NbClass {
    int entry = 0, cls = 0;
    uint64_t epoch = 0;
    uint64_t persist = 0; /* a persistent request's id (never reused), 0 for non-blocking calls */
    bool operator<(const NbClass &o) const {
        return std::tie(entry, cls, epoch, persist) < std::tie(o.entry, o.cls, o.epoch, o.persist);
    }
};

/* One non-blocking operation. Shared by the progress thread and the generalized request
 * (whose free_fn may run before or after the thread is done with it). */
struct NbOp {
    CollArgs a{};
    Coll entry = Coll::iallreduce;
    Settings settings{}; /* the user communicator's settings when the call was issued */
    MPI_Request greq = MPI_REQUEST_NULL;
    int rc = MPI_SUCCESS;
    CommState *own = nullptr;       /* persistent: the request's own state (else the channel's) */
    std::shared_ptr<void> keep;     /* keeps `own` alive while the operation runs */
    OwnedCounts counts;             /* reduce_scatter: a.recvcounts points here */
    uint64_t index = 0;             /* place in the channel's issue order (every rank alike) */
    bool gated = false;             /* the cost model decides this operation */
    NbClass cls;
    std::chrono::steady_clock::time_point t_issue{};
    bool woke = false;              /* the thread was idle when this operation was queued */
    std::atomic<bool> done{false};  /* complete in MPI (set under the waiters' lock: nb_wait.cc) */
    bool on_fiber = false;          /* inline progress: counted in mpi_next::progress::live until complete */
};

/* What a fiber's code keeps per thread and must find again when it is resumed: the resumer
 * swaps it in and out (src/runtime/progress.cc, pump_one). */
struct FiberTls {
    int depth = 0;          /* ReentryGuard */
    CostTrace trace{};      /* the cost model's trace of the operation under way */
    double handoff = 0;     /* cost_handoff_s */
    int entry = -1;         /* stats_set_entry */
    bool progress = true;   /* nb_on_progress_thread */
};

/* The progress channel of one user communicator: its private duplicates and a FIFO served
 * by one thread. Every rank issues the communicator's collectives in the same order (MPI's
 * rule), the queue keeps that order and the thread runs one operation at a time, so every
 * rank runs the same sequence of exchanges on the duplicate `internal`. Classes the cost
 * model found faster exact go, from an agreed issue index on, straight to PMPI_I* on the
 * second duplicate `direct` (nothing else uses it; every rank issues its operations there in
 * issue order: docs/design.md, "Measured, then direct"). */
struct NbChannel {
    MPI_Comm internal = MPI_COMM_NULL, direct = MPI_COMM_NULL;
    /* MPI_Comm_idup of `internal` (never blocks the issuing call; under Open MPI a blocking
     * dup instead: src/base/mpi_family.h); `direct` is then duplicated from it by the thread */
    MPI_Request idup = MPI_REQUEST_NULL;
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::shared_ptr<NbOp>> q;
    bool stop = false;
    bool joined = false;
    bool idle = false;          /* the thread waits for work */
    /* operations issued so far, the classes that go direct and from which index (guarded by
     * mu), and whether an agreement on a new one is under way (then every gated operation is
     * queued; the thread issues those that turn out direct, in index order). `issued` is
     * written by the application's thread that issues the communicator's collectives (one at
     * a time: MPI's rule), under mu except on the memo's direct path (channel_take_memo),
     * which reads `agreeing` without it; the thread sets `agreeing` under mu and clears it
     * last, with release */
    std::atomic<uint64_t> issued{0};
    std::map<NbClass, uint64_t> direct_from;
    std::atomic<bool> agreeing{false};
    /* the thread's own: operations it issued on `direct` for the application (queued while an
     * agreement ran), polled until complete; recent hand-off latencies */
    std::vector<std::pair<MPI_Request, std::shared_ptr<NbOp>>> inflight;
    double wake_s[16] = {};
    int n_wake = 0;
    std::thread th;
    /* inline progress (nb_progress=inline): the fiber that runs the loop instead of `th`,
     * resumed by the application's thread inside its MPI calls, and its per-thread state */
    fiber::Fiber *fib = nullptr;
    FiberTls fib_tls;
    /* the user's communicator was freed while MPI ran its delete callback on this channel's
     * own fiber or thread (MPICH frees it once a pending MPI_Comm_idup completes, inside the
     * wait for it): stopped there, dropped later by the application's thread (reap_orphans);
     * `exited`: the loop returned */
    bool orphan = false;
    std::atomic<bool> exited{false};
};

/* The channel of comm, created on the first compressed non-blocking call (MPI_Comm_idup;
 * under Open MPI a blocking MPI_Comm_dup); nullptr if MPI fails. */
NbChannel *channel_get(MPI_Comm comm);

/* Issue op on channel ch: straight to PMPI_I* on ch->direct when its class goes direct from
 * an index at or below op's, else queued for the progress thread under a generalized
 * request. *request gets the user's handle (`comm`: the user's communicator, for errors). */
int channel_hand_off(NbChannel *ch, const std::shared_ptr<NbOp> &op, MPI_Comm comm, MPI_Request *request);

/* Whether the next operation of class cls goes straight to MPI: cls was agreed direct from
 * an index at or below the next one (every rank alike), and -- unless the operation does not
 * go to `direct` (a persistent request started itself on the user's communicator, which
 * nothing else of the channel orders against) -- no agreement is under way. If so the index
 * is taken and true; *from gets the class's first direct index (fixed once agreed). Caller
 * holds ch->mu. */
bool channel_take_direct(NbChannel *ch, const NbClass &cls, bool on_direct, uint64_t *from = nullptr);
/* The next index for a call the memo found direct from index `from`, without ch->mu (the
 * lock was a fifth of the direct path's cost on a 0.45 us bcast): true if taken, false while
 * an agreement runs (the call then takes the locked path). Only the calling thread writes
 * `issued`. Why the lock is not needed (docs/design.md, "The direct path takes no lock"):
 * what the thread issues on `direct` when an agreement ends was queued under ch->mu after it
 * set `agreeing` there, so that lock hands `agreeing` to this thread and none of its later
 * calls comes here before the thread clears the flag -- after those issues, with release
 * (acquire here); and every call this path issued before is earlier in issue order. An
 * index the agreement missed (read before this store) only belongs to a class already
 * direct: the operations of the class being agreed that it must count were queued under
 * the lock, before it read `issued`, or after, when they see `agreeing`. */
inline bool channel_take_memo(NbChannel *ch, uint64_t from) {
    if (ch->agreeing.load(std::memory_order_acquire)) return false;
    const uint64_t i = ch->issued.load(std::memory_order_relaxed);
    if (i < from) return false;
    ch->issued.store(i + 1, std::memory_order_relaxed);
    return true;
}
/* MPI's own non-blocking collective of a (a.kind) on ch->direct, counted as `cost_model`
 * under entry (with statistics on). Caller holds ch->mu or took the index with
 * channel_take_memo (a persistent request's start; the non-blocking calls' memo path is
 * src/runtime/nb_dispatch.h): the order on `direct` is the issue order. */
int channel_issue_direct(NbChannel *ch, const CollArgs &a, Coll entry, MPI_Request *request);

/* The direct path's memo (src/runtime/nb_memo.cc; docs/design.md, "Measured, then direct"):
 * per thread, the channel, class and first direct index of a non-blocking call signature
 * whose class went direct, valid while the verdict generation (src/runtime/verdict.h) is
 * unchanged. Stored only with statistics and call-recording faults off. */
struct NbMemoEntry {
    VerdictKey key;
    uint64_t gen = 0; /* 0: empty */
    NbChannel *ch = nullptr;
    NbClass cls;
    uint64_t from = 0;
};
/* The registry of operations a wait may sleep on (src/runtime/nb_wait.cc): registered when
 * queued, done (woken) once the thread completed the generalized request. */
void nb_wait_register(const std::shared_ptr<NbOp> &op);
void nb_wait_done(NbOp &op);

bool nb_memo_key(const CollArgs &a, Coll entry, VerdictKey *k);
void nb_memo_store(const VerdictKey &k, uint64_t gen, NbChannel *ch, const NbClass &cls, uint64_t from);
/* The entry of a's signature under entry point `entry`, of the current generation, or
 * nullptr. Inline, like the blocking memo's lookup: the hit path of every direct call. */
inline NbMemoEntry *nb_memo_find(const CollArgs &a, Coll entry);

namespace nb_memo_detail {
inline constexpr int kEntries = verdict_detail::kEntries;
/* per thread, no lock; initial-exec TLS like the blocking memo's (src/runtime/verdict.h) */
extern thread_local constinit NbMemoEntry *t_nbmemo __attribute__((tls_model("initial-exec")));
}  // namespace nb_memo_detail

[[gnu::always_inline]] inline NbMemoEntry *nb_memo_find(const CollArgs &a, Coll entry) {
    NbMemoEntry *m = nb_memo_detail::t_nbmemo;
    if (!m || a.kind == Coll::reduce_scatter) return nullptr;
    const int kind = static_cast<int>(entry), root = a.kind == Coll::bcast ? a.root : -1;
    NbMemoEntry &e = m[verdict_detail::slot(a.comm, kind, a.count, root)];
    if (!verdict_detail::matches(e.key, e.gen, kind, a.kind, a.comm, a.count, a.recvcount, a.datatype, a.recvtype,
                                 a.op, root, a.sendbuf) ||
        !verdict_detail::host_buffers(a.kind, a.sendbuf, a.recvbuf))
        return nullptr;
    return &e;
}

/* An MPI-4 _c call whose counts exceed INT_MAX: counted (reason count_above_int_max) and
 * true; such calls pass through to PMPI_I*_c / PMPI_*_init_c. */
bool nb_above_int_max(const CollArgs &a, Coll entry);

}  // namespace compmpi

// SPDX-License-Identifier: BSD-3-Clause
/* Non-blocking collectives: one progress channel per communicator (docs/design.md,
 * "Non-blocking collectives"), the cost model's measured-then-direct path. */
#include "runtime/progress.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <exception>

#include "base/fault.h"
#include "base/log.h"
#include "base/mpi_next.h"
#include "base/stats.h"
#include "runtime/channel.h"
#include "runtime/costmodel.h"
#include "runtime/dispatch.h"
#include "runtime/eligibility.h"
#include "runtime/exact.h"
#include "runtime/policy.h"
#include "runtime/runtime.h"

namespace compmpi {

void nb_pump_others(NbChannel *self);

namespace {

thread_local bool t_progress = false;
/* a channel's fiber: its stack (codec kernels keep their scratch on the heap; the
 * sanitizers' builds need the room) */
constexpr size_t kFiberStack = size_t{8} << 20;
std::mutex g_mu; /* guards g_keyval and g_channels */
int g_keyval = MPI_KEYVAL_INVALID;
std::vector<NbChannel *> g_channels;
std::atomic<int> g_orphans{0}; /* channels stopped by a delete callback on their own fiber or thread */

int query_fn(void *extra, MPI_Status *status) {
    const NbOp &op = **static_cast<std::shared_ptr<NbOp> *>(extra);
    mpi_next::Status_set_elements(status, MPI_BYTE, 0);
    mpi_next::Status_set_cancelled(status, 0);
    status->MPI_SOURCE = MPI_ANY_SOURCE;
    status->MPI_TAG = MPI_ANY_TAG;
    status->MPI_ERROR = op.rc;
    return op.rc;
}
int free_fn(void *extra) {
    delete static_cast<std::shared_ptr<NbOp> *>(extra);
    return MPI_SUCCESS;
}
/* MPI: a non-blocking collective cannot be cancelled; MPI_Cancel has no effect (the
 * operation completes normally and MPI_Test_cancelled says false). */
int cancel_fn(void *, int) { return MPI_SUCCESS; }

/* Waiting for work: a thread sleeps on the channel's condition (`timed`: at most 200 us, while
 * operations issued on `direct` are polled); a fiber yields to the application's thread,
 * without the lock (the application takes it to queue work). */
void wait_for_work(NbChannel *ch, std::unique_lock<std::mutex> &lk, bool timed) {
    if (ch->fib) {
        lk.unlock();
        fiber::yield();
        lk.lock();
    } else if (timed) {
        ch->cv.wait_for(lk, std::chrono::microseconds(200));
    } else {
        ch->cv.wait(lk);
    }
}

FiberTls tls_take() {
    FiberTls t;
    t.depth = runtime_detail::t_depth;
    t.trace = cost_trace();
    t.handoff = cost_handoff_s();
    t.entry = stats_entry_raw();
    t.progress = t_progress;
    return t;
}
void tls_put(const FiberTls &t) {
    runtime_detail::t_depth = t.depth;
    cost_trace() = t.trace;
    cost_handoff_s() = t.handoff;
    stats_entry_raw_set(t.entry);
    t_progress = t.progress;
}

/* Resume ch's fiber once, with its per-thread state swapped in; true once its loop returned. */
bool pump_one(NbChannel *ch) {
    if (fiber::finished(ch->fib)) return true;
    const FiberTls app = tls_take();
    tls_put(ch->fib_tls);
    const bool done = fiber::resume(ch->fib);
    ch->fib_tls = tls_take();
    tls_put(app);
    return done;
}

/* Whether ch's fiber has anything to do: an operation queued or running, operations on
 * `direct` to poll, or a stop to honour. */
bool fiber_has_work(NbChannel *ch) {
    std::lock_guard<std::mutex> lk(ch->mu);
    return !ch->idle || !ch->q.empty() || !ch->inflight.empty() || ch->stop;
}

void stop_channel(NbChannel *ch) {
    {
        std::lock_guard<std::mutex> lk(ch->mu);
        if (ch->joined) return;
        ch->stop = true;
    }
    if (ch->fib) {
        /* its queued operations run to completion here (the peers' fibers advance in their
         * own calls into MPI: MPI_Comm_free and MPI_Finalize pump theirs too) */
        unsigned polls = 0;
        while (!pump_one(ch)) {
            if ((++polls & 63u) == 0) std::this_thread::yield();
            nb_pump_others(ch);
        }
        fiber::destroy(ch->fib);
        ch->fib = nullptr;
    } else {
        ch->cv.notify_all();
        if (ch->th.joinable()) ch->th.join();
    }
    ch->joined = true;
    int finalized = 0;
    mpi_next::Finalized(&finalized);
    if (finalized) return;
    /* operations the application issued on `direct` may still be pending: MPI frees the
     * communicator once they complete */
    for (MPI_Comm *c : {&ch->internal, &ch->direct})
        if (*c != MPI_COMM_NULL) mpi_next::Comm_free(c);
}

void drop_channel(NbChannel *ch) {
    stop_channel(ch);
    {
        std::lock_guard<std::mutex> lk(g_mu);
        for (auto it = g_channels.begin(); it != g_channels.end(); ++it)
            if (*it == ch) {
                g_channels.erase(it);
                break;
            }
        if (ch->orphan) g_orphans.fetch_sub(1, std::memory_order_relaxed);
    }
    delete ch;
}

/* Channels whose communicator was freed on their own fiber or thread, once their loop
 * returned: dropped here, on the application's thread. */
void reap_orphans() {
    if (g_orphans.load(std::memory_order_relaxed) == 0 || fiber::current() || t_progress) return;
    std::vector<NbChannel *> dead;
    {
        std::lock_guard<std::mutex> lk(g_mu);
        for (NbChannel *ch : g_channels)
            if (ch->orphan && (ch->fib ? fiber::finished(ch->fib) : ch->exited.load())) dead.push_back(ch);
    }
    for (NbChannel *ch : dead) drop_channel(ch);
}

/* The user communicator is freed: finish its queued operations (MPI: a communicator is
 * freed once its pending operations complete), then drop the channel. MPI may run this
 * inside a wait of the channel's own fiber or thread (or another fiber's), which cannot wait
 * for itself: the channel is told to stop, and dropped later (reap_orphans). */
int channel_delete_cb(MPI_Comm, int, void *attr, void *) {
    NbChannel *ch = static_cast<NbChannel *>(attr);
    if (fiber::current() || t_progress) {
        std::lock_guard<std::mutex> lk(ch->mu);
        ch->stop = true;
        if (!ch->orphan) g_orphans.fetch_add(1, std::memory_order_relaxed);
        ch->orphan = true;
        ch->cv.notify_all();
        return MPI_SUCCESS;
    }
    drop_channel(ch);
    return MPI_SUCCESS;
}

void complete(NbOp &op, int rc) {
    op.rc = rc;
    /* complete in MPI before a sleeping wait returns: MPICH's MPI_Waitall asserts that a
     * generalized request it reaches is complete (4.0.2, with a null request in the array) */
    mpi_next::Grequest_complete(op.greq);
    nb_wait_done(op);
    if (op.on_fiber) {
        op.on_fiber = false;
        mpi_next::progress::live.fetch_sub(1, std::memory_order_relaxed);
    }
}

/* The hand-off a compressed operation pays: the median of the recent wake-up latencies
 * (queued while the thread was idle -> the thread running it). */
double handoff_s(const NbChannel &ch) {
    const int n = std::min(ch.n_wake, 16);
    if (n == 0) return 0;
    double v[16];
    std::copy(ch.wake_s, ch.wake_s + n, v);
    std::nth_element(v, v + n / 2, v + n);
    return v[n / 2];
}

/* Runs op on the channel's thread; returns its MPI return code (the caller completes it). */
int run_op(NbChannel *ch, NbOp &op) {
    ReentryGuard guard; /* our PMPI traffic is never compressed again */
    stats_set_entry(op.entry);
    cost_trace() = CostTrace{};
    cost_handoff_s() = handoff_s(*ch);
    int rc = MPI_SUCCESS;
    try {
        CommState *ist = op.own ? op.own : state_get(ch->internal);
        if (!ist) {
            rc = MPI_ERR_INTERN;
        } else {
            std::lock_guard<std::mutex> lk(ist->mu);
            /* the settings of the user's communicator at issue time (a persistent request
             * keeps those of its init); the cost model, where they gate, explores and decides
             * on this thread, in FIFO order: identically on every rank */
            if (!op.own) ist->settings = op.settings;
            CollArgs b = op.a;
            b.comm = ch->internal;
            UpperClean upper; /* the thread returns to MPI's progress code */
            rc = dispatch_float_view(b, *ist);
        }
    } catch (const std::exception &e) {
        log_error("internal error in %s: %s", coll_name(op.entry), e.what());
        rc = abort_collective(ch->internal, MPI_ERR_INTERN, coll_name(op.entry)); /* peers mid-collective */
    } catch (...) {
        rc = abort_collective(ch->internal, MPI_ERR_INTERN, coll_name(op.entry));
    }
    stats_set_entry(Coll::count_);
    return rc;
}

/* Queued operations of classes that go direct, from their index on: issued on `direct` in
 * queue (= issue) order, completed by polling. Caller holds ch->mu. A persistent request
 * whose later starts go to MPI's own persistent collective (src/runtime/persistent.cc) is
 * never among them: its class is agreed after one of its runs, and the request cannot be
 * started again before that run completes, which is after the agreement. */
void issue_direct_queued(NbChannel *ch) {
    for (auto it = ch->q.begin(); it != ch->q.end();) {
        NbOp &op = **it;
        auto d = op.gated ? ch->direct_from.find(op.cls) : ch->direct_from.end();
        if (d == ch->direct_from.end() || op.index < d->second) {
            ++it;
            continue;
        }
        ReentryGuard guard;
        MPI_Request r = MPI_REQUEST_NULL;
        const int rc = passthrough_nb(op.a, ch->direct, &r);
        stats(op.entry).passthrough++;
        stats(op.entry).reason[eligibility_reason("cost_model")]++;
        if (rc != MPI_SUCCESS) complete(op, rc);
        else ch->inflight.emplace_back(r, *it);
        it = ch->q.erase(it);
    }
}

/* Completes the operations issued on `direct` that MPI finished; true if any. */
bool poll_inflight(NbChannel *ch) {
    bool any = false;
    ReentryGuard guard;
    for (size_t i = 0; i < ch->inflight.size();) {
        int flag = 0;
        MPI_Status status;
        const int rc = mpi_next::Test(&ch->inflight[i].first, &flag, &status);
        if (rc != MPI_SUCCESS || flag) {
            complete(*ch->inflight[i].second, rc);
            ch->inflight.erase(ch->inflight.begin() + static_cast<long>(i));
            any = true;
        } else {
            ++i;
        }
    }
    return any;
}

/* After an operation the cost model decided exact: from an index every rank agrees on, its
 * class goes straight to PMPI_I* on `direct`. The decision is identical on every rank (the
 * model's agreed times, FIFO order), so every rank's thread reaches this agreement after the
 * same operation. Each rank offers the next index it will issue; the largest is one no rank
 * has issued yet, except under this rank's `agreeing` flag, where gated operations are
 * queued and, once the index is known, those that go direct are issued in index order. */
void agree_direct(NbChannel *ch, const NbClass &cls) {
    uint64_t mine, from = 0;
    {
        std::lock_guard<std::mutex> lk(ch->mu);
        if (ch->direct_from.count(cls)) return;
        ch->agreeing.store(true, std::memory_order_relaxed);
        mine = ch->issued.load(std::memory_order_relaxed);
    }
    int rc;
    {
        ReentryGuard guard;
        rc = mpi_next::Allreduce(&mine, &from, 1, MPI_UINT64_T, MPI_MAX, ch->internal);
    }
    std::lock_guard<std::mutex> lk(ch->mu);
    if (rc == MPI_SUCCESS) ch->direct_from[cls] = from;
    else /* the ranks cannot be known to agree: the class stays on this thread (exact, as decided) */
        log_warn("non-blocking calls: could not agree on issuing a class directly (MPI error %d); it stays on the "
                 "progress thread", rc);
    /* queued while agreeing: those of classes that go direct (this one's and earlier ones'),
     * before the memo's path may issue again (channel_take_memo reads the flag: acquire) */
    issue_direct_queued(ch);
    ch->agreeing.store(false, std::memory_order_release);
}

void channel_loop(NbChannel *ch) {
    t_progress = true;
    {
        ReentryGuard guard;
        /* `direct` is duplicated from `internal`, blocking, here: every rank's thread does it
         * first on the private communicator, which nothing else uses yet (a fiber: MPI_Comm_idup,
         * whose wait yields) */
        MPI_Request dup = MPI_REQUEST_NULL;
        if ((ch->idup != MPI_REQUEST_NULL && mpi_next::Wait(&ch->idup, MPI_STATUS_IGNORE) != MPI_SUCCESS) ||
            (ch->fib ? mpi_next::Comm_idup(ch->internal, &ch->direct, &dup) != MPI_SUCCESS ||
                           mpi_next::Wait(&dup, MPI_STATUS_IGNORE) != MPI_SUCCESS
                     : mpi_next::Comm_dup(ch->internal, &ch->direct) != MPI_SUCCESS))
            ch->internal = MPI_COMM_NULL;
        if (ch->internal != MPI_COMM_NULL) mpi_next::Comm_set_errhandler(ch->internal, MPI_ERRORS_RETURN);
    }
    for (;;) {
        std::shared_ptr<NbOp> op;
        {
            std::unique_lock<std::mutex> lk(ch->mu);
            for (;;) {
                if (!ch->q.empty()) {
                    op = ch->q.front();
                    ch->q.pop_front();
                    break;
                }
                if (ch->stop && ch->inflight.empty()) { /* stop, and drained */
                    ch->exited.store(true);
                    return;
                }
                ch->idle = true;
                if (ch->inflight.empty()) {
                    wait_for_work(ch, lk, false);
                } else {
                    lk.unlock();
                    const bool any = poll_inflight(ch);
                    lk.lock();
                    if (!any && ch->q.empty()) wait_for_work(ch, lk, true);
                }
                ch->idle = false;
            }
        }
        if (op->woke) {
            ch->wake_s[ch->n_wake++ % 16] =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - op->t_issue).count();
        }
        if (ch->internal == MPI_COMM_NULL) {
            complete(*op, MPI_ERR_COMM);
            continue;
        }
        const int rc = run_op(ch, *op);
        /* decided exact: agree from where on the class goes direct before the application
         * can issue its next call after waiting for this one (so in issue-then-wait loops
         * every later call goes direct) */
        const CostTrace t = cost_trace();
        if (op->gated && t.gated && t.d == CostDecision::plain) agree_direct(ch, op->cls);
        complete(*op, rc);
        if (!ch->inflight.empty()) poll_inflight(ch);
    }
}


}  // namespace

/* The channel of comm, created on the first compressed non-blocking call; every rank
 * reaches that call at the same place in comm's order. */
NbChannel *channel_get(MPI_Comm comm) {
    reap_orphans();
    {
        std::lock_guard<std::mutex> lk(g_mu);
        if (g_keyval == MPI_KEYVAL_INVALID &&
            mpi_next::Comm_create_keyval(MPI_COMM_NULL_COPY_FN, channel_delete_cb, &g_keyval, nullptr) != MPI_SUCCESS)
            return nullptr;
        void *v = nullptr;
        int flag = 0;
        if (mpi_next::Comm_get_attr(comm, g_keyval, &v, &flag) == MPI_SUCCESS && flag) return static_cast<NbChannel *>(v);
    }
    /* MPI_Comm_idup where MPI lets the thread complete it; else (Open MPI) a blocking
     * MPI_Comm_dup here, on the thread that issues comm's collectives (src/base/mpi_family.h).
     * Outside g_mu: another thread's communicator must not wait for this one's ranks (MPI:
     * one communicator's collectives come from one thread at a time, so no other thread
     * creates this channel meanwhile). */
    auto ch = std::make_unique<NbChannel>();
    if (nb_mode() == NbMode::inline_) { /* before anything is issued: failing here leaves nothing behind */
        ch->fib = fiber::create([](void *c) { channel_loop(static_cast<NbChannel *>(c)); }, ch.get(), kFiberStack);
        if (!ch->fib) {
            log_error("could not map a stack for the inline progress of a communicator");
            return nullptr;
        }
    }
    const int rc = mpi_idup_any_thread() ? mpi_next::Comm_idup(comm, &ch->internal, &ch->idup)
                                         : mpi_next::Comm_dup(comm, &ch->internal);
    if (rc != MPI_SUCCESS) return nullptr;
    std::lock_guard<std::mutex> lk(g_mu);
    if (mpi_next::Comm_set_attr(comm, g_keyval, ch.get()) != MPI_SUCCESS) return nullptr;
    NbChannel *p = ch.release();
    if (!p->fib) p->th = std::thread(channel_loop, p);
    g_channels.push_back(p);
    return p;
}

int channel_hand_off(NbChannel *ch, const std::shared_ptr<NbOp> &op, MPI_Comm comm, MPI_Request *request) {
    std::unique_lock<std::mutex> lk(ch->mu);
    if (op->gated && channel_take_direct(ch, op->cls, true)) {
        /* decided exact and agreed: MPI's own non-blocking collective, no hand-off */
        const int rc = channel_issue_direct(ch, op->a, op->entry, request);
        lk.unlock();
        return rc == MPI_SUCCESS ? rc : raise_error(comm, rc);
    }
    op->index = ch->issued.fetch_add(1, std::memory_order_relaxed);
    auto *extra = new std::shared_ptr<NbOp>(op);
    int rc;
    {
        ReentryGuard guard;
        rc = mpi_next::Grequest_start(query_fn, free_fn, cancel_fn, extra, &op->greq);
    }
    if (rc != MPI_SUCCESS) {
        /* nothing was issued: the index is the next call's, as on the other ranks */
        ch->issued.fetch_sub(1, std::memory_order_relaxed);
        delete extra;
        return raise_error(comm, rc);
    }
    *request = op->greq;
    nb_wait_register(op);
    op->t_issue = std::chrono::steady_clock::now();
    op->woke = ch->idle && ch->q.empty();
    if (ch->fib) {
        op->on_fiber = true;
        mpi_next::progress::live.fetch_add(1, std::memory_order_relaxed);
    }
    ch->q.push_back(op);
    lk.unlock();
    if (ch->fib) {
        /* the operation starts now (its first messages are posted), and continues inside the
         * application's later calls into MPI */
        if (!fiber::current()) pump_one(ch);
    } else {
        ch->cv.notify_one();
    }
    return MPI_SUCCESS;
}

void nb_pump() {
    if (fiber::current()) return; /* a fiber's waits yield instead */
    nb_pump_others(nullptr);
    reap_orphans();
}

/* Every channel's fiber that has work, but `skip`'s. Inline progress runs at
 * MPI_THREAD_SINGLE or FUNNELED: channels are created, freed and pumped by the one thread that
 * calls MPI, never while a pump runs (a fiber's code never creates or frees a user's
 * communicator). */
void nb_pump_others(NbChannel *skip) {
    for (size_t i = 0; i < g_channels.size(); ++i) {
        NbChannel *ch = g_channels[i];
        if (ch != skip && ch->fib && fiber_has_work(ch)) pump_one(ch);
    }
}

bool nb_on_progress_thread() { return t_progress; }

void nb_finalize() {
    std::vector<NbChannel *> chans;
    {
        std::lock_guard<std::mutex> lk(g_mu);
        chans = g_channels;
    }
    for (NbChannel *ch : chans) stop_channel(ch);
    reap_orphans();
    /* the channels themselves go with their communicators' attributes (delete callback);
     * the keyval is released now (MPI frees it once no communicator uses it) */
    std::lock_guard<std::mutex> lk(g_mu);
    if (g_keyval != MPI_KEYVAL_INVALID) mpi_next::Comm_free_keyval(&g_keyval);
}

}  // namespace compmpi

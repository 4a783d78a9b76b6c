// SPDX-License-Identifier: BSD-3-Clause
/* Persistent collectives (MPI-4): MPI_Allreduce_init & co., MPI_Start/Startall, and the
 * request calls that must know our handles (docs/design.md, "Persistent collectives"). */
#include "runtime/progress.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <unordered_map>

#include "base/log.h"
#include "base/mpi_next.h"
#include "base/mpi_family.h"
#include "base/stats.h"
#include "runtime/channel.h"
#include "runtime/costmodel.h"
#include "runtime/eligibility.h"
#include "runtime/runtime.h"

namespace compmpi {

#if MPI_VERSION >= 4
namespace {

/* ---- persistent collectives (MPI-4) ----
 * The user's handle is a real persistent request of MPI (PMPI_*_init with the same
 * arguments), so every MPI call that only looks at the handle works; MPI_Start and the
 * wait/test family substitute, for each of our handles, the generalized request of its
 * current run (or MPI_REQUEST_NULL when inactive: MPI treats an inactive persistent request
 * like a null one) and restore the persistent handle when that run completes.
 * Once the cost model has decided the request's class exact and the ranks agreed from which
 * start on (channel_take_direct), that start and every later one start the user's handle
 * itself -- MPI's own persistent collective, on the user's communicator, from the
 * application's thread in program order, as without libcompmpi -- where MPI's persistent
 * collective is right (mpi_persistent_faithful); the request then leaves our table (with
 * statistics on it stays, to count its starts, and is passed through unchanged), so
 * MPI_Start, the wait/test family and MPI_Request_free reach MPI directly. Elsewhere each
 * start issues MPI's non-blocking collective on the channel's `direct`.
 * MPI_Start and the waits look a request up (under g_pmu, or the thread's last lookup while
 * the table is unchanged) and use it by plain pointer after:
 * freeing a request while another thread starts or waits on it is erroneous in MPI; what
 * may outlive MPI_Request_free (an active request's run on the thread) holds a shared_ptr
 * (NbOp::keep, from shared_from_this). */
struct PersistReq : std::enable_shared_from_this<PersistReq> {
    CollArgs a{};
    Coll entry = Coll::allreduce_init;
    OwnedCounts counts; /* reduce_scatter: a.recvcounts points here for the request's life */
    NbChannel *ch = nullptr;
    std::unique_ptr<CommState> st; /* plan inputs, workspaces, awp and error feedback of this request */
    MPI_Request active = MPI_REQUEST_NULL;
    uint64_t id = 0; /* its class for the cost model's direct path (NbClass::persist) */
    NbClass cls;     /* {persist = id} */
    bool gated = false;    /* the cost model decides it (settings as of init) */
    uint64_t direct_from = UINT64_MAX; /* its class's agreed first direct index, once a start saw it */
    bool faithful = false; /* MPI's own persistent collective of this kind is right */
    bool real = false;     /* its starts start the user's handle itself (statistics on) */
};
std::mutex g_pmu;
std::unordered_map<MPI_Request, std::shared_ptr<PersistReq>> g_persist;
std::atomic<int> g_npersist{0};
std::atomic<uint64_t> g_persist_ids{0};
/* Bumped under g_pmu by every change of g_persist: a thread's last lookup (t_last) stays
 * valid while it is unchanged, so a loop of MPI_Start + MPI_Wait on one request takes no
 * lock (docs/design.md, "The direct path takes no lock"). */
std::atomic<uint64_t> g_persist_gen{1};
struct LastLookup {
    MPI_Request handle = MPI_REQUEST_NULL;
    PersistReq *pr = nullptr; /* nullptr: not one of ours */
    uint64_t gen = 0;
};
constinit thread_local LastLookup t_last __attribute__((tls_model("initial-exec")));

/* Ours, or nullptr. */
PersistReq *lookup(MPI_Request h) {
    if (t_last.handle == h && t_last.gen == g_persist_gen.load(std::memory_order_acquire)) return t_last.pr;
    std::lock_guard<std::mutex> lk(g_pmu);
    const auto it = g_persist.find(h);
    t_last = {h, it == g_persist.end() ? nullptr : it->second.get(), g_persist_gen.load(std::memory_order_relaxed)};
    return t_last.pr;
}
/* g_persist changed (caller holds g_pmu) */
void persist_changed() { g_persist_gen.fetch_add(1, std::memory_order_acq_rel); }

/* From the start on which the class goes direct: the user's handle itself is started, and
 * (statistics off) the request leaves our table. */
int start_real(PersistReq *pr, MPI_Request *req) {
    int rc;
    {
        ReentryGuard guard;
        rc = mpi_next::Start(req);
    }
    static const int kReason = eligibility_reason("cost_model");
    stats(pr->entry).passthrough++;
    stats(pr->entry).reason[kReason]++;
    if (!pr->real) {
        {
            std::lock_guard<std::mutex> lk(pr->ch->mu); /* its class ends here */
            pr->ch->direct_from.erase(pr->cls);
        }
        std::lock_guard<std::mutex> lk(g_pmu);
        if (stats_enabled()) pr->real = true;
        else if (g_persist.erase(*req)) g_npersist.fetch_sub(1), persist_changed();
    }
    return rc == MPI_SUCCESS ? rc : raise_error(pr->a.comm, rc);
}

int start_one(MPI_Request *req) {
    PersistReq *pr = lookup(*req);
    if (!pr) return mpi_next::Start(req);
    if (pr->real) return start_real(pr, req);
    if (pr->active != MPI_REQUEST_NULL) {
        log_error("%s: MPI_Start on a request that is still active", coll_name(pr->entry));
        return raise_error(pr->a.comm, MPI_ERR_REQUEST);
    }
    if (pr->gated && pr->direct_from != UINT64_MAX && channel_take_memo(pr->ch, pr->direct_from)) {
        /* a class already direct, on `direct` (not faithful): as the memo's path of
         * src/runtime/nb_dispatch.h, without the channel's lock */
        const int rc = channel_issue_direct(pr->ch, pr->a, pr->entry, &pr->active);
        return rc == MPI_SUCCESS ? rc : raise_error(pr->a.comm, rc);
    }
    if (pr->gated) {
        NbChannel *ch = pr->ch;
        std::unique_lock<std::mutex> lk(ch->mu);
        uint64_t from = 0;
        if (channel_take_direct(ch, pr->cls, !pr->faithful, &from)) {
            if (!pr->faithful) pr->direct_from = from;
            if (pr->faithful) {
                lk.unlock();
                return start_real(pr, req);
            }
            const int rc = channel_issue_direct(ch, pr->a, pr->entry, &pr->active);
            lk.unlock();
            return rc == MPI_SUCCESS ? rc : raise_error(pr->a.comm, rc);
        }
    }
    auto op = std::make_shared<NbOp>();
    op->a = pr->a;
    op->entry = pr->entry;
    op->own = pr->st.get();
    op->keep = pr->shared_from_this();
    op->gated = pr->gated;
    op->cls = pr->cls;
    return channel_hand_off(pr->ch, op, pr->a.comm, &pr->active);
}

}  // namespace

int dispatch_persistent_init(CollArgs a, Coll entry, MPI_Info info, MPI_Request *request) noexcept {
    const auto pass = [&]() {
#ifdef HAVE_MPI_LARGE_COUNT
        if (a.large_count) switch (a.kind) {
                case Coll::allreduce:
                    return mpi_next::Allreduce_init_c(a.sendbuf, a.recvbuf, a.count, a.datatype, a.op, a.comm, info, request);
                case Coll::allgather:
                    return mpi_next::Allgather_init_c(a.sendbuf, a.count, a.datatype, a.recvbuf, a.recvcount, a.recvtype,
                                                 a.comm, info, request);
                case Coll::bcast: return mpi_next::Bcast_init_c(a.recvbuf, a.count, a.datatype, a.root, a.comm, info, request);
                case Coll::reduce_scatter_block:
                    return mpi_next::Reduce_scatter_block_init_c(a.sendbuf, a.recvbuf, a.count, a.datatype, a.op, a.comm,
                                                            info, request);
                case Coll::reduce_scatter:
                    return mpi_next::Reduce_scatter_init_c(a.sendbuf, a.recvbuf, a.recvcounts_c, a.datatype, a.op, a.comm,
                                                      info, request);
                default: return MPI_ERR_INTERN;
            }
#endif
        switch (a.kind) {
            case Coll::allreduce:
                return mpi_next::Allreduce_init(a.sendbuf, a.recvbuf, static_cast<int>(a.count), a.datatype, a.op, a.comm,
                                           info, request);
            case Coll::allgather:
                return mpi_next::Allgather_init(a.sendbuf, static_cast<int>(a.count), a.datatype, a.recvbuf,
                                           static_cast<int>(a.recvcount), a.recvtype, a.comm, info, request);
            case Coll::bcast:
                return mpi_next::Bcast_init(a.recvbuf, static_cast<int>(a.count), a.datatype, a.root, a.comm, info, request);
            case Coll::reduce_scatter_block:
                return mpi_next::Reduce_scatter_block_init(a.sendbuf, a.recvbuf, static_cast<int>(a.count), a.datatype,
                                                      a.op, a.comm, info, request);
            case Coll::reduce_scatter:
                return mpi_next::Reduce_scatter_init(a.sendbuf, a.recvbuf, a.recvcounts, a.datatype, a.op, a.comm, info,
                                                request);
            default: return MPI_ERR_INTERN;
        }
    };
    if (nb_above_int_max(a, entry)) return pass();
    try {
        CollStats &cs = stats(entry);
        CommState *st = nullptr;
        int reason = eligibility_begin(a, &st);
        std::shared_ptr<PersistReq> pr;
        if (reason < 0) {
            std::lock_guard<std::mutex> lk(st->mu);
            reason = eligibility_entry(a, entry, *st);
            if (reason < 0) {
                /* set up once: this request's own state (settings as of now, fresh awp and
                 * error-feedback tables, its own workspaces) */
                pr = std::make_shared<PersistReq>();
                pr->a = a;
                pr->counts.take(pr->a, st->size);
                pr->entry = entry;
                pr->id = ++g_persist_ids;
                pr->st = std::make_unique<CommState>();
                pr->st->rank = st->rank;
                pr->st->size = st->size;
                pr->st->inter = st->inter;
                pr->st->fft = st->fft;
                pr->st->settings = st->settings;
                pr->cls.persist = pr->id;
                pr->gated = cost_gated(st->settings);
                pr->faithful = mpi_persistent_faithful(static_cast<int>(a.kind));
            }
        }
        if (pr) {
            ReentryGuard guard;
            pr->ch = channel_get(a.comm);
            if (!pr->ch) reason = eligibility_reason("no_state"), pr.reset();
        }
        int rc;
        {
            ReentryGuard guard;
            rc = pass();
        }
        if (!pr || rc != MPI_SUCCESS) {
            if (!pr) cs.passthrough++, cs.reason[reason]++;
            return rc;
        }
        std::lock_guard<std::mutex> lk(g_pmu);
        g_persist[*request] = pr;
        g_npersist.fetch_add(1);
        persist_changed();
        return MPI_SUCCESS;
    } catch (const std::exception &e) {
        log_error("internal error in %s: %s", coll_name(entry), e.what());
    } catch (...) {
        log_error("internal error in %s", coll_name(entry));
    }
    return abort_collective(a.comm, MPI_ERR_INTERN, coll_name(entry)); /* the peers' operations wait for ours */
}

namespace {

int nb_startall(int n, MPI_Request *reqs) {
    for (int i = 0; i < n; ++i) {
        int rc = start_one(&reqs[i]);
        if (rc != MPI_SUCCESS) return rc;
    }
    return MPI_SUCCESS;
}

bool nb_have_persistent() { return g_npersist.load(std::memory_order_acquire) > 0; }

/* The wait/test family: `reqs` is the array to hand to PMPI (our persistent handles replaced
 * by their current run's request, or MPI_REQUEST_NULL when inactive); finish() writes the
 * results back to the user's array (our handles stay, inactive once their run completed).
 * Arrays of up to kInline requests (MPI_Wait, MPI_Test, small Waitall) need no allocation. */
class NbSubst {
  public:
    NbSubst(int n, MPI_Request *user);
    void finish();
    bool any() const { return any_; }
    MPI_Request *reqs;

  private:
    static constexpr int kInline = 8;
    MPI_Request *user_;
    int n_;
    bool any_ = false;
    MPI_Request inl_reqs_[kInline];
    PersistReq *inl_ours_[kInline] = {};
    std::vector<MPI_Request> big_reqs_;
    std::vector<PersistReq *> big_ours_;
    PersistReq **ours_;
};

NbSubst::NbSubst(int n, MPI_Request *user) : user_(user), n_(n) {
    if (n == 1) { /* MPI_Wait, MPI_Test: the thread's last lookup, no lock while it holds */
        reqs = inl_reqs_;
        ours_ = inl_ours_;
        reqs[0] = user[0];
        PersistReq *pr = user[0] == MPI_REQUEST_NULL ? nullptr : lookup(user[0]);
        if (pr && !pr->real) ours_[0] = pr, reqs[0] = pr->active, any_ = true;
        return;
    }
    if (n <= kInline) {
        reqs = inl_reqs_;
        ours_ = inl_ours_;
    } else {
        big_reqs_.resize(static_cast<size_t>(n));
        big_ours_.resize(static_cast<size_t>(n));
        reqs = big_reqs_.data();
        ours_ = big_ours_.data();
    }
    std::copy(user, user + n, reqs);
    std::lock_guard<std::mutex> lk(g_pmu);
    for (int i = 0; i < n; ++i) {
        if (user[i] == MPI_REQUEST_NULL) continue;
        auto it = g_persist.find(user[i]);
        if (it == g_persist.end()) continue;
        if (it->second->real) continue; /* MPI's own persistent request: passed as it is */
        ours_[i] = it->second.get();
        reqs[i] = it->second->active;
        any_ = true;
    }
}

void NbSubst::finish() {
    for (int i = 0; i < n_; ++i) {
        PersistReq *pr = ours_[i];
        if (!pr) user_[i] = reqs[i];
        else if (reqs[i] == MPI_REQUEST_NULL) pr->active = MPI_REQUEST_NULL;
    }
}

int nb_request_free(MPI_Request *req) {
    std::shared_ptr<PersistReq> pr;
    {
        std::lock_guard<std::mutex> lk(g_pmu);
        auto it = g_persist.find(*req);
        if (it != g_persist.end()) {
            pr = it->second;
            g_persist.erase(it);
            g_npersist.fetch_sub(1);
            persist_changed();
        }
    }
    if (pr && pr->active != MPI_REQUEST_NULL) mpi_next::Request_free(&pr->active); /* the run still completes */
    if (pr && pr->ch) { /* its class ends with it */
        std::lock_guard<std::mutex> lk(pr->ch->mu);
        for (auto it = pr->ch->direct_from.begin(); it != pr->ch->direct_from.end();)
            it = it->first.persist == pr->id ? pr->ch->direct_from.erase(it) : std::next(it);
    }
    return mpi_next::Request_free(req);
}

/* Our handles replaced for the PMPI call, the user's array updated after it. */
template <class F> int with_subst(int n, MPI_Request *reqs, F &&call) {
    NbSubst s(n, reqs);
    if (!s.any()) return call(reqs); /* none of ours among them: MPI's call on the user's array */
    const int rc = call(s.reqs);
    s.finish();
    return rc;
}

}  // namespace

int request_start(MPI_Request *r) { return nb_have_persistent() ? start_one(r) : mpi_next::Start(r); }
int request_startall(int n, MPI_Request *r) { return nb_have_persistent() ? nb_startall(n, r) : mpi_next::Startall(n, r); }
int request_free(MPI_Request *r) { return nb_have_persistent() ? nb_request_free(r) : mpi_next::Request_free(r); }
int request_wait(MPI_Request *r, MPI_Status *status) {
    if (!nb_have_persistent()) return nb_wait_quietly(1, r), mpi_next::Wait(r, status);
    return with_subst(1, r, [&](MPI_Request *q) { return nb_wait_quietly(1, q), mpi_next::Wait(q, status); });
}
int request_test(MPI_Request *r, int *flag, MPI_Status *status) {
    nb_poke(); /* inline progress: the fibers advance in the application's tests */
    if (!nb_have_persistent()) return mpi_next::Test(r, flag, status);
    return with_subst(1, r, [&](MPI_Request *q) { return mpi_next::Test(q, flag, status); });
}
int request_waitall(int n, MPI_Request *r, MPI_Status *statuses) {
    if (!nb_have_persistent()) return nb_wait_quietly(n, r), mpi_next::Waitall(n, r, statuses);
    return with_subst(n, r, [&](MPI_Request *q) { return nb_wait_quietly(n, q), mpi_next::Waitall(n, q, statuses); });
}
int request_testall(int n, MPI_Request *r, int *flag, MPI_Status *statuses) {
    nb_poke(); /* inline progress: the fibers advance in the application's tests */
    if (!nb_have_persistent()) return mpi_next::Testall(n, r, flag, statuses);
    return with_subst(n, r, [&](MPI_Request *q) { return mpi_next::Testall(n, q, flag, statuses); });
}
int request_waitany(int n, MPI_Request *r, int *index, MPI_Status *status) {
    if (!nb_have_persistent()) return mpi_next::Waitany(n, r, index, status);
    return with_subst(n, r, [&](MPI_Request *q) { return mpi_next::Waitany(n, q, index, status); });
}
int request_testany(int n, MPI_Request *r, int *index, int *flag, MPI_Status *status) {
    nb_poke(); /* inline progress: the fibers advance in the application's tests */
    if (!nb_have_persistent()) return mpi_next::Testany(n, r, index, flag, status);
    return with_subst(n, r, [&](MPI_Request *q) { return mpi_next::Testany(n, q, index, flag, status); });
}
int request_waitsome(int n, MPI_Request *r, int *outcount, int *indices, MPI_Status *statuses) {
    if (!nb_have_persistent()) return mpi_next::Waitsome(n, r, outcount, indices, statuses);
    return with_subst(n, r, [&](MPI_Request *q) { return mpi_next::Waitsome(n, q, outcount, indices, statuses); });
}
int request_testsome(int n, MPI_Request *r, int *outcount, int *indices, MPI_Status *statuses) {
    nb_poke(); /* inline progress: the fibers advance in the application's tests */
    if (!nb_have_persistent()) return mpi_next::Testsome(n, r, outcount, indices, statuses);
    return with_subst(n, r, [&](MPI_Request *q) { return mpi_next::Testsome(n, q, outcount, indices, statuses); });
}
#else
/* MPI-3 (Open MPI 4.1): no persistent collectives; a wait on our non-blocking calls still
 * sleeps while their progress thread works; tests advance inline progress */
int request_wait(MPI_Request *r, MPI_Status *status) { return nb_wait_quietly(1, r), mpi_next::Wait(r, status); }
int request_waitall(int n, MPI_Request *r, MPI_Status *statuses) {
    return nb_wait_quietly(n, r), mpi_next::Waitall(n, r, statuses);
}
int request_test(MPI_Request *r, int *flag, MPI_Status *status) { return nb_poke(), mpi_next::Test(r, flag, status); }
int request_testall(int n, MPI_Request *r, int *flag, MPI_Status *statuses) {
    return nb_poke(), mpi_next::Testall(n, r, flag, statuses);
}
int request_waitany(int n, MPI_Request *r, int *index, MPI_Status *status) {
    return mpi_next::Waitany(n, r, index, status);
}
int request_testany(int n, MPI_Request *r, int *index, int *flag, MPI_Status *status) {
    return nb_poke(), mpi_next::Testany(n, r, index, flag, status);
}
int request_waitsome(int n, MPI_Request *r, int *outcount, int *indices, MPI_Status *statuses) {
    return mpi_next::Waitsome(n, r, outcount, indices, statuses);
}
int request_testsome(int n, MPI_Request *r, int *outcount, int *indices, MPI_Status *statuses) {
    return nb_poke(), mpi_next::Testsome(n, r, outcount, indices, statuses);
}
#endif

}  // namespace compmpi

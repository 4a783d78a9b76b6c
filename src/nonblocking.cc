#include "nonblocking.h"

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <atomic>
#include <thread>
#include <unordered_map>
#include <vector>

#include "costmodel.h"
#include "log.h"
#include "policy.h"
#include "runtime.h"
#include "stats.h"

namespace compmpi {

static_assert(static_cast<int>(Coll::iallreduce) == coll_kind::iallreduce &&
                  static_cast<int>(Coll::iallgather) == coll_kind::iallgather &&
                  static_cast<int>(Coll::ibcast) == coll_kind::ibcast,
              "a Coll's value is its bit in the collectives setting");
static_assert(static_cast<int>(Coll::allreduce_init) == coll_kind::allreduce_init &&
                  static_cast<int>(Coll::allgather_init) == coll_kind::allgather_init &&
                  static_cast<int>(Coll::bcast_init) == coll_kind::bcast_init,
              "a Coll's value is its bit in the collectives setting");
static_assert(static_cast<int>(Coll::ireduce_scatter_block) == coll_kind::ireduce_scatter_block &&
                  static_cast<int>(Coll::ireduce_scatter) == coll_kind::ireduce_scatter &&
                  static_cast<int>(Coll::reduce_scatter_block_init) == coll_kind::reduce_scatter_block_init &&
                  static_cast<int>(Coll::reduce_scatter_init) == coll_kind::reduce_scatter_init,
              "a Coll's value is its bit in the collectives setting");

namespace {

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
};

/* The progress channel of one user communicator: its private duplicate and a FIFO served by
 * one thread. Every rank issues the communicator's collectives in the same order (MPI's
 * rule), the queue keeps that order and the thread runs one operation at a time, so every
 * rank runs the same sequence of exchanges on the duplicate. */
struct NbChannel {
    MPI_Comm internal = MPI_COMM_NULL;
    MPI_Request idup = MPI_REQUEST_NULL; /* MPI_Comm_idup: never blocks the issuing call */
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::shared_ptr<NbOp>> q;
    bool stop = false;
    bool joined = false;
    std::thread th;
};

int g_provided = MPI_THREAD_SINGLE;
bool g_progress = true;
std::mutex g_mu; /* guards g_keyval and g_channels */
int g_keyval = MPI_KEYVAL_INVALID;
std::vector<NbChannel *> g_channels;

void stop_channel(NbChannel *ch) {
    {
        std::lock_guard<std::mutex> lk(ch->mu);
        if (ch->joined) return;
        ch->stop = true;
    }
    ch->cv.notify_all();
    if (ch->th.joinable()) ch->th.join();
    ch->joined = true;
    int finalized = 0;
    PMPI_Finalized(&finalized);
    if (!finalized && ch->internal != MPI_COMM_NULL) PMPI_Comm_free(&ch->internal);
}

/* The user communicator is freed: finish its queued operations (MPI: a communicator is
 * freed once its pending operations complete), then drop the channel. */
int channel_delete_cb(MPI_Comm, int, void *attr, void *) {
    NbChannel *ch = static_cast<NbChannel *>(attr);
    stop_channel(ch);
    std::lock_guard<std::mutex> lk(g_mu);
    for (auto it = g_channels.begin(); it != g_channels.end(); ++it)
        if (*it == ch) {
            g_channels.erase(it);
            break;
        }
    delete ch;
    return MPI_SUCCESS;
}

void run_op(NbChannel *ch, NbOp &op, NbRunFn run) {
    ReentryGuard guard; /* our PMPI traffic is never compressed again */
    stats_set_entry(op.entry);
    int rc = MPI_SUCCESS;
    try {
        CommState *ist = op.own ? op.own : state_get(ch->internal);
        if (!ist) {
            rc = MPI_ERR_INTERN;
        } else {
            std::lock_guard<std::mutex> lk(ist->mu);
            /* the settings of the user's communicator at issue time; the cost model decided
             * at issue (nb_start), the algorithm never explores */
            if (!op.own) {
                ist->settings = op.settings;
                ist->settings.cost_model = cost_model_kind::off;
            }
            CollArgs b = op.a;
            b.comm = ch->internal;
            rc = run(b, *ist);
        }
    } catch (const std::exception &e) {
        log_error("internal error in %s: %s", coll_name(op.entry), e.what());
        rc = abort_collective(ch->internal, MPI_ERR_INTERN, coll_name(op.entry)); /* peers mid-collective */
    } catch (...) {
        rc = abort_collective(ch->internal, MPI_ERR_INTERN, coll_name(op.entry));
    }
    stats_set_entry(Coll::count_);
    op.rc = rc;
    PMPI_Grequest_complete(op.greq);
}

void channel_loop(NbChannel *ch, NbRunFn run) {
    {
        ReentryGuard guard;
        if (PMPI_Wait(&ch->idup, MPI_STATUS_IGNORE) != MPI_SUCCESS) ch->internal = MPI_COMM_NULL;
        if (ch->internal != MPI_COMM_NULL) PMPI_Comm_set_errhandler(ch->internal, MPI_ERRORS_RETURN);
    }
    for (;;) {
        std::shared_ptr<NbOp> op;
        {
            std::unique_lock<std::mutex> lk(ch->mu);
            ch->cv.wait(lk, [&] { return ch->stop || !ch->q.empty(); });
            if (ch->q.empty()) return; /* stop, and drained */
            op = ch->q.front();
        }
        if (ch->internal == MPI_COMM_NULL) {
            op->rc = MPI_ERR_COMM;
            PMPI_Grequest_complete(op->greq);
        } else {
            run_op(ch, *op, run);
        }
        std::lock_guard<std::mutex> lk(ch->mu);
        ch->q.pop_front();
    }
}

/* The channel of comm, created (MPI_Comm_idup, non-blocking) on the first compressed
 * non-blocking call; every rank reaches that call at the same place in comm's order. */
NbChannel *channel_get(MPI_Comm comm, NbRunFn run) {
    std::lock_guard<std::mutex> lk(g_mu);
    if (g_keyval == MPI_KEYVAL_INVALID &&
        PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, channel_delete_cb, &g_keyval, nullptr) != MPI_SUCCESS)
        return nullptr;
    void *v = nullptr;
    int flag = 0;
    if (PMPI_Comm_get_attr(comm, g_keyval, &v, &flag) == MPI_SUCCESS && flag) return static_cast<NbChannel *>(v);
    auto ch = std::make_unique<NbChannel>();
    if (PMPI_Comm_idup(comm, &ch->internal, &ch->idup) != MPI_SUCCESS) return nullptr;
    if (PMPI_Comm_set_attr(comm, g_keyval, ch.get()) != MPI_SUCCESS) return nullptr;
    NbChannel *p = ch.release();
    p->th = std::thread(channel_loop, p, run);
    g_channels.push_back(p);
    return p;
}

int query_fn(void *extra, MPI_Status *status) {
    const NbOp &op = **static_cast<std::shared_ptr<NbOp> *>(extra);
    PMPI_Status_set_elements(status, MPI_BYTE, 0);
    PMPI_Status_set_cancelled(status, 0);
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

int passthrough_nb(const CollArgs &a, MPI_Request *req) {
    switch (a.kind) {
        case Coll::allreduce:
            return PMPI_Iallreduce(a.sendbuf, a.recvbuf, static_cast<int>(a.count), a.datatype, a.op, a.comm, req);
        case Coll::allgather:
            return PMPI_Iallgather(a.sendbuf, static_cast<int>(a.count), a.datatype, a.recvbuf,
                                   static_cast<int>(a.recvcount), a.recvtype, a.comm, req);
        case Coll::bcast: return PMPI_Ibcast(a.recvbuf, static_cast<int>(a.count), a.datatype, a.root, a.comm, req);
        case Coll::reduce_scatter_block:
            return PMPI_Ireduce_scatter_block(a.sendbuf, a.recvbuf, static_cast<int>(a.count), a.datatype, a.op,
                                              a.comm, req);
        case Coll::reduce_scatter:
#ifdef HAVE_MPI_LARGE_COUNT
            if (a.recvcounts_c)
                return PMPI_Ireduce_scatter_c(a.sendbuf, a.recvbuf, a.recvcounts_c, a.datatype, a.op, a.comm, req);
#endif
            return PMPI_Ireduce_scatter(a.sendbuf, a.recvbuf, a.recvcounts, a.datatype, a.op, a.comm, req);
        default: return MPI_ERR_INTERN;
    }
}

/* Does the cost model say the exact collective is faster for this call's class and plan?
 * Only a finished decision counts (non-blocking calls never explore: their time overlaps
 * the caller's work and measures nothing useful); no decision yet: compress. */
bool cost_says_plain(CommState &st, const CollArgs &a) {
    const Settings &s = st.settings;
    const bool gated = s.cost_model == cost_model_kind::on ||
                       (s.cost_model == cost_model_kind::auto_ && s.policy != policy_kind::static_);
    if (!gated || !st.cost) return false;
    const size_t n = static_cast<size_t>(coll_elements(a));
    Plan plan;
    if (policy_plan(st, a.kind, n, a.root, &plan) != Status::ok) return false;
    const size_t bytes = n * sizeof(float);
    auto it = st.cost->entries.find({static_cast<int>(a.kind), cost_size_class(bytes),
                                     static_cast<int>(plan.codec->id), plan.params.bits});
    if (it == st.cost->entries.end()) return false;
    const CostEntry &e = it->second;
    return cost_entry_decided(e) && !cost_entry_compresses(e, s.cost_margin);
}

int reason_index(const char *name) {
    for (int i = 0; i < kMaxReasons; ++i)
        if (std::strcmp(eligibility_reason_name(i), name) == 0) return i;
    return kMaxReasons - 1;
}

/* -1: compress; else the pass-through reason. Caller holds st.mu. */
int nb_reason(const CollArgs &a, Coll entry, CommState &st) {
    /* the table checks the blocking collective's bit; the entry point has its own */
    const auto saved = st.settings.collectives;
    st.settings.collectives |= 1u << static_cast<int>(a.kind);
    int reason = eligibility_check(a, st);
    st.settings.collectives = saved;
    if (reason >= 0) return reason;
    if (!((st.settings.collectives >> static_cast<int>(entry)) & 1u)) return reason_index("collective_disabled");
    if (!g_progress || g_provided < MPI_THREAD_MULTIPLE) return eligibility_reason("no_thread_multiple");
    if (cost_says_plain(st, a)) return eligibility_reason("cost_model");
    return -1;
}

#if MPI_VERSION >= 4
/* ---- persistent collectives (MPI-4) ----
 * The user's handle is a real, never started persistent request of MPI (PMPI_*_init with the
 * same arguments), so every MPI call that only looks at the handle works; MPI_Start and the
 * wait/test family substitute, for each of our handles, the generalized request of its
 * current run (or MPI_REQUEST_NULL when inactive: MPI treats an inactive persistent request
 * like a null one) and restore the persistent handle when that run completes. */
struct PersistReq {
    CollArgs a{};
    Coll entry = Coll::allreduce_init;
    OwnedCounts counts; /* reduce_scatter: a.recvcounts points here for the request's life */
    NbChannel *ch = nullptr;
    std::unique_ptr<CommState> st; /* plan inputs, workspaces, awp and error feedback of this request */
    MPI_Request active = MPI_REQUEST_NULL;
};
std::mutex g_pmu;
std::unordered_map<MPI_Request, std::shared_ptr<PersistReq>> g_persist;
std::atomic<int> g_npersist{0};

int start_one(MPI_Request *req) {
    std::shared_ptr<PersistReq> pr;
    {
        std::lock_guard<std::mutex> lk(g_pmu);
        auto it = g_persist.find(*req);
        if (it != g_persist.end()) pr = it->second;
    }
    if (!pr) return PMPI_Start(req);
    if (pr->active != MPI_REQUEST_NULL) {
        log_error("%s: MPI_Start on a request that is still active", coll_name(pr->entry));
        return raise_error(pr->a.comm, MPI_ERR_REQUEST);
    }
    auto op = std::make_shared<NbOp>();
    op->a = pr->a;
    op->entry = pr->entry;
    op->own = pr->st.get();
    op->keep = pr;
    auto *extra = new std::shared_ptr<NbOp>(op);
    int rc;
    {
        ReentryGuard guard;
        rc = PMPI_Grequest_start(query_fn, free_fn, cancel_fn, extra, &op->greq);
    }
    if (rc != MPI_SUCCESS) {
        delete extra;
        return raise_error(pr->a.comm, rc);
    }
    pr->active = op->greq;
    {
        std::lock_guard<std::mutex> lk(pr->ch->mu);
        pr->ch->q.push_back(op);
    }
    pr->ch->cv.notify_one();
    return MPI_SUCCESS;
}
#endif

}  // namespace

#if MPI_VERSION >= 4
int nb_persistent_init(CollArgs a, Coll entry, MPI_Info info, MPI_Request *request, NbRunFn run) noexcept {
    const auto pass = [&]() {
#ifdef HAVE_MPI_LARGE_COUNT
        if (a.large_count) switch (a.kind) {
                case Coll::allreduce:
                    return PMPI_Allreduce_init_c(a.sendbuf, a.recvbuf, a.count, a.datatype, a.op, a.comm, info, request);
                case Coll::allgather:
                    return PMPI_Allgather_init_c(a.sendbuf, a.count, a.datatype, a.recvbuf, a.recvcount, a.recvtype,
                                                 a.comm, info, request);
                case Coll::bcast: return PMPI_Bcast_init_c(a.recvbuf, a.count, a.datatype, a.root, a.comm, info, request);
                case Coll::reduce_scatter_block:
                    return PMPI_Reduce_scatter_block_init_c(a.sendbuf, a.recvbuf, a.count, a.datatype, a.op, a.comm,
                                                            info, request);
                case Coll::reduce_scatter:
                    return PMPI_Reduce_scatter_init_c(a.sendbuf, a.recvbuf, a.recvcounts_c, a.datatype, a.op, a.comm,
                                                      info, request);
                default: return MPI_ERR_INTERN;
            }
#endif
        switch (a.kind) {
            case Coll::allreduce:
                return PMPI_Allreduce_init(a.sendbuf, a.recvbuf, static_cast<int>(a.count), a.datatype, a.op, a.comm,
                                           info, request);
            case Coll::allgather:
                return PMPI_Allgather_init(a.sendbuf, static_cast<int>(a.count), a.datatype, a.recvbuf,
                                           static_cast<int>(a.recvcount), a.recvtype, a.comm, info, request);
            case Coll::bcast:
                return PMPI_Bcast_init(a.recvbuf, static_cast<int>(a.count), a.datatype, a.root, a.comm, info, request);
            case Coll::reduce_scatter_block:
                return PMPI_Reduce_scatter_block_init(a.sendbuf, a.recvbuf, static_cast<int>(a.count), a.datatype,
                                                      a.op, a.comm, info, request);
            case Coll::reduce_scatter:
                return PMPI_Reduce_scatter_init(a.sendbuf, a.recvbuf, a.recvcounts, a.datatype, a.op, a.comm, info,
                                                request);
            default: return MPI_ERR_INTERN;
        }
    };
    try {
        CollStats &cs = stats(entry);
        int reason = -1;
        if (!runtime_active()) reason = eligibility_reason("not_initialized");
        else if (ReentryGuard::active()) reason = eligibility_reason("reentered");
        else reason = eligibility_precheck(a);
        std::shared_ptr<PersistReq> pr;
        if (reason < 0) {
            CommState *st = state_get(a.comm);
            if (!st) {
                reason = eligibility_reason("no_state");
            } else {
                std::lock_guard<std::mutex> lk(st->mu);
                reason = nb_reason(a, entry, *st);
                if (reason < 0) {
                    /* set up once: this request's own state (settings as of now, fresh awp and
                     * error-feedback tables, its own workspaces) */
                    pr = std::make_shared<PersistReq>();
                    pr->a = a;
                    pr->counts.take(pr->a, st->size);
                    pr->entry = entry;
                    pr->st = std::make_unique<CommState>();
                    pr->st->rank = st->rank;
                    pr->st->size = st->size;
                    pr->st->inter = st->inter;
                    pr->st->fft = st->fft;
                    pr->st->settings = st->settings;
                    pr->st->settings.cost_model = cost_model_kind::off;
                }
            }
        }
        if (pr) {
            ReentryGuard guard;
            pr->ch = channel_get(a.comm, run);
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
        return MPI_SUCCESS;
    } catch (const std::exception &e) {
        log_error("internal error in %s: %s", coll_name(entry), e.what());
    } catch (...) {
        log_error("internal error in %s", coll_name(entry));
    }
    return abort_collective(a.comm, MPI_ERR_INTERN, coll_name(entry)); /* the peers' operations wait for ours */
}

int nb_start_persistent(MPI_Request *req) { return start_one(req); }

int nb_startall(int n, MPI_Request *reqs) {
    for (int i = 0; i < n; ++i) {
        int rc = start_one(&reqs[i]);
        if (rc != MPI_SUCCESS) return rc;
    }
    return MPI_SUCCESS;
}

bool nb_have_persistent() { return g_npersist.load(std::memory_order_acquire) > 0; }

NbSubst::NbSubst(int n, MPI_Request *user) : user_(user), n_(n) {
    reqs.assign(user, user + n);
    ours_.resize(static_cast<size_t>(n));
    std::lock_guard<std::mutex> lk(g_pmu);
    for (int i = 0; i < n; ++i) {
        if (user[i] == MPI_REQUEST_NULL) continue;
        auto it = g_persist.find(user[i]);
        if (it == g_persist.end()) continue;
        ours_[static_cast<size_t>(i)] = it->second;
        reqs[static_cast<size_t>(i)] = it->second->active;
    }
}

void NbSubst::finish() {
    for (int i = 0; i < n_; ++i) {
        auto &pr = ours_[static_cast<size_t>(i)];
        if (!pr) user_[i] = reqs[static_cast<size_t>(i)];
        else if (reqs[static_cast<size_t>(i)] == MPI_REQUEST_NULL) static_cast<PersistReq *>(pr.get())->active = MPI_REQUEST_NULL;
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
        }
    }
    if (pr && pr->active != MPI_REQUEST_NULL) PMPI_Request_free(&pr->active); /* the run still completes */
    return PMPI_Request_free(req);
}
#endif

int nb_init_level(int required) {
    const char *e = std::getenv("COMPMPI_NB_PROGRESS");
    g_progress = !(e && std::strcmp(e, "off") == 0);
    return g_progress ? MPI_THREAD_MULTIPLE : required;
}

void nb_init_done(int provided) { g_provided = provided; }

void nb_finalize() {
    std::vector<NbChannel *> chans;
    {
        std::lock_guard<std::mutex> lk(g_mu);
        chans = g_channels;
    }
    for (NbChannel *ch : chans) stop_channel(ch);
    /* the channels themselves go with their communicators' attributes (delete callback);
     * the keyval is released now (MPI frees it once no communicator uses it) */
    std::lock_guard<std::mutex> lk(g_mu);
    if (g_keyval != MPI_KEYVAL_INVALID) PMPI_Comm_free_keyval(&g_keyval);
}

int nb_start(CollArgs a, Coll entry, MPI_Request *request, NbRunFn run) noexcept {
    try {
        CollStats &cs = stats(entry);
        int reason = -1;
        if (!runtime_active()) reason = eligibility_reason("not_initialized");
        else if (ReentryGuard::active()) reason = eligibility_reason("reentered");
        else reason = eligibility_precheck(a);
        NbChannel *ch = nullptr;
        std::shared_ptr<NbOp> op;
        if (reason < 0) {
            CommState *st = state_get(a.comm);
            if (!st) {
                reason = eligibility_reason("no_state");
            } else {
                std::lock_guard<std::mutex> lk(st->mu);
                reason = nb_reason(a, entry, *st);
                if (reason < 0) {
                    op = std::make_shared<NbOp>();
                    op->a = a;
                    op->counts.take(op->a, st->size);
                    op->entry = entry;
                    op->settings = st->settings;
                }
            }
        }
        if (op) {
            ReentryGuard guard;
            ch = channel_get(a.comm, run);
            if (!ch) {
                log_error("%s: could not set up the progress channel; passing through", coll_name(entry));
                reason = eligibility_reason("no_state");
            }
        }
        if (!ch) {
            cs.passthrough++;
            cs.reason[reason]++;
            return passthrough_nb(a, request);
        }
        auto *extra = new std::shared_ptr<NbOp>(op);
        int rc;
        {
            ReentryGuard guard;
            rc = PMPI_Grequest_start(query_fn, free_fn, cancel_fn, extra, &op->greq);
        }
        if (rc != MPI_SUCCESS) {
            delete extra;
            return raise_error(a.comm, rc);
        }
        *request = op->greq;
        {
            std::lock_guard<std::mutex> lk(ch->mu);
            ch->q.push_back(op);
        }
        ch->cv.notify_one();
        return MPI_SUCCESS;
    } catch (const std::exception &e) {
        log_error("internal error in %s: %s", coll_name(entry), e.what());
    } catch (...) {
        log_error("internal error in %s", coll_name(entry));
    }
    return abort_collective(a.comm, MPI_ERR_INTERN, coll_name(entry)); /* the peers' operations wait for ours */
}

}  // namespace compmpi

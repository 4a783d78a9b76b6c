// SPDX-License-Identifier: BSD-3-Clause
/* The table of the MPI functions libcompmpi calls, and the order check (mpi_next.h). */
#include "base/mpi_next.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#ifndef COMPMPI_SMPI
#include <dlfcn.h>
#include <sched.h>

#include <atomic>
#include <mutex>

#include "base/log.h"
#include "base/settings.h"
#endif

namespace compmpi {

#ifdef COMPMPI_SMPI
/* SimGrid SMPI: PMPI_* directly (mpi_next.h); nothing to resolve, nothing to check. */
namespace mpi_next::progress {
std::atomic<int> live{0};
void (*pump)() = nullptr;
}  // namespace mpi_next::progress
void mpi_next_resolve(bool) {}
bool mpi_next_chained() { return false; }
const char *mpi_next_preceded_by() { return ""; }
void mpi_next_order_warn(int, const char *) {}
#else

namespace mpi_next {
/* MPI's PMPI_* until resolved: constant-initialised, so valid in every constructor. */
constinit Table g_table = {
#define COMPMPI_MPI_NEXT(name) {&::PMPI_##name},
#include "base/mpi_next.def"
#undef COMPMPI_MPI_NEXT
};

namespace progress {
std::atomic<int> live{0};
void (*pump)() = nullptr;

namespace {
/* Between two polls: a fiber yields to its resumer; the application's thread resumes the
 * fibers (and, every 64 polls, lets another process have the core: ranks may share cores) */
void between_polls(unsigned &polls) {
    if (fiber::current()) {
        fiber::yield();
        return;
    }
    if (pump) pump();
    if ((++polls & 63u) == 0) sched_yield();
}
}  // namespace

int wait_all(int n, MPI_Request *r, MPI_Status *st) {
    unsigned polls = 0;
    for (;;) {
        int flag = 0;
        const int rc = g_table.Testall.load(std::memory_order_relaxed)(n, r, &flag, st);
        if (rc != MPI_SUCCESS || flag) return rc;
        between_polls(polls);
    }
}

int wait_any(int n, MPI_Request *r, int *index, MPI_Status *st) {
    unsigned polls = 0;
    for (;;) {
        int flag = 0;
        const int rc = g_table.Testany.load(std::memory_order_relaxed)(n, r, index, &flag, st);
        if (rc != MPI_SUCCESS || flag) return rc;
        between_polls(polls);
    }
}

int wait_some(int n, MPI_Request *r, int *outcount, int *indices, MPI_Status *st) {
    unsigned polls = 0;
    for (;;) {
        const int rc = g_table.Testsome.load(std::memory_order_relaxed)(n, r, outcount, indices, st);
        if (rc != MPI_SUCCESS || *outcount != 0) return rc; /* MPI_UNDEFINED: no active request */
        between_polls(polls);
    }
}

int sendrecv(const void *sbuf, int scount, MPI_Datatype stype, int dst, int stag, void *rbuf, int rcount,
             MPI_Datatype rtype, int src, int rtag, MPI_Comm comm, MPI_Status *status) {
    MPI_Request r[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    int rc = g_table.Irecv.load(std::memory_order_relaxed)(rbuf, rcount, rtype, src, rtag, comm, &r[0]);
    if (rc != MPI_SUCCESS) return rc;
    rc = g_table.Isend.load(std::memory_order_relaxed)(sbuf, scount, stype, dst, stag, comm, &r[1]);
    if (rc != MPI_SUCCESS) {
        /* the receive is still posted: MPI_Sendrecv's error leaves the call failed as a whole */
        g_table.Cancel.load(std::memory_order_relaxed)(&r[0]);
        g_table.Request_free.load(std::memory_order_relaxed)(&r[0]);
        return rc;
    }
    MPI_Status sts[2];
    rc = wait_all(2, r, sts);
    if (rc == MPI_ERR_IN_STATUS) rc = sts[0].MPI_ERROR != MPI_SUCCESS ? sts[0].MPI_ERROR : sts[1].MPI_ERROR;
    if (status != MPI_STATUS_IGNORE) *status = sts[0];
    return rc;
}
}  // namespace progress
}  // namespace mpi_next

namespace {
std::once_flag g_objects_once;
const void *g_self = nullptr;  /* the object libcompmpi's code is in (libcompmpi.so, or the program) */
const void *g_other = nullptr; /* a second copy of libcompmpi after it, if any */
std::atomic<bool> g_chained{false};

const void *object_of(const void *p) {
    Dl_info di;
    return p && dladdr(p, &di) ? di.dli_fbase : nullptr;
}

void find_objects() {
    g_self = object_of(reinterpret_cast<const void *>(&mpi_next_resolve));
    const void *other = object_of(dlsym(RTLD_NEXT, "compmpi_version"));
    g_other = other != g_self ? other : nullptr;
}

bool is_libcompmpi(const void *object) { return object == g_self || (g_other && object == g_other); }

/* The next MPI_<name> after libcompmpi; nullptr where there is none or it is a libcompmpi's own
 * (which would call back into libcompmpi). */
void *next_of(const char *symbol) {
    void *p = dlsym(RTLD_NEXT, symbol);
    return p && !is_libcompmpi(object_of(p)) ? p : nullptr;
}

template <class F>
F chosen(bool chain, const char *symbol, F pmpi) {
    void *p = chain ? next_of(symbol) : nullptr;
    return p ? reinterpret_cast<F>(p) : pmpi;
}
}  // namespace

void mpi_next_resolve(bool chain) {
    std::call_once(g_objects_once, find_objects);
#define COMPMPI_MPI_NEXT(name) \
    mpi_next::g_table.name.store(chosen(chain, "MPI_" #name, &::PMPI_##name), std::memory_order_relaxed);
#include "base/mpi_next.def"
#undef COMPMPI_MPI_NEXT
    g_chained.store(chain, std::memory_order_relaxed);
}

bool mpi_next_chained() { return g_chained.load(std::memory_order_relaxed); }

/* ---------------------------------------------------------------- the order check */

namespace {
/* The entry points whose bypass matters: without MPI_Init libcompmpi never starts, without
 * the others it compresses nothing (src/boundary/interpose.cc defines them). */
constexpr const char *kChecked[] = {
    "MPI_Init", "MPI_Init_thread", "MPI_Finalize", "MPI_Allreduce", "MPI_Allgather", "MPI_Bcast",
    "MPI_Reduce_scatter_block", "MPI_Reduce_scatter", "MPI_Iallreduce", "MPI_Iallgather", "MPI_Ibcast",
    "MPI_Ireduce_scatter_block", "MPI_Ireduce_scatter",
#if MPI_VERSION >= 4
    "MPI_Allreduce_init", "MPI_Allgather_init", "MPI_Bcast_init", "MPI_Reduce_scatter_block_init",
    "MPI_Reduce_scatter_init",
    /* the requests of compressed persistent calls: only libcompmpi knows what they stand for */
    "MPI_Start", "MPI_Startall", "MPI_Request_free", "MPI_Wait", "MPI_Test", "MPI_Waitall", "MPI_Testall",
    "MPI_Waitany", "MPI_Testany", "MPI_Waitsome", "MPI_Testsome",
#endif
};
char g_preceded[512];       /* the other library's file name, "" if none */
char g_preceded_calls[1024]; /* "MPI_Init, MPI_Allreduce, ..." */
int g_preceded_n = 0;
std::atomic<bool> g_order_done{false};

/* Whether the first definition of `symbol` in the process comes before libcompmpi's: it is
 * neither libcompmpi's (then it is first) nor the one libcompmpi's own calls reach (then
 * libcompmpi's is not exported -- a static libcompmpi.a inside the program, whose own calls
 * bind to it at link time -- or libcompmpi does not define the symbol). */
const void *preceding(const char *symbol) {
    void *first = dlsym(RTLD_DEFAULT, symbol);
    if (!first || first == dlsym(RTLD_NEXT, symbol) || is_libcompmpi(object_of(first))) return nullptr;
    return first;
}

void find_preceded() {
    for (const char *s : kChecked) {
        const void *p = preceding(s);
        Dl_info di;
        if (!p || !dladdr(p, &di)) continue;
        if (g_preceded_n++ == 0) std::snprintf(g_preceded, sizeof g_preceded, "%s", di.dli_fname);
        const size_t n = std::strlen(g_preceded_calls);
        if (n + std::strlen(s) + 3 < sizeof g_preceded_calls)
            std::snprintf(g_preceded_calls + n, sizeof g_preceded_calls - n, "%s%s", n ? ", " : "", s);
    }
}

int launcher_rank() {
    for (const char *v : {"PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK"})
        if (const char *e = std::getenv(v)) return std::atoi(e);
    return -1;
}

/* At load: the table from COMPMPI_PMPI_CHAIN (an invalid value keeps the default here;
 * MPI_Init then stops the job naming it, as for every setting), then the order. */
__attribute__((constructor)) void resolve_at_load() {
    const SettingId id = SettingId::pmpi_chain;
    Settings s{};
    setting_parse(id, kSettings[static_cast<int>(id)].def, &s, nullptr);
    if (const char *v = std::getenv("COMPMPI_PMPI_CHAIN")) setting_parse(id, v, &s, nullptr);
    mpi_next_resolve(s.pmpi_chain);
    find_preceded();
}

/* At exit: the other library wrapped MPI_Init and everything else that would have reached
 * libcompmpi, which never ran. PMPI_Initialized directly (true after MPI_Finalize too): a
 * profiler may have torn itself down already. Not in processes that never initialised MPI
 * (mpiexec itself when LD_PRELOAD reaches it). */
__attribute__((destructor)) void order_check_at_exit() {
    int init = 0;
    if (g_preceded_n && !g_order_done.load() && PMPI_Initialized(&init) == MPI_SUCCESS && init)
        mpi_next_order_warn(-1, "at exit");
}
}  // namespace

const char *mpi_next_preceded_by() { return g_preceded; }

void mpi_next_order_warn(int rank, const char *when) {
    if (!g_preceded_n || g_order_done.exchange(true)) return;
    if (rank < 0) rank = launcher_rank();
    if (rank > 0) return;
    Dl_info self;
    const char *me = dladdr(reinterpret_cast<const void *>(&mpi_next_resolve), &self) ? self.dli_fname : "libcompmpi.so";
    const char *other = std::strrchr(g_preceded, '/') ? std::strrchr(g_preceded, '/') + 1 : g_preceded;
    const char *mine = std::strrchr(me, '/') ? std::strrchr(me, '/') + 1 : me;
    log_warn("%s: %s defines %s before libcompmpi (%s): the program's calls to these reach it first, and its "
             "PMPI_* calls go to MPI directly, past libcompmpi, which compresses none of them%s. Load libcompmpi "
             "first, e.g. LD_PRELOAD=\"%s %s\" (or link libcompmpi before it): %s then sees the MPI calls "
             "libcompmpi makes itself, compressed bytes included (README, \"Beside a PMPI profiler\").",
             when, g_preceded, g_preceded_calls, me,
             std::strstr(g_preceded_calls, "MPI_Init") ? " (its MPI_Init never ran)" : "", mine, other, other);
}
#endif

}  // namespace compmpi

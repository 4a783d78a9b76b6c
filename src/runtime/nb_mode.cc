// SPDX-License-Identifier: BSD-3-Clause
/* How non-blocking and persistent collectives run (src/runtime/progress.h, NbMode): the
 * nb_progress setting as MPI_Init reads it, the thread level, and the ranks' agreement. */
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "base/log.h"
#include "base/mpi_next.h"
#include "base/stats.h"
#include "runtime/channel.h"
#include "runtime/eligibility.h"
#include "runtime/progress.h"

namespace compmpi {

namespace {
int g_provided = MPI_THREAD_SINGLE;
int g_required = MPI_THREAD_SINGLE;
bool g_progress = true;
/* the setting as MPI_Init read it, and the mode that runs (nb_init_done; nb_threads_agree) */
enum class Want { auto_, thread, inline_, off };
Want g_want = Want::auto_;
NbMode g_mode = NbMode::off;
}  // namespace

bool nb_threads_ok() { return g_progress && g_mode != NbMode::off; }

NbMode nb_mode() { return g_progress ? g_mode : NbMode::off; }

bool nb_above_int_max(const CollArgs &a, Coll entry) {
    if (!a.large_count || a.kind == Coll::reduce_scatter) return false;
    if (a.count <= INT_MAX && (a.kind != Coll::allgather || a.recvcount <= INT_MAX)) return false;
    CollStats &cs = stats(entry);
    cs.passthrough++;
    cs.reason[eligibility_reason("count_above_int_max")]++;
    return true;
}

int nb_init_level(int required) {
    /* thread: raise the level for the progress threads; auto (the default, and any value
     * runtime_init will refuse): never raise it, threads only where the program asked for
     * MULTIPLE; off: never threads */
    const char *e = std::getenv("COMPMPI_NB_PROGRESS");
    g_want = !e                              ? Want::auto_
             : std::strcmp(e, "thread") == 0 ? Want::thread
             : std::strcmp(e, "inline") == 0 ? Want::inline_
             : std::strcmp(e, "off") == 0    ? Want::off
                                             : Want::auto_;
    g_required = required;
    g_progress = g_want != Want::off;
    return g_want == Want::thread ? MPI_THREAD_MULTIPLE : required;
}

void nb_init_done(int provided) {
    g_provided = provided;
    /* the level the program must keep to: what it asked for, or less where MPI gave less */
    const int level = std::min(g_required, provided);
#ifdef COMPMPI_SMPI
    const bool fibers = false; /* SMPI's ranks are contexts of one simulator process */
#else
    const bool fibers = level <= MPI_THREAD_FUNNELED; /* one thread calls MPI: it pumps */
#endif
    switch (g_want) {
        case Want::off: g_mode = NbMode::off; break;
        case Want::thread: g_mode = provided >= MPI_THREAD_MULTIPLE ? NbMode::thread : NbMode::off; break;
        case Want::inline_: g_mode = fibers ? NbMode::inline_ : NbMode::off; break;
        case Want::auto_: /* inline is opt-in (docs/design.md, "Inline progress": the programs it does not suit) */
            g_mode = level >= MPI_THREAD_MULTIPLE ? NbMode::thread : NbMode::off;
            break;
    }
    if (g_mode == NbMode::inline_) mpi_next::progress::pump = nb_pump;
}

bool nb_inline_refused() { return g_want == Want::inline_ && g_mode != NbMode::inline_; }

void nb_threads_agree(bool every_rank, bool some_rank, int rank) {
    if (every_rank) return;
    g_progress = false;
    mpi_next::progress::pump = nullptr;
    if (some_rank && rank == 0)
        log_info("ranks differ in thread level or nb_progress: non-blocking and persistent collectives pass "
                 "through on every rank (progress threads need MPI_THREAD_MULTIPLE on all of them; inline "
                 "progress, nb_progress=inline, needs every rank inline)");
}

const char *nb_thread_level_name() {
    switch (g_provided) {
        case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
        case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
        case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
        case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
        default: return "unknown";
    }
}

}  // namespace compmpi

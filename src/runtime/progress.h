// SPDX-License-Identifier: BSD-3-Clause
/* Non-blocking (MPI_I*) and persistent (MPI_*_init, MPI-4) collectives, compressed by a
 * progress thread per communicator (docs/design.md, "Non-blocking collectives").
 *
 * The user's request is an MPI generalized request (MPI_Grequest_start): the whole
 * MPI_Wait/MPI_Test family, MPI_Request_free and mixing with point-to-point requests work
 * on it unchanged. The operation itself is the blocking compressed algorithm (the same code,
 * the same guarantees as MPI_Allreduce & co.: dispatch_float_view) run by the communicator's
 * progress thread on a private duplicate of the communicator, strictly in issue order; the
 * thread completes the generalized request when the result is in the user's buffer. A class
 * the cost model found faster exact goes straight to MPI's own PMPI_I* ("Measured, then
 * direct"). Needs MPI_THREAD_MULTIPLE: with nb_progress=auto (the default) only a program
 * that asked for it gets threads (libcompmpi never raises the level: the thread level costs
 * every MPI call of the program, docs/benchmarks.md §10f); nb_progress=thread asks for it at
 * MPI_Init whatever the program asked. Without it the calls pass through. */
#pragma once
#include <mpi.h>

#include <atomic>

#include "base/mpi_next.h"
#include "runtime/args.h"

namespace compmpi {

/* Thread level to ask PMPI_Init_thread for, given the user's `required`. Reads
 * COMPMPI_NB_PROGRESS (validated later with the other settings). */
int nb_init_level(int required);
/* After PMPI_Init*: the level MPI gave. */
void nb_init_done(int provided);
/* Before PMPI_Finalize: drain every progress thread, free internal communicators. */
void nb_finalize();
/* How non-blocking and persistent collectives run (nb_progress, the thread level, and the
 * ranks' agreement at MPI_Init): passed through, on progress threads, or inline on fibers of
 * the application's thread. */
enum class NbMode { off, thread, inline_ };
NbMode nb_mode();
/* nb_progress=inline was set but cannot run (the program's thread level is SERIALIZED or
 * MULTIPLE): they pass through; runtime_init says so once. */
bool nb_inline_refused();
/* Inline progress: resume every channel's fiber that has work (from the application's
 * thread, outside any fiber; a no-op on a fiber). mpi_next's polling waits call it; so do
 * MPI_Test* and the collectives' entry points while operations are pending. */
void nb_pump();
inline void nb_poke() {
    if (mpi_next::progress::live.load(std::memory_order_relaxed) != 0) nb_pump();
}
/* Whether the calling thread is a progress thread (statistics tell its exact runs apart). */
bool nb_on_progress_thread();
/* Whether non-blocking calls can have progress threads (MPI_THREAD_MULTIPLE given and
 * nb_progress=thread, or nb_progress=auto and the program asked for MULTIPLE). */
bool nb_threads_ok();
/* At MPI_Init, after the ranks agreed whether every / some rank can have progress threads:
 * threads only if every rank can (rank 0 says once why not where only some could). */
void nb_threads_agree(bool every_rank, bool some_rank, int rank);
/* The level MPI gave at MPI_Init ("MPI_THREAD_SINGLE", ...), for print_config. */
const char *nb_thread_level_name();

/* Before MPI's wait on these requests: sleep until those of ours (generalized requests of
 * operations on a progress thread) are complete; returns at once for any other request. The
 * wait then finds them complete. Inline: every MPI_Wait of the application passes here. */
inline void nb_wait_quietly(int n, const MPI_Request *reqs);

/* MPI_Iallreduce & co.: `args` holds the arguments (args.kind is the blocking collective), `entry`
 * the non-blocking kind for statistics and settings. The direct path is inline
 * (dispatch_nb, src/runtime/nb_dispatch.h); this is everything else. */
int dispatch_nb_full(const CollArgs &args, Coll entry, MPI_Request *request) noexcept;

#if MPI_VERSION >= 4
/* MPI_Allreduce_init & co. (MPI-4): plan, state and workspaces set up once here; each
 * MPI_Start runs the compressed algorithm on the progress channel. Not eligible: PMPI_*_init
 * unchanged. */
int dispatch_persistent_init(CollArgs a, Coll entry, MPI_Info info, MPI_Request *request) noexcept;

/* The request calls that must know our persistent handles: each substitutes, in a copy of the
 * array, our handles by their current run's request (MPI_REQUEST_NULL when inactive); with no
 * persistent request of ours alive they are the PMPI calls. */
int request_start(MPI_Request *request);
int request_startall(int count, MPI_Request *requests);
int request_free(MPI_Request *request);
int request_wait(MPI_Request *request, MPI_Status *status);
int request_test(MPI_Request *request, int *flag, MPI_Status *status);
int request_waitall(int count, MPI_Request *requests, MPI_Status *statuses);
int request_testall(int count, MPI_Request *requests, int *flag, MPI_Status *statuses);
int request_waitany(int count, MPI_Request *requests, int *index, MPI_Status *status);
int request_testany(int count, MPI_Request *requests, int *index, int *flag, MPI_Status *status);
int request_waitsome(int incount, MPI_Request *requests, int *outcount, int *indices, MPI_Status *statuses);
int request_testsome(int incount, MPI_Request *requests, int *outcount, int *indices, MPI_Status *statuses);
#else
/* MPI-3: the wait and test family, for nb_wait_quietly and inline progress */
int request_wait(MPI_Request *request, MPI_Status *status);
int request_waitall(int count, MPI_Request *requests, MPI_Status *statuses);
int request_test(MPI_Request *request, int *flag, MPI_Status *status);
int request_testall(int count, MPI_Request *requests, int *flag, MPI_Status *statuses);
int request_waitany(int count, MPI_Request *requests, int *index, MPI_Status *status);
int request_testany(int count, MPI_Request *requests, int *index, int *flag, MPI_Status *status);
int request_waitsome(int incount, MPI_Request *requests, int *outcount, int *indices, MPI_Status *statuses);
int request_testsome(int incount, MPI_Request *requests, int *outcount, int *indices, MPI_Status *statuses);
#endif

namespace nb_wait_detail {
extern std::atomic<int> g_n_pending; /* operations a wait may sleep on (src/runtime/nb_wait.cc) */
void sleep_on(int n, const MPI_Request *reqs);
}  // namespace nb_wait_detail
inline void nb_wait_quietly(int n, const MPI_Request *reqs) {
    if (nb_wait_detail::g_n_pending.load(std::memory_order_relaxed) != 0) nb_wait_detail::sleep_on(n, reqs);
}

}  // namespace compmpi

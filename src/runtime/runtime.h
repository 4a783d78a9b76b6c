// SPDX-License-Identifier: BSD-3-Clause
/* Library life cycle: set up after PMPI_Init, torn down before PMPI_Finalize. */
#pragma once
#include <mpi.h>

namespace compmpi {

/* After PMPI_Init*: read and validate the environment (abort with a message if invalid),
 * create the attribute keyval, choose kernel threads, agree on settings over
 * MPI_COMM_WORLD, print the configuration if asked. */
void runtime_init();
/* Before PMPI_Finalize: statistics, keyval. */
void runtime_finalize();
bool runtime_active();
/* A collective reached libcompmpi while MPI is initialised but libcompmpi is not: if
 * another library's MPI_* precede libcompmpi's (its MPI_Init bypassed ours), warn once
 * (src/base/mpi_next.h, mpi_next_order_warn); `what` names the call. */
void runtime_bypassed(const char *what);

/* MPI_Init / MPI_Init_thread (what names which): the family check, PMPI_Init_thread at the
 * level the progress threads need (MPI_THREAD_MULTIPLE, src/runtime/progress.h) or the
 * caller's if higher -- MPI may give more than asked -- then runtime_init. */
int runtime_mpi_init(int *argc, char ***argv, int required, int *provided, const char *what);
/* MPI_Finalize: drain the progress threads, runtime_finalize, PMPI_Finalize. */
int runtime_mpi_finalize();

/* Raise an MPI error on comm through its error handler and return the code. */
int raise_error(MPI_Comm comm, int code);
/* An error on this rank inside a collective the other ranks are already in (an internal
 * error, an exception such as std::bad_alloc): nothing can tell them, so returning it would
 * leave them waiting. The error handler sees the code; if it returns, the job is aborted
 * after one line naming `what` (docs/design.md, "Memory caps and failures"). */
int abort_collective(MPI_Comm comm, int code, const char *what);

namespace runtime_detail {
/* read on every call: initial-exec, no __tls_get_addr (libcompmpi is loaded at start-up,
 * preloaded or linked) */
extern thread_local constinit int t_depth __attribute__((tls_model("initial-exec")));
}  // namespace runtime_detail

/* Per-thread re-entry guard: libcompmpi's own MPI calls never compress again. Inline: it
 * surrounds every call the direct path makes. */
class ReentryGuard {
  public:
    ReentryGuard() { ++runtime_detail::t_depth; }
    ~ReentryGuard() { --runtime_detail::t_depth; }
    static bool active() { return runtime_detail::t_depth > 0; }
    ReentryGuard(const ReentryGuard &) = delete;
    ReentryGuard &operator=(const ReentryGuard &) = delete;
};

}  // namespace compmpi

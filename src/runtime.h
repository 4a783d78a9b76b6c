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

/* Raise an MPI error on comm through its error handler and return the code. */
int raise_error(MPI_Comm comm, int code);
/* An error on this rank inside a collective the other ranks are already in (an internal
 * error, an exception such as std::bad_alloc): nothing can tell them, so returning it would
 * leave them waiting. The error handler sees the code; if it returns, the job is aborted
 * after one line naming `what` (docs/design.md, "Memory caps and failures"). */
int abort_collective(MPI_Comm comm, int code, const char *what);

/* Per-thread re-entry guard: libcompmpi's own MPI calls never compress again. */
class ReentryGuard {
  public:
    ReentryGuard();
    ~ReentryGuard();
    static bool active();
    ReentryGuard(const ReentryGuard &) = delete;
    ReentryGuard &operator=(const ReentryGuard &) = delete;
};

}  // namespace compmpi

/* Non-blocking collectives (MPI_Iallreduce, MPI_Iallgather, MPI_Ibcast) compressed by a
 * progress thread per communicator (docs/design.md, "Non-blocking collectives").
 *
 * The user's request is an MPI generalized request (MPI_Grequest_start): the whole
 * MPI_Wait/MPI_Test family, MPI_Request_free and mixing with point-to-point requests work
 * on it unchanged. The operation itself is the blocking compressed algorithm (the same code,
 * the same guarantees as MPI_Allreduce & co.) run by the communicator's progress thread on
 * a private duplicate of the communicator, strictly in issue order; the thread completes the
 * generalized request when the result is in the user's buffer. Needs MPI_THREAD_MULTIPLE
 * (asked for at MPI_Init unless nb_progress=off); without it the calls pass through. */
#pragma once
#include <mpi.h>

#include <memory>
#include <vector>

#include "eligibility.h"
#include "state.h"

namespace compmpi {

/* The blocking compressed path of src/interpose.cc (caller holds st.mu). */
using NbRunFn = int (*)(const CollArgs &, CommState &);

/* Thread level to ask PMPI_Init_thread for, given the user's `required`. Reads
 * COMPMPI_NB_PROGRESS (validated later with the other settings). */
int nb_init_level(int required);
/* After PMPI_Init*: the level MPI gave. */
void nb_init_done(int provided);
/* Before PMPI_Finalize: drain every progress thread, free internal communicators. */
void nb_finalize();
/* Whether the calling thread is a progress thread (statistics tell its exact runs apart). */
bool nb_on_progress_thread();

/* MPI_Iallreduce / MPI_Iallgather / MPI_Ibcast: `a` holds the arguments (a.kind is the
 * blocking collective), `entry` the non-blocking kind for statistics and settings. */
int nb_start(CollArgs a, Coll entry, MPI_Request *request, NbRunFn run) noexcept;

#if MPI_VERSION >= 4
/* MPI_Allreduce_init / MPI_Allgather_init / MPI_Bcast_init (MPI-4): plan, state and
 * workspaces set up once here; each MPI_Start runs the compressed algorithm on the progress
 * channel. Not eligible: PMPI_*_init unchanged. */
int nb_persistent_init(CollArgs a, Coll entry, MPI_Info info, MPI_Request *request, NbRunFn run) noexcept;
int nb_start_persistent(MPI_Request *req);
int nb_startall(int n, MPI_Request *reqs);
int nb_request_free(MPI_Request *req);
/* Any persistent request of ours alive? (else the wait/test family goes straight to PMPI) */
bool nb_have_persistent();
/* The wait/test family: `reqs` is the array to hand to PMPI (our persistent handles replaced
 * by their current run's request, or MPI_REQUEST_NULL when inactive); finish() writes the
 * results back to the user's array (our handles stay, inactive once their run completed). */
class NbSubst {
  public:
    NbSubst(int n, MPI_Request *user);
    void finish();
    std::vector<MPI_Request> reqs;

  private:
    MPI_Request *user_;
    int n_;
    std::vector<std::shared_ptr<void>> ours_;
};
#endif

}  // namespace compmpi

// SPDX-License-Identifier: BSD-3-Clause
/* The MPI functions libcompmpi calls: the NEXT definition of each MPI_* after libcompmpi's.
 *
 * libcompmpi defines MPI_Allreduce & co. in place of MPI's. Every MPI call it makes itself
 * (the pass-through of calls it does not compress, the exchanges of compressed calls, its
 * communicator duplicates, MPI_Init/Finalize, MPI_T) goes through mpi_next::<name>(...),
 * one pointer load and an indirect call to:
 *  - with chaining on (setting pmpi_chain, default): dlsym(RTLD_NEXT, "MPI_<name>"), the
 *    next definition in the process's lookup order after libcompmpi. A PMPI profiler loaded
 *    after libcompmpi (LD_PRELOAD="libcompmpi.so libprof.so", or linked after it) is that
 *    next definition, and so sees libcompmpi's real traffic (compressed bytes); without one
 *    it is MPI's own MPI_<name> (often a weak alias of PMPI_<name>), which is PMPI_<name>.
 *    A definition in libcompmpi itself (or in a second copy of it, e.g. a static libcompmpi.a
 *    in the program and libcompmpi.so preloaded) is never taken: PMPI_<name> instead, so no
 *    call can come back into libcompmpi;
 *  - with chaining off (COMPMPI_PMPI_CHAIN=0), or where the MPI has no MPI_<name>:
 *    PMPI_<name>, as libcompmpi always called before (a profiler after it sees nothing of it).
 * The table is MPI's PMPI_* before anything is resolved (constant-initialised: valid in any
 * constructor), resolved by a constructor when the library loads (from COMPMPI_PMPI_CHAIN)
 * and again by MPI_Init, before it calls MPI, from the setting as MPI_Init reads it (an
 * MPI_T write before MPI_Init included). Slots are atomics read relaxed: a plain load.
 *
 * Under SimGrid SMPI (COMPMPI_SMPI) every rank is a privatised copy of the library inside one
 * simulator process, and there are no profilers to chain to: mpi_next::<name> is
 * PMPI_<name> itself, called directly, and the setting has no effect.
 *
 * The other direction -- a library whose MPI_* come BEFORE libcompmpi's, so that the program's
 * calls reach it first and its PMPI_* calls go straight to MPI, bypassing libcompmpi -- is
 * detected when the library loads and reported once (mpi_next_order_warn). */
#pragma once
#include <mpi.h>

#include <atomic>

#ifndef COMPMPI_SMPI
#include "base/fiber.h"
#endif

namespace compmpi {
namespace mpi_next {

/* Inline progress (below): the operations a pump can advance, and the pump. */
namespace progress {
extern std::atomic<int> live;  /* src/runtime/progress.cc counts them */
extern void (*pump)();         /* resumes every fiber with work; set at MPI_Init (nb_init_done) */
}  // namespace progress

#ifndef COMPMPI_SMPI
/* One slot per function of mpi_next.def. */
struct Table {
#define COMPMPI_MPI_NEXT(name) std::atomic<decltype(&::PMPI_##name)> name;
#include "base/mpi_next.def"
#undef COMPMPI_MPI_NEXT
};
extern Table g_table;

/* Inline progress (src/base/fiber.h, nb_progress=inline). On a fiber, every blocking call
 * libcompmpi makes is posted as its non-blocking form and waited for by polling, yielding
 * to the application's thread between polls. On the application's thread, while operations
 * only it can advance are pending (`live`), the waits (MPI_Wait, Waitall, Waitany, Waitsome:
 * the user's, through request_wait & co., and libcompmpi's own) and MPI_Sendrecv poll too,
 * running `pump` (which resumes the fibers) between polls. Blocking collectives on the
 * application's thread stay blocking: MPI does not match a blocking collective with a
 * non-blocking one, and only the fiber's calls are known to take the same form on every
 * rank (docs/design.md, "Inline progress"). Otherwise the blocking call itself. */
namespace progress {
inline bool wanted() {
    return fiber::current() != nullptr || live.load(std::memory_order_relaxed) != 0;
}
/* Wait for these requests by polling (MPI_Testall / Testany / Testsome), yielding or pumping
 * between polls; the return codes and outputs of MPI_Waitall / Waitany / Waitsome. */
int wait_all(int n, MPI_Request *r, MPI_Status *st);
int wait_any(int n, MPI_Request *r, int *index, MPI_Status *st);
int wait_some(int n, MPI_Request *r, int *outcount, int *indices, MPI_Status *st);
int sendrecv(const void *sbuf, int scount, MPI_Datatype stype, int dst, int stag, void *rbuf, int rcount,
             MPI_Datatype rtype, int src, int rtag, MPI_Comm comm, MPI_Status *status);
}  // namespace progress

/* The non-blocking form of a blocking slot (the same parameters plus MPI_Request *), where
 * libcompmpi may wait for it with inline progress: kind 1. Kind 2: a hand-written wait. */
template <auto Slot>
struct IForm {
    static constexpr int kind = 0;
};
#define COMPMPI_IFORM(b, i)                               \
    template <>                                           \
    struct IForm<&Table::b> {                             \
        static constexpr int kind = 1;                    \
        static constexpr auto slot = &Table::i;           \
    };
COMPMPI_IFORM(Allreduce, Iallreduce)
COMPMPI_IFORM(Allgather, Iallgather)
COMPMPI_IFORM(Bcast, Ibcast)
COMPMPI_IFORM(Reduce, Ireduce)
COMPMPI_IFORM(Reduce_scatter_block, Ireduce_scatter_block)
COMPMPI_IFORM(Reduce_scatter, Ireduce_scatter)
COMPMPI_IFORM(Alltoall, Ialltoall)
COMPMPI_IFORM(Alltoallv, Ialltoallv)
COMPMPI_IFORM(Barrier, Ibarrier)
#ifdef HAVE_MPI_LARGE_COUNT
COMPMPI_IFORM(Allreduce_c, Iallreduce_c)
COMPMPI_IFORM(Allgather_c, Iallgather_c)
COMPMPI_IFORM(Bcast_c, Ibcast_c)
COMPMPI_IFORM(Reduce_scatter_block_c, Ireduce_scatter_block_c)
COMPMPI_IFORM(Reduce_scatter_c, Ireduce_scatter_c)
COMPMPI_IFORM(Alltoall_c, Ialltoall_c)
COMPMPI_IFORM(Alltoallv_c, Ialltoallv_c)
#endif
#undef COMPMPI_IFORM
#define COMPMPI_IWAIT(b)                                  \
    template <>                                           \
    struct IForm<&Table::b> {                             \
        static constexpr int kind = 2;                    \
    };
COMPMPI_IWAIT(Wait)
COMPMPI_IWAIT(Waitall)
COMPMPI_IWAIT(Waitany)
COMPMPI_IWAIT(Waitsome)
COMPMPI_IWAIT(Sendrecv)
#undef COMPMPI_IWAIT

/* mpi_next::<name>: a function with PMPI_<name>'s exact parameters (so arguments convert as
 * in a direct call) that calls the slot -- or, for a blocking call under inline progress,
 * its non-blocking form and a polling wait (above). */
template <auto Slot, class F>
struct Via;
template <auto Slot, class R, class... P>
struct Via<Slot, R (*)(P...)> {
    static R call(P... p) {
        if constexpr (IForm<Slot>::kind == 1) {
            if (fiber::current()) [[unlikely]] {
                MPI_Request r = MPI_REQUEST_NULL;
                const int rc = (g_table.*IForm<Slot>::slot).load(std::memory_order_relaxed)(p..., &r);
                return rc != MPI_SUCCESS ? rc : progress::wait_all(1, &r, MPI_STATUSES_IGNORE);
            }
        } else if constexpr (IForm<Slot>::kind == 2) {
            if (progress::wanted()) [[unlikely]] return wait_form(p...);
        }
        return (g_table.*Slot).load(std::memory_order_relaxed)(p...);
    }

  private:
    static int wait_form(MPI_Request *r, MPI_Status *st) { return progress::wait_all(1, r, st); }
    static int wait_form(int n, MPI_Request *r, MPI_Status *st) { return progress::wait_all(n, r, st); }
    static int wait_form(int n, MPI_Request *r, int *index, MPI_Status *st) { return progress::wait_any(n, r, index, st); }
    static int wait_form(int n, MPI_Request *r, int *outcount, int *indices, MPI_Status *st) {
        return progress::wait_some(n, r, outcount, indices, st);
    }
    static int wait_form(const void *sbuf, int scount, MPI_Datatype stype, int dst, int stag, void *rbuf, int rcount,
                         MPI_Datatype rtype, int src, int rtag, MPI_Comm comm, MPI_Status *status) {
        return progress::sendrecv(sbuf, scount, stype, dst, stag, rbuf, rcount, rtype, src, rtag, comm, status);
    }
};
#define COMPMPI_MPI_NEXT(name) \
    inline constexpr auto name = &Via<&Table::name, decltype(&::PMPI_##name)>::call;
#include "base/mpi_next.def"
#undef COMPMPI_MPI_NEXT
#else
#define COMPMPI_MPI_NEXT(name) inline constexpr auto name = &::PMPI_##name;
#include "base/mpi_next.def"
#undef COMPMPI_MPI_NEXT
#endif

}  // namespace mpi_next

/* Fill the table: chain = true: each slot the next MPI_<name> (as above), else PMPI_<name>.
 * Called at load and by MPI_Init before MPI is initialised; thread-safe (atomic slots). A
 * no-op under SMPI. */
void mpi_next_resolve(bool chain);
/* Whether the table currently chains (the last mpi_next_resolve). */
bool mpi_next_chained();

/* The order check. If another library's MPI_* entry points for the calls libcompmpi
 * compresses precede libcompmpi's in the process (the first definition of MPI_Allreduce,
 * dlsym(RTLD_DEFAULT), lies in neither libcompmpi nor the object its own calls go to), that
 * library's file name (dladdr), else "". Found once, when the library loads. */
const char *mpi_next_preceded_by();
/* Once per process, whoever calls first: if preceded, warn (log_warn) naming that library,
 * what it means and how to fix the order. rank: this rank in MPI_COMM_WORLD; only rank 0
 * prints (-1: unknown, e.g. after MPI_Finalize; then the launcher's rank variable decides,
 * PMI_RANK, OMPI_COMM_WORLD_RANK or PMIX_RANK, and without one the process prints). `when`
 * names the moment ("MPI_Init", ...). Called by MPI_Init, by the first collective that
 * reaches libcompmpi uninitialised (the other library wrapped MPI_Init too), and at exit. */
void mpi_next_order_warn(int rank, const char *when);

}  // namespace compmpi

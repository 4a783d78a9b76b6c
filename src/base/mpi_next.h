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

#ifndef COMPMPI_SMPI
#include <atomic>
#endif

namespace compmpi {
namespace mpi_next {

#ifndef COMPMPI_SMPI
/* One slot per function of mpi_next.def. */
struct Table {
#define COMPMPI_MPI_NEXT(name) std::atomic<decltype(&::PMPI_##name)> name;
#include "base/mpi_next.def"
#undef COMPMPI_MPI_NEXT
};
extern Table g_table;

/* mpi_next::<name>: a function with PMPI_<name>'s exact parameters (so arguments convert as
 * in a direct call) that calls the slot. */
template <auto Slot, class F>
struct Via;
template <auto Slot, class R, class... P>
struct Via<Slot, R (*)(P...)> {
    static R call(P... p) { return (g_table.*Slot).load(std::memory_order_relaxed)(p...); }
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

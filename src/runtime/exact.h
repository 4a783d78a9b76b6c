// SPDX-License-Identifier: BSD-3-Clause
/* The exact path: MPI's own collective with the caller's arguments, blocking or
 * non-blocking. Every fallback of libcompmpi ends here. */
#pragma once
#include <mpi.h>

#include "base/mpi_next.h"
#include "runtime/eligibility.h"

namespace compmpi {

/* The blocking PMPI collective of a.kind (the MPI-4 _c form where a.large_count). */
int passthrough(const CollArgs &a);
/* The non-blocking PMPI_I* collective of a.kind on comm (the _c form where a.large_count); the
 * two-argument form on a.comm. Inline: on the direct path (src/runtime/nb_dispatch.h) the
 * entry point's constant kind picks the call at compile time. */
[[gnu::always_inline]] inline int passthrough_nb(const CollArgs &a, MPI_Comm comm, MPI_Request *req) {
#ifdef HAVE_MPI_LARGE_COUNT
    if (a.large_count) {
        switch (a.kind) {
            case Coll::allreduce:
                return mpi_next::Iallreduce_c(a.sendbuf, a.recvbuf, a.count, a.datatype, a.op, comm, req);
            case Coll::allgather:
                return mpi_next::Iallgather_c(a.sendbuf, a.count, a.datatype, a.recvbuf, a.recvcount, a.recvtype, comm,
                                         req);
            case Coll::bcast: return mpi_next::Ibcast_c(a.recvbuf, a.count, a.datatype, a.root, comm, req);
            case Coll::reduce_scatter_block:
                return mpi_next::Ireduce_scatter_block_c(a.sendbuf, a.recvbuf, a.count, a.datatype, a.op, comm, req);
            default: break; /* reduce_scatter: below, by its count array */
        }
    }
#endif
    switch (a.kind) {
        case Coll::allreduce:
            return mpi_next::Iallreduce(a.sendbuf, a.recvbuf, static_cast<int>(a.count), a.datatype, a.op, comm, req);
        case Coll::allgather:
            return mpi_next::Iallgather(a.sendbuf, static_cast<int>(a.count), a.datatype, a.recvbuf,
                                   static_cast<int>(a.recvcount), a.recvtype, comm, req);
        case Coll::bcast: return mpi_next::Ibcast(a.recvbuf, static_cast<int>(a.count), a.datatype, a.root, comm, req);
        case Coll::reduce_scatter_block:
            return mpi_next::Ireduce_scatter_block(a.sendbuf, a.recvbuf, static_cast<int>(a.count), a.datatype, a.op,
                                              comm, req);
        case Coll::reduce_scatter:
#ifdef HAVE_MPI_LARGE_COUNT
            if (a.recvcounts_c)
                return mpi_next::Ireduce_scatter_c(a.sendbuf, a.recvbuf, a.recvcounts_c, a.datatype, a.op, comm, req);
#endif
            return mpi_next::Ireduce_scatter(a.sendbuf, a.recvbuf, a.recvcounts, a.datatype, a.op, comm, req);
        default: return MPI_ERR_INTERN;
    }
}
inline int passthrough_nb(const CollArgs &a, MPI_Request *req) { return passthrough_nb(a, a.comm, req); }

}  // namespace compmpi

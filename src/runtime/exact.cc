// SPDX-License-Identifier: BSD-3-Clause
#include "runtime/exact.h"
#include "base/mpi_next.h"

namespace compmpi {

int passthrough(const CollArgs &a) {
#ifdef HAVE_MPI_LARGE_COUNT
    if (a.large_count) {
        switch (a.kind) {
            case Coll::allreduce: return mpi_next::Allreduce_c(a.sendbuf, a.recvbuf, a.count, a.datatype, a.op, a.comm);
            case Coll::allgather:
                return mpi_next::Allgather_c(a.sendbuf, a.count, a.datatype, a.recvbuf, a.recvcount, a.recvtype, a.comm);
            case Coll::bcast: return mpi_next::Bcast_c(a.recvbuf, a.count, a.datatype, a.root, a.comm);
            case Coll::reduce_scatter_block:
                return mpi_next::Reduce_scatter_block_c(a.sendbuf, a.recvbuf, a.count, a.datatype, a.op, a.comm);
            case Coll::reduce_scatter:
                return mpi_next::Reduce_scatter_c(a.sendbuf, a.recvbuf, a.recvcounts_c, a.datatype, a.op, a.comm);
            default: break;
        }
    }
#endif
    switch (a.kind) {
        case Coll::allreduce:
            return mpi_next::Allreduce(a.sendbuf, a.recvbuf, static_cast<int>(a.count), a.datatype, a.op, a.comm);
        case Coll::allgather:
            return mpi_next::Allgather(a.sendbuf, static_cast<int>(a.count), a.datatype, a.recvbuf,
                                  static_cast<int>(a.recvcount), a.recvtype, a.comm);
        case Coll::bcast: return mpi_next::Bcast(a.recvbuf, static_cast<int>(a.count), a.datatype, a.root, a.comm);
        case Coll::reduce_scatter_block:
            return mpi_next::Reduce_scatter_block(a.sendbuf, a.recvbuf, static_cast<int>(a.count), a.datatype, a.op, a.comm);
        case Coll::reduce_scatter:
            return mpi_next::Reduce_scatter(a.sendbuf, a.recvbuf, a.recvcounts, a.datatype, a.op, a.comm);
        default: return MPI_ERR_INTERN;
    }
}

}  // namespace compmpi

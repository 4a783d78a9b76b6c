// SPDX-License-Identifier: BSD-3-Clause
/* One intercepted collective call, packed once at the MPI boundary (NCCL style), and what
 * follows from its arguments alone. */
#pragma once
#include <mpi.h>

#include <cstddef>

#include "base/stats.h"
#include "codec.h"

namespace compmpi {

/* One intercepted call, packed once at the MPI boundary (NCCL style). */
struct CollArgs {
    Coll kind;
    const void *sendbuf;
    void *recvbuf;           /* bcast: the buffer */
    MPI_Count count;         /* allreduce/bcast: count; allgather: sendcount; reduce_scatter_block: recvcount */
    MPI_Count recvcount;     /* allgather only */
    MPI_Datatype datatype;   /* allreduce/bcast: datatype; allgather: sendtype */
    MPI_Datatype recvtype;   /* allgather only */
    MPI_Op op;               /* allreduce only */
    int root;                /* bcast only */
    MPI_Comm comm;
    bool large_count;        /* came in through an MPI-4 _c entry point */
    /* Values this rank contributes (allgather: its block), from the type signature; set by
     * eligibility_precheck when the datatype rule passes, -1 before; and their type. */
    MPI_Count elems = -1;
    Elem elem = Elem::f32;
    /* The user's receive buffer when recvbuf points into a packed copy (FloatView): the
     * key of per-buffer state (awp, error feedback). nullptr: recvbuf itself. */
    const void *key = nullptr;
    /* reduce_scatter only: the block of each rank, as the entry point gave them (int or
     * MPI_Count array; the other is nullptr) */
    const int *recvcounts = nullptr;
    const MPI_Count *recvcounts_c = nullptr;
};

/* Number of floats this rank encodes for the call (allgather: its block; reduce-scatter:
 * its whole input, every rank's block). */
inline MPI_Count coll_elements(const CollArgs &a) {
    if (a.elems >= 0) return a.elems;
    return a.kind == Coll::allgather ? a.recvcount : a.count;
}
/* Reduce-scatter: floats of rank j's block (recvcount, or recvcounts[j]). */
inline MPI_Count coll_block_count(const CollArgs &a, int j) {
    if (a.kind == Coll::reduce_scatter_block) return a.count;
    if (a.recvcounts_c) return a.recvcounts_c[j];
    return a.recvcounts ? a.recvcounts[j] : 0;
}
inline bool coll_is_reduce_scatter(Coll k) { return k == Coll::reduce_scatter_block || k == Coll::reduce_scatter; }
/* Floats of the result on this rank (allgather: every block; reduce-scatter: its own block). */
inline size_t coll_result_elements(const CollArgs &a, int rank, int size) {
    const size_t n = static_cast<size_t>(coll_elements(a));
    if (coll_is_reduce_scatter(a.kind)) return static_cast<size_t>(coll_block_count(a, rank));
    return a.kind == Coll::allgather ? n * static_cast<size_t>(size) : n;
}

/* Packing at the boundary: one builder per collective (a.kind is the blocking collective;
 * large: the call came in through an MPI-4 _c entry point). */
inline CollArgs args_allreduce(const void *s, void *r, MPI_Count n, MPI_Datatype t, MPI_Op op, MPI_Comm comm,
                               bool large) {
    return CollArgs{Coll::allreduce, s, r, n, 0, t, MPI_DATATYPE_NULL, op, 0, comm, large};
}
inline CollArgs args_allgather(const void *s, MPI_Count sn, MPI_Datatype st, void *r, MPI_Count rn, MPI_Datatype rt,
                               MPI_Comm comm, bool large) {
    return CollArgs{Coll::allgather, s, r, sn, rn, st, rt, MPI_OP_NULL, 0, comm, large};
}
inline CollArgs args_bcast(void *b, MPI_Count n, MPI_Datatype t, int root, MPI_Comm comm, bool large) {
    return CollArgs{Coll::bcast, nullptr, b, n, 0, t, MPI_DATATYPE_NULL, MPI_OP_NULL, root, comm, large};
}
inline CollArgs args_reduce_scatter_block(const void *s, void *r, MPI_Count n, MPI_Datatype t, MPI_Op op,
                                          MPI_Comm comm, bool large) {
    return CollArgs{Coll::reduce_scatter_block, s, r, n, 0, t, MPI_DATATYPE_NULL, op, 0, comm, large};
}
inline CollArgs args_reduce_scatter(const void *s, void *r, const int *counts, const MPI_Count *counts_c,
                                    MPI_Datatype t, MPI_Op op, MPI_Comm comm) {
    CollArgs a{Coll::reduce_scatter, s, r, 0, 0, t, MPI_DATATYPE_NULL, op, 0, comm, counts_c != nullptr};
    a.recvcounts = counts;
    a.recvcounts_c = counts_c;
    return a;
}

}  // namespace compmpi

/* Hierarchical allreduce: only the traffic between nodes is compressed.
 *
 *   node A: r0 r1 r2 ──PMPI_Reduce (exact, shared memory)──► leader a = sum of node A
 *   node B: r3 r4    ──PMPI_Reduce──────────────────────────► leader b = sum of node B
 *   leaders a, b: compressed allreduce (two-phase or sparse) over the leaders' communicator
 *   every node: leader ──PMPI_Bcast (exact)──► its ranks
 *
 * Every rank ends with its leader's result, and the leaders' results are bit-identical, so
 * the invariant holds. If the leaders fall back (NaN/Inf, local error), they run the exact
 * PMPI_Allreduce over the node sums; the broadcast carries whichever result they got, so the
 * other ranks never need to know. Error feedback applies to the leaders' inputs (node sums). */
#include <climits>

#include "coll.h"

namespace compmpi {

Status coll_allreduce_hierarchical(CollCtx &c, const void *sendbuf, float *out, size_t n, const HierComms &h,
                                   bool sparse) {
    if (n > INT_MAX) return Status::unsupported;
    const int cnt = static_cast<int>(n);
    int rc;
    {
        ScopedTimer t(c.stats->ns_comm);
        if (h.node_rank == 0)
            rc = PMPI_Reduce(sendbuf == MPI_IN_PLACE ? MPI_IN_PLACE : sendbuf, out, cnt, MPI_FLOAT, MPI_SUM, 0, h.node);
        else
            rc = PMPI_Reduce(sendbuf == MPI_IN_PLACE ? out : sendbuf, nullptr, cnt, MPI_FLOAT, MPI_SUM, 0, h.node);
    }
    if (rc != MPI_SUCCESS) return c.mpi_err = rc, Status::mpi_error;

    Status s = Status::ok;
    if (h.node_rank == 0) {
        CollCtx lc = c;
        lc.comm = h.leaders;
        PMPI_Comm_rank(h.leaders, &lc.rank);
        PMPI_Comm_size(h.leaders, &lc.size);
        s = sparse ? coll_allreduce_sparse(lc, out, out, n) : coll_allreduce_twophase(lc, out, out, n);
        c.mpi_err = lc.mpi_err;
        c.segments_fallback = lc.segments_fallback;
        c.fallback_reason = lc.fallback_reason;
        if (s == Status::nonfinite || s == Status::corrupt) {
            c.fallback_reason |= s == Status::nonfinite ? BLOB_NONFINITE : BLOB_ABANDON;
            ScopedTimer t(c.stats->ns_comm);
            rc = PMPI_Allreduce(MPI_IN_PLACE, out, cnt, MPI_FLOAT, MPI_SUM, h.leaders);
            if (rc != MPI_SUCCESS) return c.mpi_err = rc, Status::mpi_error;
            if (c.ef_new) c.be->copy(c.be_ctx, c.ef_new, c.ef_res, n); /* residual still owed */
            s = Status::ok;
        }
    }
    /* a leader's MPI error must not leave its node waiting in the broadcast */
    if (s != Status::ok && s != Status::mpi_error) return s;
    ScopedTimer t(c.stats->ns_comm);
    rc = PMPI_Bcast(out, cnt, MPI_FLOAT, 0, h.node);
    if (rc != MPI_SUCCESS) return c.mpi_err = rc, Status::mpi_error;
    return s;
}

}  // namespace compmpi

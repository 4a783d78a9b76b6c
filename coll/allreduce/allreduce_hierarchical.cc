// SPDX-License-Identifier: BSD-3-Clause
/* Hierarchical allreduce: only the traffic between nodes is compressed.
 *
 *   node A: r0 r1 r2 ──PMPI_Reduce (exact, shared memory)──► leader a = sum of node A
 *   node B: r3 r4    ──PMPI_Reduce──────────────────────────► leader b = sum of node B
 *   leaders a, b: compressed allreduce (two-phase, or sparse) over the leaders' communicator
 *   every node: leader ──PMPI_Bcast (exact)──► its ranks
 *
 * Every rank ends with its leader's result, and the leaders' results are bit-identical, so
 * the invariant holds. If the leaders fall back (NaN/Inf, local error), they run the exact
 * PMPI_Allreduce over the node sums; the broadcast carries whichever result they got, so the
 * other ranks never need to know. Error feedback applies to the leaders' inputs (node sums).
 *
 * Clipping codecs (terngrad, paper eq. 21: every worker clips its own gradient at c sigma of
 * that gradient before ternarising): every rank clips its contribution at its own threshold
 * (prepare() on its whole buffer) before the node reduce, and the leaders ternarise the node
 * sums of clipped gradients without clipping again, with a scaler shared among the leaders
 * (eq. 4 over the node sums). Each node sum's ternary is unbiased for it, so
 * E[result] = sum over all ranks of the clipped gradients, as in the flat algorithm. A
 * MAX-allreduce over the whole communicator first tells every rank whether some rank's data
 * holds NaN/Inf; if so nothing is written and the caller runs the exact collective on the
 * raw inputs. (After that check, a leaders' fallback -- a local error, or node sums that
 * overflow -- is exact over the node sums of clipped data.) */
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>

#include "coll.h"
#include "base/fault.h"
#include "base/log.h"
#include "base/mpi_next.h"

namespace compmpi {

namespace {

/* dst = src clamped to [-cs, cs] (cs = +inf: a copy), in the backend's memory. */
template <class T>
Status clamp_copy(CollCtx &c, const T *src, size_t n, float cs, T *dst) {
    auto clamp = [cs](const T *x, T *y, size_t m) {
        const T lim = static_cast<T>(cs);
        for (size_t i = 0; i < m; ++i) y[i] = std::min(std::max(x[i], -lim), lim);
    };
    if (c.be == &backend_cpu() && !c.stage_mpi) {
        clamp(src, dst, n);
        return Status::ok;
    }
    /* data in another memory (GPU): through a host copy (coll_stage_down/up); host data takes
     * this path too under the test-only COMPMPI_FAULT=stage_mpi, so CI runs it */
    HostStage hs;
    CMPI_CHECK(coll_stage_down(c, src, n, hs));
    clamp(hs.data<T>(), hs.data<T>(), n);
    return coll_stage_up(c, hs, dst, n);
}

/* dst = src clipped at this rank's threshold (prepare() on its whole contribution). A
 * MAX-allreduce over c.comm then tells every rank whether some rank's data holds NaN/Inf or
 * failed locally: nonfinite on every rank then, before anything is written. */
template <class T>
Status clip_contribution(CollCtx &c, const T *src, size_t n, T *dst) {
    double stat = 0;
    {
        ScopedTimer t(c.stats->ns_encode);
        float cs = 0;
        CodecParams q = c.params;
        q.clip_out = &cs;
        Status s = be_prepare(c, q, src, n, &stat);
        if (s != Status::ok || !std::isfinite(stat) || !(cs > 0) || clamp_copy(c, src, n, cs, dst) != Status::ok)
            stat = HUGE_VAL;
    }
    double any = 0;
    {
        ScopedTimer t(c.stats->ns_comm);
        int rc = COMPMPI_FAULT_MPI(allreduce, mpi_next::Allreduce(&stat, &any, 1, MPI_DOUBLE, MPI_MAX, c.comm));
        if (rc != MPI_SUCCESS) return c.mpi_err = rc, Status::mpi_error;
    }
    c.stats->bytes_wire += sizeof(double) * static_cast<size_t>(c.size - 1);
    return std::isfinite(any) ? Status::ok : Status::nonfinite;
}

}  // namespace

bool coll_hierarchy(CollState &cs, const Settings &s, MPI_Comm comm, int rank, HierComms *h) {
    HierState &st = cs.hier;
    if (s.hierarchy == enum_value(SettingId::hierarchy, "off")) return false;
    if (!st.known) {
        st.known = 1;
        int rc;
        if (s.node_size > 0)
            rc = mpi_next::Comm_split(comm, static_cast<int>(rank / s.node_size), rank, &st.node);
        else
            rc = mpi_next::Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &st.node);
        int node_size = 1;
        if (rc == MPI_SUCCESS) {
            mpi_next::Comm_rank(st.node, &st.node_rank);
            mpi_next::Comm_size(st.node, &node_size);
            rc = mpi_next::Comm_split(comm, st.node_rank == 0 ? 0 : MPI_UNDEFINED, rank, &st.leaders);
        }
        int leader = st.node_rank == 0;
        if (rc == MPI_SUCCESS) rc = mpi_next::Allreduce(&leader, &st.nodes, 1, MPI_INT, MPI_SUM, comm);
        if (rc == MPI_SUCCESS) rc = mpi_next::Allreduce(&node_size, &st.max_per_node, 1, MPI_INT, MPI_MAX, comm);
        if (rc != MPI_SUCCESS) {
            log_warn("could not split the communicator by node; using the flat algorithm");
            st.nodes = 1;
        }
    }
    h->node = st.node;
    h->leaders = st.leaders;
    h->node_rank = st.node_rank;
    h->nodes = st.nodes;
    h->max_per_node = st.max_per_node;
    return h->nodes > 1 && h->max_per_node > 1;
}


template <class T>
Status coll_allreduce_hierarchical(CollCtx &c, const void *sendbuf, T *out, size_t n, const HierComms &h,
                                   bool sparse) {
    if (n > INT_MAX) return Status::unsupported;
    c.stats->hierarchical++;
    const int cnt = static_cast<int>(n);
    int rc;
    const void *contrib = sendbuf; /* what enters the node reduce (MPI_IN_PLACE: out) */
    const bool clip = !sparse && c.codec->prepare && c.params.clip > 0;
    if (clip) {
        const T *mine = sendbuf == MPI_IN_PLACE ? out : static_cast<const T *>(sendbuf);
        T *clipped = be_scratch<T>(c, 3, n);
        if (!clipped) return Status::no_memory;
        CMPI_CHECK(clip_contribution(c, mine, n, clipped));
        contrib = clipped;
    }
    {
        ScopedTimer t(c.stats->ns_comm);
        if (h.node_rank == 0)
            rc = coll_mpi_elems<T>(c, contrib, out, n, [&](const void *s_, T *o_) {
                return COMPMPI_FAULT_MPI(reduce, mpi_next::Reduce(s_, o_, cnt, mpi_elem<T>(), MPI_SUM, 0, h.node));
            });
        else
            rc = coll_mpi_elems<T>(c, contrib == MPI_IN_PLACE ? out : contrib, nullptr, n, [&](const void *s_, T *) {
                return COMPMPI_FAULT_MPI(reduce, mpi_next::Reduce(s_, nullptr, cnt, mpi_elem<T>(), MPI_SUM, 0, h.node));
            });
    }
    if (rc != MPI_SUCCESS) return c.mpi_err = rc, Status::mpi_error;

    Status s = Status::ok;
    if (h.node_rank == 0) {
        CollCtx lc = c;
        if (clip) { /* the node sums are sums of clipped gradients: ternarise, do not clip again */
            lc.params.clip = 0;
            lc.params.clip_at = 0;
        }
        lc.comm = h.leaders;
        mpi_next::Comm_rank(h.leaders, &lc.rank);
        mpi_next::Comm_size(h.leaders, &lc.size);
        s = sparse ? coll_allreduce_sparse(lc, out, out, n) : coll_allreduce_dense(lc, out, out, n, h.nodes);
        c.mpi_err = lc.mpi_err;
        c.exploring = lc.exploring;
        c.segments_fallback = lc.segments_fallback;
        c.fallback_reason = lc.fallback_reason;
        if (s == Status::nonfinite || s == Status::corrupt) {
            c.fallback_reason |= s == Status::nonfinite ? BLOB_NONFINITE : BLOB_ABANDON;
            ScopedTimer t(c.stats->ns_comm);
            rc = coll_mpi_elems<T>(c, MPI_IN_PLACE, out, n, [&](const void *, T *o_) {
                return COMPMPI_FAULT_MPI(allreduce, mpi_next::Allreduce(MPI_IN_PLACE, o_, cnt, mpi_elem<T>(), MPI_SUM, h.leaders));
            });
            if (rc != MPI_SUCCESS) return c.mpi_err = rc, Status::mpi_error;
            if (c.ef_new) be_copy(c, ef_new_t<T>(c), ef_res_t<T>(c), n); /* residual still owed */
            s = Status::ok;
        }
    }
    /* a leader's MPI error must not leave its node waiting in the broadcast */
    if (s != Status::ok && s != Status::mpi_error) return s;
    ScopedTimer t(c.stats->ns_comm);
    rc = coll_mpi_elems<T>(c, nullptr, out, n, [&](const void *, T *o_) {
        return COMPMPI_FAULT_MPI(bcast, mpi_next::Bcast(o_, cnt, mpi_elem<T>(), 0, h.node));
    });
    if (rc != MPI_SUCCESS) return c.mpi_err = rc, Status::mpi_error;
    return s;
}

template Status coll_allreduce_hierarchical(CollCtx &, const void *, float *, size_t, const HierComms &, bool);
template Status coll_allreduce_hierarchical(CollCtx &, const void *, double *, size_t, const HierComms &, bool);

}  // namespace compmpi

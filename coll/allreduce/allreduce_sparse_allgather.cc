/* Compressed allreduce for sparse codecs (topk, fft_topk): every rank encodes its whole
 * contribution once; blobs of different sizes are allgathered; every rank decodes all of
 * them and sums in rank order, so the result is the same bits everywhere.
 *
 *   rank j: b_j = E(x_j)   ──PMPI_Allgather(|b_j|)──►  sizes, offsets
 *                          ──PMPI_Allgatherv(b_j)───►  b_0 b_1 ... b_{P-1} on every rank
 *   every rank: out = D(b_0); out += D(b_1); ... ; out += D(b_{P-1})
 *
 * Traffic per rank: (P-1) * |b| received. A sum of sparse vectors densifies; switching to
 * the dense reduce-scatter path when the union becomes dense is the job of the
 * sparse-aware collectives (see docs/design.md). With error feedback x_j = input + residual
 * and the new residual is x_j - D(b_j). */
#include <climits>
#include <vector>

#include "coll.h"

namespace compmpi {

Status coll_allreduce_sparse(CollCtx &c, const float *in, float *out, size_t n) {
    const int P = c.size;
    const float *src = coll_ef_input(c, in, n);
    if (!src) return Status::no_memory;
    CMPI_CHECK(coll_shared_scale(c, src, n));
    const size_t S = blob_max_bytes(*c.codec, n, c.params);
    uint8_t *mine = c.st->ws_send.get(S);
    if (!mine) return Status::no_memory;
    size_t len = 0;
    {
        ScopedTimer t(c.stats->ns_encode);
        CodecParams p = c.params;
        p.stream = rng_stream(c.rank, c.st->calls, 1, 0);
        coll_encode(c, p, src, n, mine, S, &len);
        if (c.ef_new) coll_ef_update(c, mine, len, src, n, c.ef_new);
    }
    std::vector<uint64_t> lens(P);
    std::vector<MPI_Count> counts(P), displs(P);
    uint64_t mylen = len;
    {
        ScopedTimer t(c.stats->ns_comm);
        int rc = PMPI_Allgather(&mylen, 1, MPI_UINT64_T, lens.data(), 1, MPI_UINT64_T, c.comm);
        if (rc != MPI_SUCCESS) return c.mpi_err = rc, Status::mpi_error;
    }
    size_t total = 0;
    for (int j = 0; j < P; ++j) {
        counts[j] = static_cast<MPI_Count>(lens[j]);
        displs[j] = static_cast<MPI_Count>(total);
        total += lens[j];
    }
    uint8_t *all = c.st->ws_recv.get(total ? total : 1);
    if (!all) return Status::no_memory; /* every rank knows `total`: they all fail alike only if memory is equal */
    {
        ScopedTimer t(c.stats->ns_comm);
        int rc;
        if (total <= INT_MAX) {
            std::vector<int> ic(P), id(P);
            for (int j = 0; j < P; ++j) ic[j] = static_cast<int>(counts[j]), id[j] = static_cast<int>(displs[j]);
            rc = PMPI_Allgatherv(mine, static_cast<int>(len), MPI_BYTE, all, ic.data(), id.data(), MPI_BYTE, c.comm);
        } else {
#ifdef HAVE_MPI_LARGE_COUNT
            std::vector<MPI_Aint> ad(displs.begin(), displs.end());
            rc = PMPI_Allgatherv_c(mine, static_cast<MPI_Count>(len), MPI_BYTE, all, counts.data(), ad.data(), MPI_BYTE,
                                   c.comm);
#else
            rc = MPI_ERR_COUNT;
#endif
        }
        if (rc != MPI_SUCCESS) return c.mpi_err = rc, Status::mpi_error;
    }
    c.stats->bytes_wire += len * static_cast<size_t>(P - 1) + sizeof(uint64_t) * static_cast<size_t>(P - 1);
    c.stats->bytes_uncompressed_wire += 2 * n * sizeof(float) * static_cast<size_t>(P - 1) / static_cast<size_t>(P);

    uint8_t flags = 0;
    for (int j = 0; j < P; ++j) {
        BlobInfo info;
        flags |= blob_peek(all + displs[j], lens[j], n, &info) == Status::ok ? info.flags : BLOB_ABANDON;
    }
    CMPI_CHECK(coll_flag_status(flags));
    ScopedTimer t(c.stats->ns_decode);
    for (int j = 0; j < P; ++j)
        CMPI_CHECK(c.be->decode(c.be_ctx, all + displs[j], lens[j], n, out, j > 0, c.params));
    return Status::ok;
}

}  // namespace compmpi

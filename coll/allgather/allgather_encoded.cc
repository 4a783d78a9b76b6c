/* Compressed allgather: each rank encodes its own block once; the blobs are gathered with
 * a fixed stride S (the codec's worst case for n elements); every rank decodes every block,
 * its own included, so all ranks hold the same bits.
 *
 *   rank j: slot[j] = E(in_j) ──PMPI_Allgather(in place, S bytes)──► out[j] = D(slot[j]) for all j
 *
 * With MPI_IN_PLACE `in` is out + rank*n; `out` is written only after every flag was read. */
#include "coll.h"

namespace compmpi {

Status coll_allgather_encoded(CollCtx &c, const float *in, float *out, size_t n) {
    const int P = c.size;
    const size_t S = (blob_max_bytes(*c.codec, n, c.params) + 63) / 64 * 64;
    uint8_t *slots = c.st->ws_recv.get(S * P);
    if (!slots) return Status::no_memory;
    CMPI_CHECK(coll_shared_scale(c, in, n));
    {
        ScopedTimer t(c.stats->ns_encode);
        CodecParams p = c.params;
        p.stream = rng_stream(c.rank, c.st->calls, 1, c.rank);
        coll_encode(c, p, in, n, slots + S * c.rank, S);
    }
    CMPI_CHECK(mpi_allgather_inplace_bytes(c, slots, S));
    c.stats->bytes_wire += S * static_cast<size_t>(P - 1);
    c.stats->bytes_uncompressed_wire += n * sizeof(float) * static_cast<size_t>(P - 1);
    uint8_t flags = 0;
    for (int j = 0; j < P; ++j) {
        BlobInfo info;
        flags |= blob_peek(slots + S * j, S, n, &info) == Status::ok ? info.flags : BLOB_ABANDON;
    }
    CMPI_CHECK(coll_flag_status(flags));
    ScopedTimer t(c.stats->ns_decode);
    for (int j = 0; j < P; ++j)
        CMPI_CHECK(c.be->decode(c.be_ctx, slots + S * j, S, n, out + n * j, false, c.params));
    return Status::ok;
}

}  // namespace compmpi

/* Compressed bcast (ADT's weight transfer): encode once at the root, broadcast the blob,
 * decode everywhere -- the root too, so every rank holds the same bits.
 *
 *   root: blob = E(buf) ──PMPI_Bcast(blob, S bytes)──► every rank: buf = D(blob)
 *
 * S is the codec's worst case for n elements, which every rank computes from the agreed
 * plan. A flagged blob (NaN/Inf or an error at the root) reaches every rank, which returns
 * with buf untouched; the caller then broadcasts the raw data. */
#include "coll.h"

namespace compmpi {

Status coll_bcast_encoded(CollCtx &c, float *buf, size_t n, int root) {
    const size_t S = blob_max_bytes(*c.codec, n, c.params);
    uint8_t *blob = c.st->ws_send.get(S);
    if (!blob) return Status::no_memory;
    if (c.rank == root) {
        ScopedTimer t(c.stats->ns_encode);
        CodecParams p = c.params;
        p.stream = rng_stream(c.rank, c.st->calls, 1, 0);
        double stat = 0; /* one encoder: its own scale is the shared one */
        if ((c.codec->flags & CODEC_SHARED_SCALE) && c.be->prepare(c.be_ctx, *c.codec, p, buf, n, &stat) == Status::ok)
            p.shared_scale = stat;
        coll_encode(c, p, buf, n, blob, S);
    }
    CMPI_CHECK(mpi_bcast_bytes(c, blob, S, root));
    if (c.rank == root) { /* what the root's data costs the tree: P-1 copies */
        c.stats->bytes_wire += S * static_cast<size_t>(c.size - 1);
        c.stats->bytes_uncompressed_wire += n * sizeof(float) * static_cast<size_t>(c.size - 1);
    }
    BlobInfo info;
    CMPI_CHECK(blob_peek(blob, S, n, &info));
    CMPI_CHECK(coll_flag_status(info.flags));
    ScopedTimer t(c.stats->ns_decode);
    return c.be->decode(c.be_ctx, blob, S, n, buf, false, c.params);
}

}  // namespace compmpi

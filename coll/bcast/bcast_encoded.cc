// SPDX-License-Identifier: BSD-3-Clause
/* Compressed bcast (ADT's weight transfer, Zhuang et al. Section III): the root encodes its
 * data once and broadcasts the blob; every other rank decodes it. The root's buffer is the
 * fp32 master copy and is input only: it is never written (receivers hold the decoded
 * copy, bit-identical among themselves).
 *
 *   root: frame = E(buf) [+ |buf|] ──PMPI_Bcast(frame)──► receivers: buf = D(blob)
 *
 * Frame = the blob (S bytes, S the codec's worst case for n elements, which every rank
 * computes from the agreed plan) followed, when the awp policy tracks the call
 * (root_norm != nullptr on every rank alike), by 8 bytes: the l2-norm of the root's fp32
 * input as an IEEE double, little-endian. Every rank hands it to the policy, so the policy
 * runs on the sender's norm (the paper's |W_b|) and decides alike everywhere.
 * A flagged blob (NaN/Inf or an error at the root) reaches every rank, which returns with
 * buf untouched; the caller then broadcasts the raw data.
 *
 * A codec whose payload size depends on the data (codec_variable_payload: zfp's fixed
 * accuracy, whose worst case exceeds the raw floats), and any codec under the entropy stage
 * (setting entropy: the root's blob is coded, kernels/entropy.h), broadcasts its actual size first:
 *   root: (L = |blob|, norm) ──PMPI_Bcast(16 B)──► all;  blob ──PMPI_Bcast(L B)──► all */
#include <cmath>
#include <cstring>

#include "coll.h"

namespace compmpi {

template <class T>
Status coll_bcast_encoded(CollCtx &c, T *buf, size_t n, int root, double *root_norm) {
    const size_t S = blob_max_bytes(*c.codec, n, c.params);
    const size_t F = S + (root_norm ? sizeof(double) : 0);
    uint8_t *blob = c.ws->send.get(F);
    if (!blob) return Status::no_memory;
    /* the entropy stage (setting entropy) makes every blob's length data-dependent */
    const bool var = codec_variable_payload(*c.codec, c.params) || coll_entropy_on(c);
    size_t len = S;
    if (c.rank == root) {
        ScopedTimer t(c.stats->ns_encode);
        CodecParams p = c.params;
        p.stream = rng_stream(c.rank, c.st->calls, 1, 0);
        double stat = 0; /* one encoder: its own scale is the shared one */
        if ((c.codec->flags & CODEC_SHARED_SCALE) && be_prepare(c, p, buf, n, &stat) == Status::ok)
            p.shared_scale = stat;
        size_t blen = kBlobHeaderBytes;
        if (coll_encode(c, p, buf, n, blob, S, &blen) == 0) coll_entropy(c, *c.codec, p, blob, &blen);
        if (var) len = blen;
        if (root_norm) {
            const double norm = be_l2norm(c, buf, n);
            std::memcpy(blob + S, &norm, sizeof norm);
        }
    }
    size_t wire = F;
    if (var) { /* the size (and the norm) first, then the blob's own bytes */
        uint64_t head[2] = {len, 0};
        if (root_norm && c.rank == root) std::memcpy(&head[1], blob + S, sizeof(double));
        CMPI_CHECK(mpi_bcast_bytes(c, head, sizeof head, root));
        if (head[0] < kBlobHeaderBytes || head[0] > S) return Status::corrupt; /* alike everywhere */
        len = static_cast<size_t>(head[0]);
        if (root_norm) std::memcpy(blob + S, &head[1], sizeof(double));
        CMPI_CHECK(mpi_bcast_bytes(c, blob, len, root));
        wire = sizeof head + len;
    } else {
        CMPI_CHECK(mpi_bcast_bytes(c, blob, F, root));
    }
    if (c.rank == root) { /* what the root's data costs the tree: P-1 copies */
        c.stats->bytes_wire += wire * static_cast<size_t>(c.size - 1);
        c.stats->bytes_uncompressed_wire += n * sizeof(T) * static_cast<size_t>(c.size - 1);
    }
    BlobInfo info;
    CMPI_CHECK(blob_peek(blob, len, n, &info));
    CMPI_CHECK(coll_flag_status(info.flags));
    if (root_norm) {
        /* every rank holds the same bytes, so every rank reaches the same verdict */
        std::memcpy(root_norm, blob + S, sizeof *root_norm);
        if (!std::isfinite(*root_norm) || *root_norm < 0) return Status::corrupt;
    }
    if (c.rank == root) return Status::ok; /* the root's data is input: never written */
    ScopedTimer t(c.stats->ns_decode);
    return be_decode(c, blob, len, n, buf, false, c.params);
}

template Status coll_bcast_encoded(CollCtx &, float *, size_t, int, double *);
template Status coll_bcast_encoded(CollCtx &, double *, size_t, int, double *);

}  // namespace compmpi

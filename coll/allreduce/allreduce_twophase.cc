/* Compressed allreduce, two phases (reduce-scatter then allgather), for dense codecs.
 *
 * n floats split into P chunks; rank j owns chunk j. E() = encode, D() = decode.
 *
 *   phase 1 (alltoall of blobs)          rank r receives E(x_j[r]) from every j != r
 *       r0: E(x0[1]) E(x0[2]) ...  ──►   acc_r = sum over j = 0..P-1 in rank order of
 *       r1: E(x1[0]) E(x1[2]) ...  ──►           (j == r ? x_r[r] : D(E(x_j[r])))   (fp32)
 *   phase 2 (allgather of blobs)         every rank receives E2(acc_j) for every j and
 *       r: E2(acc_r)              ──►    writes out[j] = D(E2(acc_j)), its own chunk too,
 *                                        so the result is the same bits on every rank.
 *
 * E2 uses the codec's reduced_params when it has them (terngrad sends the 2P+1 levels of a
 * sum exactly), else the same parameters. Codecs with a shared scale agree on it first
 * (one MAX allreduce of a double). With error feedback, x is input + residual and the new
 * residual is what E (chunks j != r) and E2 (the owned chunk) failed to carry.
 *
 * Traffic per rank ~ 2 (P-1)/P * n * 4 / ratio bytes, like a ring allreduce.
 * Flags (NaN/Inf, local errors) seen in phase 1 are forwarded in the owner's phase-2 blob,
 * so after phase 2 every rank knows and returns before touching `out`.
 * `in` may equal `out` (MPI_IN_PLACE): `out` is written only after the last read of `in`.
 */
#include <algorithm>
#include <cstring>

#include "coll.h"

namespace compmpi {

Status coll_allreduce_twophase(CollCtx &c, const float *in, float *out, size_t n) {
    const int P = c.size, r = c.rank;
    size_t lo_r, len_r, lo0, base;
    chunk_range(n, P, r, &lo_r, &len_r);
    chunk_range(n, P, 0, &lo0, &base);

    const float *src = coll_ef_input(c, in, n);
    if (!src) return Status::no_memory;
    CMPI_CHECK(coll_shared_scale(c, src, n));
    CodecParams p2 = c.params;
    p2.nranks = P;
    if (c.codec->reduced_params && c.codec->reduced_params(c.params, &p2) != Status::ok) p2 = c.params;

    const size_t S = (std::max(blob_max_bytes(*c.codec, base, c.params), blob_max_bytes(*c.codec, base, p2)) + 63) / 64 * 64;
    uint8_t *send = c.st->ws_send.get(S * P);
    uint8_t *recv = c.st->ws_recv.get(S * P);
    float *acc = c.be->scratch(c.be_ctx, 0, base);
    if (!send || !recv || !acc) return Status::no_memory;

    /* phase 1: encode every chunk but our own, exchange */
    {
        ScopedTimer t(c.stats->ns_encode);
        for (int j = 0; j < P; ++j) {
            if (j == r) continue;
            size_t lo, len;
            chunk_range(n, P, j, &lo, &len);
            CodecParams p = c.params;
            p.stream = rng_stream(r, c.st->calls, 1, j);
            coll_encode(c, p, src + lo, len, send + S * j, S);
            if (c.ef_new) coll_ef_update(c, send + S * j, S, src + lo, len, c.ef_new + lo);
        }
    }
    CMPI_CHECK(mpi_alltoall_bytes(c, send, recv, S));
    c.stats->bytes_wire += S * static_cast<size_t>(P - 1);

    /* accumulate our chunk in rank order */
    uint8_t flags = 0;
    {
        ScopedTimer t(c.stats->ns_decode);
        bool first = true;
        for (int j = 0; j < P && !flags; ++j) {
            if (j == r) {
                if (first) c.be->copy(c.be_ctx, acc, src + lo_r, len_r);
                else c.be->add(c.be_ctx, acc, src + lo_r, len_r);
            } else {
                Status s = c.be->decode(c.be_ctx, recv + S * j, S, len_r, acc, !first, c.params);
                if (s == Status::nonfinite) flags |= BLOB_NONFINITE;
                else if (s != Status::ok) flags |= BLOB_ABANDON;
            }
            first = false;
        }
    }

    /* phase 2: encode our reduced chunk into our slot, allgather the slots */
    uint8_t *mine = recv + S * r; /* slot r of recv was not used by phase 1 */
    {
        ScopedTimer t(c.stats->ns_encode);
        CodecParams p = p2;
        p.stream = rng_stream(r, c.st->calls, 2, r);
        if (flags) coll_write_flag(c, p, len_r, flags, mine);
        else coll_encode(c, p, acc, len_r, mine, S);
        if (c.ef_new && !flags) coll_ef_update(c, mine, S, acc, len_r, c.ef_new + lo_r);
    }
    CMPI_CHECK(mpi_allgather_inplace_bytes(c, recv, S));
    c.stats->bytes_wire += S * static_cast<size_t>(P - 1);
    c.stats->bytes_uncompressed_wire += 2 * (n - len_r) * sizeof(float);

    /* every rank sees the same slots: decide before writing `out` */
    flags = 0;
    for (int j = 0; j < P; ++j) {
        size_t lo, len;
        chunk_range(n, P, j, &lo, &len);
        BlobInfo info;
        flags |= blob_peek(recv + S * j, S, len, &info) == Status::ok ? info.flags : BLOB_ABANDON;
    }
    CMPI_CHECK(coll_flag_status(flags));
    ScopedTimer t(c.stats->ns_decode);
    for (int j = 0; j < P; ++j) {
        size_t lo, len;
        chunk_range(n, P, j, &lo, &len);
        CMPI_CHECK(c.be->decode(c.be_ctx, recv + S * j, S, len, out + lo, false, c.params));
    }
    return Status::ok;
}

}  // namespace compmpi

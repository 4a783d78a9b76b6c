/* Compressed allgather: each rank encodes its own block once; the blobs are gathered with
 * a fixed stride S (the codec's worst case for n elements); every rank decodes every block,
 * its own included, so all ranks hold the same bits.
 *
 *   rank j: slot[j] = E(in_j) ──PMPI_Allgather(in place, S bytes)──► out[j] = D(slot[j]) for all j
 *
 * With MPI_IN_PLACE `in` is out + rank*n; `out` is written only after every flag was read.
 *
 * The own block (setting allgather_own): decoded (default) keeps the replica invariant,
 * out[rank] = D(E(in)) like every other rank's copy of it; exact gives the caller its own
 * input back unquantised (never overwritten in place). Exact still decodes its own block
 * first, so the policy observes the agreed result (awp decisions stay identical on every
 * rank), and the caller restores the exact block afterwards (CollCtx::restore_*). */
#include "coll.h"

namespace compmpi {

template <class T>
Status coll_allgather_encoded(CollCtx &c, const T *in, T *out, size_t n) {
    const int P = c.size;
    const size_t S = coll_blob_stride(*c.codec, n, c.params);
    uint8_t *slots = c.ws->recv.get(S * P);
    if (!slots) return Status::no_memory;
    /* allgather_own=exact: what the caller gets back in its own block */
    const bool exact = c.settings->allgather_own == enum_value(SettingId::allgather_own, "exact") && n;
    T *own = out + n * static_cast<size_t>(c.rank);
    const T *keep = in;
    if (exact && in == own) { /* MPI_IN_PLACE: keep the input before its decoded copy lands there */
        T *k = be_scratch<T>(c, 3, n);
        if (!k) return Status::no_memory;
        be_copy(c, k, in, n);
        keep = k;
    }
    CMPI_CHECK(coll_shared_scale(c, in, n));
    {
        ScopedTimer t(c.stats->ns_encode);
        CodecParams p = c.params;
        p.stream = rng_stream(c.rank, c.st->calls, 1, c.rank);
        coll_encode(c, p, in, n, slots + S * c.rank, S);
    }
    CMPI_CHECK(mpi_allgather_inplace_bytes(c, slots, S));
    c.stats->bytes_wire += S * static_cast<size_t>(P - 1);
    c.stats->bytes_uncompressed_wire += n * sizeof(T) * static_cast<size_t>(P - 1);
    uint8_t flags = 0;
    for (int j = 0; j < P; ++j) {
        BlobInfo info;
        flags |= blob_peek(slots + S * j, S, n, &info) == Status::ok ? info.flags : BLOB_ABANDON;
    }
    CMPI_CHECK(coll_flag_status(flags));
    if (exact) c.restore_dst = own, c.restore_src = keep, c.restore_n = n;
    ScopedTimer t(c.stats->ns_decode);
    for (int j = 0; j < P; ++j)
        CMPI_CHECK(be_decode(c, slots + S * j, S, n, out + n * j, false, c.params));
    return Status::ok;
}

template Status coll_allgather_encoded(CollCtx &, const float *, float *, size_t);
template Status coll_allgather_encoded(CollCtx &, const double *, double *, size_t);

}  // namespace compmpi

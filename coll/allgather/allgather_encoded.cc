// SPDX-License-Identifier: BSD-3-Clause
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
 * rank), and the caller restores the exact block afterwards (CollCtx::restore_*).
 *
 * A codec whose payload size depends on the data (codec_variable_payload: zfp's fixed
 * accuracy, whose worst case exceeds the raw floats), and any codec under the entropy stage
 * (setting entropy, kernels/entropy.h), gathers the sizes first and uses the
 * largest blob, rounded up to 64 bytes, as the stride:
 *   |blob_j| ──PMPI_Allgather(8 B)──► all;  slot[j] ──PMPI_Allgather(in place, stride)──► all */
#include <algorithm>
#include <cstring>
#include <vector>

#include "coll.h"
#include "base/mpi_next.h"

namespace compmpi {

template <class T>
Status coll_allgather_encoded(CollCtx &c, const T *in, T *out, size_t n) {
    const int P = c.size;
    /* the entropy stage (setting entropy) makes every blob's length data-dependent */
    const bool var = codec_variable_payload(*c.codec, c.params) || coll_entropy_on(c);
    size_t S = coll_blob_stride(*c.codec, n, c.params);
    /* variable size: encode aside, the slots come once the stride is known */
    uint8_t *slots = var ? c.ws->aux_blob.get(S) : c.ws->recv.get(S * P);
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
        size_t len = kBlobHeaderBytes;
        if (coll_encode(c, p, in, n, var ? slots : slots + S * c.rank, S, var ? &len : nullptr) == 0 && var)
            coll_entropy(c, *c.codec, p, slots, &len);
        if (var) {
            std::vector<uint64_t> lens(static_cast<size_t>(P));
            const uint64_t mine = len;
            {
                ScopedTimer tc(c.stats->ns_comm);
                const int rc = mpi_next::Allgather(&mine, 1, MPI_UINT64_T, lens.data(), 1, MPI_UINT64_T, c.comm);
                if (rc != MPI_SUCCESS) {
                    c.mpi_err = rc;
                    return Status::mpi_error;
                }
            }
            c.stats->bytes_wire += sizeof(uint64_t) * static_cast<size_t>(P - 1);
            const uint64_t longest = *std::max_element(lens.begin(), lens.end());
            if (longest < kBlobHeaderBytes || longest > S) return Status::corrupt; /* alike on every rank */
            const size_t stride = (static_cast<size_t>(longest) + 63) / 64 * 64;
            uint8_t *all = c.ws->recv.get(stride * P);
            if (!all) return Status::no_memory;
            std::memcpy(all + stride * c.rank, slots, len);
            std::memset(all + stride * c.rank + len, 0, stride - len);
            slots = all;
            S = stride;
        }
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

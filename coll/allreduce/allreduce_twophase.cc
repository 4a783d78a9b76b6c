// SPDX-License-Identifier: BSD-3-Clause
/* Compressed allreduce, two phases (reduce-scatter then allgather), for dense codecs,
 * pipelined over segments; and the allgather path for codecs quantised once per contribution.
 *
 * Each segment of the buffer (chunk_bytes long) is split into P chunks; rank j owns chunk j.
 * E() = encode, D() = decode.
 *
 *   phase 1 (alltoall of blobs)          rank r receives E(x_j[r]) from every j
 *       r0: E(x0[0]) E(x0[1]) ...  ──►   acc_r = sum over j = 0..P-1 in rank order of
 *       r1: E(x1[0]) E(x1[1]) ...  ──►           D(E(x_j[r]))                      (fp32)
 *   phase 2 (allgather of blobs)         every rank receives E2(acc_j) for every j and
 *       r: E2(acc_r)              ──►    writes out[j] = D(E2(acc_j)), its own chunk too,
 *                                        so the result is the same bits on every rank.
 *
 * The owner's own chunk x_r[r] is encoded and decoded like the others for stochastic codecs
 * (terngrad, qsgd: every worker's contribution is quantised, so E[result] = the sum of the
 * clipped / exact contributions) and for codecs quantised once per contribution (q8); other
 * codecs (bitpack, fp16, bf16, rangefloat) add it exact.
 *
 * Pipeline (non-blocking PMPI collectives, two blob buffer sets used alternately):
 *
 *   E1(0) ─ I1(0) ─ E1(1) ─ W1(0) D1(0) E2(0) I2(0) ─ I1(1) ─ W2(0) D2(0) ─ E1(2) ─ W1(1) ...
 *                   └ encoding segment 1 overlaps the exchange of segment 0 ┘
 *
 * E2 uses the codec's reduced_params when it has them (terngrad: the 2P+1 levels of a sum of
 * ternaries exactly; qsgd: 8 bits), fp32 verbatim (codec `none`) for a codec quantised once
 * per contribution, else the same parameters. Codecs with a shared scale agree on it first,
 * and on nothing else, once per call on the whole buffer (one MAX allreduce of a double):
 * terngrad's scaler (eq. 4) and its clip threshold (c sigma of each rank's whole buffer)
 * are the same for every segment and chunk. With error feedback, x is input + residual and
 * the new residual is what E and E2 (the owned chunk) failed to carry.
 *
 * Allgather path (q8 up to 5 ranks, qsgd at 4 bits 2: no more bytes than two phases): every rank
 * encodes its whole buffer once, the P blobs are allgathered, and every rank sums
 * D(b_0) + ... + D(b_{P-1}) in rank order -- the papers' "quantise, send, decode, sum".
 * terngrad at 2 ranks takes it too (coll_gather_may_sum: fewer bytes, the same levels).
 * On host buffers it is pipelined over chunk_bytes segments the codec can encode apart
 * without changing its rule (q8: the whole contribution's scale, computed once and passed to
 * every segment, so the bytes are those of one encode; qsgd, terngrad: segments of whole
 * buckets, each segment its own random stream -- still one unbiased quantisation per element;
 * terngrad's scaler and clip threshold are agreed once for the whole buffer):
 *
 *   E(0) I(0) ─ E(1) I(1) ─ W(0) D(0) ─ E(2) I(2) ─ W(1) D(1) ...
 *              └ encoding k+1 and decoding k overlap the exchanges in flight ┘
 *
 * Traffic per rank ~ 2 (P-1)/P * n * 4 / ratio bytes, like a ring allreduce.
 * Flags (NaN/Inf, local errors) of a segment travel in the owners' phase-2 blobs, so after
 * phase 2 every rank knows; that segment then runs the exact PMPI_Allreduce instead. `out`
 * is written only segment by segment, after the last read of that segment's input, so
 * `in` may equal `out` (MPI_IN_PLACE).
 */
#include <algorithm>
#include <climits>
#include <cstring>
#include <numeric>
#include <vector>

#include "coll.h"
#include "base/fault.h"
#include "base/mpi_next.h"

namespace compmpi {

namespace {

struct Segment {
    size_t lo = 0, n = 0;   /* elements [lo, lo+n) of the buffer */
    size_t base = 0;        /* chunk length (the last chunk may be shorter) */
    uint8_t *send = nullptr, *recv = nullptr; /* phase 1, stride S */
    uint8_t *slots = nullptr;                 /* phase 2, stride S2 */
    size_t S = 0, S2 = 0; /* this segment's strides: the last, shorter segment sends fewer bytes */
    /* the strides the exchanges use: S, S2; under the entropy stage the longest blob of any
     * rank (agreed), the blobs moved together first (coll_agree_stride, coll_compact) */
    size_t X1 = 0, X2 = 0, max1 = 0;
    MPI_Request req = MPI_REQUEST_NULL;
    uint8_t flags = 0;
};

Status start(CollCtx &c, MPI_Request *req, int rc) {
    (void)req;
    if (rc == MPI_SUCCESS) return Status::ok;
    c.mpi_err = rc;
    return Status::mpi_error;
}

Status wait(CollCtx &c, MPI_Request *req) { return coll_wait(c, req); }
void poke(MPI_Request *req) { coll_poke(req); }

/* Codecs whose paper quantises each contribution exactly once and sums the decoded
 * contributions exactly: Dettmers' 8-bit approximation (each GPU's gradient quantised once,
 * sent, decoded, summed) and QSGD (Alg. 1: every processor broadcasts its quantised gradient,
 * every processor sums the decoded ones). Two phases re-encode a partial sum in phase 2,
 * a second quantisation; these codecs take the allgather path instead whenever it moves no
 * more bytes (docs/codecs/q8.md "In MPI_Allreduce", docs/codecs/qsgd.md). (A codec-table
 * flag would be the place for this; kernels/q8 belongs to another branch.) The rule is
 * coll_quantise_once (coll/coll_util.cc), shared with the reduce-scatter. */
bool quantise_once(const CodecOps &codec) { return coll_quantise_once(codec); }

/* Allgather of whole-buffer blobs: every rank encodes its whole contribution once (one
 * scale for the buffer), the ranks allgather the P blobs (dense codec: fixed stride, flags in
 * the headers) and every rank sums D(b_0) + D(b_1) + ... + D(b_{P-1}) in rank order, so the
 * result has the same bits everywhere. `out` is written only after the exchange. */
/* Elements per segment of the pipelined allgather path, or 0 for one segment: a multiple of
 * 64 and of the codec's bucket (qsgd: norms per bucket), chunk_bytes long. */
size_t gather_segment(const CollCtx &c, size_t n) {
    const uint64_t bytes = c.settings->chunk_bytes;
    if (!bytes) return 0; /* not the backend: host and device ranks must run the same exchanges */
    size_t align = 64;
    if (c.codec->id == CodecId::qsgd || c.codec->id == CodecId::terngrad) { /* param: elements per bucket */
        if (!c.params.param && c.codec->id == CodecId::qsgd) return 0; /* one norm for the whole buffer */
        if (c.params.param) align = std::lcm<size_t>(align, c.params.param); /* terngrad 0: the agreed scaler */
    }
    const size_t seg = bytes / elem_bytes(c.params.elem) / align * align;
    return seg && seg < n ? seg : 0;
}

template <class T>
Status allreduce_gather_pipelined(CollCtx &c, const T *in, const T *src, T *out, size_t n, size_t seg);

/* CodecOps::whole_scale of backend data. It is a CPU function: device data is either encoded
 * whole on the device (q8: the payload starts with exactly that scale, the kernels giving
 * the CPU's bytes; n bytes come down instead of 4 n) or read through a host copy. */
Status codec_whole_scale(const CodecOps &codec, const float *in, size_t n, const CodecParams &p, float *s) {
    return codec.whole_scale(in, n, p, s);
}
Status codec_whole_scale(const CodecOps &codec, const double *in, size_t n, const CodecParams &p, float *s) {
    return codec.whole_scale64 ? codec.whole_scale64(in, n, p, s) : Status::unsupported;
}

template <class T>
Status whole_scale(CollCtx &c, const T *src, size_t n, const CodecParams &p, float *s) {
    if (c.be == &backend_cpu()) return codec_whole_scale(*c.codec, src, n, p, s);
    if (c.codec->id == CodecId::q8) {
        const size_t cap = blob_max_bytes(*c.codec, n, p);
        uint8_t *blob = c.ws->aux_blob.get(cap);
        if (!blob) return Status::no_memory;
        size_t len = 0;
        const uint8_t f = be_encode(c, *c.codec, p, src, n, blob, cap, &len);
        if (f & BLOB_NONFINITE) return Status::nonfinite;
        if (f || len < kBlobHeaderBytes + sizeof(float)) return Status::corrupt;
        std::memcpy(s, blob + kBlobHeaderBytes, sizeof(float));
        return Status::ok;
    }
    HostStage hs;
    CMPI_CHECK(coll_stage_down(c, src, n, hs));
    return codec_whole_scale(*c.codec, hs.data<T>(), n, p, s);
}

template <class T>
Status allreduce_gather(CollCtx &c, const T *in, T *out, size_t n) {
    const int P = c.size, r = c.rank;
    const T *src = coll_ef_input(c, in, n);
    if (!src) return Status::no_memory;
    CMPI_CHECK(coll_shared_scale(c, src, n));
    if (const size_t seg = gather_segment(c, n)) return allreduce_gather_pipelined(c, in, src, out, n, seg);
    const size_t S0 = coll_blob_stride(*c.codec, n, c.params);
    uint8_t *all = c.ws->recv.get(S0 * static_cast<size_t>(P));
    if (!all) return Status::no_memory;
    size_t S = S0; /* the exchange stride: S0, or under the entropy stage the longest blob */
    {
        ScopedTimer t(c.stats->ns_encode);
        CodecParams p = c.params;
        p.stream = rng_stream(r, c.st->calls, 1, 0);
        size_t len = kBlobHeaderBytes;
        const uint8_t f = coll_encode(c, p, src, n, all + S0 * r, S0, &len);
        if (c.ef_new) coll_ef_update(c, all + S0 * r, S0, src, n, ef_new_t<T>(c));
        if (!f) coll_entropy(c, *c.codec, p, all + S0 * r, &len);
        if (coll_entropy_on(c)) {
            CMPI_CHECK(coll_agree_stride(c, len, S0, &S));
            if (S != S0) std::memmove(all + S * r, all + S0 * r, S);
        }
    }
    c.stats->bytes_wire += S * static_cast<size_t>(P - 1);
    c.stats->bytes_uncompressed_wire += 2 * n * sizeof(T) * static_cast<size_t>(P - 1) / static_cast<size_t>(P);
    /* P = 2: the non-blocking allgather (on both ranks: the choice depends on P and S only,
     * the same on every rank, as MPI requires of matching collectives), and while the blobs
     * travel each rank decodes its own blob into `out` -- D(b_r) + D(b_other) has the bits
     * of D(b_0) + D(b_1), IEEE addition being commutative. Only when `out` is not the input:
     * a flag from the other rank sends the call to the exact path, which needs the input. */
    bool own_done = false;
    if (P == 2 && S <= INT_MAX) {
        MPI_Request req = MPI_REQUEST_NULL;
        CMPI_CHECK(start(c, &req, COMPMPI_FAULT_MPI(iallgather, mpi_next::Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all,
                                                                             static_cast<int>(S), MPI_BYTE, c.comm, &req))));
        poke(&req);
        BlobInfo own;
        if (static_cast<const void *>(out) != static_cast<const void *>(in) &&
            blob_peek(all + S * r, S, n, &own) == Status::ok && !own.flags) {
            ScopedTimer t(c.stats->ns_decode);
            own_done = be_decode(c, all + S * r, S, n, out, false, c.params) == Status::ok;
        }
        CMPI_CHECK(wait(c, &req));
    } else {
        CMPI_CHECK(mpi_allgather_inplace_bytes(c, all, S));
    }
    uint8_t flags = 0;
    for (int j = 0; j < P; ++j) {
        BlobInfo info;
        flags |= blob_peek(all + S * j, S, n, &info) == Status::ok ? info.flags : BLOB_ABANDON;
    }
    CMPI_CHECK(coll_flag_status(flags));
    ScopedTimer t(c.stats->ns_decode);
    for (int j = 0; j < P; ++j) {
        if (own_done && j == r) continue;
        const bool add = own_done || j > 0;
        CMPI_CHECK(be_decode(c, all + S * j, S, n, out, add, c.params));
    }
    return Status::ok;
}

/* The pipelined allgather path (see the top of this file). Segment k's blobs go to buffer set
 * k % 2; segment k + 1 is encoded and its exchange started before segment k is waited for
 * and decoded, so both overlap the exchanges in flight. A flagged segment (NaN/Inf, a local
 * error on any rank) runs the exact PMPI_Allreduce on its elements; its input is still intact
 * (`out` is written segment by segment, after that segment's last read of `in`). */
template <class T>
Status allreduce_gather_pipelined(CollCtx &c, const T *in, const T *src, T *out, size_t n, size_t seg) {
    const int P = c.size, r = c.rank;
    const size_t nseg = (n + seg - 1) / seg;
    CodecParams p = c.params;
    uint8_t whole_flag = 0; /* the whole contribution's scale could not be taken: every segment flagged */
    if (sizeof(T) == 8 ? c.codec->whole_scale64 != nullptr : c.codec->whole_scale != nullptr) {
        float s = 0;
        ScopedTimer t(c.stats->ns_encode);
        const Status st = whole_scale(c, src, n, p, &s);
        if (st == Status::nonfinite) whole_flag = BLOB_NONFINITE;
        else if (st != Status::ok) whole_flag = BLOB_ABANDON;
        else p.fixed_scale = s;
    }
    const size_t S = coll_blob_stride(*c.codec, seg, c.params);
    if (S > INT_MAX) return Status::unsupported;
    uint8_t *sets = c.ws->recv.get(2 * S * static_cast<size_t>(P));
    if (!sets) return Status::no_memory;
    MPI_Request req[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    auto lo_of = [&](size_t k) { return k * seg; };
    auto len_of = [&](size_t k) { return std::min(seg, n - k * seg); };
    auto set_of = [&](size_t k) { return sets + (k % 2) * S * static_cast<size_t>(P); };
    /* each segment's own stride (the last one is shorter: a full stride would send its unused
     * bytes); from the segment's length only, so the same on every rank */
    auto stride_of = [&](size_t k) {
        return k + 1 < nseg ? S : std::min(S, coll_blob_stride(*c.codec, len_of(k), c.params));
    };
    size_t xs[2] = {0, 0}; /* the exchange stride of each buffer set's segment */
    auto encode_and_start = [&](size_t k, MPI_Request *progress) -> Status {
        size_t Sk = stride_of(k);
        uint8_t *mine = set_of(k) + Sk * static_cast<size_t>(r);
        {
            ScopedTimer t(c.stats->ns_encode);
            CodecParams q = p;
            q.stream = rng_stream(r, c.st->calls, 1, static_cast<int>(k));
            size_t len = kBlobHeaderBytes;
            uint8_t f = whole_flag;
            if (whole_flag) coll_write_flag(c, q, len_of(k), whole_flag, mine);
            else f = coll_encode(c, q, src + lo_of(k), len_of(k), mine, Sk, &len);
            if (c.ef_new && !whole_flag)
                coll_ef_update(c, mine, Sk, src + lo_of(k), len_of(k), ef_new_t<T>(c) + lo_of(k));
            if (!f) coll_entropy(c, *c.codec, q, mine, &len);
            poke(progress);
            if (coll_entropy_on(c)) { /* the longest blob of any rank is this segment's stride */
                size_t X = Sk;
                CMPI_CHECK(coll_agree_stride(c, len, Sk, &X));
                if (X != Sk) std::memmove(set_of(k) + X * static_cast<size_t>(r), mine, X);
                Sk = X;
            }
        }
        xs[k % 2] = Sk;
        c.stats->bytes_wire += Sk * static_cast<size_t>(P - 1);
        c.stats->bytes_uncompressed_wire +=
            2 * len_of(k) * sizeof(T) * static_cast<size_t>(P - 1) / static_cast<size_t>(P);
        return start(c, &req[k % 2],
                     COMPMPI_FAULT_MPI(iallgather, mpi_next::Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, set_of(k),
                                                                   static_cast<int>(Sk), MPI_BYTE, c.comm, &req[k % 2])));
    };
    uint8_t all_flags = 0;
    int fell_back = 0;
    std::vector<const uint8_t *> pay(static_cast<size_t>(P));
    std::vector<size_t> plen(static_cast<size_t>(P));
    std::vector<std::vector<uint8_t>> raw(static_cast<size_t>(P)); /* blobs the entropy stage coded, undone */
    CMPI_CHECK(encode_and_start(0, nullptr));
    for (size_t k = 0; k < nseg; ++k) {
        if (k + 1 < nseg) CMPI_CHECK(encode_and_start(k + 1, &req[k % 2]));
        CMPI_CHECK(wait(c, &req[k % 2]));
        const uint8_t *blobs = set_of(k);
        const size_t Sk = xs[k % 2];
        uint8_t flags = 0;
        for (int j = 0; j < P; ++j) {
            BlobInfo info;
            const uint8_t *b = blobs + Sk * j;
            size_t avail = Sk;
            /* decode_sum reads payloads: a blob the entropy stage coded is undone first */
            Status ps = blob_peek(b, avail, len_of(k), &info);
            if (ps == Status::ok && blob_entropy_coded(b, avail)) {
                ps = blob_entropy_decode(b, avail, len_of(k), raw[j], &b, &avail);
                if (ps == Status::ok) ps = blob_peek(b, avail, len_of(k), &info);
            }
            flags |= ps == Status::ok ? info.flags : BLOB_ABANDON;
            pay[j] = b + kBlobHeaderBytes, plen[j] = info.payload;
        }
        if (flags) { /* every rank saw the same flags: the exact collective for this segment */
            ScopedTimer t(c.stats->ns_comm);
            const void *sb = in == out ? MPI_IN_PLACE : static_cast<const void *>(in + lo_of(k));
            const int len = static_cast<int>(len_of(k));
            int rc = coll_mpi_elems<T>(c, sb, out + lo_of(k), len_of(k), [&](const void *s_, T *o_) {
                return COMPMPI_FAULT_MPI(allreduce, mpi_next::Allreduce(s_, o_, len, mpi_elem<T>(), MPI_SUM, c.comm));
            });
            if (rc != MPI_SUCCESS) return c.mpi_err = rc, Status::mpi_error;
            if (c.ef_new) be_copy(c, ef_new_t<T>(c) + lo_of(k), ef_res_t<T>(c) + lo_of(k), len_of(k));
            all_flags |= flags;
            ++fell_back;
            continue;
        }
        ScopedTimer t(c.stats->ns_decode);
        if (codec_has_decode_sum(*c.codec, p.elem) && c.be == &backend_cpu()) /* one pass over the output, the same bits */
            CMPI_CHECK(codec_decode_sum(*c.codec, pay.data(), plen.data(), P, len_of(k), p, out + lo_of(k)));
        else
            for (int j = 0; j < P; ++j) /* rank order: the same sum on every rank */
                CMPI_CHECK(be_decode(c, blobs + Sk * j, Sk, len_of(k), out + lo_of(k), j > 0, p));
        if (k + 1 < nseg) poke(&req[(k + 1) % 2]);
    }
    c.segments_fallback = fell_back;
    if (all_flags & BLOB_NONFINITE) c.fallback_reason = BLOB_NONFINITE;
    else if (all_flags) c.fallback_reason = BLOB_ABANDON;
    return Status::ok;
}

}  // namespace

template <class T>
Status coll_allreduce_twophase(CollCtx &c, const T *in, T *out, size_t n) {
    const int P = c.size, r = c.rank;
    c.params.nranks = P;
    /* phase 2: the codec's reduced_params (terngrad: the 2P+1 levels exactly; qsgd: 8 bits),
     * else fp32 verbatim for a codec quantised once per contribution (q8), else the same
     * parameters */
    const CodecOps *codec2 = c.codec;
    CodecParams p2 = c.params;
    const bool reduced = c.codec->reduced_params && c.codec->reduced_params(c.params, &p2) == Status::ok;
    if (!reduced) p2 = c.params;
    if (!reduced && quantise_once(*c.codec)) {
        codec2 = codec_by_id(static_cast<int>(CodecId::none));
        p2 = coll_exact_params(c.params);
    }
    if (coll_gather_may_sum(*c.codec)) {
        /* the allgather path when it moves no more bytes per rank than two phases:
         * (P-1) |E(n)| <= (P-1) (|E(n/P)| + |E2(n/P)|) -- the same numbers on every rank.
         * q8 (E2 = fp32): P <= 5; qsgd (E2 = 8 bits): P <= (bits + 8) / bits, 2 at 4 bits;
         * terngrad (E2 = the 2P+1 levels): P = 2 */
        const size_t q = (n + static_cast<size_t>(P) - 1) / static_cast<size_t>(P);
        const size_t gather = blob_max_bytes(*c.codec, n, c.params);
        const size_t two = blob_max_bytes(*c.codec, q, c.params) + blob_max_bytes(*codec2, q, p2);
        if (gather <= two) return allreduce_gather(c, in, out, n);
    }
    const T *src = coll_ef_input(c, in, n);
    if (!src) return Status::no_memory;
    CMPI_CHECK(coll_shared_scale(c, src, n)); /* once per buffer, not per segment or chunk */
    /* phase 2's parameters again, now with the agreed scaler and clip threshold (p2 above
     * was derived before they were known): terngrad's levels are exact on the shared grid */
    if (reduced) CMPI_CHECK(c.codec->reduced_params(c.params, &p2));
    /* every contribution is quantised, the owner's chunk too, for stochastic codecs (terngrad,
     * qsgd: each worker's gradient is quantised, paper eq. 1-4 / Alg. 1) and for codecs
     * quantised once per contribution; other codecs keep the owner's chunk exact */
    const bool own_encoded = coll_own_encoded(*c.codec); /* shared with the reduce-scatter */

    /* segments: chunk_bytes of data each (0 = one), at least 16 floats per rank */
    const uint64_t seg_bytes = c.settings->chunk_bytes;
    size_t seg = seg_bytes ? std::max<size_t>(seg_bytes / sizeof(T), 16 * static_cast<size_t>(P)) : n;
    if (seg >= n) seg = n;
    const size_t nseg = n ? (n + seg - 1) / seg : 0;

    size_t lo0, base_max;
    chunk_range(seg, P, 0, &lo0, &base_max);
    /* each phase its own stride: phase 2 may be wider (terngrad's levels) */
    const size_t S = coll_blob_stride(*c.codec, base_max, c.params);
    const size_t S2 = coll_blob_stride(*codec2, base_max, p2);
    if (S > INT_MAX || S2 > INT_MAX) return Status::unsupported; /* chunk_bytes too large for one exchange */
    uint8_t *sendbuf = c.ws->send.get(2 * S * P);
    uint8_t *recvbuf = c.ws->recv.get(2 * (S + S2) * P);
    T *acc = be_scratch<T>(c, 0, base_max);
    if (!sendbuf || !recvbuf || !acc) return Status::no_memory;
    /* phase-2 error of the owner's chunk, for error feedback when that chunk was encoded */
    T *d2 = nullptr;
    if (c.ef_new && own_encoded && !(codec2->flags & CODEC_LOSSLESS)) {
        d2 = be_scratch<T>(c, 2, base_max);
        if (!d2) return Status::no_memory;
    }

    std::vector<Segment> sg(nseg);
    for (size_t k = 0; k < nseg; ++k) {
        sg[k].lo = k * seg;
        sg[k].n = std::min(seg, n - sg[k].lo);
        sg[k].send = sendbuf + (k % 2) * S * P;
        sg[k].recv = recvbuf + (k % 2) * (S + S2) * P;
        sg[k].slots = sg[k].recv + S * P;
        /* from the segment's length only: the same on every rank */
        size_t lo_k, max_k;
        chunk_range(sg[k].n, P, 0, &lo_k, &max_k);
        sg[k].S = k + 1 < nseg ? S : std::min(S, coll_blob_stride(*c.codec, max_k, c.params));
        sg[k].S2 = k + 1 < nseg ? S2 : std::min(S2, coll_blob_stride(*codec2, max_k, p2));
    }

    auto encode1 = [&](Segment &g, int k, MPI_Request *progress) {
        ScopedTimer t(c.stats->ns_encode);
        g.X1 = g.S, g.X2 = g.S2, g.max1 = kBlobHeaderBytes;
        for (int j = 0; j < P; ++j) {
            if (j == r && !own_encoded) continue;
            size_t lo, len;
            chunk_range(g.n, P, j, &lo, &len);
            CodecParams p = c.params;
            p.stream = rng_stream(r, c.st->calls, 1, j + P * k);
            size_t bl = kBlobHeaderBytes;
            const uint8_t f = coll_encode(c, p, src + g.lo + lo, len, g.send + g.S * j, g.S, &bl);
            if (c.ef_new) coll_ef_update(c, g.send + g.S * j, g.S, src + g.lo + lo, len, ef_new_t<T>(c) + g.lo + lo);
            if (!f) coll_entropy(c, *c.codec, p, g.send + g.S * j, &bl);
            g.max1 = std::max(g.max1, bl);
            poke(progress);
        }
    };
    /* one segment: nothing to overlap, so the blocking collectives (MPICH's tuned algorithms) */
    const bool blocking = nseg == 1;
    auto start1 = [&](Segment &g) {
        if (coll_entropy_on(c)) { /* the longest blob any rank sends is the stride */
            CMPI_CHECK(coll_agree_stride(c, g.max1, g.S, &g.X1));
            coll_compact(g.send, P, g.S, g.X1);
        }
        c.stats->bytes_wire += g.X1 * static_cast<size_t>(P - 1);
        if (blocking) return mpi_alltoall_bytes(c, g.send, g.recv, g.X1);
        const int Si = static_cast<int>(g.X1);
        return start(c, &g.req,
                     COMPMPI_FAULT_MPI(ialltoall, mpi_next::Ialltoall(g.send, Si, MPI_BYTE, g.recv, Si, MPI_BYTE, c.comm, &g.req)));
    };
    /* after phase 1 arrived: accumulate, encode the owned chunk, start phase 2 */
    auto reduce_and_start2 = [&](Segment &g, int k) {
        size_t lo_r, len_r;
        chunk_range(g.n, P, r, &lo_r, &len_r);
        uint8_t flags = 0;
        {
            ScopedTimer t(c.stats->ns_decode);
            flags = coll_accumulate(c, own_encoded, src + g.lo + lo_r, len_r, acc, g.X1,
                                    [&](int j) -> const uint8_t * { return j == r ? g.send + g.X1 * r : g.recv + g.X1 * j; });
        }
        uint8_t *mine = g.slots + g.S2 * r;
        size_t len2 = kBlobHeaderBytes;
        uint8_t f2 = flags;
        {
            ScopedTimer t(c.stats->ns_encode);
            CodecParams p = p2;
            p.stream = rng_stream(r, c.st->calls, 2, r + P * k);
            if (flags) coll_write_flag(c, p, len_r, flags, mine);
            else f2 = be_encode(c, *codec2, p, acc, len_r, mine, g.S2, &len2);
            /* the residual also owes what phase 2 failed to carry of the sum (terngrad on the
             * shared grid, q8's fp32 phase 2: nothing): all of the owner's residual when its
             * chunk entered exact, else added to its phase-1 residual */
            if (c.ef_new && !flags) {
                if (!own_encoded) {
                    coll_ef_update(c, mine, g.S2, acc, len_r, ef_new_t<T>(c) + g.lo + lo_r);
                } else if (d2) {
                    coll_ef_update(c, mine, g.S2, acc, len_r, d2);
                    be_add(c, ef_new_t<T>(c) + g.lo + lo_r, d2, len_r);
                }
            }
            /* the partial sums get the entropy stage too (issue 43: every re-encode) */
            if (!f2) coll_entropy(c, *codec2, p, mine, &len2);
        }
        if (coll_entropy_on(c)) {
            CMPI_CHECK(coll_agree_stride(c, len2, g.S2, &g.X2));
            if (g.X2 != g.S2) std::memmove(g.slots + g.X2 * r, mine, g.X2);
        }
        c.stats->bytes_wire += g.X2 * static_cast<size_t>(P - 1);
        c.stats->bytes_uncompressed_wire += 2 * (g.n - len_r) * sizeof(T);
        if (blocking) return mpi_allgather_inplace_bytes(c, g.slots, g.X2);
        return start(c, &g.req,
                     COMPMPI_FAULT_MPI(iallgather, mpi_next::Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, g.slots,
                                                                   static_cast<int>(g.X2), MPI_BYTE, c.comm, &g.req)));
    };
    /* after phase 2 arrived: every rank sees the same slots; decode or fall back */
    auto finish = [&](Segment &g) -> Status {
        uint8_t flags = 0;
        for (int j = 0; j < P; ++j) {
            size_t lo, len;
            chunk_range(g.n, P, j, &lo, &len);
            BlobInfo info;
            flags |= blob_peek(g.slots + g.X2 * j, g.X2, len, &info) == Status::ok ? info.flags : BLOB_ABANDON;
        }
        g.flags = flags;
        if (flags) {
            /* exact path for this segment (its input is still intact) */
            ScopedTimer t(c.stats->ns_comm);
            const void *sb = in == out ? MPI_IN_PLACE : static_cast<const void *>(in + g.lo);
            const int len = static_cast<int>(g.n);
            int rc = coll_mpi_elems<T>(c, sb, out + g.lo, g.n, [&](const void *s_, T *o_) {
                return COMPMPI_FAULT_MPI(allreduce, mpi_next::Allreduce(s_, o_, len, mpi_elem<T>(), MPI_SUM, c.comm));
            });
            if (rc != MPI_SUCCESS) return c.mpi_err = rc, Status::mpi_error;
            /* the exact path sent `in`, not input + residual: the residual is still owed */
            if (c.ef_new) be_copy(c, ef_new_t<T>(c) + g.lo, ef_res_t<T>(c) + g.lo, g.n);
            return Status::ok;
        }
        ScopedTimer t(c.stats->ns_decode);
        for (int j = 0; j < P; ++j) {
            size_t lo, len;
            chunk_range(g.n, P, j, &lo, &len);
            CMPI_CHECK(be_decode(c, g.slots + g.X2 * j, g.X2, len, out + g.lo + lo, false, c.params));
        }
        return Status::ok;
    };

    if (nseg == 0) return Status::ok;
    encode1(sg[0], 0, nullptr);
    CMPI_CHECK(start1(sg[0]));
    for (size_t k = 0; k < nseg; ++k) {
        Segment &g = sg[k];
        if (k + 1 < nseg) encode1(sg[k + 1], static_cast<int>(k + 1), &g.req); /* overlaps phase 1 of k */
        CMPI_CHECK(wait(c, &g.req));
        CMPI_CHECK(reduce_and_start2(g, static_cast<int>(k)));
        if (k + 1 < nseg) CMPI_CHECK(start1(sg[k + 1]));
        CMPI_CHECK(wait(c, &g.req));
        CMPI_CHECK(finish(g)); /* overlaps phase 1 of k + 1 */
    }
    /* Which segments fell back is what the caller's statistics and error feedback need. */
    uint8_t all = 0;
    for (const Segment &g : sg) all |= g.flags;
    c.segments_fallback = 0;
    for (const Segment &g : sg) c.segments_fallback += g.flags != 0;
    if (all & BLOB_NONFINITE) c.fallback_reason = BLOB_NONFINITE;
    else if (all) c.fallback_reason = BLOB_ABANDON;
    return Status::ok;
}

template Status coll_allreduce_twophase(CollCtx &, const float *, float *, size_t);
template Status coll_allreduce_twophase(CollCtx &, const double *, double *, size_t);

}  // namespace compmpi

// SPDX-License-Identifier: BSD-3-Clause
/* Compressed allreduce for sparse codecs (topk, fft_topk, sparse), sparse-aware.
 *
 * Every rank encodes its whole contribution once: b_j = E(x_j). Then the ranks exchange
 * (|b_j|, nnz_j, flags_j) and all choose the same path from those numbers:
 *
 * A. allgather (small P, or data sparse only in another domain such as fft_topk's spectrum)
 *      ──PMPI_Allgather (stride = largest b_j)──► b_0 ... b_{P-1} on every rank
 *      out = D(b_0) + D(b_1) + ... + D(b_{P-1})           (rank order: same bits everywhere)
 *    or, for a codec with decode_sum (fft_topk, setting fft_sum_domain=spectral), the sum
 *    formed in the codec's own domain: out = F^-1(S(b_0) + ... + S(b_{P-1})), one inverse
 *    transform instead of P. fft_topk's allgather runs in pieces of about chunk_bytes of
 *    input each, and on host data the blocks whose coefficients have arrived are summed and
 *    inverted while later pieces are in flight (its payload is decodable by prefix: header
 *    and bitmap first, then the codes in position order); the same bits as one exchange
 *
 * B. sparse reduce-scatter + allgather (SparCML), for codecs whose decoded data is sparse
 *    in its own domain (CODEC_SPATIAL_SPARSE): s_j = D(b_j) is an exact sparse vector
 *      phase 1: chunk k of s_j, packed exactly by the `sparse` codec (index list, bitmap
 *               or dense, whichever is smallest), goes to rank k (alltoallv)
 *      rank k:  u_k = sum over j in rank order of chunk k of s_j   (exact fp32 sums)
 *      phase 2: u_k packed by `sparse` again -- as the union densifies the packer switches
 *               to bitmap, then to dense -- allgatherv; out = concatenation of the u_k
 *
 *    Bytes received per rank, with s = the size of one b_j and U that of the union:
 *      A: (P-1) s          B: (P-1)/P (s + U)
 *    B wins when the union stays sparse relative to P. U is estimated from the densities
 *    as n (1 - prod_j (1 - d_j)) (independent positions); every rank evaluates the same
 *    numbers, so all choose alike.
 *
 * A flag on any rank (NaN/Inf, local error) is seen by all in the size exchange: nothing is
 * written to `out` and the caller runs the exact collective. With error feedback x_j is
 * input + residual and the new residual is x_j - D(b_j). */
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <new>
#include <vector>

#include "coll.h"
#include "base/fault.h"
#include "fft_topk/fft_topk.h"
#include "base/mpi_next.h"

namespace compmpi {

namespace {

struct Exchange {
    uint64_t len, nnz, flags;
};

Status check_rc(CollCtx &c, int rc) {
    if (rc == MPI_SUCCESS) return Status::ok;
    c.mpi_err = rc;
    return Status::mpi_error;
}

size_t packed_size(size_t n, double nnz) {
    double k = std::min<double>(nnz, static_cast<double>(n));
    return static_cast<size_t>(std::min({8.0 * k, n / 8.0 + 4.0 * k, 4.0 * n})) + 8 + kBlobHeaderBytes;
}

/* The P blobs at all + displs[j] (lens[j] bytes each), every one validated before `out` is
 * written (the same bytes on every rank: the same verdict), summed in rank order. */
template <class T>
Status decode_all(CollCtx &c, const uint8_t *all, const std::vector<size_t> &lens, const std::vector<size_t> &displs,
                  T *out, size_t n) {
    const int P = c.size;
    std::vector<BlobInfo> info(P);
    /* blobs the entropy stage coded are undone first: decode_sum reads the codec's payloads */
    std::vector<std::vector<uint8_t>> raw(static_cast<size_t>(P));
    std::vector<const uint8_t *> blob(static_cast<size_t>(P));
    std::vector<size_t> avail(static_cast<size_t>(P));
    bool same = true; /* every blob from the same codec with the same header parameters */
    for (int j = 0; j < P; ++j) {
        blob[j] = all + displs[j], avail[j] = lens[j];
        if (blob_entropy_coded(blob[j], avail[j]) &&
            blob_entropy_decode(all + displs[j], lens[j], n, raw[j], &blob[j], &avail[j]) != Status::ok)
            return Status::corrupt;
        if (blob_peek(blob[j], avail[j], n, &info[j]) != Status::ok || info[j].flags) return Status::corrupt;
        same = same && info[j].codec == info[0].codec && info[j].bits == info[0].bits &&
               info[j].variant == info[0].variant && info[j].param == info[0].param;
    }
    ScopedTimer t(c.stats->ns_decode);
    /* a codec linear in a domain of its own (fft_topk: the spectrum) sums the P payloads
     * there and leaves that domain once (decode_sum); host data only. Its decision depends
     * on the received bytes and the (rank-agreed) settings: the same on every rank. */
    const CodecOps *dc = codec_by_id(static_cast<int>(info[0].codec));
    const bool spectral = c.settings->fft_sum_domain == enum_value(SettingId::fft_sum_domain, "spectral");
    if (same && dc && codec_has_decode_sum(*dc, info[0].elem) && spectral) {
        std::vector<const uint8_t *> pay(P);
        std::vector<size_t> plen(P);
        for (int j = 0; j < P; ++j) pay[j] = blob[j] + kBlobHeaderBytes, plen[j] = info[j].payload;
        CodecParams p;
        p.bits = info[0].bits;
        p.variant = info[0].variant;
        p.param = info[0].param;
        p.elem = info[0].elem;
        p.simd = c.params.simd;
        p.threads = c.params.threads;
        if (c.be == &backend_cpu()) return codec_decode_sum(*dc, pay.data(), plen.data(), P, n, p, out);
        /* device data: the same sum on the host (a CPU function), then copied up, so a GPU
         * rank holds the bits of a CPU rank */
        std::vector<T> sum;
        try {
            sum.resize(n);
        } catch (const std::bad_alloc &) {
            return Status::no_memory;
        }
        CMPI_CHECK(codec_decode_sum(*dc, pay.data(), plen.data(), P, n, p, sum.data()));
        return coll_upload(c, sum.data(), n, out);
    }
    for (int j = 0; j < P; ++j) CMPI_CHECK(be_decode(c, blob[j], avail[j], n, out, j > 0, c.params));
    return Status::ok;
}

/* Bytes per piece of fft_topk's exchange: about chunk_bytes of input each (the pipelining
 * setting), a multiple of 64; 0: one exchange (chunk_bytes = 0, another codec, or a single
 * piece). From agreed settings and the agreed stride only: every rank runs the same exchanges,
 * whatever its buffers (host or device) and whether it can decode while they run. */
size_t exchange_piece(const CollCtx &c, size_t n, size_t stride) {
    const uint64_t chunk = c.settings->chunk_bytes;
    if (c.codec->id != CodecId::fft_topk || !chunk || !n) return 0;
    const double input = static_cast<double>(n) * elem_bytes(c.params.elem);
    size_t piece = static_cast<size_t>(std::ceil(static_cast<double>(stride) * std::min(1.0, chunk / input) / 64.0)) * 64;
    piece = std::clamp<size_t>(piece, 64, INT_MAX / 64 * 64);
    return piece < stride ? piece : 0;
}

/* Blocks decoded between two looks at the exchange (fft_topk: 16 Ki-point blocks take
 * ~30 us each here; MPI progresses only inside MPI calls on this thread) */
constexpr size_t kBlocksPerPoke = 8;

/* The allgather of the blobs in pieces of `piece` bytes (all posted at once, PMPI_Iallgather
 * in place, piece-major in ws_send, copied to blob-major `all` as each completes). Where the
 * sum is fft_topk's on host data, the inverse transforms of the blocks whose bytes have
 * arrived run while the rest is in flight (SumStream: the bits of decode_all); else the blobs
 * are decoded once all are there. In place (`out` is the input) only where no block can be
 * refused once written (SumStream::may_refuse: the payloads' headers bound every block): a
 * refusal after the first block would leave the exact fallback without its input. */
template <class T>
Status path_allgather_pieces(CollCtx &c, const uint8_t *mine, size_t len, T *out, size_t n, bool out_is_input,
                             uint8_t *all, const std::vector<size_t> &lens, const std::vector<size_t> &displs,
                             size_t stride, size_t piece) {
    const int P = c.size, r = c.rank;
    const size_t np = (stride + piece - 1) / piece, set = piece * static_cast<size_t>(P);
    uint8_t *sets = c.ws->send.get(set * np);
    if (!sets) return Status::no_memory;
    std::vector<MPI_Request> req(np, MPI_REQUEST_NULL);
    size_t posted = 0, arrived = 0;
    /* every request is completed before returning, whatever happened */
    auto finish = [&](Status s) {
        if (posted > arrived) {
            ScopedTimer t(c.stats->ns_comm);
            const int rc = mpi_next::Waitall(static_cast<int>(posted - arrived), req.data() + arrived, MPI_STATUSES_IGNORE);
            if (s == Status::ok && rc != MPI_SUCCESS) c.mpi_err = rc, s = Status::mpi_error;
        }
        return s;
    };
    {
        ScopedTimer t(c.stats->ns_comm);
        for (; posted < np; ++posted) {
            uint8_t *own = sets + set * posted + piece * static_cast<size_t>(r);
            const size_t lo = piece * posted, cnt = lo < len ? std::min(piece, len - lo) : 0;
            std::memcpy(own, mine + lo, cnt);
            std::memset(own + cnt, 0, piece - cnt);
            const int rc = COMPMPI_FAULT_MPI(iallgather, mpi_next::Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL,
                                                                        sets + set * posted, static_cast<int>(piece),
                                                                        MPI_BYTE, c.comm, &req[posted]));
            if (rc != MPI_SUCCESS) return c.mpi_err = rc, finish(Status::mpi_error);
        }
    }
    c.stats->bytes_wire += set * np / static_cast<size_t>(P) * static_cast<size_t>(P - 1);
    /* piece k done: its P parts to their blobs */
    auto land = [&](size_t k) {
        for (int j = 0; j < P; ++j) {
            const size_t lo = piece * k;
            if (lo < lens[j]) std::memcpy(all + displs[j] + lo, sets + set * k + piece * static_cast<size_t>(j),
                                          std::min(piece, lens[j] - lo));
        }
    };
    /* wait until `bytes` of every blob are there (block), or take what has come (!block) */
    auto receive = [&](size_t bytes, bool block) -> Status {
        ScopedTimer t(c.stats->ns_comm);
        while (arrived < np && (block ? arrived * piece < bytes : true)) {
            if (block) {
                const int rc = COMPMPI_FAULT_MPI(wait, mpi_next::Wait(&req[arrived], MPI_STATUS_IGNORE));
                if (rc != MPI_SUCCESS) return c.mpi_err = rc, Status::mpi_error;
            } else {
                int done = 0;
                mpi_next::Test(&req[arrived], &done, MPI_STATUS_IGNORE);
                if (!done) break;
            }
            land(arrived++);
        }
        return Status::ok;
    };

    auto at_once = [&]() {
        const Status s = receive(stride, true);
        if (s != Status::ok) return finish(s);
        return decode_all(c, all, lens, displs, out, n);
    };
    if (c.be != &backend_cpu()) return at_once();
    /* the overlapped decode is fft_topk's fp32 SumStream: doubles are decoded once all is there */
    if constexpr (sizeof(T) != sizeof(float)) {
        return at_once();
    } else {
        /* the blob headers, then every payload's header and bitmap */
        const size_t H = kBlobHeaderBytes;
        Status s = receive(H, true);
        if (s != Status::ok) return finish(s);
        std::vector<BlobInfo> info(P);
        for (int j = 0; j < P; ++j) {
            /* a coded blob (the entropy stage) cannot be decoded as it arrives */
            if (blob_entropy_coded(all + displs[j], lens[j]) ||
                blob_peek(all + displs[j], lens[j], n, &info[j]) != Status::ok || info[j].flags ||
                info[j].codec != CodecId::fft_topk || info[j].bits != info[0].bits || info[j].variant != info[0].variant ||
                info[j].param != info[0].param)
                return at_once(); /* decode_all's verdict on the whole blobs */
        }
        std::vector<const uint8_t *> pay(P);
        std::vector<size_t> plen(P), avail(P);
        for (int j = 0; j < P; ++j) pay[j] = all + displs[j] + H, plen[j] = info[j].payload;
        s = receive(H + fft_topk::SumStream::prefix_bytes(n, info[0].param), true);
        if (s != Status::ok) return finish(s);
        const bool spectral = c.settings->fft_sum_domain == enum_value(SettingId::fft_sum_domain, "spectral");
        fft_topk::SumStream ss;
        {
            ScopedTimer t(c.stats->ns_decode);
            s = ss.begin(pay.data(), plen.data(), P, n, info[0].bits, info[0].param, out, false, c.params.simd,
                         c.params.threads, info[0].variant, spectral, c.params.stream_out);
        }
        if (s == Status::corrupt || (s == Status::ok && out_is_input && ss.may_refuse())) return at_once();
        if (s == Status::ok) c.stats->decode_overlapped++;
        while (s == Status::ok && !ss.done()) {
            size_t want = 0;
            for (int j = 0; j < P; ++j) want = std::max(want, H + ss.need(j));
            s = receive(want, true);
            if (s == Status::ok) s = receive(0, false);
            if (s != Status::ok) break;
            for (int j = 0; j < P; ++j) avail[j] = std::min(plen[j], arrived * piece - std::min(arrived * piece, H));
            ScopedTimer t(c.stats->ns_decode);
            s = ss.advance(avail.data(), kBlocksPerPoke);
        }
        return finish(s);
    }
}

template <class T>
Status path_allgather(CollCtx &c, const uint8_t *mine, size_t len, const std::vector<Exchange> &ex, T *out,
                      size_t n, bool out_is_input) {
    const int P = c.size;
    /* Blobs of one call have nearly equal sizes: a fixed stride (the largest) and MPICH's
     * in-place allgather. Measured with 4 ranks on 2 cores, MPI_Allgatherv of the exact
     * sizes took 15x longer than this for 8 MiB of floats. */
    size_t stride = 0;
    for (const Exchange &e : ex) stride = std::max<size_t>(stride, e.len);
    std::vector<size_t> lens(P), displs(P);
    for (int j = 0; j < P; ++j) lens[j] = ex[j].len, displs[j] = stride * static_cast<size_t>(j);
    uint8_t *all = c.ws->recv.get(stride * P != 0 ? stride * P : 1);
    if (!all) return Status::no_memory;
    if (const size_t piece = exchange_piece(c, n, stride))
        return path_allgather_pieces(c, mine, len, out, n, out_is_input, all, lens, displs, stride, piece);
    std::memcpy(all + displs[c.rank], mine, len);
    CMPI_CHECK(mpi_allgather_inplace_bytes(c, all, stride));
    c.stats->bytes_wire += stride * static_cast<size_t>(P - 1);
    return decode_all(c, all, lens, displs, out, n);
}

/* Path B with packer pk: phase 1 packs chunk j of s (this rank's exact contribution) with pk
 * and sends it to rank j; rank j sums the chunks in rank order; phase 2 allgathers the sums
 * packed by pk. pk must be lossless: `sparse` for the sparsifiers (s = D(b_r)), or the call's
 * own lossless codec (s = the input). */
template <class T>
Status path_exact_twophase(CollCtx &c, const CodecOps &sp, const CodecParams &sp_p, const T *s, T *out, size_t n) {
    const int P = c.size, r = c.rank;
    size_t lo0, base;
    chunk_range(n, P, 0, &lo0, &base);
    T *acc = be_scratch<T>(c, 0, base);
    if (!s || !acc) return Status::no_memory;

    /* phase 1: chunk j of s, packed, to rank j */
    const size_t cap = blob_max_bytes(sp, base, sp_p);
    uint8_t *send = c.ws->send.get(cap * P);
    std::vector<uint64_t> slen(P, 0), rlen(P, 0);
    if (!send) return Status::no_memory;
    {
        ScopedTimer t(c.stats->ns_encode);
        for (int j = 0; j < P; ++j) {
            if (j == r) continue;
            size_t lo, l;
            chunk_range(n, P, j, &lo, &l);
            size_t bl = 0;
            /* lossless: cannot fail on valid input; a failure flags ABANDON for all */
            if (be_encode(c, sp, sp_p, s + lo, l, send + cap * j, cap, &bl) == 0) coll_entropy(c, sp, sp_p, send + cap * j, &bl);
            slen[j] = bl;
        }
    }
    {
        ScopedTimer t(c.stats->ns_comm);
        CMPI_CHECK(check_rc(c, mpi_next::Alltoall(slen.data(), 1, MPI_UINT64_T, rlen.data(), 1, MPI_UINT64_T, c.comm)));
    }
    std::vector<MPI_Count> scnt(P), sdis(P), rcnt(P), rdis(P);
    size_t rtotal = 0;
    for (int j = 0; j < P; ++j) {
        scnt[j] = static_cast<MPI_Count>(slen[j]);
        sdis[j] = static_cast<MPI_Count>(cap * j);
        rcnt[j] = static_cast<MPI_Count>(rlen[j]);
        rdis[j] = static_cast<MPI_Count>(rtotal);
        rtotal += rlen[j];
        c.stats->bytes_wire += slen[j];
    }
    uint8_t *recv = c.ws->recv.get(rtotal ? rtotal : 1);
    if (!recv) return Status::no_memory;
    {
        ScopedTimer t(c.stats->ns_comm);
        if (cap * P <= INT_MAX && rtotal <= INT_MAX) {
            std::vector<int> a(P), b(P), d(P), e(P);
            for (int j = 0; j < P; ++j)
                a[j] = static_cast<int>(scnt[j]), b[j] = static_cast<int>(sdis[j]), d[j] = static_cast<int>(rcnt[j]),
                e[j] = static_cast<int>(rdis[j]);
            CMPI_CHECK(check_rc(c, mpi_next::Alltoallv(send, a.data(), b.data(), MPI_BYTE, recv, d.data(), e.data(),
                                                  MPI_BYTE, c.comm)));
        } else {
#ifdef HAVE_MPI_LARGE_COUNT
            std::vector<MPI_Aint> sd(sdis.begin(), sdis.end()), rd(rdis.begin(), rdis.end());
            CMPI_CHECK(check_rc(c, mpi_next::Alltoallv_c(send, scnt.data(), sd.data(), MPI_BYTE, recv, rcnt.data(),
                                                    rd.data(), MPI_BYTE, c.comm)));
#else
            return Status::unsupported;
#endif
        }
    }
    /* our chunk of the union, exact sums in rank order */
    size_t lo_r, len_r;
    chunk_range(n, P, r, &lo_r, &len_r);
    uint8_t flags = 0;
    {
        ScopedTimer t(c.stats->ns_decode);
        for (int j = 0; j < P && !flags; ++j) {
            if (j == r) {
                if (j == 0) be_copy(c, acc, s + lo_r, len_r);
                else be_add(c, acc, s + lo_r, len_r);
            } else if (be_decode(c, recv + rdis[j], rlen[j], len_r, acc, j > 0, sp_p) != Status::ok) {
                flags |= BLOB_ABANDON;
            }
        }
    }
    /* phase 2: the union chunk, packed (densifies gracefully), allgathered */
    const size_t cap2 = blob_max_bytes(sp, len_r, sp_p);
    uint8_t *mine2 = c.ws->send.get(std::max(cap2, cap * P)); /* phase-1 send buffer is free now */
    size_t len2 = kBlobHeaderBytes;
    if (flags) coll_write_flag(c, sp_p, len_r, flags, mine2);
    else {
        ScopedTimer t(c.stats->ns_encode);
        if (be_encode(c, sp, sp_p, acc, len_r, mine2, cap2, &len2) == 0) coll_entropy(c, sp, sp_p, mine2, &len2);
    }
    std::vector<uint64_t> l2(P);
    uint64_t my2 = len2;
    {
        ScopedTimer t(c.stats->ns_comm);
        CMPI_CHECK(check_rc(c, mpi_next::Allgather(&my2, 1, MPI_UINT64_T, l2.data(), 1, MPI_UINT64_T, c.comm)));
    }
    /* fixed stride + MPICH's allgather (see path_allgather) */
    size_t stride = 0;
    for (uint64_t l : l2) stride = std::max<size_t>(stride, l);
    std::vector<size_t> lens(P), displs(P);
    for (int j = 0; j < P; ++j) lens[j] = l2[j], displs[j] = stride * static_cast<size_t>(j);
    uint8_t *all = c.ws->recv.get(stride * P != 0 ? stride * P : 1); /* phase-1 receive buffer is free now */
    if (!all) return Status::no_memory;
    std::memcpy(all + displs[r], mine2, len2);
    CMPI_CHECK(mpi_allgather_inplace_bytes(c, all, stride));
    c.stats->bytes_wire += stride * static_cast<size_t>(P - 1);
    for (int j = 0; j < P; ++j) {
        size_t lo, l;
        chunk_range(n, P, j, &lo, &l);
        BlobInfo info;
        if (blob_peek(all + displs[j], lens[j], l, &info) != Status::ok || info.flags) return Status::corrupt;
    }
    ScopedTimer t(c.stats->ns_decode);
    for (int j = 0; j < P; ++j) {
        size_t lo, l;
        chunk_range(n, P, j, &lo, &l);
        CMPI_CHECK(be_decode(c, all + displs[j], lens[j], l, out + lo, false, sp_p));
    }
    return Status::ok;
}

/* path B for the sparsifiers: s_r = D(b_r), decoded before the path choice, packed by `sparse` */
template <class T> Status path_sparse_twophase(CollCtx &c, T *out, size_t n) {
    const CodecParams sp_p = coll_exact_params(c.params);
    return path_exact_twophase(c, *codec_by_id(static_cast<int>(CodecId::sparse)), sp_p,
                               static_cast<const T *>(be_scratch<T>(c, 2, n)), out, n);
}

}  // namespace

template <class T>
Status coll_allreduce_sparse(CollCtx &c, const T *in, T *out, size_t n) {
    const int P = c.size;
    /* a lossless codec whose data is not sparse (lossless): the decoded contribution is the
     * input itself, so from 3 ranks on path B packs chunks of the input with the codec at once
     * (no whole-buffer encode first): (P-1)/P of the packed data sent twice per rank, against
     * P-1 packed contributions received on path A. Exact sums in rank order, as path B's. */
    if ((c.codec->flags & CODEC_LOSSLESS) && !(c.codec->flags & CODEC_SPATIAL_SPARSE) && P > 2 && !c.ef_new) {
        c.stats->bytes_uncompressed_wire += 2 * n * sizeof(T) * static_cast<size_t>(P - 1) / static_cast<size_t>(P);
        c.stats->sparse_twophase++;
        return path_exact_twophase(c, *c.codec, c.params, in, out, n);
    }
    const T *src = coll_ef_input(c, in, n);
    if (!src) return Status::no_memory;
    CMPI_CHECK(coll_shared_scale(c, src, n));
    const size_t S = blob_max_bytes(*c.codec, n, c.params);
    uint8_t *mine = c.ws->aux_blob.get(S);
    if (!mine) return Status::no_memory;
    size_t len = 0;
    uint8_t flag;
    {
        ScopedTimer t(c.stats->ns_encode);
        CodecParams p = c.params;
        p.stream = rng_stream(c.rank, c.st->calls, 1, 0);
        flag = coll_encode(c, p, src, n, mine, S, &len);
        if (c.ef_new) coll_ef_update(c, mine, len, src, n, ef_new_t<T>(c));
    }
    /* density of our decoded contribution, where it is sparse in the data's own domain:
     * decode it (path B needs it anyway) and count the nonzeros */
    uint64_t nnz = n;
    const bool spatial = (c.codec->flags & CODEC_SPATIAL_SPARSE) && P > 2;
    if (!flag && spatial) {
        T *s = be_scratch<T>(c, 2, n);
        if (s && be_decode(c, mine, len, n, s, false, c.params) == Status::ok) {
            nnz = 0;
            for (size_t i = 0; i < n; ++i) nnz += s[i] != 0.0f;
        } else {
            flag = BLOB_ABANDON;
        }
    }
    /* the entropy stage, after the density count (which decodes the plain blob) */
    if (!flag) coll_entropy(c, *c.codec, c.params, mine, &len);
    std::vector<Exchange> ex(P);
    Exchange me{len, nnz, flag};
    {
        ScopedTimer t(c.stats->ns_comm);
        CMPI_CHECK(check_rc(c, mpi_next::Allgather(&me, 3, MPI_UINT64_T, ex.data(), 3, MPI_UINT64_T, c.comm)));
    }
    c.stats->bytes_wire += sizeof(Exchange) * static_cast<size_t>(P - 1);
    c.stats->bytes_uncompressed_wire += 2 * n * sizeof(T) * static_cast<size_t>(P - 1) / static_cast<size_t>(P);
    uint8_t flags = 0;
    for (const Exchange &e : ex) flags |= static_cast<uint8_t>(e.flags);
    CMPI_CHECK(coll_flag_status(flags));

    /* choose the path (same numbers on every rank) */
    bool twophase = false;
    if (spatial) {
        double a = 0, s_sum = 0, keep = 1;
        for (const Exchange &e : ex) {
            a += static_cast<double>(e.len);
            s_sum += static_cast<double>(packed_size(n, static_cast<double>(e.nnz)));
            keep *= 1.0 - static_cast<double>(e.nnz) / static_cast<double>(n ? n : 1);
        }
        const double cost_a = a * (P - 1) / P; /* bytes received per rank, averaged */
        const double union_nnz = n * (1.0 - keep);
        const double cost_b = (P - 1.0) / P * (s_sum / P + static_cast<double>(packed_size(n, union_nnz)));
        twophase = cost_b < 0.9 * cost_a;
    }
    if (twophase) c.stats->sparse_twophase++;
    return twophase ? path_sparse_twophase(c, out, n)
                    : path_allgather(c, mine, len, ex, out, n, static_cast<const void *>(in) == out);
}

template Status coll_allreduce_sparse(CollCtx &, const float *, float *, size_t);
template Status coll_allreduce_sparse(CollCtx &, const double *, double *, size_t);

}  // namespace compmpi

// SPDX-License-Identifier: BSD-3-Clause
/* Compressed reduce-scatter (MPI_Reduce_scatter_block, MPI_Reduce_scatter): phase 1 of the
 * two-phase allreduce (coll/allreduce/allreduce_twophase.cc) on the caller's blocks.
 *
 *   exchange (alltoall / alltoallv of blobs)   rank r receives E(x_j[r]) from every j
 *       r0: E(x0[0]) E(x0[1]) ...  ──►          out_r = sum over j = 0..P-1 in rank order of
 *       r1: E(x1[0]) E(x1[1]) ...  ──►                  D(E(x_j[r]))                 (fp32)
 *   agreement (allgather of 16 bytes per rank)  {flags, |out_r|^2} of every rank
 *
 * The owner's own block x_r[r] is treated by the allreduce's rule (coll_own_encoded): encoded
 * and decoded like the others for stochastic codecs (terngrad, qsgd) and codecs quantised
 * once per contribution (q8), so E[out_r] is the sum of the contributions; added exact for
 * the others. The accumulation itself is the allreduce's (coll_accumulate). Codecs with a
 * shared scale agree on it over the whole input first (terngrad's scaler and clip threshold,
 * as in the allreduce).
 *
 * Block sizes. MPI_Reduce_scatter_block: every blob slot the same, MPI's tuned alltoall.
 * MPI_Reduce_scatter: block j travels as a blob of blob_max_bytes(counts[j]) (rounded to 64
 * bytes) in an alltoallv; every rank knows every size from recvcounts, so nothing is
 * exchanged to learn them and no slot is padded to the largest block. Zero-count blocks
 * send nothing.
 *
 * The entropy stage (setting entropy, kernels/entropy.h) codes every blob; then the blobs'
 * own lengths travel first (an alltoall of one u64 per rank) and the alltoallv carries just
 * those bytes; pipelined segments exchange at an agreed stride, the longest blob of any rank
 * (coll_agree_stride), as the two-phase allreduce does.
 *
 * Error feedback (ef_res/ef_new): the blocks are encoded from x = input + residual and each
 * leaves x - D(E(x)) as its part of the new residual, as in the allreduce's phase 1.
 *
 * A NaN/Inf in an own block added exact is caught by the l2-norm of the sum (not finite).
 * Why the agreement: a flag (NaN/Inf in some rank's data, or a blob that fails to decode)
 * is seen only by the receiver of the flagged blob, not by every rank as in the allreduce
 * (whose phase 2 carries the owners' flags to everybody). The allgather of one {flags,
 * sum of squares} pair per rank lets every rank learn the union of flags, so that every rank
 * falls back to the exact PMPI call together, and gives every rank the same l2-norm of the
 * whole reduced vector (summed in rank order) for the awp policy, whose decisions must be
 * identical on all ranks while each rank holds a different block.
 *
 * Pipelined (session 9), equal blocks on host buffers: with chunk_bytes > 0 the exchange
 * runs in segments of chunk_bytes of input (P sub-blocks of chunk_bytes / 4P floats, a
 * multiple of 64 and of qsgd's/terngrad's bucket), each sub-block its own blob:
 *     encode segment k+1   |  Ialltoall of segment k+1 in flight
 *     Ialltoall of k in flight  |  accumulate segment k
 * so encoding and accumulating overlap the exchanges (two in flight, double-buffered). A
 * flag in any segment makes the whole call fall back, as before. Blocks of different sizes
 * (alltoallv), device buffers and chunk_bytes=0 take the single exchange.
 *
 * `out` is written only after the agreement, so `in` may overlap it (MPI_IN_PLACE: the
 * input is the receive buffer) and the exact fallback still finds the input intact.
 * Traffic per rank ~ (n - counts[r]) * 4 / ratio bytes + 16 (P-1), like an exact pairwise
 * reduce-scatter at the codec's ratio. */
#include <algorithm>
#include <climits>
#include <numeric>
#include <cmath>
#include <cstring>
#include <vector>

#include "coll.h"
#include "base/fault.h"
#include "base/mpi_next.h"

namespace compmpi {

namespace {

Status check(CollCtx &c, int rc) {
    if (rc == MPI_SUCCESS) return Status::ok;
    c.mpi_err = rc;
    return Status::mpi_error;
}

/* An alltoallv of bytes: sn[j] bytes at send + soff[j] to rank j, rn[j] bytes from rank j into
 * recv + Sr * j; the MPI-4 large-count form where the counts or offsets exceed int. */
Status alltoallv_bytes(CollCtx &c, const uint8_t *send, const std::vector<size_t> &sn, const std::vector<size_t> &soff,
                       uint8_t *recv, const std::vector<size_t> &rn, size_t Sr, bool large) {
    const int P = c.size;
    if (!large) {
        std::vector<int> sc(P), sd(P), rc(P), rd(P);
        for (int j = 0; j < P; ++j) {
            sc[j] = static_cast<int>(sn[j]);
            sd[j] = static_cast<int>(soff[j]);
            rc[j] = static_cast<int>(rn[j]);
            rd[j] = static_cast<int>(Sr * static_cast<size_t>(j));
        }
        return check(c, mpi_next::Alltoallv(send, sc.data(), sd.data(), MPI_BYTE, recv, rc.data(), rd.data(), MPI_BYTE,
                                            c.comm));
    }
#ifdef HAVE_MPI_LARGE_COUNT
    std::vector<MPI_Count> sc(P), rc(P);
    std::vector<MPI_Aint> sd(P), rd(P);
    for (int j = 0; j < P; ++j) {
        sc[j] = static_cast<MPI_Count>(sn[j]);
        sd[j] = static_cast<MPI_Aint>(soff[j]);
        rc[j] = static_cast<MPI_Count>(rn[j]);
        rd[j] = static_cast<MPI_Aint>(Sr * static_cast<size_t>(j));
    }
    return check(c, mpi_next::Alltoallv_c(send, sc.data(), sd.data(), MPI_BYTE, recv, rc.data(), rd.data(), MPI_BYTE,
                                          c.comm));
#else
    return Status::unsupported;
#endif
}

/* Exchange blobs: to rank j, send[soff[j] .. + ssz[j]); from rank j, S_r bytes into
 * recv + j * S_r. ssz[r] is not sent (the own blob, if any, is read from send). */
Status exchange(CollCtx &c, bool equal, const uint8_t *send, const std::vector<size_t> &soff,
                const std::vector<size_t> &ssz, uint8_t *recv, size_t Sr, bool large) {
    const int P = c.size, r = c.rank;
    ScopedTimer t(c.stats->ns_comm);
    if (equal) { /* fixed stride: MPI's tuned alltoall (the self slot is copied, unused) */
        const size_t S = ssz[0];
        if (!large)
            return check(c, mpi_next::Alltoall(send, static_cast<int>(S), MPI_BYTE, recv, static_cast<int>(S), MPI_BYTE,
                                          c.comm));
#ifdef HAVE_MPI_LARGE_COUNT
        return check(c, mpi_next::Alltoall_c(send, static_cast<MPI_Count>(S), MPI_BYTE, recv, static_cast<MPI_Count>(S),
                                        MPI_BYTE, c.comm));
#else
        return Status::unsupported;
#endif
    }
    std::vector<size_t> sn(static_cast<size_t>(P)), rn(static_cast<size_t>(P));
    for (int j = 0; j < P; ++j) sn[j] = j == r ? 0 : ssz[j], rn[j] = j == r ? 0 : Sr;
    return alltoallv_bytes(c, send, sn, soff, recv, rn, Sr, large);
}

/* The entropy stage's exchange: blob j (blen[j] bytes at send + soff[j], 0 for none) to rank
 * j. The lengths go first (an alltoall of one u64 per rank), then an alltoallv of exactly
 * those bytes into recv + Sr * j. */
Status exchange_lengths(CollCtx &c, const std::vector<size_t> &blen, size_t Sr, const uint8_t *send,
                        const std::vector<size_t> &soff, uint8_t *recv, bool large, uint8_t *flags) {
    const int P = c.size, r = c.rank;
    std::vector<uint64_t> sl(static_cast<size_t>(P)), rl(static_cast<size_t>(P));
    for (int j = 0; j < P; ++j) sl[j] = j == r ? 0 : blen[j];
    {
        ScopedTimer t(c.stats->ns_comm);
        CMPI_CHECK(check(c, mpi_next::Alltoall(sl.data(), 1, MPI_UINT64_T, rl.data(), 1, MPI_UINT64_T, c.comm)));
    }
    /* every sender's blob fits the slot of this rank's block (both sides size it from counts
     * alone); a longer claim would be a bug: receive at most the slot, and MPI reports the
     * truncation (an MPI error, never memory past the buffer) */
    for (int j = 0; j < P; ++j)
        if (rl[j] > Sr) *flags |= BLOB_ABANDON, rl[j] = Sr;
    std::vector<size_t> sn(sl.begin(), sl.end()), rn(rl.begin(), rl.end());
    ScopedTimer t(c.stats->ns_comm);
    return alltoallv_bytes(c, send, sn, soff, recv, rn, Sr, large);
}

/* This rank's flags and the sum of squares of its block, agreed by all (one allgather of
 * P pairs): every rank learns the union of flags and falls back together, and every rank
 * gets the same norm of the whole reduced vector (rank order); then out = acc. */
template <class T>
Status finish(CollCtx &c, uint8_t flags, const T *acc, size_t len_r, T *out, double *result_norm) {
    const int P = c.size, r = c.rank;
    double sumsq = 0;
    /* a NaN/Inf in the own block added exact (no blob flags it), or a sum that overflowed:
     * the norm is not finite, and the call falls back like a flagged blob */
    if (len_r && !flags) {
        const double nr = be_l2norm(c, acc, len_r);
        if (!std::isfinite(nr)) flags |= BLOB_NONFINITE;
        else sumsq = nr * nr;
    }
    /* agreement: every rank's flags and sum of squares, the same P pairs everywhere */
    std::vector<double> all(2 * static_cast<size_t>(P));
    all[2 * r] = flags;
    all[2 * r + 1] = sumsq;
    {
        ScopedTimer t(c.stats->ns_comm);
        CMPI_CHECK(check(c, mpi_next::Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all.data(), 2, MPI_DOUBLE, c.comm)));
    }
    c.stats->bytes_wire += 2 * sizeof(double) * static_cast<size_t>(P - 1);
    uint8_t any = 0;
    double total = 0;
    for (int j = 0; j < P; ++j) {
        any |= static_cast<uint8_t>(all[2 * j]);
        total += all[2 * j + 1];
    }
    CMPI_CHECK(coll_flag_status(any));
    if (len_r) be_copy(c, out, acc, len_r);
    if (result_norm) *result_norm = std::sqrt(total);
    return Status::ok;
}

/* Floats per sub-block of a pipelined segment, or 0 for one exchange: chunk_bytes of input
 * split in P, a multiple of 64 and of the codec's bucket (qsgd, terngrad), below the block. */
size_t segment_elems(const CollCtx &c, size_t block) {
    const uint64_t bytes = c.settings->chunk_bytes;
    if (!bytes) return 0; /* not the backend: host and device ranks must run the same exchanges */
    size_t align = 64;
    if (c.codec->id == CodecId::qsgd || c.codec->id == CodecId::terngrad) {
        if (!c.params.param && c.codec->id == CodecId::qsgd) return 0; /* one norm per blob */
        if (c.params.param) align = std::lcm<size_t>(align, c.params.param);
    }
    const size_t seg = bytes / elem_bytes(c.params.elem) / static_cast<size_t>(c.size) / align * align;
    return seg && seg < block ? seg : 0;
}

/* The pipelined exchange and accumulation of equal blocks of b floats in sub-blocks of seg
 * (see the top of the file); x = the input (+ residual), acc = this rank's block. Returns
 * the union of this rank's flags through *flags. */
template <class T>
Status pipelined(CollCtx &c, const T *x, T *acc, size_t b, size_t seg, bool own_encoded, uint8_t *flags) {
    const int P = c.size, r = c.rank;
    const size_t nseg = (b + seg - 1) / seg;
    const size_t S = coll_blob_stride(*c.codec, seg, c.params);
    if (S * static_cast<size_t>(P) > INT_MAX) return Status::unsupported; /* decided alike on every rank */
    uint8_t *sendbuf = c.ws->send.get(2 * S * P), *recvbuf = c.ws->recv.get(2 * S * P);
    if (!sendbuf || !recvbuf) return Status::no_memory;
    MPI_Request req[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    /* the entropy stage: each buffer set's exchange stride (the longest blob of any rank,
     * agreed) and this rank's longest blob of the segment being encoded */
    size_t xs[2] = {0, 0}, longest = kBlobHeaderBytes;
    /* segment k: floats [lo, lo + len) of every block, stride Sk (from len only: alike) */
    auto geom = [&](size_t k, size_t *lo, size_t *len, size_t *Sk) {
        *lo = k * seg;
        *len = std::min(seg, b - *lo);
        *Sk = *len == seg ? S : coll_blob_stride(*c.codec, *len, c.params);
    };
    auto encode = [&](size_t k, MPI_Request *progress) {
        ScopedTimer t(c.stats->ns_encode);
        size_t lo, len, Sk;
        geom(k, &lo, &len, &Sk);
        uint8_t *snd = sendbuf + (k % 2) * S * P;
        longest = kBlobHeaderBytes;
        for (int j = 0; j < P; ++j) {
            const T *src = x + b * static_cast<size_t>(j) + lo;
            T *res = c.ef_new ? ef_new_t<T>(c) + b * static_cast<size_t>(j) + lo : nullptr;
            if (j == r && !own_encoded) {
                if (res) be_sub(c, res, src, src, len); /* carried exact: nothing owed */
                continue;
            }
            CodecParams p = c.params;
            p.stream = rng_stream(r, c.st->calls, 1, j + P * static_cast<int>(k));
            size_t bl = kBlobHeaderBytes;
            const uint8_t f = coll_encode(c, p, src, len, snd + Sk * j, Sk, &bl);
            *flags |= f;
            if (res && !f) coll_ef_update(c, snd + Sk * j, Sk, src, len, res);
            if (!f) coll_entropy(c, *c.codec, p, snd + Sk * j, &bl);
            longest = std::max(longest, bl);
            coll_poke(progress);
        }
    };
    auto start = [&](size_t k) -> Status {
        size_t lo, len, Sk;
        geom(k, &lo, &len, &Sk);
        if (coll_entropy_on(c)) { /* the longest blob any rank sends is the stride */
            size_t X = Sk;
            CMPI_CHECK(coll_agree_stride(c, longest, Sk, &X));
            coll_compact(sendbuf + (k % 2) * S * P, P, Sk, X);
            Sk = X;
        }
        xs[k % 2] = Sk;
        c.stats->bytes_wire += Sk * static_cast<size_t>(P - 1);
        c.stats->bytes_uncompressed_wire += len * sizeof(T) * static_cast<size_t>(P - 1);
        const int Si = static_cast<int>(Sk);
        return check(c, COMPMPI_FAULT_MPI(ialltoall, mpi_next::Ialltoall(sendbuf + (k % 2) * S * P, Si, MPI_BYTE,
                                                                    recvbuf + (k % 2) * S * P, Si, MPI_BYTE, c.comm,
                                                                    &req[k % 2])));
    };
    auto reduce = [&](size_t k) {
        ScopedTimer t(c.stats->ns_decode);
        size_t lo, len, Sk;
        geom(k, &lo, &len, &Sk);
        Sk = xs[k % 2]; /* the stride it was exchanged at */
        const uint8_t *snd = sendbuf + (k % 2) * S * P, *rcv = recvbuf + (k % 2) * S * P;
        *flags |= coll_accumulate(c, own_encoded, x + b * static_cast<size_t>(r) + lo, len, acc + lo, Sk,
                                  [&](int j) -> const uint8_t * { return (j == r ? snd : rcv) + Sk * j; });
    };
    /* every rank posts every exchange, flagged or not: all stay matched */
    encode(0, nullptr);
    CMPI_CHECK(start(0));
    for (size_t k = 0; k < nseg; ++k) {
        if (k + 1 < nseg) { /* its buffers' exchange (k - 1) completed in the previous round */
            encode(k + 1, &req[k % 2]);
            CMPI_CHECK(start(k + 1));
        }
        CMPI_CHECK(coll_wait(c, &req[k % 2]));
        reduce(k); /* overlaps the exchange of k + 1 */
    }
    return Status::ok;
}

}  // namespace

template <class T>
Status coll_reduce_scatter(CollCtx &c, const T *in, T *out, const size_t *counts, double *result_norm) {
    const int P = c.size, r = c.rank;
    /* a payload of data-dependent size (zfp's fixed accuracy) would travel in worst-case
     * slots, above the raw floats (140 bits per 4): the exact call, decided alike everywhere */
    if ((c.codec->flags & CODEC_VARIABLE_VARIANT) && codec_variable_payload(*c.codec, c.params))
        return Status::unsupported; /* (sparse codecs keep their worst-case slots, as before) */
    c.params.nranks = P;
    std::vector<size_t> off(P), ssz(P), soff(P);
    size_t n = 0, send_total = 0, slot_max = 0;
    bool equal = true;
    for (int j = 0; j < P; ++j) {
        off[j] = n;
        n += counts[j];
        equal = equal && counts[j] == counts[0];
        ssz[j] = counts[j] ? coll_blob_stride(*c.codec, counts[j], c.params) : 0;
        soff[j] = send_total;
        send_total += ssz[j];
        slot_max = std::max(slot_max, ssz[j]);
    }
    const size_t Sr = ssz[r], len_r = counts[r];
    /* the same answer on every rank: every rank knows every block size */
    const bool large = send_total > INT_MAX || slot_max * static_cast<size_t>(P) > INT_MAX;
#ifndef HAVE_MPI_LARGE_COUNT
    if (large) return Status::unsupported;
#endif

    /* error feedback: x = input + the buffer's residual (else x = in); every block is encoded
     * from x and leaves its new residual x - D(E(x)) in ef_new, as in the allreduce's phase 1 */
    const T *x = coll_ef_input(c, in, n);
    if (!x) return Status::no_memory;
    CMPI_CHECK(coll_shared_scale(c, x, n)); /* once per call, on the whole input */
    const bool own_encoded = coll_own_encoded(*c.codec);
    uint8_t flags = 0;
    const size_t seg = equal && !large ? segment_elems(c, len_r) : 0;
    if (seg) {
        T *acc = be_scratch<T>(c, 0, len_r);
        if (!acc) return Status::no_memory;
        CMPI_CHECK(pipelined(c, x, acc, len_r, seg, own_encoded, &flags));
        return finish(c, flags, acc, len_r, out, result_norm);
    }
    uint8_t *send = c.ws->send.get(std::max<size_t>(send_total, 64));
    uint8_t *recv = c.ws->recv.get(std::max<size_t>(Sr * static_cast<size_t>(P), 64));
    T *acc = be_scratch<T>(c, 0, std::max<size_t>(len_r, 1));
    if (!send || !recv || !acc) return Status::no_memory;
    std::vector<size_t> blen(static_cast<size_t>(P), 0); /* the entropy stage: each blob's length */
    {
        ScopedTimer t(c.stats->ns_encode);
        for (int j = 0; j < P; ++j) {
            if (!counts[j] || (j == r && !own_encoded)) continue;
            CodecParams p = c.params;
            p.stream = rng_stream(r, c.st->calls, 1, j);
            size_t bl = kBlobHeaderBytes;
            const uint8_t f = coll_encode(c, p, x + off[j], counts[j], send + soff[j], ssz[j], &bl);
            flags |= f;
            if (c.ef_new && !f) coll_ef_update(c, send + soff[j], ssz[j], x + off[j], counts[j], ef_new_t<T>(c) + off[j]);
            if (!f) coll_entropy(c, *c.codec, p, send + soff[j], &bl);
            blen[j] = std::min(bl, ssz[j]);
        }
        /* the own block added exact carries all of x: nothing owed (x - x = 0; a NaN/Inf there
         * makes the call fall back, and a residual is kept only after a success) */
        if (c.ef_new && counts[r] && !own_encoded)
            be_sub(c, ef_new_t<T>(c) + off[r], x + off[r], x + off[r], counts[r]);
    }
    if (coll_entropy_on(c)) { /* blobs of their own lengths: the lengths first, then an alltoallv */
        for (int j = 0; j < P; ++j)
            if (j != r && counts[j]) {
                c.stats->bytes_wire += blen[j] + sizeof(uint64_t);
                c.stats->bytes_uncompressed_wire += counts[j] * sizeof(T);
            }
        CMPI_CHECK(exchange_lengths(c, blen, Sr, send, soff, recv, large, &flags));
    } else {
        for (int j = 0; j < P; ++j)
            if (j != r) {
                c.stats->bytes_wire += ssz[j];
                c.stats->bytes_uncompressed_wire += counts[j] * sizeof(T);
            }
        CMPI_CHECK(exchange(c, equal, send, soff, ssz, recv, Sr, large));
    }
    if (len_r) {
        ScopedTimer t(c.stats->ns_decode);
        flags |= coll_accumulate(c, own_encoded, x + off[r], len_r, acc, Sr, [&](int j) -> const uint8_t * {
            return j == r ? send + soff[r] : recv + Sr * static_cast<size_t>(j);
        });
    }
    return finish(c, flags, acc, len_r, out, result_norm);
}

template Status coll_reduce_scatter(CollCtx &, const float *, float *, const size_t *, double *);
template Status coll_reduce_scatter(CollCtx &, const double *, double *, const size_t *, double *);

}  // namespace compmpi

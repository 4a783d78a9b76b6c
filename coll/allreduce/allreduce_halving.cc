// SPDX-License-Identifier: BSD-3-Clause
/* Compressed allreduce by recursive halving and doubling (Rabenseifner's order), for dense
 * codecs (setting allreduce_algorithm, docs/design.md "Collective algorithms" and "Scale on
 * paper").
 *
 * Q = the largest power of two <= P ranks, k = log2 Q. The buffer is cut into Q chunks
 * (chunk_range(n, Q, j)); after the reduce-scatter new rank i owns chunk i.
 *
 *   fold (P not a power of two, rem = P - Q): among ranks 0..2 rem - 1 the even rank
 *     ("extra") encodes its whole buffer once with the codec and sends it to the odd rank
 *     above it, which adds the decoded contribution to its own and takes part as new rank
 *     r / 2; ranks >= 2 rem are new rank r - rem. At the end the odd rank sends the Q final
 *     blobs to its extra rank unchanged.
 *   reduce-scatter, steps s = 0..k-1: mask = Q >> (s + 1), partner = i ^ mask. Each rank
 *     keeps the half of its current chunk range on its side of mask, sends the other half
 *     encoded (one blob), receives the partner's blob of the kept half and adds it decoded.
 *   final blobs: the owner encodes its chunk (a sum of all P contributions) once more.
 *   allgather, steps s = 0..k-1: mask = 1 << s; partners swap the blocks of final blobs they
 *     hold (mask blobs each), unchanged. Every rank, the owner included, decodes the same Q
 *     blobs, so the result has the same bits on every rank.
 *
 * What travels at each step (the same rules as the two-phase allreduce, applied per step):
 *   - a rank's own contribution, quantised once: stochastic codecs (terngrad, qsgd) and q8
 *     encode all of it, the kept half too (its decoded copy enters the sum: every
 *     contribution is quantised, as the papers do); other codecs keep the kept half exact;
 *   - partial sums of c contributions (c > 1): the codec's reduced_params for c ranks
 *     (terngrad: the 2c+1 levels of a sum of ternaries on the shared grid, exact -- with
 *     buckets, unbiased stochastic rounding; qsgd: 8 bits, unbiased), fp32 verbatim for q8
 *     (quantised once per contribution, docs/codecs/q8.md), else the codec's parameters
 *     again (bitpack, fp16, bf16, rangefloat: deterministic, one more rounding per step;
 *     docs/design.md gives the measured error).
 * A rank's partial sum after step s holds at most m 2^(s+1) contributions (m = 2 with a fold,
 * else 1; P at the end); every rank computes the same parameters and blob strides.
 *
 * Flags (NaN/Inf, local errors): a rank that saw one sends flagged (header-only) blobs from
 * then on; every flag reaches its owner's final blob, and the allgather shows every final blob
 * to every rank, so all ranks learn it together and return nonfinite/corrupt (the caller runs
 * the exact PMPI_Allreduce on the untouched input). `out` is written only after the last
 * exchange, so `in` may equal `out`. Point-to-point messages go over a private duplicate of
 * the communicator (made on first use), never the user's. One segment: no pipelining
 * (chunk_bytes does not apply).
 *
 * Traffic per rank, compressed: the two-phase volume 2 (Q-1)/Q n / ratio, in 2 log2 Q messages
 * instead of 2 (P-1) (plus the fold's whole buffer and Q final blobs for extra ranks). Which
 * of the two runs under allreduce_algorithm=auto: coll/allreduce/allreduce_choice.cc.
 */
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <vector>

#include "coll.h"
#include "base/log.h"
#include "base/settings.h"
#include "base/mpi_next.h"

namespace compmpi {

namespace {

bool quantise_once(const CodecOps &codec) { return coll_quantise_once(codec); }
bool own_encoded(const CodecOps &codec) { return coll_own_encoded(codec); }

int floor_pow2(int p) {
    int q = 1;
    while (q * 2 <= p) q *= 2;
    return q;
}

int log2i(int q) {
    int k = 0;
    while ((1 << k) < q) ++k;
    return k;
}

struct Enc {
    const CodecOps *codec;
    CodecParams p;
};

/* Parameters for a payload that carries a sum of `cnt` contributions (cnt = 1: a rank's own). */
Enc sum_params(const CollCtx &c, int cnt) {
    Enc e{c.codec, c.params};
    if (cnt <= 1) return e;
    CodecParams in = c.params, out = c.params;
    in.nranks = cnt;
    out.nranks = cnt;
    if (c.codec->reduced_params && c.codec->reduced_params(in, &out) == Status::ok) {
        e.p = out;
        return e;
    }
    if (quantise_once(*c.codec)) { /* q8: the sums travel exactly */
        e.codec = codec_by_id(static_cast<int>(CodecId::none));
        e.p = coll_exact_params(c.params);
    }
    return e;
}

size_t round64(size_t b) { return (b + 63) / 64 * 64; }

/* Element range of chunks [a, b) of n split over q ranks. */
void chunks_range(size_t n, int q, int a, int b, size_t *lo, size_t *len) {
    size_t l0, n0, l1, n1;
    chunk_range(n, q, a, &l0, &n0);
    chunk_range(n, q, b - 1, &l1, &n1);
    *lo = l0;
    *len = l1 + n1 - l0;
}

/* The shape of one call, the same on every rank (P, n, codec parameters only). */
struct Plan {
    int P, Q, rem, k, m;
    size_t base;              /* chunk length (the last may be shorter) */
    std::vector<size_t> step; /* blob stride of reduce-scatter step s */
    size_t fin = 0;           /* final blob stride */
    size_t fold = 0;          /* the extra ranks' whole-buffer blob */
    Enc efin;
};

Plan make_plan(const CollCtx &c, size_t n) {
    Plan pl;
    pl.P = c.size;
    pl.Q = floor_pow2(pl.P);
    pl.rem = pl.P - pl.Q;
    pl.k = log2i(pl.Q);
    pl.m = pl.rem ? 2 : 1;
    size_t lo;
    chunk_range(n, pl.Q, 0, &lo, &pl.base);
    const Enc e1 = sum_params(c, 1);
    for (int s = 0; s < pl.k; ++s) {
        const size_t half = pl.base * static_cast<size_t>(pl.Q >> (s + 1));
        const int cnt = std::min(pl.P, pl.m << s);
        size_t b = blob_max_bytes(*e1.codec, half, e1.p); /* a single contribution may travel at step 0 */
        if (cnt > 1) {
            const Enc e = sum_params(c, cnt);
            b = std::max(b, blob_max_bytes(*e.codec, half, e.p));
        }
        pl.step.push_back(round64(b));
    }
    pl.efin = sum_params(c, pl.P);
    pl.fin = coll_blob_stride(*pl.efin.codec, pl.base, pl.efin.p);
    if (pl.rem) pl.fold = coll_blob_stride(*e1.codec, n, e1.p);
    return pl;
}

constexpr size_t kPiece = size_t{1} << 30; /* bytes per point-to-point message */
constexpr int kTag = 7;

/* Exchange bytes with a partner (either count may be 0), in pieces of at most 1 GiB. */
Status sendrecv(CollCtx &c, MPI_Comm comm, const uint8_t *send, size_t sn, int dst, uint8_t *recv, size_t rn,
                int src) {
    ScopedTimer t(c.stats->ns_comm);
    size_t so = 0, ro = 0;
    do {
        const size_t a = std::min(kPiece, sn - so), b = std::min(kPiece, rn - ro);
        const int rc = mpi_next::Sendrecv(send + so, static_cast<int>(a), MPI_BYTE, a || so < sn ? dst : MPI_PROC_NULL,
                                     kTag, recv + ro, static_cast<int>(b), MPI_BYTE,
                                     b || ro < rn ? src : MPI_PROC_NULL, kTag, comm, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) return c.mpi_err = rc, Status::mpi_error;
        so += a;
        ro += b;
    } while (so < sn || ro < rn);
    return Status::ok;
}

uint8_t status_flag(Status s) {
    if (s == Status::ok) return 0;
    return s == Status::nonfinite ? BLOB_NONFINITE : BLOB_ABANDON;
}

}  // namespace

template <class T>
Status coll_allreduce_halving(CollCtx &c, const T *in, T *out, size_t n) {
    const int P = c.size, r = c.rank;
    c.params.nranks = P;
    if (P < 2) return Status::unsupported;
    const T *src = coll_ef_input(c, in, n);
    if (!src) return Status::no_memory;
    CMPI_CHECK(coll_shared_scale(c, src, n)); /* once per buffer (terngrad: scaler and cσ) */
    const Plan pl = make_plan(c, n);
    const bool own = own_encoded(*c.codec);
    const Enc e1 = sum_params(c, 1);
    MPI_Comm comm;
    CMPI_CHECK(coll_p2p_comm(c, &comm));

    const int Q = pl.Q, rem = pl.rem;
    const bool extra = r < 2 * rem && r % 2 == 0;
    const bool absorbs = r < 2 * rem && r % 2 == 1;
    const int nr = r < 2 * rem ? r / 2 : r - rem; /* new rank (not for extra ranks) */
    auto old_of = [&](int v) { return v < rem ? 2 * v + 1 : v + rem; };

    size_t smax = pl.fold;
    for (size_t b : pl.step) smax = std::max(smax, b);
    uint8_t *sendb = c.ws->send.get(2 * smax);
    uint8_t *recvb = sendb ? sendb + smax : nullptr;
    uint8_t *slots = c.ws->recv.get(pl.fin * static_cast<size_t>(Q));
    T *acc = be_scratch<T>(c, 0, n);
    T *d = c.ef_new ? be_scratch<T>(c, 2, n) : nullptr;
    if (!sendb || !slots || !acc || (c.ef_new && !d)) return Status::no_memory;
    uint8_t flags = 0;
    const uint64_t call = c.st->calls;

    /* encode n floats at x with e into blob (stride cap); error feedback: ef_new[lo..) += x - D(blob).
     * Returns the bytes to send: cap, or under the entropy stage the (coded) blob's own length --
     * a point-to-point message may be shorter than the receive posted for it. The final blobs
     * (phase 3) travel in the doubling's fixed slots: not coded. */
    auto encode = [&](const Enc &e, int phase, int chunk, const T *x, size_t len, uint8_t *blob, size_t cap,
                      size_t ef_lo) -> size_t {
        ScopedTimer t(c.stats->ns_encode);
        CodecParams p = e.p;
        p.stream = rng_stream(r, call, phase, chunk);
        uint8_t f;
        size_t bl = kBlobHeaderBytes;
        if (flags) {
            blob_write_header(blob, BlobInfo{e.codec->id, flags, p.bits, p.variant, p.param, len, 0});
            f = flags;
        } else {
            f = be_encode(c, *e.codec, p, x, len, blob, cap, &bl);
        }
        if (c.ef_new && !f && !(e.codec->flags & CODEC_LOSSLESS)) {
            coll_ef_update(c, blob, cap, x, len, d);
            be_add(c, ef_new_t<T>(c) + ef_lo, d, len);
        }
        flags |= f;
        if (!coll_entropy_on(c) || phase == 3) return cap;
        if (!f) coll_entropy(c, *e.codec, p, blob, &bl);
        return std::min(bl, cap);
    };
    auto decode = [&](const uint8_t *blob, size_t cap, size_t len, T *dst, bool accumulate) {
        ScopedTimer t(c.stats->ns_decode);
        if (flags) return;
        BlobInfo info;
        Status s = blob_peek(blob, cap, len, &info);
        if (s == Status::ok && info.flags) s = info.flags & BLOB_ABANDON ? Status::corrupt : Status::nonfinite;
        if (s == Status::ok) s = be_decode(c, blob, cap, len, dst, accumulate, c.params);
        flags |= status_flag(s);
    };
    /* error feedback starts at zero; encode() adds what each blob of ours failed to carry */
    if (c.ef_new) be_sub(c, ef_new_t<T>(c), src, src, n);
    const size_t unc = n * sizeof(T);

    if (extra) {
        /* fold: the whole contribution, quantised once, to the partner; the result back */
        const size_t L = encode(e1, 1, 0, src, n, sendb, pl.fold, 0);
        c.stats->bytes_wire += L;
        c.stats->bytes_uncompressed_wire += unc;
        CMPI_CHECK(sendrecv(c, comm, sendb, L, r + 1, nullptr, 0, MPI_PROC_NULL));
        CMPI_CHECK(sendrecv(c, comm, nullptr, 0, MPI_PROC_NULL, slots, pl.fin * Q, r + 1));
    } else {
        /* the own contribution as it enters the sum; a partner's folded one added */
        const bool single = !absorbs; /* step 0 may send straight from src */
        if (absorbs) {
            CMPI_CHECK(sendrecv(c, comm, nullptr, 0, MPI_PROC_NULL, recvb, pl.fold, r - 1));
            if (own) {
                encode(e1, 1, 0, src, n, sendb, pl.fold, 0);
                decode(sendb, pl.fold, n, acc, false);
            } else {
                be_copy(c, acc, src, n);
            }
            decode(recvb, pl.fold, n, acc, true);
        }
        int ca = 0, cb = Q; /* current chunk range */
        for (int s = 0; s < pl.k; ++s) {
            const int mask = Q >> (s + 1), pn = nr ^ mask, peer = old_of(pn);
            const int mid = ca + mask;
            const bool upper = nr & mask;
            const int ka = upper ? mid : ca, kb = upper ? cb : mid; /* kept */
            const int sa = upper ? ca : mid, sb = upper ? mid : cb; /* sent */
            size_t klo, klen, slo, slen;
            chunks_range(n, Q, ka, kb, &klo, &klen);
            chunks_range(n, Q, sa, sb, &slo, &slen);
            const size_t S = pl.step[s];
            size_t L = S; /* the bytes sent (encode) */
            if (s == 0 && single) {
                L = encode(e1, 1, sa, src + slo, slen, sendb, S, slo);
                if (own) { /* the kept half quantised too, its decoded copy enters the sum */
                    encode(e1, 1, ka, src + klo, klen, recvb, S, klo);
                    decode(recvb, S, klen, acc + klo, false);
                } else {
                    be_copy(c, acc + klo, src + klo, klen);
                }
            } else {
                const Enc e = sum_params(c, std::min(P, pl.m << s));
                L = encode(e, 2, s * Q + sa, acc + slo, slen, sendb, S, slo);
            }
            c.stats->bytes_wire += L;
            c.stats->bytes_uncompressed_wire += slen * sizeof(T);
            CMPI_CHECK(sendrecv(c, comm, sendb, L, peer, recvb, S, peer));
            decode(recvb, S, klen, acc + klo, true);
            ca = ka;
            cb = kb;
        }
        /* the owned chunk, a sum of all P contributions, encoded once more */
        size_t lo, len;
        chunk_range(n, Q, nr, &lo, &len);
        encode(pl.efin, 3, nr, acc + lo, len, slots + pl.fin * nr, pl.fin, lo);
        /* allgather by recursive doubling: blobs forwarded unchanged */
        for (int s = 0; s < pl.k; ++s) {
            const int mask = 1 << s, pn = nr ^ mask, peer = old_of(pn);
            const int mine = nr / mask * mask, theirs = pn / mask * mask;
            const size_t b = pl.fin * static_cast<size_t>(mask);
            c.stats->bytes_wire += b;
            c.stats->bytes_uncompressed_wire += static_cast<size_t>(mask) * pl.base * sizeof(T);
            CMPI_CHECK(sendrecv(c, comm, slots + pl.fin * mine, b, peer, slots + pl.fin * theirs, b, peer));
        }
        if (absorbs) {
            c.stats->bytes_wire += pl.fin * Q;
            CMPI_CHECK(sendrecv(c, comm, slots, pl.fin * Q, r - 1, nullptr, 0, MPI_PROC_NULL));
        }
    }
    /* every rank holds the same Q final blobs: any flag anywhere is in one of them */
    uint8_t all = 0;
    for (int j = 0; j < Q; ++j) {
        size_t lo, len;
        chunk_range(n, Q, j, &lo, &len);
        BlobInfo info;
        all |= blob_peek(slots + pl.fin * j, pl.fin, len, &info) == Status::ok ? info.flags : BLOB_ABANDON;
    }
    CMPI_CHECK(coll_flag_status(all));
    ScopedTimer t(c.stats->ns_decode);
    for (int j = 0; j < Q; ++j) {
        size_t lo, len;
        chunk_range(n, Q, j, &lo, &len);
        CMPI_CHECK(be_decode(c, slots + pl.fin * j, pl.fin, len, out + lo, false, c.params));
    }
    return Status::ok;
}

/* Communication of one call (coll/allreduce/allreduce_choice.cc weighs it against two-phase). */
AllreduceCost allreduce_halving_cost(const CollCtx &c, size_t n) {
    AllreduceCost k;
    if (c.size < 2) return k;
    const Plan pl = make_plan(c, n);
    /* the busiest rank: an extra rank's fold and final blobs, plus a new rank's steps */
    k.messages = 2.0 * pl.k + (pl.rem ? 2 : 0);
    double b = pl.rem ? static_cast<double>(pl.fold + pl.fin * pl.Q) : 0;
    for (size_t st : pl.step) b += static_cast<double>(st);
    b += static_cast<double>(pl.fin) * (pl.Q - 1);
    k.bytes = b;
    return k;
}

template Status coll_allreduce_halving(CollCtx &, const float *, float *, size_t);
template Status coll_allreduce_halving(CollCtx &, const double *, double *, size_t);

}  // namespace compmpi

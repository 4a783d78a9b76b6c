// SPDX-License-Identifier: BSD-3-Clause
#include <climits>
#include <cmath>
#include <cstring>
#include <new>

#include "coll.h"
#include "base/fault.h"
#include "base/mpi_next.h"

namespace compmpi {

void chunk_range(size_t n, int p, int j, size_t *lo, size_t *len) {
    size_t base = (n + static_cast<size_t>(p) - 1) / static_cast<size_t>(p);
    base = (base + 15) / 16 * 16;
    size_t a = std::min(n, base * static_cast<size_t>(j));
    size_t b = std::min(n, a + base);
    *lo = a;
    *len = b - a;
}

namespace {
Status check(CollCtx &c, int rc) {
    if (rc == MPI_SUCCESS) return Status::ok;
    c.mpi_err = rc;
    return Status::mpi_error;
}
}  // namespace

Status coll_wait(CollCtx &c, MPI_Request *req) {
    ScopedTimer t(c.stats->ns_comm);
    return check(c, COMPMPI_FAULT_MPI(wait, mpi_next::Wait(req, MPI_STATUS_IGNORE)));
}

void coll_poke(MPI_Request *req) {
    if (!req || *req == MPI_REQUEST_NULL) return;
    int done = 0;
    mpi_next::Test(req, &done, MPI_STATUS_IGNORE);
}

Status mpi_alltoall_bytes(CollCtx &c, const void *send, void *recv, size_t stride) {
    ScopedTimer t(c.stats->ns_comm);
    if (stride <= INT_MAX)
        return check(c, COMPMPI_FAULT_MPI(alltoall, mpi_next::Alltoall(send, static_cast<int>(stride), MPI_BYTE, recv,
                                                                  static_cast<int>(stride), MPI_BYTE, c.comm)));
#ifdef HAVE_MPI_LARGE_COUNT
    return check(c, mpi_next::Alltoall_c(send, static_cast<MPI_Count>(stride), MPI_BYTE, recv,
                                    static_cast<MPI_Count>(stride), MPI_BYTE, c.comm));
#else
    return Status::unsupported;
#endif
}

Status mpi_allgather_inplace_bytes(CollCtx &c, void *buf, size_t stride) {
    ScopedTimer t(c.stats->ns_comm);
    if (stride <= INT_MAX)
        return check(c, COMPMPI_FAULT_MPI(allgather, mpi_next::Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf,
                                                                    static_cast<int>(stride), MPI_BYTE, c.comm)));
#ifdef HAVE_MPI_LARGE_COUNT
    return check(c, mpi_next::Allgather_c(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, static_cast<MPI_Count>(stride),
                                     MPI_BYTE, c.comm));
#else
    return Status::unsupported;
#endif
}

Status mpi_bcast_bytes(CollCtx &c, void *buf, size_t bytes, int root) {
    ScopedTimer t(c.stats->ns_comm);
    if (bytes <= INT_MAX)
        return check(c, COMPMPI_FAULT_MPI(bcast, mpi_next::Bcast(buf, static_cast<int>(bytes), MPI_BYTE, root, c.comm)));
#ifdef HAVE_MPI_LARGE_COUNT
    return check(c, mpi_next::Bcast_c(buf, static_cast<MPI_Count>(bytes), MPI_BYTE, root, c.comm));
#else
    return Status::unsupported;
#endif
}

template <class T>
uint8_t coll_encode(CollCtx &c, const CodecParams &p, const T *in, size_t n, uint8_t *out, size_t cap, size_t *plen) {
    /* test-only fault injection (src/base/fault.h): host blobs only */
    const bool host = COMPMPI_FAULT_ON() && c.be == &backend_cpu();
    if (host && fault_fire(FaultKind::encode_fail, FaultWhere::any)) {
        coll_write_flag(c, p, n, BLOB_ABANDON, out); /* what a failing encoder writes */
        if (plen) *plen = kBlobHeaderBytes;
        return BLOB_ABANDON;
    }
    if (host && fault_fire(FaultKind::alloc_throw, FaultWhere::any)) throw std::bad_alloc(); /* as a vector's */
    const uint8_t flag = be_encode(c, *c.codec, p, in, n, out, cap, plen);
    if (host && flag == 0) coll_fault_encoded(out, cap, plen); /* corrupt_blob, truncate_blob, corrupt_payload */
    return flag;
}

template <class T> Status coll_stage_down(CollCtx &c, const T *src, size_t n, HostStage &h) {
    const CodecOps &none = *codec_by_id(static_cast<int>(CodecId::none));
    CodecParams np{};
    np.elem = elem_of<T>();
    const size_t cap = blob_max_bytes(none, n, np);
    try {
        h.blob.resize(cap);
    } catch (const std::bad_alloc &) {
        return Status::no_memory;
    }
    h.len = 0;
    /* none carries NaN/Inf verbatim: it never flags */
    if (be_encode(c, none, np, src, n, h.blob.data(), cap, &h.len) != 0) return Status::corrupt;
    return h.len == kBlobHeaderBytes + n * sizeof(T) ? Status::ok : Status::corrupt;
}

template <class T> Status coll_stage_up(CollCtx &c, HostStage &h, T *dst, size_t n) {
    CodecParams np{};
    np.elem = elem_of<T>();
    return be_decode(c, h.blob.data(), h.len, n, dst, false, np);
}

template <class T> Status coll_upload(CollCtx &c, const T *h, size_t n, T *dst) {
    const CodecOps &none = *codec_by_id(static_cast<int>(CodecId::none));
    CodecParams np{};
    np.elem = elem_of<T>();
    HostStage hs;
    try {
        hs.blob.resize(blob_max_bytes(none, n, np));
    } catch (const std::bad_alloc &) {
        return Status::no_memory;
    }
    CMPI_CHECK(blob_encode(none, np, h, n, hs.blob.data(), hs.blob.size(), &hs.len));
    return coll_stage_up(c, hs, dst, n);
}

template <class T>
int coll_mpi_elems(CollCtx &c, const void *in, T *io, size_t n, const std::function<int(const void *, T *)> &fn) {
    if (!c.stage_mpi) return fn(in, io);
    HostStage hi, ho;
    const bool in_data = in && in != MPI_IN_PLACE;
    if (in_data && coll_stage_down(c, static_cast<const T *>(in), n, hi) != Status::ok) return MPI_ERR_BUFFER;
    if (io && coll_stage_down(c, io, n, ho) != Status::ok) return MPI_ERR_BUFFER;
    const int rc = fn(in_data ? hi.data<T>() : in, io ? ho.data<T>() : nullptr);
    if (rc == MPI_SUCCESS && io && coll_stage_up(c, ho, io, n) != Status::ok) return MPI_ERR_BUFFER;
    return rc;
}

void coll_write_flag(CollCtx &c, const CodecParams &p, size_t n, uint8_t flag, uint8_t *out) {
    blob_write_header(out, BlobInfo{c.codec->id, flag, p.bits, p.variant, p.param, n, 0, p.elem});
}

bool coll_quantise_once(const CodecOps &codec) { return codec.id == CodecId::q8 || codec.id == CodecId::qsgd; }

bool coll_gather_may_sum(const CodecOps &codec) { return coll_quantise_once(codec) || codec.id == CodecId::terngrad; }

bool coll_own_encoded(const CodecOps &codec) { return (codec.flags & CODEC_STOCHASTIC) || coll_quantise_once(codec); }

template <class T>
uint8_t coll_accumulate(CollCtx &c, bool own_encoded, const T *own, size_t len, T *acc, size_t cap,
                        const std::function<const uint8_t *(int)> &blob) {
    uint8_t flags = 0;
    for (int j = 0; j < c.size && !flags; ++j) {
        if (j == c.rank && !own_encoded) {
            if (j == 0) be_copy(c, acc, own, len);
            else be_add(c, acc, own, len);
        } else {
            Status s = be_decode(c, blob(j), cap, len, acc, j > 0, c.params);
            if (s == Status::nonfinite) flags |= BLOB_NONFINITE;
            else if (s != Status::ok) flags |= BLOB_ABANDON;
        }
    }
    return flags;
}

void coll_entropy(CollCtx &c, const CodecOps &codec, const CodecParams &p, uint8_t *blob, size_t *len) {
    if (!c.entropy_encode || !coll_entropy_on(c)) return;
    ScopedTimer t(c.stats->ns_encode);
    blob_entropy_encode(codec, p, blob, len, c.entropy);
}

size_t coll_blob_len(const uint8_t *blob, size_t cap) {
    if (cap < kBlobHeaderBytes) return cap;
    uint64_t payload = 0;
    std::memcpy(&payload, blob + 24, sizeof payload);
    return payload <= cap - kBlobHeaderBytes ? kBlobHeaderBytes + static_cast<size_t>(payload) : kBlobHeaderBytes;
}

Status coll_agree_stride(CollCtx &c, size_t mine, size_t cap, size_t *stride) {
    uint64_t m = mine, all = 0;
    {
        ScopedTimer t(c.stats->ns_comm);
        const int rc = COMPMPI_FAULT_MPI(allreduce, mpi_next::Allreduce(&m, &all, 1, MPI_UINT64_T, MPI_MAX, c.comm));
        if (rc != MPI_SUCCESS) return c.mpi_err = rc, Status::mpi_error;
    }
    c.stats->bytes_wire += sizeof(uint64_t) * static_cast<size_t>(c.size - 1);
    const size_t s = (static_cast<size_t>(all) + 63) / 64 * 64;
    *stride = std::min(std::max<size_t>(s, 64), cap); /* alike on every rank */
    return Status::ok;
}

void coll_compact(uint8_t *base, int cnt, size_t cap, size_t stride) {
    if (stride == cap) return;
    for (int j = 1; j < cnt; ++j) /* stride < cap: each destination lies before its source */
        std::memmove(base + stride * static_cast<size_t>(j), base + cap * static_cast<size_t>(j), stride);
}

Status coll_flag_status(uint8_t flags) {
    if (flags & BLOB_ABANDON) return Status::corrupt;
    if (flags & BLOB_NONFINITE) return Status::nonfinite;
    return Status::ok;
}

template <class T> Status coll_shared_scale(CollCtx &c, const T *in, size_t n) {
    if (!(c.codec->flags & CODEC_SHARED_SCALE) || !(sizeof(T) == 8 ? c.codec->prepare64 != nullptr : c.codec->prepare != nullptr))
        return Status::ok;
    double stat = 0;
    float clip_at = 0;
    {
        ScopedTimer t(c.stats->ns_encode);
        CodecParams q = c.params;
        q.clip_out = &clip_at;
        Status s = be_prepare(c, q, in, n, &stat);
        if (s != Status::ok || !std::isfinite(stat)) stat = HUGE_VAL; /* every rank falls back */
    }
    double all = 0;
    {
        ScopedTimer t(c.stats->ns_comm);
        int rc = COMPMPI_FAULT_MPI(allreduce, mpi_next::Allreduce(&stat, &all, 1, MPI_DOUBLE, MPI_MAX, c.comm));
        if (rc != MPI_SUCCESS) {
            c.mpi_err = rc;
            return Status::mpi_error;
        }
    }
    c.stats->bytes_wire += sizeof(double) * static_cast<size_t>(c.size - 1);
    if (!std::isfinite(all)) return Status::nonfinite;
    c.params.shared_scale = all;
    /* the clip threshold of this rank's whole contribution, for every chunk and segment */
    if (clip_at > 0) c.params.clip_at = clip_at;
    return Status::ok;
}

template <class T> const T *coll_ef_input(CollCtx &c, const T *in, size_t n) {
    if (!c.ef_res) return in;
    T *tmp = be_scratch<T>(c, 1, n);
    if (tmp) be_sum(c, tmp, in, static_cast<const T *>(c.ef_res), n);
    return tmp;
}

template <class T> void coll_ef_update(CollCtx &c, const uint8_t *blob, size_t cap, const T *src, size_t n, T *ef_new) {
    if (be_decode(c, blob, cap, n, ef_new, false, c.params) != Status::ok) {
        be_copy(c, ef_new, src, n); /* flagged: the call falls back anyway */
        return;
    }
    be_sub(c, ef_new, src, ef_new, n);
}

Status coll_p2p_comm(CollCtx &c, MPI_Comm *out) {
    for (const auto &pr : c.st->p2p)
        if (pr.first == c.comm) return *out = pr.second, Status::ok;
    MPI_Comm d = MPI_COMM_NULL;
    const int rc = mpi_next::Comm_split(c.comm, 0, c.rank, &d); /* split: no attributes copied */
    if (rc != MPI_SUCCESS) return c.mpi_err = rc, Status::mpi_error;
    c.st->p2p.emplace_back(c.comm, d);
    *out = d;
    return Status::ok;
}

uint64_t rng_stream(int rank, uint64_t call, int phase, int chunk) {
    uint64_t x = (static_cast<uint64_t>(static_cast<uint32_t>(rank)) << 32) ^ (call * 0x9E3779B97F4A7C15ull) ^
                 (static_cast<uint64_t>(phase) << 60) ^ (static_cast<uint64_t>(static_cast<uint32_t>(chunk)) << 16);
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

void coll_fault_encoded(uint8_t *out, size_t cap, size_t *plen) {
    if (cap < kBlobHeaderBytes) return;
    uint64_t payload = 0; /* the header's payload length (u64 at byte 24, little-endian) */
    std::memcpy(&payload, out + 24, sizeof payload);
    if (fault_fire(FaultKind::corrupt_blob, FaultWhere::any)) {
        out[16] ^= 0x01; /* the header's element count: a receiver expects another */
    } else if (fault_fire(FaultKind::truncate_blob, FaultWhere::any)) {
        /* the message ends before the payload does: the header claims one byte more than the
         * slot (cap) holds; a sender that states its length states half the payload */
        const uint64_t claim = cap - kBlobHeaderBytes + 1;
        std::memcpy(out + 24, &claim, sizeof claim);
        if (plen) *plen = kBlobHeaderBytes + payload / 2;
    } else if (payload && fault_fire(FaultKind::corrupt_payload, FaultWhere::any)) {
        out[kBlobHeaderBytes + payload / 2] ^= 0x80; /* one bit, mid-payload */
    }
}

CollState::~CollState() {
    int finalized = 0;
    mpi_next::Finalized(&finalized);
    if (finalized) return;
    if (hier.leaders != MPI_COMM_NULL) mpi_next::Comm_free(&hier.leaders);
    if (hier.node != MPI_COMM_NULL) mpi_next::Comm_free(&hier.node);
    for (auto &pr : p2p)
        if (pr.second != MPI_COMM_NULL) mpi_next::Comm_free(&pr.second);
}

/* the two element types every algorithm runs on */
#define COMPMPI_COLL_UTIL(T)                                                                                         \
    template uint8_t coll_encode(CollCtx &, const CodecParams &, const T *, size_t, uint8_t *, size_t, size_t *);  \
    template Status coll_stage_down(CollCtx &, const T *, size_t, HostStage &);                                      \
    template Status coll_stage_up(CollCtx &, HostStage &, T *, size_t);                                              \
    template Status coll_upload(CollCtx &, const T *, size_t, T *);                                                  \
    template int coll_mpi_elems(CollCtx &, const void *, T *, size_t, const std::function<int(const void *, T *)> &); \
    template uint8_t coll_accumulate(CollCtx &, bool, const T *, size_t, T *, size_t,                                \
                                     const std::function<const uint8_t *(int)> &);                                   \
    template Status coll_shared_scale(CollCtx &, const T *, size_t);                                                 \
    template const T *coll_ef_input(CollCtx &, const T *, size_t);                                                   \
    template void coll_ef_update(CollCtx &, const uint8_t *, size_t, const T *, size_t, T *);
COMPMPI_COLL_UTIL(float)
COMPMPI_COLL_UTIL(double)
#undef COMPMPI_COLL_UTIL

}  // namespace compmpi

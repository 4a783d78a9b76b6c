// SPDX-License-Identifier: BSD-3-Clause
/* The call as MPI_FLOAT over dense buffers, from type signatures (src/runtime/eligibility.h,
 * "Datatypes"; docs/hardening.md, "Eligibility by type signature"). */
#include <climits>
#include <cstring>

#include "base/mpi_family.h"
#include "runtime/cuda_loader.h"
#include "runtime/eligibility.h"
#include "base/mpi_next.h"

namespace compmpi {

namespace {

/* One datatype's constructor arguments (MPI_Type_get_envelope/contents), the returned
 * derived types freed on scope exit. Large-count constructors (MPI-4 _c) fill counts. */
struct Contents {
    int combiner = 0;
    bool ok = false;
    std::vector<int> ints;
    std::vector<MPI_Aint> addrs;
    std::vector<MPI_Count> counts;
    std::vector<MPI_Datatype> types;

    explicit Contents(MPI_Datatype t) {
#ifdef HAVE_MPI_LARGE_COUNT
        MPI_Count ni = 0, na = 0, nc = 0, nd = 0;
        if (mpi_next::Type_get_envelope_c(t, &ni, &na, &nc, &nd, &combiner) != MPI_SUCCESS) return;
#else
        int ni = 0, na = 0, nd = 0, nc = 0;
        if (mpi_next::Type_get_envelope(t, &ni, &na, &nd, &combiner) != MPI_SUCCESS) return;
#endif
        if (combiner == MPI_COMBINER_NAMED) { ok = true; return; }
        ints.resize(static_cast<size_t>(ni) + 1);
        addrs.resize(static_cast<size_t>(na) + 1);
        counts.resize(static_cast<size_t>(nc) + 1);
        types.assign(static_cast<size_t>(nd) + 1, MPI_DATATYPE_NULL);
#ifdef HAVE_MPI_LARGE_COUNT
        int rc = mpi_next::Type_get_contents_c(t, ni, na, nc, nd, ints.data(), addrs.data(), counts.data(), types.data());
#else
        int rc = mpi_next::Type_get_contents(t, ni, na, nd, ints.data(), addrs.data(), types.data());
#endif
        ints.resize(static_cast<size_t>(ni));
        addrs.resize(static_cast<size_t>(na));
        counts.resize(static_cast<size_t>(nc));
        types.resize(static_cast<size_t>(nd));
        ok = rc == MPI_SUCCESS;
    }
    ~Contents() {
        for (MPI_Datatype &d : types) {
            int comb = MPI_COMBINER_NAMED;
#ifdef HAVE_MPI_LARGE_COUNT
            MPI_Count ni, na, nc, nd;
            int rc = d == MPI_DATATYPE_NULL ? MPI_ERR_TYPE : mpi_next::Type_get_envelope_c(d, &ni, &na, &nc, &nd, &comb);
#else
            int ni, na, nd;
            int rc = d == MPI_DATATYPE_NULL ? MPI_ERR_TYPE : mpi_next::Type_get_envelope(d, &ni, &na, &nd, &comb);
#endif
            if (rc == MPI_SUCCESS && comb != MPI_COMBINER_NAMED) mpi_next::Type_free(&d);
        }
    }
    Contents(const Contents &) = delete;
    Contents &operator=(const Contents &) = delete;
};

bool type_size(MPI_Datatype t, MPI_Count *sz) {
    return mpi_next::Type_size_x(t, sz) == MPI_SUCCESS && *sz != MPI_UNDEFINED && *sz >= 0;
}

/* Every basic type in t's signature is an IEEE value of type e (4-byte floats or 8-byte
 * doubles). Members a struct repeats zero times, and subtypes of size 0, are not in the
 * signature and do not count. */
bool signature_only(MPI_Datatype t, Elem e) {
    MPI_Count sz;
    if (!type_size(t, &sz)) return false;
    if (sz == 0) return true;
    Contents c(t);
    if (!c.ok) return false;
    Elem pe;
    if (c.combiner == MPI_COMBINER_NAMED) return fp_predefined(t, &pe) && pe == e;
    if (c.combiner == MPI_COMBINER_F90_REAL) return static_cast<size_t>(sz) == elem_bytes(e);
    if (c.types.size() == 1) return signature_only(c.types[0], e); /* dup, contiguous, vector, indexed, subarray, darray, resized */
    if (c.types.empty()) return false;                               /* f90 complex / integer */
    /* struct: count, then one block length per member */
    for (size_t i = 0; i < c.types.size(); ++i) {
        MPI_Count blen = c.counts.empty() ? (i + 1 < c.ints.size() ? c.ints[i + 1] : 0)
                                          : (i + 1 < c.counts.size() ? c.counts[i + 1] : 0);
        if (blen > 0 && !signature_only(c.types[i], e)) return false;
    }
    return true;
}

/* ---- dense-layout proof: the typemap flattened into runs of elements in signature order,
 * adjacent runs merged; gives up (pack instead) beyond kMaxRuns or on constructors it
 * does not walk. */
struct Run {
    MPI_Aint disp; /* bytes from the buffer address */
    MPI_Count n;   /* elements */
};
/* The runs, and the size of their elements (4 or 8 bytes). */
struct Runs {
    std::vector<Run> r;
    MPI_Aint esize = 4;
    bool empty() const { return r.empty(); }
    size_t size() const { return r.size(); }
    const Run &operator[](size_t i) const { return r[i]; }
};
constexpr size_t kMaxRuns = 64;

bool append(Runs &out, Run r) {
    if (r.n <= 0) return true;
    if (!out.r.empty() && out.r.back().disp + static_cast<MPI_Aint>(out.r.back().n) * out.esize == r.disp)
        out.r.back().n += r.n;
    else out.r.push_back(r);
    return out.r.size() <= kMaxRuns;
}

/* cnt copies of R, copy i shifted by base + i*stride. */
bool repeat(const Runs &R, MPI_Count cnt, MPI_Aint stride, MPI_Aint base, Runs &out) {
    if (cnt <= 0 || R.empty()) return true;
    if (R.size() == 1 && stride == static_cast<MPI_Aint>(R[0].n) * R.esize)
        return append(out, Run{base + R[0].disp, R[0].n * cnt});
    for (MPI_Count i = 0; i < cnt; ++i) /* each copy adds a run: at most kMaxRuns + 1 rounds */
        for (const Run &r : R.r)
            if (!append(out, Run{base + static_cast<MPI_Aint>(i) * stride + r.disp, r.n})) return false;
    return true;
}

bool extent(MPI_Datatype t, MPI_Aint *ext) {
    MPI_Aint lb;
    return mpi_next::Type_get_extent(t, &lb, ext) == MPI_SUCCESS;
}

bool flatten(MPI_Datatype t, Runs &out) {
    MPI_Count sz;
    if (!type_size(t, &sz)) return false;
    if (sz == 0) return true;
    Contents c(t);
    if (!c.ok) return false;
    if (c.combiner == MPI_COMBINER_NAMED || c.combiner == MPI_COMBINER_F90_REAL) return append(out, Run{0, 1});
    if (!c.counts.empty()) return false; /* large-count constructor: packed */
    const auto &I = c.ints;
    const auto &A = c.addrs;
    auto sub = [&](MPI_Datatype old, Runs &R, MPI_Aint *ext) {
        R.esize = out.esize;
        return flatten(old, R) && extent(old, ext);
    };
    Runs R, blk;
    blk.esize = out.esize;
    MPI_Aint e = 0;
    switch (c.combiner) {
        case MPI_COMBINER_DUP:
        case MPI_COMBINER_RESIZED: /* extent changes, typemap does not */
            return flatten(c.types[0], out);
        case MPI_COMBINER_CONTIGUOUS:
            return sub(c.types[0], R, &e) && repeat(R, I[0], e, 0, out);
        case MPI_COMBINER_VECTOR:
            return sub(c.types[0], R, &e) && repeat(R, I[1], e, 0, blk) && repeat(blk, I[0], I[2] * e, 0, out);
        case MPI_COMBINER_HVECTOR:
            return sub(c.types[0], R, &e) && repeat(R, I[1], e, 0, blk) && repeat(blk, I[0], A[0], 0, out);
        case MPI_COMBINER_INDEXED:
            if (!sub(c.types[0], R, &e)) return false;
            for (int i = 0; i < I[0]; ++i)
                if (!repeat(R, I[1 + i], e, I[1 + I[0] + i] * e, out)) return false;
            return true;
        case MPI_COMBINER_HINDEXED:
            if (!sub(c.types[0], R, &e)) return false;
            for (int i = 0; i < I[0]; ++i)
                if (!repeat(R, I[1 + i], e, A[i], out)) return false;
            return true;
        case MPI_COMBINER_INDEXED_BLOCK:
            if (!sub(c.types[0], R, &e)) return false;
            for (int i = 0; i < I[0]; ++i)
                if (!repeat(R, I[1], e, I[2 + i] * e, out)) return false;
            return true;
        case MPI_COMBINER_HINDEXED_BLOCK:
            if (!sub(c.types[0], R, &e)) return false;
            for (int i = 0; i < I[0]; ++i)
                if (!repeat(R, I[1], e, A[i], out)) return false;
            return true;
        case MPI_COMBINER_STRUCT:
            for (int i = 0; i < I[0]; ++i) {
                if (I[1 + i] <= 0) continue;
                Runs Ri;
                if (!sub(c.types[i], Ri, &e) || !repeat(Ri, I[1 + i], e, A[i], out)) return false;
            }
            return true;
        default: return false; /* subarray, darray, deprecated forms: packed */
    }
}

}  // namespace

bool fp_predefined(MPI_Datatype t, Elem *e) {
    if (t == MPI_DATATYPE_NULL) return false;
    if (t == MPI_FLOAT) return *e = Elem::f32, true;
    if (t == MPI_DOUBLE) return *e = Elem::f64, true;
    if (t != MPI_REAL && t != MPI_REAL4 && t != MPI_REAL8 && t != MPI_DOUBLE_PRECISION) return false;
    /* Fortran REAL is 4 bytes unless MPI was built with e.g. -freal-4-real-8: by size */
    MPI_Count sz;
    if (!type_size(t, &sz) || (sz != 4 && sz != 8)) return false;
    *e = sz == 8 ? Elem::f64 : Elem::f32;
    return true;
}

bool fp_signature(MPI_Datatype t, Elem *e, MPI_Count *k) {
    if (fp_predefined(t, e)) {
        *k = 1;
        return true;
    }
    if (!kMpiDerivedTypesKnown) return false; /* SimGrid SMPI: derived types pass through (src/base/mpi_family.h) */
    MPI_Count sz;
    if (t == MPI_DATATYPE_NULL || !type_size(t, &sz)) return false;
    for (Elem cand : {Elem::f32, Elem::f64}) {
        const MPI_Count es = static_cast<MPI_Count>(elem_bytes(cand));
        if (sz % es == 0 && signature_only(t, cand)) {
            *e = cand;
            *k = sz / es;
            return true;
        }
    }
    return false;
}

bool fp_dense(MPI_Datatype t, Elem el, MPI_Count count, MPI_Aint *offset) {
    *offset = 0;
    Elem pe;
    if (fp_predefined(t, &pe) || count == 0) return true;
    Runs R, all;
    R.esize = all.esize = static_cast<MPI_Aint>(elem_bytes(el));
    MPI_Aint e;
    if (!flatten(t, R) || !extent(t, &e) || !repeat(R, count, e, 0, all)) return false;
    if (all.empty()) return true;
    if (all.size() != 1) return false;
    *offset = all[0].disp;
    return true;
}

namespace {
const char kExternal32[] = "external32"; /* the one representation MPI defines: big-endian IEEE */

/* external32 is big-endian: each element's bytes reversed on this (little-endian) host */
void swap_elems(void *p, size_t n, Elem e) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (e == Elem::f64) {
        uint64_t *w = static_cast<uint64_t *>(p);
        for (size_t i = 0; i < n; ++i) w[i] = __builtin_bswap64(w[i]);
    } else {
        uint32_t *w = static_cast<uint32_t *>(p);
        for (size_t i = 0; i < n; ++i) w[i] = __builtin_bswap32(w[i]);
    }
#else
    (void)p, (void)n, (void)e;
#endif
}
}  // namespace

int fp_pack(const void *buf, MPI_Count count, MPI_Datatype t, Elem e, void *out, MPI_Count n) {
    const MPI_Count bytes = n * static_cast<MPI_Count>(elem_bytes(e));
    int rc;
#ifdef HAVE_MPI_LARGE_COUNT
    MPI_Count pos = 0;
    rc = mpi_next::Pack_external_c(kExternal32, buf, count, t, out, bytes, &pos);
#else
    MPI_Aint pos = 0;
    if (count > INT_MAX) return MPI_ERR_COUNT;
    rc = mpi_next::Pack_external(mpi_in(kExternal32), mpi_in(buf), static_cast<int>(count), t, out,
                            static_cast<MPI_Aint>(bytes), &pos);
#endif
    if (rc != MPI_SUCCESS) return rc;
    if (pos != bytes) return MPI_ERR_TYPE;
    swap_elems(out, static_cast<size_t>(n), e);
    return MPI_SUCCESS;
}

int fp_unpack(const void *in, MPI_Count n, Elem e, void *buf, MPI_Count count, MPI_Datatype t) {
    const MPI_Count bytes = n * static_cast<MPI_Count>(elem_bytes(e));
    std::vector<uint64_t> be((static_cast<size_t>(bytes) + 7) / 8);
    if (n) std::memcpy(be.data(), in, static_cast<size_t>(bytes));
    swap_elems(be.data(), static_cast<size_t>(n), e);
#ifdef HAVE_MPI_LARGE_COUNT
    MPI_Count pos = 0;
    int rc = mpi_next::Unpack_external_c(kExternal32, be.data(), bytes, &pos, buf, count, t);
#else
    MPI_Aint pos = 0;
    if (count > INT_MAX) return MPI_ERR_COUNT;
    int rc = mpi_next::Unpack_external(mpi_in(kExternal32), be.data(), static_cast<MPI_Aint>(bytes), &pos, buf,
                                  static_cast<int>(count), t);
#endif
    if (rc != MPI_SUCCESS) return rc;
    return pos == bytes ? MPI_SUCCESS : MPI_ERR_TYPE;
}

int float_view_begin(const CollArgs &a, int rank, int nranks, FloatView *v, bool *device) {
    *device = false;
    v->args = a;
    v->args.key = a.key ? a.key : a.recvbuf;
    v->unpack = false;
    v->nranks = nranks;
    /* predefined float types only, as allreduce: used in place, arguments unchanged (the
     * exact fallback needs the caller's recvcount / recvcounts) */
    if (coll_is_reduce_scatter(a.kind)) return MPI_SUCCESS;
    const MPI_Count n = coll_elements(a);
    const Elem el = a.elem;
    const MPI_Datatype dt = el == Elem::f64 ? MPI_DOUBLE : MPI_FLOAT;
    CollArgs &b = v->args;
    b.count = n;
    b.datatype = dt;
    if (a.kind == Coll::allgather) b.recvcount = n, b.recvtype = dt;
    v->elem = el;
    if (n > INT_MAX) b.large_count = true; /* eligible only where the _c calls exist */
    MPI_Aint off = 0;
    auto shift = [](const void *p, MPI_Aint o) { return static_cast<const char *>(p) + o; };
    switch (a.kind) {
        case Coll::allreduce: return MPI_SUCCESS; /* predefined types only */
        case Coll::bcast:
            if (fp_dense(a.datatype, el, a.count, &off)) {
                b.recvbuf = const_cast<char *>(shift(a.recvbuf, off));
                return MPI_SUCCESS;
            }
            if (cuda_is_device_ptr(a.recvbuf)) return *device = true, MPI_SUCCESS;
            b.recvbuf = v->resize(v->recv, static_cast<size_t>(n));
            v->unpack = true;
            return rank == a.root ? fp_pack(a.recvbuf, a.count, a.datatype, el, b.recvbuf, n) : MPI_SUCCESS;
        case Coll::allgather: {
            if (a.sendbuf != MPI_IN_PLACE) {
                if (fp_dense(a.datatype, el, a.count, &off)) {
                    b.sendbuf = shift(a.sendbuf, off);
                } else {
                    if (cuda_is_device_ptr(a.sendbuf)) return *device = true, MPI_SUCCESS;
                    void *packed = v->resize(v->send, static_cast<size_t>(n));
                    int rc = fp_pack(a.sendbuf, a.count, a.datatype, el, packed, n);
                    if (rc != MPI_SUCCESS) return rc;
                    b.sendbuf = packed;
                }
            }
            /* block r of the result is elements [r*recvcount, (r+1)*recvcount) of recvtype */
            const MPI_Count all = a.recvcount * nranks;
            if (fp_dense(a.recvtype, el, all, &off)) {
                b.recvbuf = const_cast<char *>(shift(a.recvbuf, off));
                return MPI_SUCCESS;
            }
            if (cuda_is_device_ptr(a.recvbuf)) return *device = true, MPI_SUCCESS;
            b.recvbuf = v->resize(v->recv, static_cast<size_t>(n) * static_cast<size_t>(nranks));
            v->unpack = true;
            if (a.sendbuf == MPI_IN_PLACE) { /* this rank's block is its input */
                MPI_Aint lb, e;
                if (mpi_next::Type_get_extent(a.recvtype, &lb, &e) != MPI_SUCCESS) return MPI_ERR_TYPE;
                return fp_pack(shift(a.recvbuf, e * static_cast<MPI_Aint>(a.recvcount) * rank), a.recvcount,
                               a.recvtype, el, static_cast<char *>(b.recvbuf) + static_cast<size_t>(n) * rank * elem_bytes(el), n);
            }
            return MPI_SUCCESS;
        }
        default: return MPI_ERR_INTERN;
    }
}

int float_view_end(const CollArgs &a, FloatView &v) {
    if (!v.unpack) return MPI_SUCCESS;
    if (a.kind == Coll::bcast) return fp_unpack(v.recv.data(), coll_elements(a), v.elem, a.recvbuf, a.count, a.datatype);
    return fp_unpack(v.recv.data(), coll_elements(a) * v.nranks, v.elem, a.recvbuf, a.recvcount * v.nranks, a.recvtype);
}

}  // namespace compmpi

// SPDX-License-Identifier: BSD-3-Clause
#include "runtime/eligibility.h"

#include <climits>
#include <cstring>

#include "codec.h"
#include "runtime/cuda_loader.h"
#include <atomic>

#include "base/log.h"
#include "base/mpi_family.h"
#include "runtime/costmodel.h"
#include "runtime/policy.h"
#include "runtime/progress.h"
#include "runtime/runtime.h"
#include "base/mpi_next.h"

namespace compmpi {

namespace {

using PreRule = bool (*)(CollArgs &);
using StateRule = bool (*)(const CollArgs &, const CommState &);

/* Decided from the type signature only, which MPI requires every rank to share: the same
 * answer on every rank however each describes its buffer (src/runtime/eligibility.h). Floats
 * or doubles; a.elem says which. */
bool is_fp(CollArgs &a) {
    MPI_Count k = 0, elems = 0;
    Elem e = Elem::f32;
    switch (a.kind) {
        case Coll::allreduce:
            if (!fp_predefined(a.datatype, &e)) return false;
            elems = a.count;
            break;
        case Coll::bcast:
            if (!fp_signature(a.datatype, &e, &k)) return false;
            elems = a.count * k;
            break;
        case Coll::allgather: {
            if (!fp_signature(a.recvtype, &e, &k)) return false;
            elems = a.recvcount * k;
            if (a.sendbuf != MPI_IN_PLACE) {
                MPI_Count ks = 0;
                Elem es = Elem::f32;
                if (!fp_signature(a.datatype, &es, &ks) || es != e || a.count * ks != elems) return false;
            }
            break;
        }
        case Coll::reduce_scatter_block:
        case Coll::reduce_scatter: {
            /* MPI_SUM on predefined types only, as allreduce; the input is every rank's block */
            if (!fp_predefined(a.datatype, &e)) return false;
            int p = 0;
            if (mpi_next::Comm_size(a.comm, &p) != MPI_SUCCESS) return false;
            for (int j = 0; j < p; ++j) {
                const MPI_Count kb = coll_block_count(a, j);
                if (kb < 0) return false;
                elems += kb;
            }
            break;
        }
        default: return false;
    }
#ifndef HAVE_MPI_LARGE_COUNT
    if (elems > INT_MAX) return false; /* the exact fallback of the float view needs int counts */
#endif
    a.elems = elems;
    a.elem = e;
    return true;
}

bool not_float16(CollArgs &a) {
    return !mpi_is_float16(a.datatype) && !(a.kind == Coll::allgather && mpi_is_float16(a.recvtype));
}
bool is_sum(CollArgs &a) { return (a.kind != Coll::allreduce && !coll_is_reduce_scatter(a.kind)) || a.op == MPI_SUM; }
bool non_empty(CollArgs &a) { return coll_elements(a) > 0; }
/* sendbuf == recvbuf without MPI_IN_PLACE is erroneous: let MPI report it. */
bool no_alias(CollArgs &a) { return a.kind == Coll::bcast || a.sendbuf != a.recvbuf; }

bool intracomm(const CollArgs &, const CommState &st) { return !st.inter; }
bool several_ranks(const CollArgs &, const CommState &st) { return st.size > 1; }
bool agreed(const CollArgs &, const CommState &st) { return !st.mismatch; }
bool coll_enabled(const CollArgs &a, const CommState &st) {
    int bit = a.kind == Coll::allreduce ? coll_kind::allreduce
              : a.kind == Coll::allgather ? coll_kind::allgather
              : a.kind == Coll::reduce_scatter_block ? coll_kind::reduce_scatter_block
              : a.kind == Coll::reduce_scatter ? coll_kind::reduce_scatter : coll_kind::bcast;
    return (st.settings.collectives >> bit) & 1u;
}
static_assert(static_cast<int>(Coll::reduce_scatter_block) == coll_kind::reduce_scatter_block &&
                  static_cast<int>(Coll::reduce_scatter) == coll_kind::reduce_scatter,
              "a Coll's value is its bit in the collectives setting");
bool codec_on(const CollArgs &, const CommState &st) { return st.settings.codec != static_cast<int>(CodecId::none); }
/* fft_topk only where its transforms were probed alike on every rank (state_agree_fft) */
bool fft_alike(const CollArgs &a, const CommState &st) {
    const CodecOps *c = policy_codec(st.settings, a.elem);
    return !c || c->id != CodecId::fft_topk || st.fft > 0;
}
bool big_enough(const CollArgs &a, const CommState &st) {
    return static_cast<uint64_t>(coll_elements(a)) * elem_bytes(a.elem) >= st.settings.min_bytes;
}
/* doubles: only with a codec that has an fp64 form (src/base/codecs.def, kernels/codec.h) */
bool codec_fp64(const CollArgs &a, const CommState &st) {
    if (a.elem != Elem::f64) return true;
    const CodecOps *c = policy_codec(st.settings, Elem::f64);
    return c && codec_has_elem(*c, Elem::f64);
}
/* doubles: an explicit width must be one the codec has for doubles (bitpack: 16..64). The
 * setting is the user's: refused for doubles with a message (once per process), applied to
 * floats. */
bool bits_fp64(const CollArgs &a, const CommState &st) {
    if (a.elem != Elem::f64 || !st.settings.bits) return true;
    const CodecOps *c = policy_codec(st.settings, Elem::f64);
    /* a lossy codec not opted in for doubles: they run the lossless codec, which has no width */
    if (!c || static_cast<int>(c->id) != st.settings.codec || codec_bits_ok(*c, static_cast<int>(st.settings.bits), Elem::f64)) return true;
    static std::atomic<bool> said{false};
    if (!said.exchange(true))
        log_warn("bits=%lld is not a width codec %s has for doubles (%d..%d in steps of %d): calls on doubles pass "
                 "through to MPI unchanged (reason bits_no_fp64); floats keep bits=%lld",
                 static_cast<long long>(st.settings.bits), c->name, c->bits64_min, c->bits64_max, c->bits64_step,
                 static_cast<long long>(st.settings.bits));
    return false;
}
/* error_bound: host data only (device buffers would need the bound's scans on the device; no
 * GPU was available to test one): device calls pass through, reason error_bound_device */
bool bound_host(const CollArgs &a, const CommState &st) {
    if (!error_bound_on(st.settings.error_bound)) return true;
    return !(cuda_is_device_ptr(a.recvbuf) ||
             (a.sendbuf && a.sendbuf != MPI_IN_PLACE && cuda_is_device_ptr(a.sendbuf)));
}
/* floats: a codec with an fp32 form (not fp32, which narrows doubles), and a width it has for
 * floats (bits 40..64 are widths for doubles only) */
bool codec_fp32(const CollArgs &a, const CommState &st) {
    if (a.elem != Elem::f32) return true;
    const CodecOps *c = policy_codec(st.settings, Elem::f32);
    return c && codec_has_elem(*c, Elem::f32);
}
bool bits_fp32(const CollArgs &a, const CommState &st) {
    if (a.elem != Elem::f32 || !st.settings.bits) return true;
    const CodecOps *c = policy_codec(st.settings, Elem::f32);
    if (!c || static_cast<int>(c->id) != st.settings.codec || codec_bits_ok(*c, static_cast<int>(st.settings.bits), Elem::f32)) return true;
    static std::atomic<bool> said{false};
    if (!said.exchange(true))
        log_warn("bits=%lld is not a width codec %s has for floats (%d..%d in steps of %d): calls on floats pass "
                 "through to MPI unchanged (reason bits_no_fp32); doubles keep bits=%lld",
                 static_cast<long long>(st.settings.bits), c->name, c->bits_min, c->bits_max, c->bits_step,
                 static_cast<long long>(st.settings.bits));
    return false;
}
bool valid_root(const CollArgs &a, const CommState &st) { return a.kind != Coll::bcast || (a.root >= 0 && a.root < st.size); }

struct PreEntry { const char *name; PreRule ok; };
struct StateEntry { const char *name; StateRule ok; };

/* Order matters only for which reason is reported. */
const PreEntry kPre[] = {
    {"float16", not_float16},
    {"datatype", is_fp},
    {"op", is_sum},
    {"empty", non_empty},
    {"aliased_buffers", no_alias},
};
const StateEntry kState[] = {
    {"intercomm", intracomm},
    {"single_rank", several_ranks},
    {"settings_mismatch", agreed},
    {"collective_disabled", coll_enabled},
    {"codec_none", codec_on},
    {"codec_no_fp64", codec_fp64},
    {"codec_no_fp32", codec_fp32},
    {"bits_no_fp32", bits_fp32},
    {"bits_no_fp64", bits_fp64},
    {"fft_ranks_differ", fft_alike},
    {"below_min_bytes", big_enough},
    {"invalid_root", valid_root},
    {"error_bound_device", bound_host},
};
constexpr int kNumPre = sizeof kPre / sizeof kPre[0];
constexpr int kNumState = sizeof kState / sizeof kState[0];
/* Reasons decided outside the tables. */
/* cost_explore: the cost model was measuring (the result is MPI's exact one); cost_model:
 * decided exact; cost_model_queued: decided exact, run by a progress thread while the
 * ranks agreed to issue the class straight to MPI (src/runtime/progress.cc) */
const char *const kOther[] = {"not_initialized",    "reentered",           "no_state",
                              "device_buffer",      "cost_model",          "no_thread_multiple",
                              "count_above_int_max", "cost_explore",       "cost_model_queued"};
constexpr int kNumOther = sizeof kOther / sizeof kOther[0];
static_assert(kNumPre + kNumState + kNumOther <= kMaxReasons, "raise kMaxReasons");

}  // namespace

int eligibility_precheck(CollArgs &a) {
    for (int i = 0; i < kNumPre; ++i)
        if (!kPre[i].ok(a)) return i;
    return -1;
}

int eligibility_check(const CollArgs &a, const CommState &st) {
    for (int i = 0; i < kNumState; ++i)
        if (!kState[i].ok(a, st)) return kNumPre + i;
    return -1;
}

const char *eligibility_reason_name(int r) {
    if (r < kNumPre) return kPre[r].name;
    if (r < kNumPre + kNumState) return kState[r - kNumPre].name;
    if (r < kNumPre + kNumState + kNumOther) return kOther[r - kNumPre - kNumState];
    return "?";
}

int eligibility_reason(const char *name) {
    for (int i = 0; i < kNumPre + kNumState + kNumOther; ++i)
        if (std::strcmp(eligibility_reason_name(i), name) == 0) return i;
    return kMaxReasons - 1;
}

int eligibility_begin(CollArgs &a, CommState **st) {
    if (!runtime_active()) return runtime_bypassed(coll_name(a.kind)), eligibility_reason("not_initialized");
    if (ReentryGuard::active()) return eligibility_reason("reentered");
    const int reason = eligibility_precheck(a);
    if (reason >= 0) return reason;
    *st = state_get(a.comm);
    return *st ? -1 : eligibility_reason("no_state");
}

int eligibility_entry(const CollArgs &a, Coll entry, CommState &st) {
    if (entry == a.kind) return eligibility_check(a, st);
    /* the table checks the blocking collective's bit; the entry point has its own */
    const auto saved = st.settings.collectives;
    st.settings.collectives |= 1u << static_cast<int>(a.kind);
    const int reason = eligibility_check(a, st);
    st.settings.collectives = saved;
    if (reason >= 0) return reason;
    if (!((st.settings.collectives >> static_cast<int>(entry)) & 1u)) return eligibility_reason("collective_disabled");
    if (!nb_threads_ok()) return eligibility_reason("no_thread_multiple");
    if (cost_blocking_exact(st, a)) return eligibility_reason("cost_model");
    return -1;
}

}  // namespace compmpi

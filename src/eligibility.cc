#include "eligibility.h"

#include <cstring>

#include "codec.h"

namespace compmpi {

namespace {

using PreRule = bool (*)(const CollArgs &);
using StateRule = bool (*)(const CollArgs &, const CommState &);

bool is_float(const CollArgs &a) {
    if (a.kind != Coll::allgather) return a.datatype == MPI_FLOAT;
    if (a.recvtype != MPI_FLOAT) return false;
    return a.sendbuf == MPI_IN_PLACE || (a.datatype == MPI_FLOAT && a.count == a.recvcount);
}
bool is_sum(const CollArgs &a) { return a.kind != Coll::allreduce || a.op == MPI_SUM; }
bool non_empty(const CollArgs &a) { return coll_elements(a) > 0; }
/* sendbuf == recvbuf without MPI_IN_PLACE is erroneous: let MPI report it. */
bool no_alias(const CollArgs &a) { return a.kind == Coll::bcast || a.sendbuf != a.recvbuf; }

bool intracomm(const CollArgs &, const CommState &st) { return !st.inter; }
bool several_ranks(const CollArgs &, const CommState &st) { return st.size > 1; }
bool agreed(const CollArgs &, const CommState &st) { return !st.mismatch; }
bool coll_enabled(const CollArgs &a, const CommState &st) {
    int bit = a.kind == Coll::allreduce ? coll_kind::allreduce
              : a.kind == Coll::allgather ? coll_kind::allgather : coll_kind::bcast;
    return (st.settings.collectives >> bit) & 1u;
}
bool codec_on(const CollArgs &, const CommState &st) { return st.settings.codec != static_cast<int>(CodecId::none); }
bool big_enough(const CollArgs &a, const CommState &st) {
    return static_cast<uint64_t>(coll_elements(a)) * sizeof(float) >= st.settings.min_bytes;
}
bool valid_root(const CollArgs &a, const CommState &st) { return a.kind != Coll::bcast || (a.root >= 0 && a.root < st.size); }

struct PreEntry { const char *name; PreRule ok; };
struct StateEntry { const char *name; StateRule ok; };

/* Order matters only for which reason is reported. */
const PreEntry kPre[] = {
    {"datatype", is_float},
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
    {"below_min_bytes", big_enough},
    {"invalid_root", valid_root},
};
constexpr int kNumPre = sizeof kPre / sizeof kPre[0];
constexpr int kNumState = sizeof kState / sizeof kState[0];
/* Reasons decided outside the tables. */
const char *const kOther[] = {"not_initialized", "reentered", "no_state", "device_buffer", "cost_model",
                             "no_thread_multiple"};
constexpr int kNumOther = sizeof kOther / sizeof kOther[0];
static_assert(kNumPre + kNumState + kNumOther <= kMaxReasons, "raise kMaxReasons");

}  // namespace

MPI_Count coll_elements(const CollArgs &a) { return a.kind == Coll::allgather ? a.recvcount : a.count; }

int eligibility_precheck(const CollArgs &a) {
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
    for (int i = 0; i < kNumOther; ++i)
        if (std::strcmp(kOther[i], name) == 0) return kNumPre + kNumState + i;
    return kMaxReasons - 1;
}

}  // namespace compmpi

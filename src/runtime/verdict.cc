// SPDX-License-Identifier: BSD-3-Clause
#include "runtime/verdict.h"

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>

#include "runtime/cuda_loader.h"
#include "runtime/eligibility.h"

namespace compmpi {

namespace verdict_detail {
std::atomic<uint64_t> g_generation{1};
constinit thread_local Memo *t_memo __attribute__((tls_model("initial-exec"))) = nullptr;
}  // namespace verdict_detail

namespace {
using namespace verdict_detail;

/* the memo itself is freed with its thread through the holder */
struct Holder {
    std::unique_ptr<Memo> memo;
};
thread_local Holder t_holder;
thread_local int t_final __attribute__((tls_model("initial-exec"))) = -1;

Memo *memo() {
    if (!t_memo) {
        t_holder.memo = std::make_unique<Memo>();
        t_memo = t_holder.memo.get();
    }
    return t_memo;
}

int slot_of(const VerdictKey &k) { return slot(k.comm, k.kind, k.count, k.root); }

bool same(const VerdictKey &a, const VerdictKey &b) {
    return a.comm == b.comm && a.kind == b.kind && a.root == b.root && a.count == b.count &&
           a.recvcount == b.recvcount && a.datatype == b.datatype && a.recvtype == b.recvtype && a.op == b.op &&
           a.inplace == b.inplace;
}

}  // namespace

bool verdict_key(const CollArgs &a, VerdictKey *k) {
    Elem e;
    auto float_predefined = [&e](MPI_Datatype t) { return fp_predefined(t, &e); }; /* floats and doubles */
    switch (a.kind) {
        case Coll::allreduce:
        case Coll::reduce_scatter_block:
            if (!float_predefined(a.datatype)) return false;
            break;
        case Coll::bcast:
            if (!float_predefined(a.datatype)) return false;
            break;
        case Coll::allgather:
            if (!float_predefined(a.recvtype) || (a.sendbuf != MPI_IN_PLACE && !float_predefined(a.datatype)))
                return false;
            break;
        default: return false;
    }
    /* where the buffers live changes how the exact call runs (host staging), not the verdict;
     * device buffers simply take the full path */
    if (cuda_is_device_ptr(a.recvbuf) || (a.kind != Coll::bcast && a.sendbuf != MPI_IN_PLACE && cuda_is_device_ptr(a.sendbuf)))
        return false;
    *k = VerdictKey{a.comm, static_cast<int>(a.kind), a.kind == Coll::bcast ? a.root : -1, a.count, a.recvcount,
                    a.datatype, a.kind == Coll::allgather ? a.recvtype : MPI_DATATYPE_NULL, a.op,
                    a.sendbuf == MPI_IN_PLACE};
    return true;
}

bool verdict_lookup(const VerdictKey &k, int *reason) {
    const Memo *m = t_memo;
    if (!m) return false;
    const Entry &e = m->e[slot_of(k)];
    if (e.gen != g_generation.load(std::memory_order_acquire) || !same(e.key, k)) return false;
    *reason = e.reason;
    return true;
}

uint64_t verdict_generation() { return g_generation.load(std::memory_order_acquire); }

void verdict_store(const VerdictKey &k, int reason, uint64_t generation) {
    Entry &e = memo()->e[slot_of(k)];
    e.key = k;
    e.reason = reason;
    e.gen = generation;
}

void verdict_invalidate() { g_generation.fetch_add(1, std::memory_order_acq_rel); }

void verdict_mark_final(int reason) { t_final = reason; }

int verdict_take_final() {
    const int r = t_final;
    t_final = -1;
    return r;
}

}  // namespace compmpi

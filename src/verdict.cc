#include "verdict.h"

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>

#include "cuda_loader.h"
#include "eligibility.h"

namespace compmpi {

namespace {

std::atomic<uint64_t> g_generation{1};

struct Entry {
    VerdictKey key;
    uint64_t gen = 0; /* 0: empty */
    int reason = 0;
};
constexpr int kEntries = 16; /* direct-mapped; a training loop's distinct small calls */

struct Memo {
    Entry e[kEntries];
};

/* Per thread, no lock. The pointer is initial-exec TLS (read on every call: no
 * __tls_get_addr; 8 bytes of static TLS, libcompmpi being loaded at start-up); the memo
 * itself is freed with its thread through the holder. */
thread_local Memo *t_memo __attribute__((tls_model("initial-exec"))) = nullptr;
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

template <class H> uint64_t bits_of(H h) {
    static_assert(sizeof(H) <= sizeof(uint64_t), "MPI handles fit 64 bits");
    uint64_t v = 0;
    std::memcpy(&v, &h, sizeof h);
    return v;
}

int slot(const VerdictKey &k) {
    uint64_t h = bits_of(k.comm) * 0x9E3779B97F4A7C15ull;
    h ^= static_cast<uint64_t>(k.count) * 0xC2B2AE3D27D4EB4Full + static_cast<uint64_t>(k.kind) * 0x165667B19E3779F9ull +
         static_cast<uint64_t>(k.root);
    h ^= h >> 29;
    return static_cast<int>(h % kEntries);
}

bool same(const VerdictKey &a, const VerdictKey &b) {
    return a.comm == b.comm && a.kind == b.kind && a.root == b.root && a.count == b.count &&
           a.recvcount == b.recvcount && a.datatype == b.datatype && a.recvtype == b.recvtype && a.op == b.op &&
           a.inplace == b.inplace;
}

}  // namespace

bool verdict_key(const CollArgs &a, VerdictKey *k) {
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
    const Entry &e = m->e[slot(k)];
    if (e.gen != g_generation.load(std::memory_order_acquire) || !same(e.key, k)) return false;
    *reason = e.reason;
    return true;
}

uint64_t verdict_generation() { return g_generation.load(std::memory_order_acquire); }

void verdict_store(const VerdictKey &k, int reason, uint64_t generation) {
    Entry &e = memo()->e[slot(k)];
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

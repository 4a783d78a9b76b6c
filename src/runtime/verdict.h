// SPDX-License-Identifier: BSD-3-Clause
/* The memo of final exact verdicts: the cheap path of calls libcompmpi hands to MPI unchanged.
 *
 * A training loop repeats the same calls. Once the full path has decided, for a call's
 * signature on a communicator, that MPI's own collective runs -- by a rule on the
 * communicator's settings (below min_bytes, codec none, collective disabled, one rank, ...)
 * or because the cost model measured the exact collective faster -- the same signature gets
 * the same verdict until some state that verdict was derived from changes. This thread-local
 * memo replays such verdicts without the attribute lookup, the lock, the plan and the cost
 * model's lookup (about 1,400 instructions; 0.1-0.3 us on a 0.6-4 us small collective:
 * docs/design.md, "The exact path's cost").
 *
 * Why it cannot make ranks disagree: a verdict is a deterministic function of the call's
 * signature and of state every rank holds alike (settings agreed over the communicator, the
 * cost model's agreed times, awp widths from the shared call sequence). Every change of that
 * state bumps one process-wide generation (verdict_invalidate), and an entry of an older
 * generation is never used, so a memo hit returns exactly what the full path would; which
 * entries a rank happens to hold changes only how fast it gets there.
 *
 * What is memoised: final pass-through verdicts only (never exploration, never compression),
 * for allreduce / allgather / bcast / reduce_scatter_block on predefined float types (a
 * derived datatype handle can be freed and reused for another type without libcompmpi
 * seeing it), host buffers, with statistics and fault injection off (both keep per-call
 * records the memo skips: a hit is not counted in the pass-through statistics, which are
 * only ever read to print them; the test-only cost_plain / cost_compress faults keep none and
 * leave the memo on: COMPMPI_FAULT_RECORDS_CALLS). */
#pragma once
#include <mpi.h>

#include <atomic>
#include <cstdint>

#include "runtime/cuda_loader.h"
#include "runtime/eligibility.h"

namespace compmpi {

struct VerdictKey {
    MPI_Comm comm;
    int kind, root;
    MPI_Count count, recvcount;
    MPI_Datatype datatype, recvtype;
    MPI_Op op;
    bool inplace;
};

/* The key of a call that may be memoised (see above); false for one that may not. */
bool verdict_key(const CollArgs &a, VerdictKey *k);
/* A verdict of the current generation: the pass-through reason (src/runtime/eligibility.h). */
bool verdict_lookup(const VerdictKey &k, int *reason);
/* The same, straight from a call's arguments (the hit path of every memoised call: inline,
 * no key built, no datatype query -- entries only ever hold predefined float handles, which
 * a derived handle never equals). The blocking wrappers ask before packing their arguments;
 * nothing else needs checking: entries are stored only while the library is active, with
 * statistics and call-recording faults off, and MPI_Finalize invalidates them. */
inline bool verdict_lookup_call(Coll kind, MPI_Comm comm, MPI_Count count, MPI_Count recvcount, MPI_Datatype dt,
                                MPI_Datatype recvtype, MPI_Op op, int root, const void *sendbuf, const void *recvbuf,
                                int *reason);
inline bool verdict_lookup_call(const CollArgs &a, int *reason) {
    return verdict_lookup_call(a.kind, a.comm, a.count, a.recvcount, a.datatype, a.recvtype, a.op, a.root, a.sendbuf,
                               a.recvbuf, reason);
}
/* The generation to store a verdict under: read BEFORE the full path derives it, so that a
 * change made meanwhile (by another thread) leaves the entry stale rather than wrong. */
uint64_t verdict_generation();
void verdict_store(const VerdictKey &k, int reason, uint64_t generation);
/* Some state a verdict may depend on changed, on any communicator. */
void verdict_invalidate();

/* The full path tells its caller that the verdict it reached is final (cost model decided,
 * not exploring); per thread, read and cleared by dispatch(). */
void verdict_mark_final(int reason);
int verdict_take_final();

/* ---- implementation of the inline lookup ---- */
namespace verdict_detail {
struct Entry {
    VerdictKey key;
    uint64_t gen = 0; /* 0: empty */
    int reason = 0;
};
inline constexpr int kEntries = 16; /* direct-mapped; a training loop's distinct small calls */
struct Memo {
    Entry e[kEntries];
};
/* per thread, no lock; initial-exec TLS: no __tls_get_addr (8 bytes of static TLS,
 * libcompmpi being loaded at start-up) */
extern thread_local constinit Memo *t_memo __attribute__((tls_model("initial-exec")));
extern std::atomic<uint64_t> g_generation;

template <class H> inline uint64_t bits_of(H h) {
    static_assert(sizeof(H) <= sizeof(uint64_t), "MPI handles fit 64 bits");
    uint64_t v = 0;
    __builtin_memcpy(&v, &h, sizeof h);
    return v;
}
inline int slot(MPI_Comm comm, int kind, MPI_Count count, int root) {
    uint64_t h = bits_of(comm) * 0x9E3779B97F4A7C15ull;
    h ^= static_cast<uint64_t>(count) * 0xC2B2AE3D27D4EB4Full + static_cast<uint64_t>(kind) * 0x165667B19E3779F9ull +
         static_cast<uint64_t>(root);
    h ^= h >> 29;
    return static_cast<int>(h % kEntries);
}
/* Whether key k, stored under generation gen, is the call's (kind: the key's kind, the
 * collective or, for the non-blocking memo, its entry point), of the current generation. */
inline bool matches(const VerdictKey &k, uint64_t gen, int kind, Coll c, MPI_Comm comm, MPI_Count count,
                    MPI_Count recvcount, MPI_Datatype dt, MPI_Datatype recvtype, MPI_Op op, int root,
                    const void *sendbuf) {
    return gen == g_generation.load(std::memory_order_acquire) && k.comm == comm && k.kind == kind &&
           k.count == count && k.root == root && k.datatype == dt && k.op == op &&
           k.inplace == (sendbuf == MPI_IN_PLACE) && k.recvcount == recvcount &&
           k.recvtype == (c == Coll::allgather ? recvtype : MPI_DATATYPE_NULL);
}
/* Device buffers take the full path (host staging of the exact call). */
inline bool host_buffers(Coll c, const void *sendbuf, const void *recvbuf) {
    return !cuda_device_ptrs_possible() ||
           !(cuda_is_device_ptr(recvbuf) || (c != Coll::bcast && sendbuf != MPI_IN_PLACE && cuda_is_device_ptr(sendbuf)));
}
}  // namespace verdict_detail

inline bool verdict_lookup_call(Coll c, MPI_Comm comm, MPI_Count count, MPI_Count recvcount, MPI_Datatype dt,
                                MPI_Datatype recvtype, MPI_Op op, int root_arg, const void *sendbuf, const void *recvbuf,
                                int *reason) {
    using namespace verdict_detail;
    const Memo *m = t_memo;
    if (!m) return false;
    const int kind = static_cast<int>(c), root = c == Coll::bcast ? root_arg : -1;
    const Entry &e = m->e[slot(comm, kind, count, root)];
    if (!matches(e.key, e.gen, kind, c, comm, count, recvcount, dt, recvtype, op, root, sendbuf) ||
        !host_buffers(c, sendbuf, recvbuf))
        return false;
    *reason = e.reason;
    return true;
}

}  // namespace compmpi

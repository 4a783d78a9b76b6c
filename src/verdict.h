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
 * records the memo would skip). */
#pragma once
#include <mpi.h>

#include <cstdint>

#include "eligibility.h"

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
/* A verdict of the current generation: the pass-through reason (src/eligibility.h). */
bool verdict_lookup(const VerdictKey &k, int *reason);
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

}  // namespace compmpi

/* Which calls are compressed: a table of named rules (src/runtime/eligibility.cc). The first rule
 * that fails names the pass-through reason counted in the statistics; the fallback is
 * always the exact PMPI call. */
#pragma once
#include <mpi.h>

#include <vector>

#include "base/stats.h"
#include "runtime/args.h"
#include "runtime/state.h"

namespace compmpi {

/* The prelude every entry point shares (blocking, non-blocking, persistent):
 * eligibility_begin -- the library is active and not re-entered, the rules without state,
 * the communicator's state (-1 and *st, or the reason); then, with st->mu held,
 * eligibility_entry -- the communicator's rules for `entry` (a.kind for a blocking call; a
 * non-blocking or persistent entry point adds its own bit of the collectives setting, the
 * thread level its progress thread needs, and the blocking calls' exact verdict on its
 * class). -1: eligible, else the pass-through reason. */
int eligibility_begin(CollArgs &a, CommState **st);
int eligibility_entry(const CollArgs &a, Coll entry, CommState &st);

/* Rules that need no communicator state; -1 if all pass, else the reason index. Sets
 * a.elems when the datatype rule passes. */
int eligibility_precheck(CollArgs &a);
/* Rules that read the communicator's state (caller holds st->mu). */
int eligibility_check(const CollArgs &a, const CommState &st);
const char *eligibility_reason_name(int reason);
/* Reason index for failures decided outside the table. */
int eligibility_reason(const char *name);

/* ---- Datatypes, decided by type signature (what MPI makes every rank share).
 * A call is eligible when its signature is a run of 4-byte IEEE floats: MPI_FLOAT, or
 * MPI_REAL / MPI_REAL4 whose size is 4 at run time, or any derived type (contiguous,
 * vector, indexed, struct, resized, subarray, ...) built only of those. Where the floats
 * lie in memory is each rank's own business: one dense in-order run is used in place,
 * anything else is packed into a scratch copy (and unpacked after), so ranks that describe
 * the same data with different datatypes take the same path and exchange the same bytes.
 * MPI_SUM is defined by MPI only for predefined datatypes (MPICH refuses derived ones), so
 * allreduce additionally needs a predefined float type: a derived one reaches MPI, which
 * reports the error exactly as without libcompmpi. */

/* True if t's type signature holds only 4-byte IEEE floats; *k = floats per element. */
bool float_signature(MPI_Datatype t, MPI_Count *k);
/* True if t is MPI_FLOAT, or MPI_REAL / MPI_REAL4 of size 4. */
bool float_predefined(MPI_Datatype t);
/* True if count elements of float-signature type t lay their floats out as one dense run in
 * signature order; *offset = byte offset of the first float from the buffer address.
 * False (pack) for any layout it does not prove dense, however simple. */
bool float_dense(MPI_Datatype t, MPI_Count count, MPI_Aint *offset);
/* Copy the count*k floats of buf (type t) in signature order to out, or back (MPI's own
 * packing engine, external32 representation then byte order fixed). MPI error code. */
int floats_pack(const void *buf, MPI_Count count, MPI_Datatype t, float *out, MPI_Count n);
int floats_unpack(const float *in, MPI_Count n, void *buf, MPI_Count count, MPI_Datatype t);

/* The call seen as MPI_FLOAT over dense buffers: args points into the caller's buffers where
 * they are dense, else into send/recv scratch filled by float_view_begin; float_view_end
 * unpacks recv into the caller's buffer. Every rank reaches the same collective either way. */
struct FloatView {
    CollArgs args;
    std::vector<float> send, recv;
    bool unpack = false;
    int nranks = 1;
};
/* rank, nranks: in the call's communicator. Returns an MPI error code; *device is set (and
 * nothing done) when a buffer that needs packing is GPU memory. */
int float_view_begin(const CollArgs &a, int rank, int nranks, FloatView *v, bool *device);
int float_view_end(const CollArgs &a, FloatView &v);

}  // namespace compmpi

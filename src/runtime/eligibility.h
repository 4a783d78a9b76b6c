// SPDX-License-Identifier: BSD-3-Clause
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
 * A call is eligible when its signature is a run of IEEE values of one type: 4-byte floats
 * (MPI_FLOAT, MPI_REAL / MPI_REAL4 of size 4) or 8-byte doubles (MPI_DOUBLE, MPI_REAL8,
 * MPI_DOUBLE_PRECISION, MPI_REAL of size 8), or any derived type (contiguous, vector,
 * indexed, struct, resized, subarray, ...) built only of one of those. Where the values lie
 * in memory is each rank's own business: one dense in-order run is used in place, anything
 * else is packed into a scratch copy (and unpacked after), so ranks that describe the same
 * data with different datatypes take the same path and exchange the same bytes. MPI_SUM is
 * defined by MPI only for predefined datatypes (MPICH refuses derived ones), so allreduce
 * and reduce-scatter additionally need a predefined type: a derived one reaches MPI, which
 * reports the error exactly as without libcompmpi. CollArgs::elem says which type a call has. */

/* True if t is a predefined float or double type (*e says which). */
bool fp_predefined(MPI_Datatype t, Elem *e);
/* True if t's type signature holds only values of one such type: *e, and *k of them per t. */
bool fp_signature(MPI_Datatype t, Elem *e, MPI_Count *k);
/* True if count elements of type t (signature of e) lay their values out as one dense run in
 * signature order; *offset = byte offset of the first one from the buffer address. False
 * (pack) for any layout it does not prove dense, however simple. */
bool fp_dense(MPI_Datatype t, Elem e, MPI_Count count, MPI_Aint *offset);
/* Copy the count*k values of buf (type t) in signature order to out (n values of type e), or
 * back (MPI's own packing engine, external32 representation then byte order fixed). MPI error
 * code. */
int fp_pack(const void *buf, MPI_Count count, MPI_Datatype t, Elem e, void *out, MPI_Count n);
int fp_unpack(const void *in, MPI_Count n, Elem e, void *buf, MPI_Count count, MPI_Datatype t);

/* The call seen as MPI_FLOAT (MPI_DOUBLE) over dense buffers: args points into the caller's
 * buffers where they are dense, else into send/recv scratch filled by float_view_begin;
 * float_view_end unpacks recv into the caller's buffer. Every rank reaches the same collective
 * either way. */
struct FloatView {
    CollArgs args;
    std::vector<uint64_t> send, recv; /* 8-byte aligned scratch for values of type elem */
    bool unpack = false;
    int nranks = 1;
    Elem elem = Elem::f32;
    /* v sized for n values of type elem; its memory */
    void *resize(std::vector<uint64_t> &v, size_t n) {
        v.resize((n * elem_bytes(elem) + 7) / 8);
        return v.data();
    }
};
/* rank, nranks: in the call's communicator. Returns an MPI error code; *device is set (and
 * nothing done) when a buffer that needs packing is GPU memory. */
int float_view_begin(const CollArgs &a, int rank, int nranks, FloatView *v, bool *device);
int float_view_end(const CollArgs &a, FloatView &v);

}  // namespace compmpi

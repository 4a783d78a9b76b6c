/* Which calls are compressed: a table of named rules (src/eligibility.cc). The first rule
 * that fails names the pass-through reason counted in the statistics; the fallback is
 * always the exact PMPI call. */
#pragma once
#include <mpi.h>

#include "state.h"
#include "stats.h"

namespace compmpi {

/* One intercepted call, packed once at the MPI boundary (NCCL style). */
struct CollArgs {
    Coll kind;
    const void *sendbuf;
    void *recvbuf;           /* bcast: the buffer */
    MPI_Count count;         /* allreduce/bcast: count; allgather: sendcount */
    MPI_Count recvcount;     /* allgather only */
    MPI_Datatype datatype;   /* allreduce/bcast: datatype; allgather: sendtype */
    MPI_Datatype recvtype;   /* allgather only */
    MPI_Op op;               /* allreduce only */
    int root;                /* bcast only */
    MPI_Comm comm;
    bool large_count;        /* came in through an MPI-4 _c entry point */
};

/* Rules that need no communicator state; -1 if all pass, else the reason index. */
int eligibility_precheck(const CollArgs &a);
/* Rules that read the communicator's state (caller holds st->mu). */
int eligibility_check(const CollArgs &a, const CommState &st);
const char *eligibility_reason_name(int reason);
/* Reason index for failures decided outside the table. */
int eligibility_reason(const char *name);

/* Number of floats this rank encodes for the call (allgather: its block). */
MPI_Count coll_elements(const CollArgs &a);

}  // namespace compmpi

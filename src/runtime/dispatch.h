// SPDX-License-Identifier: BSD-3-Clause
/* The dispatch pipeline of one blocking call, in reading order: the memo of final verdicts
 * (src/runtime/verdict.h) -> the eligibility rules (src/runtime/eligibility.h) -> the call as
 * floats (packing derived layouts) -> placement and backend (src/runtime/device.h) -> plan,
 * cost model, algorithm, observation (src/runtime/run.h). Anything not eligible goes to the
 * exact PMPI call (src/runtime/exact.h). The MPI boundary (src/boundary/) calls one function
 * of this file per entry point; non-blocking and persistent calls enter through
 * src/runtime/progress.h, whose progress thread runs dispatch_float_view. */
#pragma once
#include <mpi.h>

#include "runtime/args.h"
#include "runtime/state.h"
#include "runtime/verdict.h"
#include "simd.h"
#include "base/mpi_next.h"

namespace compmpi {

/* Hands control back with the vector registers' upper halves clean, whatever ran inside
 * (codec kernels, FFTW, the OpenMP runtime): kernels/simd.h, simd_upper_clean. */
struct UpperClean {
    UpperClean() = default;
    UpperClean(const UpperClean &) = delete;
    UpperClean &operator=(const UpperClean &) = delete;
    ~UpperClean() { simd_upper_clean(); }
};

/* One checked funnel: no exception crosses it; returns an MPI error code. */
int dispatch(CollArgs a) noexcept;

/* The eligible call as MPI_FLOAT over dense buffers (packing derived-type layouts that are
 * not one dense run; src/runtime/eligibility.h), compressed, then unpacked. Caller holds
 * st.mu (the progress thread runs queued calls through it too). */
int dispatch_float_view(const CollArgs &a, CommState &st);

/* The blocking entry points with a memo: a repeated small call that MPI runs anyway goes to
 * it before its arguments are even packed (~134 instructions of libcompmpi per call). */
inline int dispatch_allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                              MPI_Comm comm) {
    int r;
    if (verdict_lookup_call(Coll::allreduce, comm, count, 0, datatype, MPI_DATATYPE_NULL, op, 0, sendbuf, recvbuf, &r))
        return mpi_next::Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
    return dispatch(args_allreduce(sendbuf, recvbuf, count, datatype, op, comm, false));
}
inline int dispatch_allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                              MPI_Datatype recvtype, MPI_Comm comm) {
    int r;
    if (verdict_lookup_call(Coll::allgather, comm, sendcount, recvcount, sendtype, recvtype, MPI_OP_NULL, 0, sendbuf,
                            recvbuf, &r))
        return mpi_next::Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    return dispatch(args_allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, false));
}
inline int dispatch_bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
    int r;
    if (verdict_lookup_call(Coll::bcast, comm, count, 0, datatype, MPI_DATATYPE_NULL, MPI_OP_NULL, root, nullptr,
                            buffer, &r))
        return mpi_next::Bcast(buffer, count, datatype, root, comm);
    return dispatch(args_bcast(buffer, count, datatype, root, comm, false));
}

}  // namespace compmpi

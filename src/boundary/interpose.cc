// SPDX-License-Identifier: BSD-3-Clause
/* The MPI boundary: the C entry points libcompmpi defines in place of MPI's, and nothing
 * else. Each one packs its arguments and calls one function of the runtime (src/runtime/):
 * dispatch_* for the collectives (src/runtime/dispatch.h, progress.h), hints_* for the calls
 * that carry MPI_Info hints (hints.h), request_* for the request calls that must know our
 * persistent handles (progress.h), runtime_mpi_* for the life cycle (runtime.h), mpit_* for
 * the MPI_T control variables (mpit.h). Those
 * functions catch everything: no exception crosses this file, and the fallback is always
 * the exact PMPI call with the caller's own arguments (except inside a collective the peers
 * are already in: abort_collective, src/runtime/runtime.h). */
#include <mpi.h>

#include "runtime/args.h"
#include "runtime/dispatch.h"
#include "runtime/hints.h"
#ifdef HAVE_MPI_T_CVARS
#include "runtime/mpit.h"
#endif
#include "runtime/nb_dispatch.h"
#include "runtime/progress.h"
#include "runtime/runtime.h"

#define COMPMPI_EXPORT extern "C" __attribute__((visibility("default")))

using namespace compmpi;

/* ---- life cycle (src/runtime/runtime.h) ---- */

COMPMPI_EXPORT int MPI_Init(int *argc, char ***argv) {
    int provided = MPI_THREAD_SINGLE;
    return runtime_mpi_init(argc, argv, MPI_THREAD_SINGLE, &provided, "MPI_Init");
}

COMPMPI_EXPORT int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
    return runtime_mpi_init(argc, argv, required, provided, "MPI_Init_thread");
}

COMPMPI_EXPORT int MPI_Finalize(void) { return runtime_mpi_finalize(); }

/* ---- MPI_T control variables: ours after MPI's (src/runtime/mpit.h); callable before
 * MPI_Init, after MPI_T_init_thread. Not under SimGrid SMPI, which has no MPI_T. ---- */
#ifdef HAVE_MPI_T_CVARS

COMPMPI_EXPORT int MPI_T_cvar_get_num(int *num_cvar) { return mpit_cvar_get_num(num_cvar); }

COMPMPI_EXPORT int MPI_T_cvar_get_info(int cvar_index, char *name, int *name_len, int *verbosity,
                                       MPI_Datatype *datatype, MPI_T_enum *enumtype, char *desc, int *desc_len,
                                       int *bind, int *scope) {
    return mpit_cvar_get_info(cvar_index, name, name_len, verbosity, datatype, enumtype, desc, desc_len, bind, scope);
}

COMPMPI_EXPORT int MPI_T_cvar_get_index(const char *name, int *cvar_index) {
    return mpit_cvar_get_index(name, cvar_index);
}

COMPMPI_EXPORT int MPI_T_cvar_handle_alloc(int cvar_index, void *obj_handle, MPI_T_cvar_handle *handle, int *count) {
    return mpit_cvar_handle_alloc(cvar_index, obj_handle, handle, count);
}

COMPMPI_EXPORT int MPI_T_cvar_handle_free(MPI_T_cvar_handle *handle) { return mpit_cvar_handle_free(handle); }

COMPMPI_EXPORT int MPI_T_cvar_read(MPI_T_cvar_handle handle, void *buf) { return mpit_cvar_read(handle, buf); }

COMPMPI_EXPORT int MPI_T_cvar_write(MPI_T_cvar_handle handle, const void *buf) { return mpit_cvar_write(handle, buf); }

COMPMPI_EXPORT int MPI_T_category_get_cvars(int cat_index, int len, int indices[]) {
    return mpit_category_get_cvars(cat_index, len, indices);
}
#endif

/* ---- blocking collectives (src/runtime/dispatch.h) ---- */

COMPMPI_EXPORT int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                                 MPI_Comm comm) {
    return dispatch_allreduce(sendbuf, recvbuf, count, datatype, op, comm);
}

COMPMPI_EXPORT int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                                 int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
    return dispatch_allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

COMPMPI_EXPORT int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
    return dispatch_bcast(buffer, count, datatype, root, comm);
}

#ifdef HAVE_MPI_LARGE_COUNT
COMPMPI_EXPORT int MPI_Allreduce_c(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype,
                                   MPI_Op op, MPI_Comm comm) {
    return dispatch(args_allreduce(sendbuf, recvbuf, count, datatype, op, comm, true));
}

COMPMPI_EXPORT int MPI_Allgather_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf,
                                   MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
    return dispatch(args_allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, true));
}

COMPMPI_EXPORT int MPI_Bcast_c(void *buffer, MPI_Count count, MPI_Datatype datatype, int root, MPI_Comm comm) {
    return dispatch(args_bcast(buffer, count, datatype, root, comm, true));
}
#endif

/* ---- the calls that carry MPI_Info hints (src/runtime/hints.h) ---- */

COMPMPI_EXPORT int MPI_Comm_set_info(MPI_Comm comm, MPI_Info info) {
    return hints_comm_set_info(comm, info);
}

COMPMPI_EXPORT int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm) {
    return hints_comm_dup_with_info(comm, info, newcomm);
}

COMPMPI_EXPORT int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm *newcomm) {
    return hints_comm_split_type(comm, split_type, key, info, newcomm);
}

#if MPI_VERSION >= 4
COMPMPI_EXPORT int MPI_Comm_idup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm, MPI_Request *request) {
    return hints_comm_idup_with_info(comm, info, newcomm, request);
}

COMPMPI_EXPORT int MPI_Comm_create_from_group(MPI_Group group, const char *stringtag, MPI_Info info,
                                              MPI_Errhandler errhandler, MPI_Comm *newcomm) {
    return hints_comm_create_from_group(group, stringtag, info, errhandler, newcomm);
}
#endif

COMPMPI_EXPORT int MPI_Comm_get_info(MPI_Comm comm, MPI_Info *info_used) {
    return hints_comm_get_info(comm, info_used);
}

/* ---- non-blocking collectives (src/runtime/progress.h) ---- */

/* The non-blocking, persistent (MPI-4) and reduce-scatter entry points come in two forms:
 * int counts, and (MPI-4 large count) MPI_Count ones with the suffix _c. SUF the suffix, Count
 * the count type, LARGE whether it is MPI_Count, RS_INT / RS_C the int and the MPI_Count
 * recvcounts of args_reduce_scatter (the other one nullptr). For MPI_Count the progress thread
 * (and each persistent run) runs what the blocking _c call runs (its large-count rules), and
 * counts above INT_MAX pass through to PMPI_I*_c (reason count_above_int_max). */
#define COMPMPI_NONBLOCKING(SUF, Count, LARGE, RS_INT, RS_C)                                                            \
    COMPMPI_EXPORT int MPI_Iallreduce##SUF(const void *sendbuf, void *recvbuf, Count count, MPI_Datatype datatype,       \
                                           MPI_Op op, MPI_Comm comm, MPI_Request *request) {                           \
        return dispatch_nb(args_allreduce(sendbuf, recvbuf, count, datatype, op, comm, LARGE), Coll::iallreduce,       \
                           request);                                                                                   \
    }                                                                                                                  \
    COMPMPI_EXPORT int MPI_Iallgather##SUF(const void *sendbuf, Count sendcount, MPI_Datatype sendtype, void *recvbuf,   \
                                           Count recvcount, MPI_Datatype recvtype, MPI_Comm comm,                      \
                                           MPI_Request *request) {                                                     \
        return dispatch_nb(args_allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, LARGE),    \
                           Coll::iallgather, request);                                                                 \
    }                                                                                                                  \
    COMPMPI_EXPORT int MPI_Ibcast##SUF(void *buffer, Count count, MPI_Datatype datatype, int root, MPI_Comm comm,        \
                                       MPI_Request *request) {                                                         \
        return dispatch_nb(args_bcast(buffer, count, datatype, root, comm, LARGE), Coll::ibcast, request);             \
    }                                                                                                                  \
    COMPMPI_EXPORT int MPI_Ireduce_scatter_block##SUF(const void *sendbuf, void *recvbuf, Count recvcount,              \
                                                      MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,                 \
                                                      MPI_Request *request) {                                          \
        return dispatch_nb(args_reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm, LARGE),          \
                           Coll::ireduce_scatter_block, request);                                                      \
    }                                                                                                                  \
    COMPMPI_EXPORT int MPI_Ireduce_scatter##SUF(const void *sendbuf, void *recvbuf, const Count recvcounts[],           \
                                                MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,                       \
                                                MPI_Request *request) {                                                \
        return dispatch_nb(args_reduce_scatter(sendbuf, recvbuf, RS_INT, RS_C, datatype, op, comm),                    \
                           Coll::ireduce_scatter, request);                                                            \
    }
#define COMPMPI_PERSISTENT(SUF, Count, LARGE, RS_INT, RS_C)                                                             \
    COMPMPI_EXPORT int MPI_Allreduce_init##SUF(const void *sendbuf, void *recvbuf, Count count, MPI_Datatype datatype,   \
                                               MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request *request) {        \
        return dispatch_persistent_init(args_allreduce(sendbuf, recvbuf, count, datatype, op, comm, LARGE),            \
                                        Coll::allreduce_init, info, request);                                          \
    }                                                                                                                  \
    COMPMPI_EXPORT int MPI_Allgather_init##SUF(const void *sendbuf, Count sendcount, MPI_Datatype sendtype,             \
                                               void *recvbuf, Count recvcount, MPI_Datatype recvtype, MPI_Comm comm,   \
                                               MPI_Info info, MPI_Request *request) {                                  \
        return dispatch_persistent_init(                                                                               \
            args_allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, LARGE),                   \
            Coll::allgather_init, info, request);                                                                      \
    }                                                                                                                  \
    COMPMPI_EXPORT int MPI_Bcast_init##SUF(void *buffer, Count count, MPI_Datatype datatype, int root, MPI_Comm comm,    \
                                           MPI_Info info, MPI_Request *request) {                                      \
        return dispatch_persistent_init(args_bcast(buffer, count, datatype, root, comm, LARGE), Coll::bcast_init,      \
                                        info, request);                                                                \
    }                                                                                                                  \
    COMPMPI_EXPORT int MPI_Reduce_scatter_block_init##SUF(const void *sendbuf, void *recvbuf, Count recvcount,          \
                                                          MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,             \
                                                          MPI_Info info, MPI_Request *request) {                       \
        return dispatch_persistent_init(                                                                               \
            args_reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm, LARGE),                         \
            Coll::reduce_scatter_block_init, info, request);                                                           \
    }                                                                                                                  \
    COMPMPI_EXPORT int MPI_Reduce_scatter_init##SUF(const void *sendbuf, void *recvbuf, const Count recvcounts[],       \
                                                    MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Info info,    \
                                                    MPI_Request *request) {                                            \
        return dispatch_persistent_init(args_reduce_scatter(sendbuf, recvbuf, RS_INT, RS_C, datatype, op, comm),       \
                                        Coll::reduce_scatter_init, info, request);                                     \
    }
#define COMPMPI_REDUCE_SCATTER(SUF, Count, LARGE, RS_INT, RS_C)                                                         \
    COMPMPI_EXPORT int MPI_Reduce_scatter_block##SUF(const void *sendbuf, void *recvbuf, Count recvcount,               \
                                                     MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {                \
        return dispatch(args_reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm, LARGE));            \
    }                                                                                                                  \
    COMPMPI_EXPORT int MPI_Reduce_scatter##SUF(const void *sendbuf, void *recvbuf, const Count recvcounts[],            \
                                               MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {                      \
        return dispatch(args_reduce_scatter(sendbuf, recvbuf, RS_INT, RS_C, datatype, op, comm));                      \
    }

COMPMPI_NONBLOCKING(, int, false, recvcounts, nullptr)

#if MPI_VERSION >= 4
/* ---- persistent collectives (MPI-4) and the request calls that must know them ---- */

COMPMPI_PERSISTENT(, int, false, recvcounts, nullptr)

COMPMPI_EXPORT int MPI_Start(MPI_Request *request) {
    return request_start(request);
}
COMPMPI_EXPORT int MPI_Startall(int count, MPI_Request *requests) {
    return request_startall(count, requests);
}
COMPMPI_EXPORT int MPI_Request_free(MPI_Request *request) {
    return request_free(request);
}
#endif
/* MPI-3 and MPI-4: waits on our non-blocking calls sleep while the progress thread works;
 * tests and waits advance inline progress (progress.h) */
COMPMPI_EXPORT int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status) {
    return request_test(request, flag, status);
}
COMPMPI_EXPORT int MPI_Testall(int count, MPI_Request *requests, int *flag, MPI_Status *statuses) {
    return request_testall(count, requests, flag, statuses);
}
COMPMPI_EXPORT int MPI_Waitany(int count, MPI_Request *requests, int *index, MPI_Status *status) {
    return request_waitany(count, requests, index, status);
}
COMPMPI_EXPORT int MPI_Testany(int count, MPI_Request *requests, int *index, int *flag, MPI_Status *status) {
    return request_testany(count, requests, index, flag, status);
}
COMPMPI_EXPORT int MPI_Waitsome(int incount, MPI_Request *requests, int *outcount, int *indices, MPI_Status *statuses) {
    return request_waitsome(incount, requests, outcount, indices, statuses);
}
COMPMPI_EXPORT int MPI_Testsome(int incount, MPI_Request *requests, int *outcount, int *indices, MPI_Status *statuses) {
    return request_testsome(incount, requests, outcount, indices, statuses);
}
COMPMPI_EXPORT int MPI_Wait(MPI_Request *request, MPI_Status *status) {
    return request_wait(request, status);
}
COMPMPI_EXPORT int MPI_Waitall(int count, MPI_Request *requests, MPI_Status *statuses) {
    return request_waitall(count, requests, statuses);
}

/* ---- reduce-scatter (coll/reduce_scatter/) ---- */

COMPMPI_REDUCE_SCATTER(, int, false, recvcounts, nullptr)
#ifdef HAVE_MPI_LARGE_COUNT
COMPMPI_REDUCE_SCATTER(_c, MPI_Count, true, nullptr, recvcounts)
#endif

#if MPI_VERSION >= 4 && defined(HAVE_MPI_LARGE_COUNT)
/* ---- MPI-4 large-count non-blocking and persistent entry points: counts up to INT_MAX
 * elements run like MPI_Iallreduce & co. (the progress thread, the same compressed
 * algorithms); above INT_MAX they pass through to PMPI_I*_c (reason count_above_int_max). ---- */
COMPMPI_NONBLOCKING(_c, MPI_Count, true, nullptr, recvcounts)
COMPMPI_PERSISTENT(_c, MPI_Count, true, nullptr, recvcounts)
#endif

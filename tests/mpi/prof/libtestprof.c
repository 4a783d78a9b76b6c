// SPDX-License-Identifier: BSD-3-Clause
/* libtestprof -- a small PMPI profiler for libcompmpi's tests (built by make check for the
 * build's MPI family, never installed): what mpiP, Score-P or TAU do, in miniature.
 *
 * It defines MPI_<call> for the collectives and point-to-point calls libcompmpi's algorithms
 * use (and MPI_Init/MPI_Init_thread/MPI_Finalize, as real profilers do), counts each call and
 * its bytes, and calls PMPI_<call>. Not wrapped on purpose: MPI_Reduce_scatter_block and
 * MPI_Reduce_scatter, so that with the profiler loaded first a program can still reach
 * libcompmpi through them (tests/mpi/t_plain_profiler.c, --reduce-scatter).
 *
 * Bytes of one call, as the profiler sees its arguments (mpiP's message size): count x type
 * size for allreduce, reduce, bcast and point-to-point (a receive: its buffer's size); the
 * whole result (block x communicator size) for allgather; the whole send side (block x size,
 * or the sum of the counts) for alltoall(v). Counters are atomics: libcompmpi's progress
 * threads call MPI from their own threads.
 *
 *   LD_PRELOAD="libcompmpi.so libtestprof.so"   libcompmpi first: the profiler sees its calls
 *   LD_PRELOAD="libtestprof.so libcompmpi.so"   the profiler first: it sees the program's
 *
 * libtestprof_noinit.so, the same without MPI_Init, MPI_Init_thread and MPI_Finalize: loaded
 * first, it lets libcompmpi's MPI_Init run (which then warns about the order itself).
 *
 * At MPI_Finalize every rank prints one line per call kind it saw since the start, to stderr:
 *   testprof[R]: MPI_Iallgather calls=N bytes=B
 * and a program can read the counters itself (dlsym(RTLD_DEFAULT, "testprof_get")):
 *   int testprof_get(const char *name, long long *calls, long long *bytes, long long *max);
 *       calls, bytes and the largest call's bytes of kind `name` ("MPI_Bcast") since the last
 *       testprof_reset(); 1 if `name` is a kind it counts, 0 otherwise
 *   void testprof_reset(void);
 */
#include <mpi.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define TESTPROF_KINDS(X) \
    X(Init) X(Init_thread) X(Finalize) X(Allreduce) X(Iallreduce) X(Reduce) X(Allgather) X(Iallgather) \
    X(Bcast) X(Ibcast) X(Alltoall) X(Ialltoall) X(Alltoallv) X(Barrier) X(Sendrecv) X(Send) X(Recv) \
    X(Isend) X(Irecv) X(Wait) X(Waitall) X(Test) X(Comm_dup) X(Comm_idup) X(Comm_split) \
    X(Comm_split_type) X(Comm_free)

enum {
#define X(k) K_##k,
    TESTPROF_KINDS(X)
#undef X
    K_N
};
static const char *const kNames[K_N] = {
#define X(k) "MPI_" #k,
    TESTPROF_KINDS(X)
#undef X
};
/* since testprof_reset (what testprof_get reads), and since the start (the summary) */
static _Atomic long long g_calls[K_N], g_bytes[K_N], g_max[K_N], g_total_calls[K_N], g_total_bytes[K_N];

static long long type_bytes(MPI_Datatype t, long long count) {
    int size = 0;
    if (t == MPI_DATATYPE_NULL || PMPI_Type_size(t, &size) != MPI_SUCCESS) return 0;
    return count * size;
}
static long long comm_size(MPI_Comm c) {
    int p = 0;
    PMPI_Comm_size(c, &p);
    return p;
}
static void note(int k, long long bytes) {
    atomic_fetch_add(&g_calls[k], 1);
    atomic_fetch_add(&g_bytes[k], bytes);
    atomic_fetch_add(&g_total_calls[k], 1);
    atomic_fetch_add(&g_total_bytes[k], bytes);
    long long m = atomic_load(&g_max[k]);
    while (bytes > m && !atomic_compare_exchange_weak(&g_max[k], &m, bytes)) {
    }
}

__attribute__((visibility("default"))) int testprof_get(const char *name, long long *calls, long long *bytes,
                                                         long long *max) {
    for (int k = 0; k < K_N; ++k)
        if (!strcmp(name, kNames[k])) {
            *calls = atomic_load(&g_calls[k]);
            *bytes = atomic_load(&g_bytes[k]);
            *max = atomic_load(&g_max[k]);
            return 1;
        }
    return 0;
}

__attribute__((visibility("default"))) void testprof_reset(void) {
    for (int k = 0; k < K_N; ++k) atomic_store(&g_calls[k], 0), atomic_store(&g_bytes[k], 0), atomic_store(&g_max[k], 0);
}

/* ---- life cycle (not in libtestprof_noinit.so, built with TESTPROF_NO_INIT: a profiler
 * before libcompmpi that leaves MPI_Init to it) ---- */
#ifndef TESTPROF_NO_INIT
int MPI_Init(int *argc, char ***argv) {
    note(K_Init, 0);
    return PMPI_Init(argc, argv);
}
int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
    note(K_Init_thread, 0);
    return PMPI_Init_thread(argc, argv, required, provided);
}
int MPI_Finalize(void) {
    note(K_Finalize, 0);
    int rank = -1;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int k = 0; k < K_N; ++k)
        if (atomic_load(&g_total_calls[k]))
            fprintf(stderr, "testprof[%d]: %s calls=%lld bytes=%lld\n", rank, kNames[k],
                    atomic_load(&g_total_calls[k]), atomic_load(&g_total_bytes[k]));
    return PMPI_Finalize();
}
#endif

/* ---- collectives ---- */

int MPI_Allreduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c) {
    note(K_Allreduce, type_bytes(t, n));
    return PMPI_Allreduce(s, r, n, t, op, c);
}
int MPI_Iallreduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c, MPI_Request *q) {
    note(K_Iallreduce, type_bytes(t, n));
    return PMPI_Iallreduce(s, r, n, t, op, c, q);
}
int MPI_Reduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, int root, MPI_Comm c) {
    note(K_Reduce, type_bytes(t, n));
    return PMPI_Reduce(s, r, n, t, op, root, c);
}
int MPI_Allgather(const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt, MPI_Comm c) {
    note(K_Allgather, type_bytes(rt, (long long)rn * comm_size(c)));
    return PMPI_Allgather(s, sn, st, r, rn, rt, c);
}
int MPI_Iallgather(const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt, MPI_Comm c,
                   MPI_Request *q) {
    note(K_Iallgather, type_bytes(rt, (long long)rn * comm_size(c)));
    return PMPI_Iallgather(s, sn, st, r, rn, rt, c, q);
}
int MPI_Bcast(void *b, int n, MPI_Datatype t, int root, MPI_Comm c) {
    note(K_Bcast, type_bytes(t, n));
    return PMPI_Bcast(b, n, t, root, c);
}
int MPI_Ibcast(void *b, int n, MPI_Datatype t, int root, MPI_Comm c, MPI_Request *q) {
    note(K_Ibcast, type_bytes(t, n));
    return PMPI_Ibcast(b, n, t, root, c, q);
}
static long long alltoall_bytes(const void *s, int sn, MPI_Datatype st, int rn, MPI_Datatype rt, MPI_Comm c) {
    return s == MPI_IN_PLACE ? type_bytes(rt, (long long)rn * comm_size(c)) : type_bytes(st, (long long)sn * comm_size(c));
}
int MPI_Alltoall(const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt, MPI_Comm c) {
    note(K_Alltoall, alltoall_bytes(s, sn, st, rn, rt, c));
    return PMPI_Alltoall(s, sn, st, r, rn, rt, c);
}
int MPI_Ialltoall(const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt, MPI_Comm c,
                  MPI_Request *q) {
    note(K_Ialltoall, alltoall_bytes(s, sn, st, rn, rt, c));
    return PMPI_Ialltoall(s, sn, st, r, rn, rt, c, q);
}
int MPI_Alltoallv(const void *s, const int sc[], const int sd[], MPI_Datatype st, void *r, const int rc[],
                  const int rd[], MPI_Datatype rt, MPI_Comm c) {
    long long n = 0;
    const int *cnt = s == MPI_IN_PLACE ? rc : sc;
    for (long long j = 0, p = comm_size(c); j < p; ++j) n += cnt[j];
    note(K_Alltoallv, type_bytes(s == MPI_IN_PLACE ? rt : st, n));
    return PMPI_Alltoallv(s, sc, sd, st, r, rc, rd, rt, c);
}
int MPI_Barrier(MPI_Comm c) {
    note(K_Barrier, 0);
    return PMPI_Barrier(c);
}

/* ---- point to point, requests ---- */

int MPI_Sendrecv(const void *s, int sn, MPI_Datatype st, int dst, int stag, void *r, int rn, MPI_Datatype rt,
                 int src, int rtag, MPI_Comm c, MPI_Status *status) {
    note(K_Sendrecv, type_bytes(st, sn));
    return PMPI_Sendrecv(s, sn, st, dst, stag, r, rn, rt, src, rtag, c, status);
}
int MPI_Send(const void *b, int n, MPI_Datatype t, int dst, int tag, MPI_Comm c) {
    note(K_Send, type_bytes(t, n));
    return PMPI_Send(b, n, t, dst, tag, c);
}
int MPI_Recv(void *b, int n, MPI_Datatype t, int src, int tag, MPI_Comm c, MPI_Status *status) {
    note(K_Recv, type_bytes(t, n));
    return PMPI_Recv(b, n, t, src, tag, c, status);
}
int MPI_Isend(const void *b, int n, MPI_Datatype t, int dst, int tag, MPI_Comm c, MPI_Request *q) {
    note(K_Isend, type_bytes(t, n));
    return PMPI_Isend(b, n, t, dst, tag, c, q);
}
int MPI_Irecv(void *b, int n, MPI_Datatype t, int src, int tag, MPI_Comm c, MPI_Request *q) {
    note(K_Irecv, type_bytes(t, n));
    return PMPI_Irecv(b, n, t, src, tag, c, q);
}
int MPI_Wait(MPI_Request *q, MPI_Status *status) {
    note(K_Wait, 0);
    return PMPI_Wait(q, status);
}
int MPI_Waitall(int n, MPI_Request q[], MPI_Status statuses[]) {
    note(K_Waitall, 0);
    return PMPI_Waitall(n, q, statuses);
}
int MPI_Test(MPI_Request *q, int *flag, MPI_Status *status) {
    note(K_Test, 0);
    return PMPI_Test(q, flag, status);
}

/* ---- communicators ---- */

int MPI_Comm_dup(MPI_Comm c, MPI_Comm *n) {
    note(K_Comm_dup, 0);
    return PMPI_Comm_dup(c, n);
}
int MPI_Comm_idup(MPI_Comm c, MPI_Comm *n, MPI_Request *q) {
    note(K_Comm_idup, 0);
    return PMPI_Comm_idup(c, n, q);
}
int MPI_Comm_split(MPI_Comm c, int color, int key, MPI_Comm *n) {
    note(K_Comm_split, 0);
    return PMPI_Comm_split(c, color, key, n);
}
int MPI_Comm_split_type(MPI_Comm c, int type, int key, MPI_Info info, MPI_Comm *n) {
    note(K_Comm_split_type, 0);
    return PMPI_Comm_split_type(c, type, key, info, n);
}
int MPI_Comm_free(MPI_Comm *c) {
    note(K_Comm_free, 0);
    return PMPI_Comm_free(c);
}

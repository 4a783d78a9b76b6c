// SPDX-License-Identifier: BSD-3-Clause
/* Non-blocking collectives (linked -lcompmpi; src/runtime/progress.h):
 *   - MPI_Iallreduce/Iallgather/Ibcast give the same bits as the blocking compressed call
 *     with the same settings (static policy, 16 bits: the same algorithm), on every rank,
 *     within the bitpack bound of the rank-order fp32 sum; inputs (the bcast root's buffer
 *     included) are never written;
 *   - several outstanding requests on one communicator, completed with MPI_Waitall,
 *     MPI_Waitany and MPI_Testsome over the array in reverse order;
 *   - point-to-point requests and collective requests in one MPI_Waitall;
 *   - NaN/Inf in one rank's input: every rank ends with the exact PMPI result, bit for bit;
 *   - 20 MPI_Iallreduce with awp: identical on every rank each time;
 *   - MPI_Request_free before completion: the next operation on the communicator completes
 *     after it (issue order), so its result is checked, then a barrier;
 *   - MPI_Cancel has no effect on a collective request (MPI: it cannot be cancelled);
 *   - non-float types pass through to PMPI_I*: exact;
 *   - MPI-4 persistent collectives: 20 (quick: 4) MPI_Startall/wait rounds with the blocking call's bits,
 *     awp per request, a second MPI_Start before completion is MPI_ERR_REQUEST. */
#include "compmpi.h"
#include "mpitest.h"

static int P, R;
static int g_pass; /* arg --passthrough: the non-blocking calls are expected exact (PMPI_I*) */
/* arg nobound: the environment names a codec other than bitpack (COMPMPI_CODEC): the 16-bit
 * bitpack bound does not apply; bits, ranks and the blocking call's bits still must agree */
static int g_nobound;
enum { N = 70001 };

static void set(MPI_Comm c, const char *k, const char *v) {
    MT_CHECK(compmpi_comm_set(c, k, v) == MPI_SUCCESS, "compmpi_comm_set(%s, %s)", k, v);
}

/* Within the 16-bit bitpack bound of the rank-order fp32 sum (as tests/mpi/t_compressed.c). */
static size_t outside_bound(const float *y, size_t n, uint64_t seed, int bits) {
    if (g_nobound) return 0;
    double eps = ldexp(1.0, -(bits - 9));
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i) {
        float acc = 0;
        double absum = 0;
        for (int r = 0; r < P; ++r) {
            float v = mt_value(seed, r, i);
            acc = r ? acc + v : v;
            absum += fabs(v);
        }
        double bound = eps * absum * (2 + eps) + P * ldexp(absum, -23) + 1e-37;
        if (!(fabs((double)y[i] - acc) <= bound)) ++bad;
    }
    return bad;
}

/* One of each: inputs, blocking references and non-blocking outputs. */
struct Set {
    float *x, *x0;          /* allreduce input and its copy */
    float *ref_ar, *ar;     /* blocking / non-blocking allreduce results */
    float *ag_in, *ref_ag, *ag;
    float *bc, *bc0, *ref_bc; /* ibcast buffer, the root's original, blocking result */
    int root;
};

static void set_make(struct Set *s, MPI_Comm comm, uint64_t seed) {
    s->x = malloc(N * sizeof(float));
    s->x0 = malloc(N * sizeof(float));
    s->ref_ar = malloc(N * sizeof(float));
    s->ar = malloc(N * sizeof(float));
    s->ag_in = malloc(N * sizeof(float));
    s->ref_ag = malloc((size_t)N * P * sizeof(float));
    s->ag = malloc((size_t)N * P * sizeof(float));
    s->bc = malloc(N * sizeof(float));
    s->bc0 = malloc(N * sizeof(float));
    s->ref_bc = malloc(N * sizeof(float));
    s->root = (int)(seed % P);
    mt_fill(s->x, N, seed, R);
    memcpy(s->x0, s->x, N * sizeof(float));
    mt_fill(s->ag_in, N, seed + 1, R);
    mt_fill(s->bc, N, seed + 2, R);
    memcpy(s->bc0, s->bc, N * sizeof(float));
    memcpy(s->ref_bc, s->bc, N * sizeof(float));
    if (g_pass) {
        PMPI_Allreduce(s->x, s->ref_ar, N, MPI_FLOAT, MPI_SUM, comm);
        PMPI_Allgather(s->ag_in, N, MPI_FLOAT, s->ref_ag, N, MPI_FLOAT, comm);
        PMPI_Bcast(s->ref_bc, N, MPI_FLOAT, s->root, comm);
    } else {
        MPI_Allreduce(s->x, s->ref_ar, N, MPI_FLOAT, MPI_SUM, comm);
        MPI_Allgather(s->ag_in, N, MPI_FLOAT, s->ref_ag, N, MPI_FLOAT, comm);
        MPI_Bcast(s->ref_bc, N, MPI_FLOAT, s->root, comm);
    }
}

static void set_check(struct Set *s, MPI_Comm comm, uint64_t seed, const char *how) {
    MT_CHECK(memcmp(s->x, s->x0, N * sizeof(float)) == 0, "%s: iallreduce wrote its input", how);
    MT_CHECK(memcmp(s->ar, s->ref_ar, N * sizeof(float)) == 0, "%s: iallreduce differs from the blocking call", how);
    MT_CHECK(mt_identical(s->ar, N * sizeof(float), comm), "%s: iallreduce: ranks differ", how);
    MT_CHECK(outside_bound(s->ar, N, seed, 16) == 0, "%s: iallreduce outside the 16-bit bound", how);
    MT_CHECK(memcmp(s->ag, s->ref_ag, (size_t)N * P * sizeof(float)) == 0, "%s: iallgather differs from the blocking call",
             how);
    MT_CHECK(mt_identical(s->ag, (size_t)N * P * sizeof(float), comm), "%s: iallgather: ranks differ", how);
    MT_CHECK(mt_bcast_ok(s->bc, s->bc0, N * sizeof(float), s->root, comm), "%s: ibcast: root written or receivers differ",
             how);
    if (R != s->root)
        MT_CHECK(memcmp(s->bc, s->ref_bc, N * sizeof(float)) == 0, "%s: ibcast differs from the blocking call", how);
}

static void set_issue(struct Set *s, MPI_Comm comm, MPI_Request *req) {
    MT_CHECK(MPI_Iallreduce(s->x, s->ar, N, MPI_FLOAT, MPI_SUM, comm, &req[0]) == MPI_SUCCESS, "iallreduce rc");
    MT_CHECK(MPI_Iallgather(s->ag_in, N, MPI_FLOAT, s->ag, N, MPI_FLOAT, comm, &req[1]) == MPI_SUCCESS, "iallgather rc");
    MT_CHECK(MPI_Ibcast(s->bc, N, MPI_FLOAT, s->root, comm, &req[2]) == MPI_SUCCESS, "ibcast rc");
}

static void set_free(struct Set *s) {
    free(s->x); free(s->x0); free(s->ref_ar); free(s->ar); free(s->ag_in); free(s->ref_ag); free(s->ag);
    free(s->bc); free(s->bc0); free(s->ref_bc);
}

/* Two sets outstanding at once (6 requests), completed by `mode`. */
static void outstanding(MPI_Comm comm, int mode, uint64_t seed) {
    static const char *names[] = {"Waitall", "Waitany", "Testsome reversed", "Wait each"};
    struct Set a, b;
    set_make(&a, comm, seed);
    set_make(&b, comm, seed + 10);
    MPI_Request req[6];
    set_issue(&a, comm, req);
    set_issue(&b, comm, req + 3);
    if (mode == 0) {
        MPI_Status st[6];
        MT_CHECK(MPI_Waitall(6, req, st) == MPI_SUCCESS, "waitall rc");
    } else if (mode == 1) {
        int seen = 0;
        for (int k = 0; k < 6; ++k) {
            int idx = -1;
            MT_CHECK(MPI_Waitany(6, req, &idx, MPI_STATUS_IGNORE) == MPI_SUCCESS, "waitany rc");
            MT_CHECK(idx >= 0 && idx < 6 && !(seen & (1 << idx)), "waitany index %d", idx);
            if (idx >= 0 && idx < 6) seen |= 1 << idx;
        }
        int idx = 0;
        MPI_Waitany(6, req, &idx, MPI_STATUS_IGNORE);
        MT_CHECK(idx == MPI_UNDEFINED, "waitany on completed requests: %d", idx);
    } else if (mode == 2) {
        MPI_Request rev[6];
        for (int k = 0; k < 6; ++k) rev[k] = req[5 - k];
        int done = 0, out, idx[6];
        while (done < 6) {
            MT_CHECK(MPI_Testsome(6, rev, &out, idx, MPI_STATUSES_IGNORE) == MPI_SUCCESS, "testsome rc");
            if (out == MPI_UNDEFINED) break;
            done += out;
        }
        MT_CHECK(done == 6, "testsome completed %d of 6", done);
        for (int k = 0; k < 6; ++k) MT_CHECK(rev[k] == MPI_REQUEST_NULL, "request %d not freed", k);
    } else {
        for (int k = 5; k >= 0; --k) {
            int flag = 0;
            MPI_Test(&req[k], &flag, MPI_STATUS_IGNORE);
            if (!flag) MT_CHECK(MPI_Wait(&req[k], MPI_STATUS_IGNORE) == MPI_SUCCESS, "wait rc");
            MT_CHECK(req[k] == MPI_REQUEST_NULL, "request not freed");
        }
    }
    set_check(&a, comm, seed, names[mode]);
    set_check(&b, comm, seed + 10, names[mode]);
    set_free(&a);
    set_free(&b);
}

/* A ring of point-to-point messages and a collective in one MPI_Waitall. */
static void mixed_p2p(MPI_Comm comm) {
    struct Set a;
    set_make(&a, comm, 500);
    MPI_Request req[5];
    int sendv[64], recvv[64];
    for (int i = 0; i < 64; ++i) sendv[i] = R * 1000 + i, recvv[i] = -1;
    MPI_Irecv(recvv, 64, MPI_INT, (R + P - 1) % P, 7, comm, &req[0]);
    set_issue(&a, comm, req + 1);
    MPI_Isend(sendv, 64, MPI_INT, (R + 1) % P, 7, comm, &req[4]);
    MPI_Status st[5];
    MT_CHECK(MPI_Waitall(5, req, st) == MPI_SUCCESS, "waitall rc");
    for (int i = 0; i < 64; ++i) MT_CHECK(recvv[i] == ((R + P - 1) % P) * 1000 + i, "p2p message wrong at %d", i);
    MT_CHECK(st[0].MPI_SOURCE == (R + P - 1) % P && st[0].MPI_TAG == 7, "p2p status");
    set_check(&a, comm, 500, "mixed with p2p");
    set_free(&a);
}

/* NaN and Inf in one rank's data: the exact PMPI result on every rank, bit for bit. */
static void nonfinite(MPI_Comm comm) {
    float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float)), *ref = malloc(N * sizeof(float));
    mt_fill(x, N, 900, R);
    if (R == P - 1) x[5] = NAN, x[N - 3] = INFINITY;
    PMPI_Allreduce(x, ref, N, MPI_FLOAT, MPI_SUM, comm);
    MPI_Request req;
    MPI_Iallreduce(x, y, N, MPI_FLOAT, MPI_SUM, comm, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    MT_CHECK(memcmp(y, ref, N * sizeof(float)) == 0, "iallreduce with NaN: not the exact result");
    MT_CHECK(isnan(y[5]) && isinf(y[N - 3]), "NaN/Inf lost");
    /* ibcast from the rank with the NaN: an exact copy everywhere */
    memcpy(y, x, N * sizeof(float));
    MPI_Ibcast(y, N, MPI_FLOAT, P - 1, comm, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    mt_fill(ref, N, 900, P - 1);
    ref[5] = NAN, ref[N - 3] = INFINITY;
    MT_CHECK(memcmp(y, ref, N * sizeof(float)) == 0, "ibcast with NaN: not an exact copy");
    /* iallgather: the exact blocks */
    float *all = malloc((size_t)N * P * sizeof(float)), *allref = malloc((size_t)N * P * sizeof(float));
    PMPI_Allgather(x, N, MPI_FLOAT, allref, N, MPI_FLOAT, comm);
    MPI_Iallgather(x, N, MPI_FLOAT, all, N, MPI_FLOAT, comm, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    MT_CHECK(memcmp(all, allref, (size_t)N * P * sizeof(float)) == 0, "iallgather with NaN: not exact");
    free(all); free(allref); free(x); free(y); free(ref);
}

/* A duplicate of MPI_COMM_WORLD under awp with the custom settings of both awp tests. */
static MPI_Comm awp_comm(void) {
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    set(comm, "policy", "awp");
    set(comm, "awp_preset", "custom");
    set(comm, "awp_threshold", "0.5");
    set(comm, "awp_interval", "3");
    set(comm, "min_bytes", "0");
    return comm;
}

/* 20 calls with awp (its own state per call key): identical bits on every rank each time. */
static void awp_loop(void) {
    MPI_Comm comm = awp_comm();
    float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float));
    for (int it = 0; it < 20; ++it) {
        mt_fill(x, N, 1000, R);
        for (size_t i = 0; i < N; ++i) x[i] *= 1.0f + 0.01f * it;
        MPI_Request req;
        MPI_Iallreduce(x, y, N, MPI_FLOAT, MPI_SUM, comm, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        MT_CHECK(mt_identical(y, N * sizeof(float), comm), "awp call %d: ranks differ", it);
        size_t bad = 0;
        for (size_t i = 0; i < N; ++i) bad += !isfinite(y[i]);
        MT_CHECK(bad == 0, "awp call %d: non-finite result", it);
    }
    free(x); free(y);
    MPI_Comm_free(&comm);
}

/* MPI_Request_free before completion, then MPI_Cancel on a collective request. */
static void free_and_cancel(MPI_Comm comm) {
    struct Set a;
    set_make(&a, comm, 700);
    MPI_Request req[3];
    set_issue(&a, comm, req);
    MPI_Request_free(&req[0]);
    MT_CHECK(req[0] == MPI_REQUEST_NULL, "request_free left the handle");
    MPI_Cancel(&req[1]);
    MPI_Status st;
    MT_CHECK(MPI_Wait(&req[1], &st) == MPI_SUCCESS, "wait after cancel");
    int cancelled = 1;
    MPI_Test_cancelled(&st, &cancelled);
    MT_CHECK(!cancelled, "a collective request reported cancelled");
    MPI_Wait(&req[2], MPI_STATUS_IGNORE);
    /* the ibcast was issued after the freed iallreduce: it completed after it */
    set_check(&a, comm, 700, "request_free/cancel");
    set_free(&a);
    /* freed and never waited for: the barrier and the communicator's end must not hang */
    float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float));
    mt_fill(x, N, 800, R);
    MPI_Request r;
    MPI_Iallreduce(x, y, N, MPI_FLOAT, MPI_SUM, comm, &r);
    MPI_Request_free(&r);
    MPI_Barrier(comm);
    MPI_Iallreduce(x, y, N, MPI_FLOAT, MPI_SUM, comm, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    MT_CHECK(outside_bound(y, N, 800, 16) == 0, "allreduce after a freed request");
    free(x); free(y);
}

/* Types libcompmpi does not compress go to PMPI_I* unchanged. */
static void non_float(MPI_Comm comm) {
    int iv[100], isum[100];
    for (int i = 0; i < 100; ++i) iv[i] = R + i;
    MPI_Request req[2];
    MPI_Iallreduce(iv, isum, 100, MPI_INT, MPI_SUM, comm, &req[0]);
    long long d[50]; /* 8-byte integers (doubles are compressed since issue 30: t_fp64) */
    for (int i = 0; i < 50; ++i) d[i] = R == 0 ? 3 * i : -1;
    MPI_Ibcast(d, 50, MPI_LONG_LONG, 0, comm, &req[1]);
    MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
    for (int i = 0; i < 100; ++i) MT_CHECK(isum[i] == P * i + P * (P - 1) / 2, "int iallreduce at %d", i);
    for (int i = 0; i < 50; ++i) MT_CHECK(d[i] == 3 * i, "long long ibcast at %d", i);
}

/* arg channels=K: K fresh communicators, each with its first compressed MPI_Iallreduce (which
 * makes the communicator's progress channel) followed at once, before any wait, by MPI's own
 * non-blocking collectives on the same communicator (an int MPI_Iallreduce and MPI_Ibcast pass
 * through). Under Open MPI 4.1 this failed (wrong data, MPI_ERR_TRUNCATE, crashes, hangs) while
 * the channel's MPI_Comm_idup was completed by the progress thread: its context-id rounds, run
 * on that thread, took libnbc tags on the user's communicator in a different order on each
 * rank than the application thread's calls (docs/design.md, "Matching argument", 2). */
static void fresh_channels(int k) {
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    for (int i = 0; i < N; ++i) x[i] = mt_value(900, R, (size_t)i);
    for (int it = 0; it < k; ++it) {
        MPI_Comm c;
        MPI_Comm_dup(MPI_COMM_WORLD, &c);
        set(c, "policy", "static");
        set(c, "bits", "16");
        set(c, "min_bytes", "0");
        int iv[64], isum[64];
        long long d[32];
        for (int i = 0; i < 64; ++i) iv[i] = R + i + it;
        for (int i = 0; i < 32; ++i) d[i] = R == it % P ? 5 * i + it : -1;
        MPI_Request req[3];
        MPI_Iallreduce(x, y, N, MPI_FLOAT, MPI_SUM, c, &req[0]);
        MPI_Iallreduce(iv, isum, 64, MPI_INT, MPI_SUM, c, &req[1]);
        MPI_Ibcast(d, 32, MPI_LONG_LONG, it % P, c, &req[2]);
        MPI_Waitall(3, req, MPI_STATUSES_IGNORE);
        for (int i = 0; i < 64; ++i)
            MT_CHECK(isum[i] == P * (i + it) + P * (P - 1) / 2, "channel %d: int iallreduce at %d", it, i);
        for (int i = 0; i < 32; ++i) MT_CHECK(d[i] == 5 * i + it, "channel %d: long long ibcast at %d", it, i);
        MT_CHECK(outside_bound(y, N, 900, 16) == 0, "channel %d: the first compressed iallreduce", it);
        MT_CHECK(mt_identical(y, N * sizeof *y, c), "channel %d: ranks differ", it);
        MPI_Comm_free(&c);
    }
    free(x); free(y);
}

#if MPI_VERSION >= 4
/* Persistent collectives: 20 rounds of MPI_Startall/MPI_Waitall over an allreduce, an
 * allgather and a bcast initialised once, each round on new data in the same buffers: the
 * same bits as the blocking calls; the handles stay (inactive) after each round. */
static void persistent(MPI_Comm comm, int rounds) {
    struct Set a;
    set_make(&a, comm, 1200);
    MPI_Request req[3];
    MT_CHECK(MPI_Allreduce_init(a.x, a.ar, N, MPI_FLOAT, MPI_SUM, comm, MPI_INFO_NULL, &req[0]) == MPI_SUCCESS, "init");
    MT_CHECK(MPI_Allgather_init(a.ag_in, N, MPI_FLOAT, a.ag, N, MPI_FLOAT, comm, MPI_INFO_NULL, &req[1]) == MPI_SUCCESS,
             "init");
    MT_CHECK(MPI_Bcast_init(a.bc, N, MPI_FLOAT, a.root, comm, MPI_INFO_NULL, &req[2]) == MPI_SUCCESS, "init");
    for (int it = 0; it < rounds; ++it) {
        uint64_t seed = 1200 + 100 * (uint64_t)it;
        if (it) { /* new data, new blocking references */
            mt_fill(a.x, N, seed, R);
            memcpy(a.x0, a.x, N * sizeof(float));
            mt_fill(a.ag_in, N, seed + 1, R);
            mt_fill(a.bc, N, seed + 2, R);
            memcpy(a.bc0, a.bc, N * sizeof(float));
            memcpy(a.ref_bc, a.bc, N * sizeof(float));
            if (g_pass) {
                PMPI_Allreduce(a.x, a.ref_ar, N, MPI_FLOAT, MPI_SUM, comm);
                PMPI_Allgather(a.ag_in, N, MPI_FLOAT, a.ref_ag, N, MPI_FLOAT, comm);
                PMPI_Bcast(a.ref_bc, N, MPI_FLOAT, a.root, comm);
            } else {
                MPI_Allreduce(a.x, a.ref_ar, N, MPI_FLOAT, MPI_SUM, comm);
                MPI_Allgather(a.ag_in, N, MPI_FLOAT, a.ref_ag, N, MPI_FLOAT, comm);
                MPI_Bcast(a.ref_bc, N, MPI_FLOAT, a.root, comm);
            }
        }
        MT_CHECK(MPI_Startall(3, req) == MPI_SUCCESS, "startall");
        if (it % 2) {
            MT_CHECK(MPI_Waitall(3, req, MPI_STATUSES_IGNORE) == MPI_SUCCESS, "waitall");
        } else {
            for (int k = 2; k >= 0; --k) MT_CHECK(MPI_Wait(&req[k], MPI_STATUS_IGNORE) == MPI_SUCCESS, "wait");
        }
        for (int k = 0; k < 3; ++k) MT_CHECK(req[k] != MPI_REQUEST_NULL, "persistent handle %d freed by completion", k);
        set_check(&a, comm, seed, "persistent");
    }
    /* an inactive persistent request completes at once; MPI_Testall says done */
    int flag = 0;
    MT_CHECK(MPI_Wait(&req[0], MPI_STATUS_IGNORE) == MPI_SUCCESS, "wait on inactive");
    if (!g_pass) { /* Debian's MPICH 4.0.2 fails MPI_Testall on its own inactive persistent collectives */
        MPI_Testall(3, req, &flag, MPI_STATUSES_IGNORE);
        MT_CHECK(flag, "testall on inactive requests");
    }
    /* started twice without completion: MPI_ERR_REQUEST, and no hang */
    if (!g_pass) {
        MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
        MT_CHECK(MPI_Start(&req[0]) == MPI_SUCCESS, "start");
        int rc = MPI_Start(&req[0]), cls = -1;
        MPI_Error_class(rc, &cls);
        MT_CHECK(cls == MPI_ERR_REQUEST, "second start: error class %d, want MPI_ERR_REQUEST", cls);
        MPI_Wait(&req[0], MPI_STATUS_IGNORE);
        MPI_Comm_set_errhandler(comm, MPI_ERRORS_ARE_FATAL);
    }
    for (int k = 0; k < 3; ++k) MPI_Request_free(&req[k]);
    set_free(&a);
}

/* awp state per persistent request: 20 starts, identical bits on every rank each time. */
static void persistent_awp(void) {
    MPI_Comm comm = awp_comm();
    float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float));
    MPI_Request req;
    MPI_Allreduce_init(x, y, N, MPI_FLOAT, MPI_SUM, comm, MPI_INFO_NULL, &req);
    for (int it = 0; it < 20; ++it) {
        mt_fill(x, N, 1300, R);
        for (size_t i = 0; i < N; ++i) x[i] *= 1.0f + 0.01f * it;
        MPI_Start(&req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        MT_CHECK(mt_identical(y, N * sizeof(float), comm), "persistent awp start %d: ranks differ", it);
    }
    MPI_Request_free(&req);
    free(x); free(y);
    MPI_Comm_free(&comm);
}
#endif

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SINGLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &R);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    set(comm, "policy", "static");
    set(comm, "bits", "16");
    set(comm, "min_bytes", "0");
    int quick = 0, channels = 0;
    for (int i = 1; i < argc; ++i) {
        quick |= strcmp(argv[i], "quick") == 0;
        if (strncmp(argv[i], "channels=", 9) == 0) channels = atoi(argv[i] + 9);
        g_pass |= strcmp(argv[i], "--passthrough") == 0;
        g_nobound |= strcmp(argv[i], "nobound") == 0;
    }
    if (channels) { /* only this case */
        fresh_channels(channels);
        MPI_Comm_free(&comm);
        return mt_finish();
    }
    for (int mode = 0; mode < (quick ? 1 : 4); ++mode) outstanding(comm, mode, 100 + 20 * (uint64_t)mode);
    mixed_p2p(comm);
    nonfinite(comm);
    /* MPI calls both erroneous on a collective request; MPICH refuses Request_free on its own
     * non-blocking collectives, so only libcompmpi's requests are checked */
    if (!g_pass) free_and_cancel(comm);
    non_float(comm);
    if (!quick) awp_loop();
#if MPI_VERSION >= 4
    persistent(comm, quick ? 4 : 20);
    if (!quick) persistent_awp();
#endif
    MPI_Comm_free(&comm);
    return mt_finish();
}

// SPDX-License-Identifier: BSD-3-Clause
/* Inline progress (nb_progress=inline, src/runtime/progress.h; the program at
 * MPI_THREAD_SINGLE): compressed non-blocking collectives advance inside the application's own
 * calls into MPI, as MPI's own non-blocking collectives do, with no thread:
 *   - issuing and completing compressed operations on 3 communicators starts no thread
 *     (/proc/self/task counted before and after; arg nothreads);
 *   - a blocking compressed MPI_Allreduce on a second communicator between the issue and the
 *     wait of a non-blocking one (both compressed; rank 0 waits later than the others);
 *   - completion by MPI_Test alone, with computation between tests;
 *   - MPI_Waitany over point-to-point and collective requests;
 *   - MPI_Comm_free with an operation pending: the wait after it completes it;
 *   - every result the bits of the blocking compressed call with the same settings (the same
 *     algorithm), identical on every rank; the input never written. */
#include <dirent.h>

#include "compmpi.h"
#include "mpitest.h"

static int P, R;
enum { N = 50000 };

static void set(MPI_Comm c, const char *k, const char *v) {
    MT_CHECK(compmpi_comm_set(c, k, v) == MPI_SUCCESS, "compmpi_comm_set(%s, %s)", k, v);
}

static MPI_Comm make_comm(void) {
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    set(c, "policy", "static");
    set(c, "bits", "16");
    set(c, "min_bytes", "0");
    return c;
}

static int threads(void) {
    DIR *d = opendir("/proc/self/task");
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.') ++n;
    closedir(d);
    return n;
}

/* The blocking compressed call's result for this seed, on a communicator of the same settings. */
static void reference(float *ref, uint64_t seed, MPI_Comm c) {
    float *x = malloc(N * sizeof(float));
    mt_fill(x, N, seed, R);
    MPI_Allreduce(x, ref, N, MPI_FLOAT, MPI_SUM, c);
    free(x);
}

static void check(const float *y, const float *ref, const float *x, uint64_t seed, const char *what, MPI_Comm c) {
    MT_CHECK(memcmp(y, ref, N * sizeof(float)) == 0, "%s: not the blocking call's bits", what);
    MT_CHECK(mt_identical(y, N * sizeof(float), c), "%s: ranks differ", what);
    float *x0 = malloc(N * sizeof(float));
    mt_fill(x0, N, seed, R);
    MT_CHECK(memcmp(x, x0, N * sizeof(float)) == 0, "%s: the input was written", what);
    free(x0);
}

static void spin(double s) {
    double t0 = MPI_Wtime();
    volatile double v = 0;
    while (MPI_Wtime() - t0 < s) v += 1;
}

int main(int argc, char **argv) {
    int provided, nothreads = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SINGLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &R);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    mt_watchdog("t_inline_progress", 120);
    for (int i = 1; i < argc; ++i) nothreads |= strcmp(argv[i], "nothreads") == 0;
    MPI_Comm a = make_comm(), b = make_comm(), c = make_comm();
    float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float)), *ref = malloc(N * sizeof(float));
    float *y2 = malloc(N * sizeof(float)), *ref2 = malloc(N * sizeof(float));
    const int t_before = threads();

    /* progress inside a blocking collective of another communicator */
    reference(ref, 1, a);
    reference(ref2, 2, b);
    mt_fill(x, N, 1, R);
    MPI_Request r;
    MPI_Iallreduce(x, y, N, MPI_FLOAT, MPI_SUM, a, &r);
    float *x2 = malloc(N * sizeof(float));
    mt_fill(x2, N, 2, R);
    MPI_Allreduce(x2, y2, N, MPI_FLOAT, MPI_SUM, b); /* compressed, while `a`'s runs on its fiber */
    if (R == 0) spin(2e-3); /* the others wait first */
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    check(y, ref, x, 1, "Iallreduce with a blocking compressed Allreduce between issue and wait", a);
    MT_CHECK(memcmp(y2, ref2, N * sizeof(float)) == 0, "the blocking Allreduce beside it: wrong bits");

    /* completion by MPI_Test alone, computation between tests (rank-dependent) */
    reference(ref, 3, c);
    mt_fill(x, N, 3, R);
    MPI_Iallreduce(x, y, N, MPI_FLOAT, MPI_SUM, c, &r);
    int flag = 0;
    long tests = 0;
    while (!flag) {
        spin(R % 2 ? 20e-6 : 5e-6);
        MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
        ++tests;
    }
    check(y, ref, x, 3, "Iallreduce completed by MPI_Test", c);

    /* MPI_Waitany over a ring's point-to-point requests and two collectives */
    reference(ref, 4, a);
    reference(ref2, 5, b);
    mt_fill(x, N, 4, R);
    mt_fill(x2, N, 5, R);
    int token_out = R, token_in = -1;
    MPI_Request rs[4];
    MPI_Irecv(&token_in, 1, MPI_INT, (R + P - 1) % P, 7, MPI_COMM_WORLD, &rs[0]);
    MPI_Iallreduce(x, y, N, MPI_FLOAT, MPI_SUM, a, &rs[1]);
    MPI_Iallreduce(x2, y2, N, MPI_FLOAT, MPI_SUM, b, &rs[2]);
    MPI_Isend(&token_out, 1, MPI_INT, (R + 1) % P, 7, MPI_COMM_WORLD, &rs[3]);
    for (int done = 0; done < 4; ++done) {
        int idx = -1;
        MPI_Waitany(4, rs, &idx, MPI_STATUS_IGNORE);
        MT_CHECK(idx >= 0 && idx < 4, "MPI_Waitany index %d", idx);
    }
    check(y, ref, x, 4, "Iallreduce completed by MPI_Waitany", a);
    MT_CHECK(memcmp(y2, ref2, N * sizeof(float)) == 0, "second Iallreduce under MPI_Waitany: wrong bits");
    MT_CHECK(token_in == (R + P - 1) % P, "ring token %d", token_in);

    /* MPI_Comm_free with an operation pending; the wait after it completes it */
    MPI_Comm d = make_comm();
    reference(ref, 6, d);
    mt_fill(x, N, 6, R);
    MPI_Iallreduce(x, y, N, MPI_FLOAT, MPI_SUM, d, &r);
    MPI_Comm_free(&d);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    MT_CHECK(memcmp(y, ref, N * sizeof(float)) == 0, "Iallreduce on a freed communicator: wrong bits");

    const int t_after = threads();
    if (nothreads) MT_CHECK(t_after == t_before, "threads %d before, %d after compressed non-blocking calls", t_before, t_after);
    if (R == 0) printf("t_inline_progress: %d threads before, %d after; %ld tests to complete\n", t_before, t_after, tests);
    free(x); free(x2); free(y); free(y2); free(ref); free(ref2);
    MPI_Comm_free(&a);
    MPI_Comm_free(&b);
    MPI_Comm_free(&c);
    return mt_finish();
}

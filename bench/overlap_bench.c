// SPDX-License-Identifier: BSD-3-Clause
/*
 * overlap_bench — does computation overlap a non-blocking float MPI_Iallreduce? Plain MPI,
 * meant to be run with and without libcompmpi (LD_PRELOAD).
 *
 *   overlap_bench [--bytes 64M] [--iters K] [--compute-ms MS] [--test-every N]
 *
 * Per iteration (each time the max over ranks, after an MPI_Barrier):
 *   t_blocking  MPI_Allreduce alone;
 *   t_compute   the compute kernel alone (a streaming multiply-add over a private 16 MiB
 *               array, repeated; calibrated once so that it takes about t_blocking, or
 *               --compute-ms);
 *   t_overlap   MPI_Iallreduce, the same compute, MPI_Wait.
 * Output (rank 0): one line with the medians and
 *   overlap = (t_blocking + t_compute - t_overlap) / min(t_blocking, t_compute)
 * 1 = the shorter of the two was completely hidden, 0 = none of it.
 * --test-every N: call MPI_Test after every N kernel passes (how plain MPI progresses a
 * non-blocking collective without a progress thread); 0 (default): no MPI call while
 * computing.
 *
 * Build: mpicc.mpich -O2 -o overlap_bench overlap_bench.c -lm
 */
#include <mpi.h>
#include "bench_init.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t parse_bytes(const char *s) {
    char *e;
    double v = strtod(s, &e);
    if (*e == 'K' || *e == 'k') v *= 1024;
    else if (*e == 'M' || *e == 'm') v *= 1024 * 1024;
    else if (*e == 'G' || *e == 'g') v *= 1024.0 * 1024 * 1024;
    return (size_t)v;
}

enum { WORK = 4 << 20 }; /* floats of the compute array (16 MiB) */
static float *g_work;
static volatile float g_sink;

/* `passes` streaming passes; MPI_Test on req every test_every passes when asked */
static void compute(long passes, MPI_Request *req, int test_every) {
    for (long p = 0; p < passes; ++p) {
        float a = 1.0f + 1e-7f * (float)p;
        for (size_t i = 0; i < WORK; ++i) g_work[i] = g_work[i] * a + 1e-6f;
        if (req && test_every > 0 && (p + 1) % test_every == 0) {
            int flag;
            MPI_Test(req, &flag, MPI_STATUS_IGNORE);
        }
    }
    g_sink = g_work[0];
}

static double max_over_ranks(double t) {
    double m;
    MPI_Allreduce(&t, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return m;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char **argv) {
    bench_init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    size_t bytes = 64u << 20;
    int iters = 5, test_every = 0;
    double compute_ms = 0;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--bytes") && i + 1 < argc) bytes = parse_bytes(argv[++i]);
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--compute-ms") && i + 1 < argc) compute_ms = atof(argv[++i]);
        else if (!strcmp(argv[i], "--test-every") && i + 1 < argc) test_every = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--thread-level") && i + 1 < argc) ++i; /* bench_init */
        else {
            if (rank == 0) fprintf(stderr, "usage: overlap_bench [--bytes 64M] [--iters K] [--compute-ms MS] [--test-every N] [--thread-level L]\n");
            MPI_Finalize();
            return 2;
        }
    }
    const size_t n = bytes / sizeof(float);
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    g_work = malloc(WORK * sizeof(float));
    for (size_t i = 0; i < n; ++i) x[i] = (float)sin(0.001 * (double)i + rank) * 1e-2f;
    for (size_t i = 0; i < WORK; ++i) g_work[i] = 1.0f;

    /* warm up both paths (connections, page faults, libcompmpi's first-call set-up) */
    MPI_Request req;
    MPI_Allreduce(x, y, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Iallreduce(x, y, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);

    /* calibrate the kernel: time per pass, then passes for the target time */
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    compute(4, NULL, 0);
    double per_pass = max_over_ranks(MPI_Wtime() - t0) / 4;
    double *tb = malloc(iters * sizeof(double)), *tc = malloc(iters * sizeof(double)), *to = malloc(iters * sizeof(double));
    long passes = 0;
    for (int it = 0; it < iters; ++it) {
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        MPI_Allreduce(x, y, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        tb[it] = max_over_ranks(MPI_Wtime() - t0);
        if (it == 0) {
            double target = compute_ms > 0 ? compute_ms * 1e-3 : tb[0];
            passes = (long)(target / per_pass + 0.5);
            if (passes < 1) passes = 1;
            MPI_Bcast(&passes, 1, MPI_LONG, 0, MPI_COMM_WORLD);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        compute(passes, NULL, 0);
        tc[it] = max_over_ranks(MPI_Wtime() - t0);
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        MPI_Iallreduce(x, y, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
        compute(passes, &req, test_every);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        to[it] = max_over_ranks(MPI_Wtime() - t0);
    }
    double b = median(tb, iters), c = median(tc, iters), o = median(to, iters);
    double ov = (b + c - o) / (b < c ? b : c);
    if (rank == 0)
        printf("coll=iallreduce bytes=%zu ranks=%d iters=%d passes=%ld test_every=%d t_blocking_s=%.4f "
               "t_compute_s=%.4f t_overlap_s=%.4f t_sequential_s=%.4f overlap=%.2f\n",
               bytes, size, iters, passes, test_every, b, c, o, b + c, ov);
    fflush(stdout);
    free(x); free(y); free(g_work); free(tb); free(tc); free(to);
    MPI_Finalize();
    return 0;
}

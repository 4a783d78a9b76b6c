// SPDX-License-Identifier: BSD-3-Clause
/*
 * wholeprog_bench — what preloading costs the calls libcompmpi does NOT compress (issue 42,
 * part 1): point-to-point latency (blocking and non-blocking) and bandwidth, MPI_Barrier,
 * int and double MPI_Allreduce below min_bytes, MPI_Alltoall. Plain MPI: run it with and
 * without libcompmpi (bench/wholeprog_paired.sh alternates the two).
 *
 *   wholeprog_bench [--thread-level single|funneled|serialized|multiple] [--iters K]
 *                   [--max-bytes B] [--tests LIST]
 *
 * --thread-level: MPI_Init_thread at that level (default: MPI_Init), as the program would ask.
 * Tests (LIST, default all): lat (MPI_Send/MPI_Recv ping-pong, ranks 0 and 1; half round
 * trip), nblat (MPI_Isend/MPI_Irecv/MPI_Waitall ping-pong), bw (rank 0 sends a window of 32
 * MPI_Isend to rank 1, which answers with one byte; MB/s), barrier, allreduce_int,
 * allreduce_double (8 B - 2 KiB: below the default min_bytes of 4 KiB), alltoall (per-rank
 * block 8 B - 16 KiB). Point-to-point sizes 8 B - max-bytes (default 4 MiB), by 4x.
 * Each measurement: K timed batches (batch size so that a batch takes ~1 ms), the median
 * and the minimum per call over the batches; for the collectives the max over ranks.
 * Output (rank 0): "wholeprog: test=T bytes=N median_us=X min_us=Y [mbps=Z] level=L".
 */
#define _POSIX_C_SOURCE 200809L /* strdup under -std=c11 */
#include <mpi.h>
#include "bench_init.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_rank, g_size;

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static const char *level_name(int l)
{
    return l == MPI_THREAD_SINGLE ? "single" : l == MPI_THREAD_FUNNELED ? "funneled"
         : l == MPI_THREAD_SERIALIZED ? "serialized" : l == MPI_THREAD_MULTIPLE ? "multiple" : "?";
}

enum test { T_LAT, T_NBLAT, T_BW, T_BARRIER, T_AR_INT, T_AR_DOUBLE, T_ALLTOALL, T_N };
static const char *const k_names[T_N] = {"lat", "nblat", "bw", "barrier", "allreduce_int", "allreduce_double",
                                         "alltoall"};

static char *g_sbuf, *g_rbuf;

/* one run of `reps` calls of test t at `bytes`; returns seconds */
static double run(enum test t, size_t bytes, int reps)
{
    const int peer = g_rank == 0 ? 1 : 0;
    const int active = g_rank < 2;
    MPI_Request rq[33];
    MPI_Status st[33]; /* not MPI_STATUSES_IGNORE: GCC 12 warns on MPICH's (MPI_Status *)1 */
    double t0 = MPI_Wtime();
    for (int r = 0; r < reps; r++) {
        switch (t) {
        case T_LAT:
            if (!active) break;
            if (g_rank == 0) {
                MPI_Send(g_sbuf, (int)bytes, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
                MPI_Recv(g_rbuf, (int)bytes, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(g_rbuf, (int)bytes, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(g_sbuf, (int)bytes, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
            }
            break;
        case T_NBLAT:
            if (!active) break;
            if (g_rank == 0) {
                MPI_Isend(g_sbuf, (int)bytes, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &rq[0]);
                MPI_Wait(&rq[0], MPI_STATUS_IGNORE);
                MPI_Irecv(g_rbuf, (int)bytes, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &rq[0]);
                MPI_Wait(&rq[0], MPI_STATUS_IGNORE);
            } else {
                MPI_Irecv(g_rbuf, (int)bytes, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &rq[0]);
                MPI_Wait(&rq[0], MPI_STATUS_IGNORE);
                MPI_Isend(g_sbuf, (int)bytes, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &rq[0]);
                MPI_Wait(&rq[0], MPI_STATUS_IGNORE);
            }
            break;
        case T_BW:
            if (!active) break;
            if (g_rank == 0) {
                for (int w = 0; w < 32; w++)
                    MPI_Isend(g_sbuf, (int)bytes, MPI_BYTE, peer, 3, MPI_COMM_WORLD, &rq[w]);
                MPI_Waitall(32, rq, st);
                MPI_Recv(g_rbuf, 1, MPI_BYTE, peer, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                for (int w = 0; w < 32; w++)
                    MPI_Irecv(g_rbuf, (int)bytes, MPI_BYTE, peer, 3, MPI_COMM_WORLD, &rq[w]);
                MPI_Waitall(32, rq, st);
                MPI_Send(g_sbuf, 1, MPI_BYTE, peer, 4, MPI_COMM_WORLD);
            }
            break;
        case T_BARRIER: MPI_Barrier(MPI_COMM_WORLD); break;
        case T_AR_INT:
            MPI_Allreduce(g_sbuf, g_rbuf, (int)(bytes / sizeof(int)), MPI_INT, MPI_SUM, MPI_COMM_WORLD);
            break;
        case T_AR_DOUBLE:
            MPI_Allreduce(g_sbuf, g_rbuf, (int)(bytes / sizeof(double)), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
            break;
        case T_ALLTOALL:
            MPI_Alltoall(g_sbuf, (int)bytes, MPI_BYTE, g_rbuf, (int)bytes, MPI_BYTE, MPI_COMM_WORLD);
            break;
        default: break;
        }
    }
    return MPI_Wtime() - t0;
}

static void measure(enum test t, size_t bytes, int iters, int level)
{
    const int p2p = t == T_LAT || t == T_NBLAT || t == T_BW;
    /* calibrate the batch on rank 0 (about 1 ms), everyone uses it */
    int reps = 1;
    for (;;) {
        double dt = run(t, bytes, reps);
        MPI_Bcast(&dt, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        if (dt > 1e-3 || reps >= 1 << 16) break;
        reps *= 2;
    }
    double *v = malloc(sizeof(double) * (size_t)iters);
    for (int i = 0; i < iters; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double dt = run(t, bytes, reps), mx = 0;
        MPI_Allreduce(&dt, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        v[i] = (p2p ? dt : mx) / reps;
        MPI_Bcast(&v[i], 1, MPI_DOUBLE, 0, MPI_COMM_WORLD); /* rank 0's view for p2p */
    }
    qsort(v, (size_t)iters, sizeof *v, cmp);
    const double med = iters % 2 ? v[iters / 2] : 0.5 * (v[iters / 2 - 1] + v[iters / 2]);
    const double per = (t == T_LAT || t == T_NBLAT) ? 0.5 : 1.0; /* half round trip */
    if (g_rank == 0) {
        printf("wholeprog: test=%s bytes=%zu median_us=%.4f min_us=%.4f", k_names[t], bytes, med * per * 1e6,
               v[0] * per * 1e6);
        if (t == T_BW) printf(" mbps=%.1f", 32.0 * (double)bytes / med / 1e6);
        printf(" level=%s ranks=%d\n", level_name(level), g_size);
        fflush(stdout);
    }
    free(v);
}

int main(int argc, char **argv)
{
    int level = -1, provided = MPI_THREAD_SINGLE, iters = 21, want[T_N];
    size_t max_bytes = 4u << 20;
    for (int t = 0; t < T_N; t++) want[t] = 1;
    for (int a = 1; a < argc; a++) {
        const char *o = argv[a], *v = a + 1 < argc ? argv[a + 1] : NULL;
        if (!v) { fprintf(stderr, "wholeprog_bench: option %s needs a value\n", o); return 2; }
        a++;
        if (!strcmp(o, "--thread-level")) {
            level = bench_level_of(v);
            if (level < 0) { fprintf(stderr, "--thread-level: single|funneled|serialized|multiple\n"); return 2; }
        } else if (!strcmp(o, "--iters")) iters = atoi(v);
        else if (!strcmp(o, "--max-bytes")) max_bytes = strtoull(v, NULL, 0);
        else if (!strcmp(o, "--tests")) {
            for (int t = 0; t < T_N; t++) want[t] = 0;
            char *list = strdup(v);
            for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ","))
                for (int t = 0; t < T_N; t++)
                    if (!strcmp(tok, k_names[t])) want[t] = 1;
            free(list);
        } else { fprintf(stderr, "wholeprog_bench: unknown option %s\n", o); return 2; }
    }
    if (iters < 1) iters = 1;
    if (level < 0) MPI_Init(&argc, &argv);
    else MPI_Init_thread(&argc, &argv, level, &provided);
    MPI_Query_thread(&provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    const size_t a2a_max = 16u << 10;
    const size_t buf = (max_bytes > a2a_max * (size_t)g_size ? max_bytes : a2a_max * (size_t)g_size) + 64;
    g_sbuf = calloc(buf, 1);
    g_rbuf = calloc(buf, 1);
    for (size_t i = 0; i < buf; i++) g_sbuf[i] = (char)(i * 7);
    if (g_rank == 0)
        printf("wholeprog: asked=%s provided=%s ranks=%d\n", level < 0 ? "MPI_Init" : level_name(level),
               level_name(provided), g_size);
    for (int t = 0; t < T_N; t++) {
        if (!want[t]) continue;
        if ((t == T_LAT || t == T_NBLAT || t == T_BW) && g_size < 2) continue;
        if (t == T_BARRIER) { measure(T_BARRIER, 0, iters, provided); continue; }
        if (t == T_AR_INT || t == T_AR_DOUBLE) {
            for (size_t b = 8; b <= 2048; b *= 4) measure((enum test)t, b, iters, provided);
            continue;
        }
        if (t == T_ALLTOALL) {
            for (size_t b = 8; b <= a2a_max; b *= 4) measure(T_ALLTOALL, b, iters, provided);
            continue;
        }
        for (size_t b = 8; b <= max_bytes; b *= 4) measure((enum test)t, b, iters, provided);
    }
    free(g_sbuf);
    free(g_rbuf);
    MPI_Finalize();
    return 0;
}

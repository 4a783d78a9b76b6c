// SPDX-License-Identifier: BSD-3-Clause
/* Helpers for the MPI test programs (MPICH test-suite style: each program prints
 * " No Errors" from rank 0 when every check passed, and exits non-zero otherwise). */
#ifndef MPITEST_H
#define MPITEST_H
#include <math.h>
#include <mpi.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int mt_errors = 0;

/* MPI_Init, then this process's rank in MPI_COMM_WORLD and its size. */
static inline void mt_init(int *argc, char ***argv, int *rank, int *size) {
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
}

#define MT_CHECK(cond, ...)                                                       \
    do {                                                                          \
        if (!(cond)) {                                                            \
            int r_;                                                               \
            MPI_Comm_rank(MPI_COMM_WORLD, &r_);                                   \
            fprintf(stderr, "[rank %d] %s:%d: check failed: %s: ", r_, __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                         \
            fprintf(stderr, "\n");                                                \
            mt_errors++;                                                          \
        }                                                                         \
    } while (0)

/* Deterministic data of any rank: splitmix64 on (seed, rank, index). */
static inline uint64_t mt_mix(uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static inline double mt_uniform(uint64_t seed, int rank, size_t i) {
    return (mt_mix(seed * 1000003ull + (uint64_t)rank * 0x100000001ull + i) >> 11) * (1.0 / 9007199254740992.0);
}
/* gradient-like float: roughly normal, scale varying by block */
static inline float mt_value(uint64_t seed, int rank, size_t i) {
    double u1 = mt_uniform(seed, rank, 2 * i) + 1e-12, u2 = mt_uniform(seed, rank, 2 * i + 1);
    double scale = pow(10.0, -3.0 + 2.0 * mt_uniform(seed + 7, 0, i / 512));
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2) * scale);
}
static inline void mt_fill(float *x, size_t n, uint64_t seed, int rank) {
    for (size_t i = 0; i < n; ++i) x[i] = mt_value(seed, rank, i);
}

/* exact[0..n) = the fp32 sum over ranks 0..size-1, in rank order, of mt_fill(seed, rank):
 * with 2 ranks, what MPI's own allreduce returns bit for bit. tmp: n floats of scratch. */
static inline void mt_exact_sum(float *exact, float *tmp, size_t n, uint64_t seed, int size) {
    for (size_t i = 0; i < n; ++i) exact[i] = 0.0f;
    for (int r = 0; r < size; ++r) {
        mt_fill(tmp, n, seed, r);
        for (size_t i = 0; i < n; ++i) exact[i] += tmp[i];
    }
}

static inline uint64_t mt_hash(const void *p, size_t bytes) {
    const unsigned char *c = (const unsigned char *)p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < bytes; ++i) h = (h ^ c[i]) * 1099511628211ull;
    return h;
}
/* 1 if every rank of comm holds the same bytes (integers pass through libcompmpi untouched). */
static inline int mt_identical(const void *p, size_t bytes, MPI_Comm comm) {
    uint64_t h = mt_hash(p, bytes), v[2] = {h, ~h}, r[2];
    MPI_Allreduce(v, r, 2, MPI_UINT64_T, MPI_MAX, comm);
    return r[0] == h && r[1] == ~h;
}

/* After a bcast from root: 1 if the root's buffer still holds orig bit for bit (the root's
 * data is input and is never written) and every other rank holds the same bytes. */
static inline int mt_bcast_ok(const void *buf, const void *orig, size_t bytes, int root, MPI_Comm comm) {
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    uint64_t mine[2] = {mt_hash(buf, bytes), rank == root ? (uint64_t)(memcmp(buf, orig, bytes) == 0) : 1};
    uint64_t *all = (uint64_t *)malloc(2 * sizeof(uint64_t) * (size_t)size);
    MPI_Allgather(mine, 2, MPI_UINT64_T, all, 2, MPI_UINT64_T, comm);
    int ok = all[2 * root + 1] == 1, first = root == 0 ? 1 : 0;
    for (int r = 0; r < size; ++r)
        if (r != root && first < size && all[2 * r] != all[2 * first]) ok = 0;
    free(all);
    return ok;
}

/* A watchdog for programs that must end, never hang (t_fault, t_storm): after `seconds`
 * every rank still running writes "<prog>: watchdog: ... hangs" and exits 99;
 * tests/mpi/run_tests.sh fails any line with such a line, expect_fail lines included. */
static char mt_watchdog_line[128];
static inline void mt_watchdog_fire(int sig) {
    (void)sig;
    ssize_t w = write(2, mt_watchdog_line, strlen(mt_watchdog_line));
    (void)w;
    _exit(99);
}
static inline void mt_watchdog(const char *prog, unsigned seconds) {
    snprintf(mt_watchdog_line, sizeof mt_watchdog_line, "%s: watchdog: no result after %u s: the job hangs\n", prog,
             seconds);
    signal(SIGALRM, mt_watchdog_fire);
    alarm(seconds);
}

static inline int mt_finish(void) {
    int rank, total = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Allreduce(&mt_errors, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        if (total == 0) printf(" No Errors\n");
        else printf(" Found %d errors\n", total);
        fflush(stdout);
    }
    MPI_Finalize();
    return total != 0;
}
#endif

// SPDX-License-Identifier: BSD-3-Clause
/*
 * fp64_bench -- MPI_Allreduce of doubles (MPI_DOUBLE, MPI_SUM), plain MPI against the same call
 * through libcompmpi, paired in one job: every iteration times PMPI_Allreduce (MPI's own; an
 * interposer defines only the MPI_* names) and MPI_Allreduce (intercepted when the library is
 * preloaded), the two arms alternating which goes first. Run with LD_PRELOAD of libcompmpi
 * and its settings in the environment (COMPMPI_ERROR_BOUND, COMPMPI_CODEC, COMPMPI_BITS, ...).
 *
 *   fp64_bench [--sizes 16M,64M] [--iters 5] [--data smooth|noisy]
 *
 * Per size, rank 0 prints one line: bytes, median plain and compressed seconds (max over ranks
 * per iteration), speedup, and the largest |result - exact| over the result, absolute and
 * relative to sum_r |x_r| (exact: a long double sum of every rank's data, regenerated).
 * Data: smooth = a sine field plus 1e-3 noise (simulation-like, as in
 * examples/mpi4py_float64.py); noisy = Gaussian.
 * Build: mpicc.mpich -O2 -o fp64_bench fp64_bench.c -lm  (make builds _build/bench/fp64_bench)
 */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t mix(uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static double unif(uint64_t s) { return (mix(s) >> 11) * (1.0 / 9007199254740992.0); }
static int smooth = 1;
static double val(int r, size_t i, size_t n) {
    double g = sqrt(-2 * log(unif(i * 131 + (uint64_t)r * 7 + 1) + 1e-300)) * cos(6.283185307179586 * unif(i * 131 + (uint64_t)r * 7 + 2));
    if (!smooth) return g;
    return sin(8 * 3.141592653589793 * (double)i / (double)n + 0.1 * r) + 1e-3 * g;
}
static size_t parse(const char *s) {
    char *e;
    double v = strtod(s, &e);
    if (*e == 'K') v *= 1024;
    if (*e == 'M') v *= 1024 * 1024;
    if (*e == 'G') v *= 1024.0 * 1024 * 1024;
    return (size_t)v;
}
static int cmpd(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, P, iters = 5;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    const char *sizes = "16M,64M";
    for (int a = 1; a < argc; ++a) {
        if (!strcmp(argv[a], "--sizes") && a + 1 < argc) sizes = argv[++a];
        else if (!strcmp(argv[a], "--iters") && a + 1 < argc) iters = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--data") && a + 1 < argc) smooth = strcmp(argv[++a], "noisy") != 0;
    }
    char *list = malloc(strlen(sizes) + 1); /* (no strdup: the build is strict C11) */
    strcpy(list, sizes);
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        const size_t bytes = parse(tok), n = bytes / 8;
        double *x = malloc(n * 8), *y = malloc(n * 8), *z = malloc(n * 8);
        for (size_t i = 0; i < n; ++i) x[i] = val(rank, i, n);
        double *tp = malloc(sizeof(double) * iters), *tc = malloc(sizeof(double) * iters);
        for (int it = -1; it < iters; ++it) { /* it = -1: warm-up (the cost model's first calls) */
            for (int arm = 0; arm < 2; ++arm) {
                const int comp = (arm + it) % 2 == 0;
                MPI_Barrier(MPI_COMM_WORLD);
                double t0 = MPI_Wtime();
                if (comp) MPI_Allreduce(x, y, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
                else PMPI_Allreduce(x, z, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
                double t = MPI_Wtime() - t0, tm;
                PMPI_Allreduce(&t, &tm, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
                if (it >= 0) (comp ? tc : tp)[it] = tm;
            }
        }
        /* errors: rank 0 checks a strided sample of 1/16 of the elements against the exact sum */
        double eabs = 0, erel = 0;
        if (rank == 0)
            for (size_t i = 0; i < n; i += 16) {
                long double S = 0, A = 0;
                for (int r = 0; r < P; ++r) {
                    long double v = val(r, i, n);
                    S += v, A += fabsl(v);
                }
                const double e = (double)fabsl((long double)y[i] - S);
                if (e > eabs) eabs = e;
                if (A > 0 && e / (double)A > erel) erel = e / (double)A;
            }
        qsort(tp, iters, sizeof(double), cmpd);
        qsort(tc, iters, sizeof(double), cmpd);
        if (rank == 0)
            printf("fp64 allreduce %zu B P=%d plain %.6f s compressed %.6f s speedup %.3f max_abs_err %.3e max_rel_err %.3e\n",
                   bytes, P, tp[iters / 2], tc[iters / 2], tp[iters / 2] / tc[iters / 2], eabs, erel);
        fflush(stdout);
        free(x), free(y), free(z), free(tp), free(tc);
    }
    free(list);
    MPI_Finalize();
    return 0;
}

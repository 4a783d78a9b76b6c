// SPDX-License-Identifier: BSD-3-Clause
/*
 * validate_exact — OSU-style validation of an unmodified program under the default preload
 * (issue 42, part 2): on shared memory no codec beats MPI, so the cost model must keep every
 * class exact, and every call must return MPI's own result bit for bit — also when the
 * machine is loaded and the model's timings are noise (bench/validate_under_load.sh).
 *
 *   validate_exact [--iters K] [--sizes 4K,16K,64K,256K] [--colls LIST] [--quiet]
 *
 * Per collective (allreduce, bcast, allgather, iallreduce, ibcast, iallgather) and size
 * (bytes of floats per rank), K calls of gradient-like data, each compared with the same
 * collective through PMPI_* (past the preload; for allreduce with 2 ranks the sum is
 * commutative, so any algorithm gives the same bits; with more ranks the reference is the
 * same form: PMPI_Allreduce for blocking, PMPI_Iallreduce + PMPI_Wait for non-blocking).
 * Prints one line per (collective, size): "validate: coll=C bytes=N calls=K wrong_calls=W
 * max_rel_err=E", and " No Errors" when no call was wrong (exit 0), else exit 1.
 */
#define _POSIX_C_SOURCE 200809L /* strdup under -std=c11 */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t mix(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void fill(float *x, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) {
        double u = (double)(mix(seed * 0x100000001ull + i) >> 11) * (1.0 / 9007199254740992.0);
        x[i] = (float)((u - 0.5) * 2e-2 * (1 + (double)(i % 97)));
    }
}

static size_t parse_bytes(const char *s)
{
    char *e;
    double v = strtod(s, &e);
    if (*e == 'K' || *e == 'k') v *= 1024;
    else if (*e == 'M' || *e == 'm') v *= 1048576;
    return (size_t)v;
}

enum { C_AR, C_BC, C_AG, C_IAR, C_IBC, C_IAG, C_N };
static const char *const k_name[C_N] = {"allreduce", "bcast", "allgather", "iallreduce", "ibcast", "iallgather"};

int main(int argc, char **argv)
{
    int iters = 200, quiet = 0, want[C_N];
    const char *sizes_arg = "4K,16K,64K,256K";
    for (int c = 0; c < C_N; c++) want[c] = 1;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--iters") && a + 1 < argc) iters = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--sizes") && a + 1 < argc) sizes_arg = argv[++a];
        else if (!strcmp(argv[a], "--quiet")) quiet = 1;
        else if (!strcmp(argv[a], "--colls") && a + 1 < argc) {
            const char *l = argv[++a];
            for (int c = 0; c < C_N; c++) {
                const char *p = strstr(l, k_name[c]);
                /* whole names only: "allreduce" inside "iallreduce" does not count */
                want[c] = 0;
                while (p) {
                    const size_t k = strlen(k_name[c]);
                    if ((p == l || p[-1] == ',') && (p[k] == 0 || p[k] == ',')) { want[c] = 1; break; }
                    p = strstr(p + 1, k_name[c]);
                }
            }
        } else {
            fprintf(stderr, "usage: validate_exact [--iters K] [--sizes LIST] [--colls LIST] [--quiet]\n");
            return 2;
        }
    }
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long wrong_total = 0;
    char *list = strdup(sizes_arg);
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        const size_t bytes = parse_bytes(tok), n = bytes / sizeof(float);
        const size_t nout = n * (size_t)size;
        float *in = malloc(n * sizeof *in), *out = malloc(nout * sizeof *out), *ref = malloc(nout * sizeof *ref),
              *ref2 = malloc(n * sizeof *ref2);
        for (int c = 0; c < C_N; c++) {
            if (!want[c]) continue;
            long wrong = 0;
            double max_rel = 0;
            for (int it = 0; it < iters; it++) {
                fill(in, n, (uint64_t)rank * 7919u + (uint64_t)it * 104729u + bytes);
                MPI_Request rq;
                size_t m = n;
                switch (c) {
                case C_AR: case C_IAR:
                    if (c == C_AR) MPI_Allreduce(in, out, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
                    else MPI_Iallreduce(in, out, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &rq), MPI_Wait(&rq, MPI_STATUS_IGNORE);
                    /* MPI's exact result: its blocking or its non-blocking one (they may sum in
                     * different orders at 3+ ranks; an exact call may run either) */
                    PMPI_Allreduce(in, ref, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
                    PMPI_Iallreduce(in, ref2, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &rq);
                    PMPI_Wait(&rq, MPI_STATUS_IGNORE);
                    if (!memcmp(out, ref2, n * sizeof *out)) memcpy(ref, ref2, n * sizeof *ref);
                    break;
                case C_BC: case C_IBC:
                    memcpy(out, in, n * sizeof *out);
                    memcpy(ref, in, n * sizeof *ref);
                    if (c == C_BC) MPI_Bcast(out, (int)n, MPI_FLOAT, 0, MPI_COMM_WORLD);
                    else MPI_Ibcast(out, (int)n, MPI_FLOAT, 0, MPI_COMM_WORLD, &rq), MPI_Wait(&rq, MPI_STATUS_IGNORE);
                    PMPI_Bcast(ref, (int)n, MPI_FLOAT, 0, MPI_COMM_WORLD);
                    break;
                default:
                    if (c == C_AG) MPI_Allgather(in, (int)n, MPI_FLOAT, out, (int)n, MPI_FLOAT, MPI_COMM_WORLD);
                    else {
                        MPI_Iallgather(in, (int)n, MPI_FLOAT, out, (int)n, MPI_FLOAT, MPI_COMM_WORLD, &rq);
                        MPI_Wait(&rq, MPI_STATUS_IGNORE);
                    }
                    PMPI_Allgather(in, (int)n, MPI_FLOAT, ref, (int)n, MPI_FLOAT, MPI_COMM_WORLD);
                    m = nout;
                    break;
                }
                if (memcmp(out, ref, m * sizeof *out)) {
                    wrong++;
                    for (size_t i = 0; i < m; i++) {
                        const double d = fabs((double)out[i] - ref[i]) / (fabs((double)ref[i]) + 1e-30);
                        if (d > max_rel) max_rel = d;
                    }
                }
            }
            long wsum = 0;
            double emax = 0;
            MPI_Allreduce(&wrong, &wsum, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
            MPI_Allreduce(&max_rel, &emax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            wrong_total += wsum;
            if (rank == 0 && (!quiet || wsum))
                printf("validate: coll=%s bytes=%zu calls=%d wrong_calls=%ld max_rel_err=%.3g\n", k_name[c], bytes, iters,
                       wsum, emax);
        }
        free(in), free(out), free(ref), free(ref2);
    }
    free(list);
    if (rank == 0) {
        if (!wrong_total) printf(" No Errors\n");
        fflush(stdout);
    }
    MPI_Finalize();
    return wrong_total ? 1 : 0;
}

// SPDX-License-Identifier: BSD-3-Clause
/*
 * after_effect — does a compressed call leave MPI's own collective slower? One job, one
 * preloaded libcompmpi, no noise from comparing separate jobs (on the 2-vCPU development VM
 * each job lands in a speed state of its own):
 *
 *   1. time MPI's own collective on a communicator whose hint turns compression off
 *      (compmpi_codec=none: libcompmpi hands every call to MPI unchanged);
 *   2. run a few calls on another communicator with libcompmpi's defaults (the cost model
 *      explores there: compressed and exact calls);
 *   3. time step 1 again.
 *
 * The ratio after / before should be 1. It was 1.63 at 1 MiB allreduce while libcompmpi
 * returned with dirty vector upper halves (docs/design.md, "Vector state at the MPI
 * boundary"); with --control, step 2 is skipped (the ratio of two identical timings).
 *
 *   mpiexec.mpich -n 2 -genv LD_PRELOAD .../libcompmpi.so -genv COMPMPI_THREADS 1 \
 *       bench/after_effect [--coll allreduce|allgather|bcast] [--bytes B] [--control]
 *
 * Prints one line from rank 0: coll=... bytes=... before_us=... after_us=... ratio=...
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int coll_kind; /* 0 allreduce, 1 allgather, 2 bcast */

static void call(MPI_Comm c, float *s, float *r, int n) {
    if (coll_kind == 2) MPI_Bcast(r, n, MPI_FLOAT, 0, c);
    else if (coll_kind == 1) MPI_Allgather(s, n, MPI_FLOAT, r, n, MPI_FLOAT, c);
    else MPI_Allreduce(s, r, n, MPI_FLOAT, MPI_SUM, c);
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* median over `it` calls of the slowest rank's time */
static double timed(MPI_Comm c, float *s, float *r, int n, int it) {
    double *ts = malloc(sizeof(double) * (size_t)it);
    for (int i = 0; i < it; i++) {
        MPI_Barrier(c);
        double t0 = MPI_Wtime();
        call(c, s, r, n);
        double t = MPI_Wtime() - t0;
        MPI_Allreduce(&t, &ts[i], 1, MPI_DOUBLE, MPI_MAX, c);
    }
    qsort(ts, (size_t)it, sizeof(double), cmp);
    double m = ts[it / 2];
    free(ts);
    return m;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    size_t bytes = 1 << 20;
    int control = 0;
    const char *names[] = {"allreduce", "allgather", "bcast"};
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--bytes") && a + 1 < argc) bytes = strtoull(argv[++a], NULL, 0);
        else if (!strcmp(argv[a], "--control")) control = 1;
        else if (!strcmp(argv[a], "--coll") && a + 1 < argc) {
            ++a;
            for (coll_kind = 0; coll_kind < 3 && strcmp(argv[a], names[coll_kind]); coll_kind++) ;
            if (coll_kind == 3) { if (rank == 0) fprintf(stderr, "unknown --coll %s\n", argv[a]); MPI_Abort(MPI_COMM_WORLD, 2); }
        } else {
            if (rank == 0) fprintf(stderr, "usage: after_effect [--coll allreduce|allgather|bcast] [--bytes B] [--control]\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    const int n = (int)(bytes / sizeof(float));
    float *s = malloc(bytes), *r = malloc(bytes * 2);
    for (int i = 0; i < n; i++) s[i] = (float)((i * 7 + rank) % 100) * 0.01f;
    memcpy(r, s, bytes);
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "compmpi_codec", "none");
    MPI_Comm off, on;
    MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &off);
    MPI_Comm_dup(MPI_COMM_WORLD, &on);
    MPI_Info_free(&info);
    const int it = bytes >= (16u << 20) ? 20 : 100;
    timed(off, s, r, n, 10);
    double before = timed(off, s, r, n, it);
    if (!control)
        for (int i = 0; i < 10; i++) call(on, s, r, n);
    double after = timed(off, s, r, n, it);
    if (rank == 0)
        printf("coll=%s bytes=%zu %s before_us=%.1f after_us=%.1f ratio=%.3f\n", names[coll_kind], bytes,
               control ? "control" : "explored", before * 1e6, after * 1e6, after / before);
    MPI_Comm_free(&off);
    MPI_Comm_free(&on);
    free(s);
    free(r);
    MPI_Finalize();
    return 0;
}

// SPDX-License-Identifier: BSD-3-Clause
/* A plain MPI program: a NaN or Inf in one rank's data must not garble the result. With
 * libcompmpi preloaded the part of the call holding it (the whole call, or with pipelining
 * the segment of chunk_bytes holding it) falls back to the exact path: where MPI's own result
 * is NaN/Inf ours holds the same bits, everything else is finite and close to exact.
 * Argument --exact: demand the whole result equal PMPI's (run with COMPMPI_CHUNK_BYTES=0).
 * Argument --nonfinite-only: for codecs whose per-element error is bounded by a bucket's norm
 * (qsgd), not by |x|: no closeness check of the finite values, everything else as without. */
#include "mpitest.h"

int main(int argc, char **argv) {
    int rank, size;
    mt_init(&argc, &argv, &rank, &size);
    int exact = argc > 1 && strcmp(argv[1], "--exact") == 0;
    int nonfinite_only = argc > 1 && strcmp(argv[1], "--nonfinite-only") == 0;
    const int n = 300000;
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float)), *z = malloc(n * sizeof(float));
    float *ax = malloc(n * sizeof(float)), *s = malloc(n * sizeof(float));
    float bads[] = {NAN, INFINITY, -INFINITY};
    for (int b = 0; b < 3; ++b) {
        mt_fill(x, n, 5 + b, rank);
        if (rank == size - 1) x[12345 + b] = bads[b];
        for (int i = 0; i < n; ++i) ax[i] = fabsf(x[i]);
        MPI_Allreduce(x, y, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        PMPI_Allreduce(x, z, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        PMPI_Allreduce(ax, s, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        if (exact) {
            MT_CHECK(memcmp(y, z, n * sizeof(float)) == 0, "allreduce with %g differs from exact", bads[b]);
        } else {
            size_t wrong = 0, far = 0;
            for (int i = 0; i < n; ++i) {
                if (!isfinite(z[i]) || !isfinite(y[i])) wrong += memcmp(&y[i], &z[i], sizeof(float)) != 0;
                else far += !(fabsf(y[i] - z[i]) <= 3.0f * s[i]);
            }
            MT_CHECK(wrong == 0, "allreduce with %g: %zu non-finite values differ from MPI's", bads[b], wrong);
            if (!nonfinite_only) MT_CHECK(far == 0, "allreduce with %g: %zu finite values far from exact", bads[b], far);
        }
        MT_CHECK(mt_identical(y, n * sizeof(float), MPI_COMM_WORLD), "ranks differ");
        memcpy(y, x, n * sizeof(float));
        MPI_Bcast(y, n, MPI_FLOAT, size - 1, MPI_COMM_WORLD);
        memcpy(z, x, n * sizeof(float));
        PMPI_Bcast(z, n, MPI_FLOAT, size - 1, MPI_COMM_WORLD);
        MT_CHECK(memcmp(y, z, n * sizeof(float)) == 0, "bcast with %g differs from exact", bads[b]);
    }
    /* the next clean call is compressed again and finite */
    mt_fill(x, n, 99, rank);
    MPI_Allreduce(x, y, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    int finite = 1;
    for (int i = 0; i < n; ++i) finite &= isfinite(y[i]);
    MT_CHECK(finite, "clean call after a fallback is not finite");
    free(x); free(y); free(z); free(ax); free(s);
    return mt_finish();
}

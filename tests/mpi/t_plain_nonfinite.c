/* A plain MPI program: a NaN or Inf in one rank's data must not garble the result. With
 * libcompmpi preloaded the call falls back to the exact path, so the result equals
 * PMPI_Allreduce's bit for bit. */
#include "mpitest.h"

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const int n = 300000;
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float)), *z = malloc(n * sizeof(float));
    float bads[] = {NAN, INFINITY, -INFINITY};
    for (int b = 0; b < 3; ++b) {
        mt_fill(x, n, 5 + b, rank);
        if (rank == size - 1) x[12345 + b] = bads[b];
        MPI_Allreduce(x, y, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        PMPI_Allreduce(x, z, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        MT_CHECK(memcmp(y, z, n * sizeof(float)) == 0, "allreduce with %g differs from exact", bads[b]);
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
    free(x); free(y); free(z);
    return mt_finish();
}

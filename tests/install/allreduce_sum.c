// SPDX-License-Identifier: BSD-3-Clause
/* A 4 MiB float MPI_Allreduce that checks its result: identical bits on every rank and exact
 * sums (small integers, which the fp16 codec carries exactly). Prints " No Errors" on rank 0.
 * As is, a plain MPI program that knows nothing of libcompmpi (run it with libcompmpi
 * preloaded); with -DCOMPMPI_API it includes compmpi.h and names the linked library's
 * version. Used by scripts/test-install.sh and scripts/test-deb.sh. */
#ifdef COMPMPI_API
#include <compmpi.h>
#endif
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const int n = 1 << 20;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *y0 = malloc(n * sizeof *y0);
    for (int i = 0; i < n; ++i) x[i] = (float)(i % 61 + rank);
    MPI_Allreduce(x, y, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    memcpy(y0, y, n * sizeof *y);
    MPI_Bcast(y0, n, MPI_FLOAT, 0, MPI_COMM_WORLD); /* rank 0's result, for the bit check */
    int bad = memcmp(y, y0, n * sizeof *y) != 0;
    for (int i = 0; i < n && !bad; ++i)
        if (y[i] != (float)(size * (i % 61) + size * (size - 1) / 2)) bad = 1;
    int anybad = 0;
    MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
#ifdef COMPMPI_API
    if (rank == 0) printf("libcompmpi %s: %s\n", compmpi_version(), anybad ? "WRONG" : " No Errors");
#else
    if (rank == 0) printf("%s\n", anybad ? "WRONG" : " No Errors");
#endif
    free(x);
    free(y);
    free(y0);
    MPI_Finalize();
    return anybad;
}

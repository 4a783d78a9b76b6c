// SPDX-License-Identifier: BSD-3-Clause
/* Sparse-aware allreduce with the lossless `sparse` codec: at every density the result is the
 * fp32 sum in rank order, bit for bit, on every rank -- whether the allgather path or
 * SparCML's sparse reduce-scatter path ran (chosen from the densities; COMPMPI_STATS shows
 * sparse_twophase=N). */
#include "compmpi.h"
#include "mpitest.h"

int main(int argc, char **argv) {
    int rank, size;
    mt_init(&argc, &argv, &rank, &size);
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    compmpi_comm_set(comm, "codec", "sparse");
    compmpi_comm_set(comm, "min_bytes", "0");
    const size_t sizes[] = {1, 100, 65537, 400000};
    const double dens[] = {0.0, 0.001, 0.01, 0.1, 0.4, 1.0};
    for (size_t si = 0; si < 4; ++si)
        for (int di = 0; di < 6; ++di) {
            size_t n = sizes[si];
            float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float)), *ref = malloc(n * sizeof(float));
            for (size_t i = 0; i < n; ++i) {
                float acc = 0;
                for (int r = 0; r < size; ++r) {
                    float v = mt_uniform(7 + di, r, i) < dens[di] ? mt_value(7 + di, r, i) : 0.0f;
                    if (r == rank) x[i] = v;
                    acc = r ? acc + v : v;
                }
                ref[i] = acc;
            }
            MPI_Allreduce(x, y, (int)n, MPI_FLOAT, MPI_SUM, comm);
            MT_CHECK(memcmp(y, ref, n * sizeof(float)) == 0, "n=%zu density=%g: not the rank-order sum", n, dens[di]);
            MT_CHECK(mt_identical(y, n * sizeof(float), comm), "ranks differ");
            free(x); free(y); free(ref);
        }
    MPI_Comm_free(&comm);
    return mt_finish();
}

// SPDX-License-Identifier: BSD-3-Clause
/* MPI_THREAD_MULTIPLE: two threads per rank run compressed allreduces concurrently on their
 * own communicators; results are right and identical across ranks. */
#include <pthread.h>

#include "compmpi.h"
#include "mpitest.h"

static MPI_Comm comms[2];
static int R;

static void *worker(void *arg) {
    int t = (int)(intptr_t)arg;
    const int n = 150000;
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float)), *z = malloc(n * sizeof(float));
    float *ax = malloc(n * sizeof(float)), *s = malloc(n * sizeof(float));
    for (int it = 0; it < 20; ++it) {
        mt_fill(x, n, 50 + t * 100 + it, R);
        for (int i = 0; i < n; ++i) ax[i] = fabsf(x[i]);
        MPI_Allreduce(x, y, n, MPI_FLOAT, MPI_SUM, comms[t]);
        PMPI_Allreduce(x, z, n, MPI_FLOAT, MPI_SUM, comms[t]);
        PMPI_Allreduce(ax, s, n, MPI_FLOAT, MPI_SUM, comms[t]);
        size_t far = 0; /* 16-bit truncation, twice: 2 * 2^-7 of the magnitudes */
        for (int i = 0; i < n; ++i) far += fabsf(y[i] - z[i]) > 0.0157f * s[i] + 1e-30f;
        MT_CHECK(far == 0, "thread %d iteration %d: %zu values far from exact", t, it, far);
    }
    free(x); free(y); free(z); free(ax); free(s);
    return NULL;
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &R);
    if (provided < MPI_THREAD_MULTIPLE) {
        if (R == 0) printf(" No Errors (MPI_THREAD_MULTIPLE not provided: skipped)\n");
        MPI_Finalize();
        return 0;
    }
    for (int t = 0; t < 2; ++t) {
        MPI_Comm_dup(MPI_COMM_WORLD, &comms[t]);
        compmpi_comm_set(comms[t], "policy", "static");
        compmpi_comm_set(comms[t], "bits", "16");
    }
    pthread_t th[2];
    for (int t = 0; t < 2; ++t) pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t);
    for (int t = 0; t < 2; ++t) pthread_join(th[t], NULL);
    for (int t = 0; t < 2; ++t) MPI_Comm_free(&comms[t]);
    return mt_finish();
}

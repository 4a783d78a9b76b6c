// SPDX-License-Identifier: BSD-3-Clause
/* Error feedback: with a coarse lossy codec (8-bit bitpack, which always shrinks values),
 * repeating the same allreduce T times gives results whose mean converges to the exact sum
 * when error feedback is on (the residual carries what each call dropped), while without it
 * the mean keeps the codec's bias. Ranks stay bit-identical; reset clears the residual.
 * The same for MPI_Reduce_scatter_block, MPI_Reduce_scatter (blocks of different sizes) and
 * the persistent MPI_Reduce_scatter_init (MPI-4): each rank's residual covers every block it
 * sends, and the mean of the T reduced blocks (all ranks' blocks together) converges. */
#include "compmpi.h"
#include "mpitest.h"

static double mean_error(MPI_Comm comm, const float *x, float *y, double *mean, const double *exact, int n, int T) {
    for (int i = 0; i < n; ++i) mean[i] = 0;
    for (int t = 0; t < T; ++t) {
        MPI_Allreduce(x, y, n, MPI_FLOAT, MPI_SUM, comm);
        MT_CHECK(mt_identical(y, n * sizeof(float), comm), "ranks differ at call %d", t);
        for (int i = 0; i < n; ++i) mean[i] += y[i] / (double)T;
    }
    double num = 0, den = 0;
    for (int i = 0; i < n; ++i) {
        num += (mean[i] - exact[i]) * (mean[i] - exact[i]);
        den += exact[i] * exact[i];
    }
    return sqrt(num / den);
}

/* T reduce-scatters of the same x (n floats in P blocks: counts, or n / P each when counts
 * is NULL); the relative error of the mean over all ranks' blocks against the exact sum.
 * persistent: one MPI_Reduce_scatter_init started T times (MPI-4). */
static double mean_error_rs(MPI_Comm comm, const float *x, float *y, double *mean, const double *exact, int n, int T,
                            const int *counts, int persistent) {
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int lo = 0, len = n / size;
    if (counts) {
        for (int j = 0; j < rank; ++j) lo += counts[j];
        len = counts[rank];
    } else {
        lo = len * rank;
    }
    for (int i = 0; i < len; ++i) mean[i] = 0;
    MPI_Request rq = MPI_REQUEST_NULL;
#if MPI_VERSION >= 4
    if (persistent) MPI_Reduce_scatter_init(x, y, counts, MPI_FLOAT, MPI_SUM, comm, MPI_INFO_NULL, &rq);
#else
    (void)persistent;
#endif
    for (int t = 0; t < T; ++t) {
        if (rq != MPI_REQUEST_NULL) {
            MPI_Start(&rq);
            MPI_Wait(&rq, MPI_STATUS_IGNORE);
        } else if (counts) {
            MPI_Reduce_scatter(x, y, counts, MPI_FLOAT, MPI_SUM, comm);
        } else {
            MPI_Reduce_scatter_block(x, y, n / size, MPI_FLOAT, MPI_SUM, comm);
        }
        for (int i = 0; i < len; ++i) mean[i] += y[i] / (double)T;
    }
    if (rq != MPI_REQUEST_NULL) MPI_Request_free(&rq);
    double nd[2] = {0, 0}, all[2];
    for (int i = 0; i < len; ++i) {
        nd[0] += (mean[i] - exact[lo + i]) * (mean[i] - exact[lo + i]);
        nd[1] += exact[lo + i] * exact[lo + i];
    }
    MPI_Allreduce(nd, all, 2, MPI_DOUBLE, MPI_SUM, comm);
    return sqrt(all[0] / all[1]);
}

static void reduce_scatter_cases(MPI_Comm plain, MPI_Comm ef, const float *x, float *y, double *mean,
                                 const double *exact, int n, int T, int rank, int size) {
    int *counts = malloc(sizeof(int) * (size_t)size), rest = n;
    for (int j = 0; j < size; ++j) { /* unequal blocks: 3/5, 1/5, ... of what is left */
        counts[j] = j == size - 1 ? rest : rest * (j % 2 ? 1 : 3) / 5;
        rest -= counts[j];
    }
    const char *what[] = {"reduce_scatter_block", "reduce_scatter", "reduce_scatter_init"};
    for (int k = 0; k < 3; ++k) {
#if MPI_VERSION < 4
        if (k == 2) continue;
#endif
        const int *cnt = k ? counts : NULL;
        double e_plain = mean_error_rs(plain, x, y, mean, exact, n, T, cnt, k == 2);
        double e_ef = mean_error_rs(ef, x, y, mean, exact, n, T, cnt, k == 2);
        if (rank == 0) printf("%s: relative error of the mean of %d calls: without feedback %.4f, with %.4f\n",
                              what[k], T, e_plain, e_ef);
        MT_CHECK(e_plain > 0.05, "%s: 8-bit truncation should be biased: %.4f", what[k], e_plain);
        MT_CHECK(e_ef < e_plain / 8, "%s: feedback did not remove the bias: %.4f vs %.4f", what[k], e_ef, e_plain);
    }
    /* reset: the next call starts without residual, as on a fresh communicator */
    compmpi_comm_reset_state(ef);
    MPI_Reduce_scatter_block(x, y, n / size, MPI_FLOAT, MPI_SUM, ef);
    float *z = malloc(sizeof(float) * (size_t)n);
    MPI_Comm fresh;
    MPI_Comm_dup(plain, &fresh);
    MPI_Reduce_scatter_block(x, z, n / size, MPI_FLOAT, MPI_SUM, fresh);
    MT_CHECK(memcmp(y, z, sizeof(float) * (size_t)(n / size)) == 0,
             "reduce_scatter_block: after reset the first call differs from a fresh one");
    MPI_Comm_free(&fresh);
    free(z), free(counts);
}

int main(int argc, char **argv) {
    int rank, size;
    mt_init(&argc, &argv, &rank, &size);
    const int n = 40000, T = 64;
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    double *mean = malloc(n * sizeof(double)), *exact = calloc(n, sizeof(double));
    mt_fill(x, n, 21, rank);
    for (int r = 0; r < size; ++r)
        for (int i = 0; i < n; ++i) exact[i] += mt_value(21, r, i);
    MPI_Comm plain, ef;
    MPI_Comm_dup(MPI_COMM_WORLD, &plain);
    MPI_Comm_dup(MPI_COMM_WORLD, &ef);
    const char *kv[][2] = {{"policy", "static"}, {"bits", "8"}, {"min_bytes", "0"}};
    for (int k = 0; k < 3; ++k) {
        compmpi_comm_set(plain, kv[k][0], kv[k][1]);
        compmpi_comm_set(ef, kv[k][0], kv[k][1]);
    }
    MT_CHECK(compmpi_comm_set(ef, "error_feedback", "1") == MPI_SUCCESS, "set");
    double e_plain = mean_error(plain, x, y, mean, exact, n, T);
    double e_ef = mean_error(ef, x, y, mean, exact, n, T);
    if (rank == 0) printf("relative error of the mean of %d calls: without feedback %.4f, with %.4f\n", T, e_plain, e_ef);
    MT_CHECK(e_plain > 0.05, "8-bit truncation should be biased: %.4f", e_plain);
    MT_CHECK(e_ef < e_plain / 8, "feedback did not remove the bias: %.4f vs %.4f", e_ef, e_plain);
    /* reset: the next call starts without residual, i.e. equals a fresh communicator's */
    compmpi_comm_reset_state(ef);
    MPI_Allreduce(x, y, n, MPI_FLOAT, MPI_SUM, ef);
    float *z = malloc(n * sizeof(float));
    MPI_Comm fresh;
    MPI_Comm_dup(plain, &fresh);
    MPI_Allreduce(x, z, n, MPI_FLOAT, MPI_SUM, fresh);
    MT_CHECK(memcmp(y, z, n * sizeof(float)) == 0, "after reset the first call differs from a fresh one");
    MPI_Comm_free(&fresh);
    reduce_scatter_cases(plain, ef, x, y, mean, exact, n, T, rank, size);
    MPI_Comm_free(&plain);
    MPI_Comm_free(&ef);
    free(x); free(y); free(z); free(mean); free(exact);
    return mt_finish();
}

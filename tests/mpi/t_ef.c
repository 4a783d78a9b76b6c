/* Error feedback: with a coarse lossy codec (8-bit bitpack, which always shrinks values),
 * repeating the same allreduce T times gives results whose mean converges to the exact sum
 * when error feedback is on (the residual carries what each call dropped), while without it
 * the mean keeps the codec's bias. Ranks stay bit-identical; reset clears the residual. */
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

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
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
    MPI_Comm_free(&plain);
    MPI_Comm_free(&ef);
    free(x); free(y); free(z); free(mean); free(exact);
    return mt_finish();
}

// SPDX-License-Identifier: BSD-3-Clause
/* θ schedule through real allreduces (codec topk): θ_t follows the schedule's formula call by
 * call -- the result is exactly the rank-order fp32 sum of every rank's top-k_t, with
 * k_t = ceil((1 - θ_t) n) -- and is bit-identical on every rank, although each rank passes a
 * receive buffer at a different address; a second buffer size counts its own calls.
 *   t_theta [linear|paper|step|paper_step]   (theta 0.9, theta_end 0.5, theta_calls 4, gamma 0.1) */
#include "compmpi.h"
#include "mpitest.h"

static double theta_formula(const char *kind, unsigned long t) {
    const double th0 = 0.9, end = 0.5, T = 4.0, tt = (double)t;
    double th = th0;
    if (!strcmp(kind, "linear")) th = th0 + (end - th0) * fmin(1.0, tt / T);
    else if (!strcmp(kind, "paper")) th = end + (th0 - end) * sqrt(T / (T + tt));
    else if (!strcmp(kind, "step")) th = t < 4 ? th0 : end;
    else if (!strcmp(kind, "paper_step")) th = end + (th0 - end) * pow(sqrt(0.1), (double)(t / 4));
    return th;
}

/* k = ceil((1 - θ) n) with θ (an fp32 setting) to 7 decimal digits, as kernels/topk */
static size_t keep_count(size_t n, float theta) {
    long long t = llround((double)theta * 1e7);
    if (t < 0) t = 0;
    if (t > 10000000) t = 10000000;
    return (size_t)(((unsigned long long)n * (unsigned long long)(10000000 - t) + 9999999ull) / 10000000ull);
}

static const float *g_key;
static int by_mag_then_index(const void *a, const void *b) {
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    float x = fabsf(g_key[i]), y = fabsf(g_key[j]);
    if (x != y) return x > y ? -1 : 1;
    return i < j ? -1 : (i > j);
}

/* ref = sum over ranks in rank order of top-k(x_r) (ties to the smaller index) */
static void reference(float *ref, size_t n, size_t k, int size, uint64_t seed) {
    float *x = malloc(n * sizeof(float));
    size_t *idx = malloc(n * sizeof(size_t));
    for (int r = 0; r < size; ++r) {
        mt_fill(x, n, seed, r);
        for (size_t i = 0; i < n; ++i) idx[i] = i;
        g_key = x;
        qsort(idx, n, sizeof(size_t), by_mag_then_index);
        float *kept = calloc(n, sizeof(float));
        for (size_t j = 0; j < k; ++j) kept[idx[j]] = x[idx[j]];
        for (size_t i = 0; i < n; ++i) ref[i] = r ? ref[i] + kept[i] : kept[i];
        free(kept);
    }
    free(x);
    free(idx);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    const char *kind = argc > 1 ? argv[1] : "linear";
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MT_CHECK(compmpi_comm_set(comm, "codec", "topk") == 0, "set");
    MT_CHECK(compmpi_comm_set(comm, "min_bytes", "0") == 0, "set");
    MT_CHECK(compmpi_comm_set(comm, "theta", "0.9") == 0, "set");
    MT_CHECK(compmpi_comm_set(comm, "theta_end", "0.5") == 0, "set");
    MT_CHECK(compmpi_comm_set(comm, "theta_calls", "4") == 0, "set");
    MT_CHECK(compmpi_comm_set(comm, "theta_schedule", kind) == 0, "set %s", kind);
    const size_t n = 20000, n2 = 3000;
    float *x = malloc(n * sizeof(float)), *x2 = malloc(n2 * sizeof(float)), *ref = malloc(n * sizeof(float));
    /* receive buffers at rank-dependent addresses: θ must not depend on them */
    float *ybase = malloc((n + 64 * (size_t)size) * sizeof(float)), *y = ybase + 64 * (size_t)rank;
    float *y2 = malloc(n2 * sizeof(float)), *ref2 = malloc(n2 * sizeof(float));
    mt_fill(x, n, 5, rank);
    mt_fill(x2, n2, 6, rank);
    size_t k_first = 0, k_last = 0;
    unsigned long t2 = 0;
    for (unsigned long t = 0; t < 10; ++t) {
        const size_t k = keep_count(n, (float)theta_formula(kind, t));
        if (t == 0) k_first = k;
        k_last = k;
        MPI_Allreduce(x, y, (int)n, MPI_FLOAT, MPI_SUM, comm);
        reference(ref, n, k, size, 5);
        MT_CHECK(memcmp(y, ref, n * sizeof(float)) == 0, "%s call %lu: not the sum of top-%zu (theta %.9g)", kind, t, k,
                 theta_formula(kind, t));
        MT_CHECK(mt_identical(y, n * sizeof(float), comm), "%s call %lu: ranks differ", kind, t);
        if (t % 3 == 0) { /* another size: its own count */
            const size_t k2 = keep_count(n2, (float)theta_formula(kind, t2));
            MPI_Allreduce(x2, y2, (int)n2, MPI_FLOAT, MPI_SUM, comm);
            reference(ref2, n2, k2, size, 6);
            MT_CHECK(memcmp(y2, ref2, n2 * sizeof(float)) == 0, "%s n2 call %lu: not the sum of top-%zu", kind, t2, k2);
            ++t2;
        }
    }
    MT_CHECK(k_last > k_first, "%s: theta did not decrease (k %zu -> %zu)", kind, k_first, k_last);
    if (rank == 0) printf("%s: k from %zu to %zu of %zu over 10 calls\n", kind, k_first, k_last, n);
    free(x); free(x2); free(ref); free(ybase); free(y2); free(ref2);
    MPI_Comm_free(&comm);
    return mt_finish();
}

// SPDX-License-Identifier: BSD-3-Clause
/* Compressed collectives through the explicit API (linked -lcompmpi): for every bitpack
 * width and rounding, odd sizes, in-place and not:
 *   - bits = 32 is exact: the allreduce equals the fp32 sum in rank order, bit for bit;
 *   - 16/24 bits stay within the truncation/rounding bound;
 *   - every rank holds identical bits. */
#include "compmpi.h"
#include "mpitest.h"

static int P, R;

static void set(MPI_Comm c, const char *k, const char *v) {
    MT_CHECK(compmpi_comm_set(c, k, v) == MPI_SUCCESS, "compmpi_comm_set(%s, %s)", k, v);
}

static void check_allreduce(MPI_Comm comm, size_t n, int bits, int nearest, int inplace, uint64_t seed) {
    float *x = malloc((n + 1) * sizeof(float)), *y = malloc((n + 1) * sizeof(float));
    float *ref = malloc((n + 1) * sizeof(float));
    double *absum = calloc(n + 1, sizeof(double));
    for (size_t i = 0; i < n; ++i) {
        float acc = 0;
        for (int r = 0; r < P; ++r) {
            float v = mt_value(seed, r, i);
            acc = r ? acc + v : v;
            absum[i] += fabs(v);
        }
        ref[i] = acc;
    }
    mt_fill(x, n, seed, R);
    y[n] = 42.0f;
    if (inplace) {
        memcpy(y, x, n * sizeof(float));
        MT_CHECK(MPI_Allreduce(MPI_IN_PLACE, y, (int)n, MPI_FLOAT, MPI_SUM, comm) == MPI_SUCCESS, "rc");
    } else {
        MT_CHECK(MPI_Allreduce(x, y, (int)n, MPI_FLOAT, MPI_SUM, comm) == MPI_SUCCESS, "rc");
    }
    MT_CHECK(y[n] == 42.0f, "wrote past the buffer");
    MT_CHECK(mt_identical(y, n * sizeof(float), comm), "n=%zu bits=%d: ranks differ", n, bits);
    if (bits == 32) {
        MT_CHECK(memcmp(y, ref, n * sizeof(float)) == 0, "n=%zu: 32-bit result is not the rank-order fp32 sum", n);
    } else {
        double eps = ldexp(1.0, -(bits - 9)) / (nearest ? 2 : 1);
        size_t bad = 0;
        for (size_t i = 0; i < n; ++i) {
            double bound = eps * absum[i] * (2 + eps) + P * ldexp(absum[i], -23) + 1e-37;
            if (!(fabs((double)y[i] - ref[i]) <= bound)) ++bad;
        }
        MT_CHECK(bad == 0, "n=%zu bits=%d nearest=%d: %zu values outside the bound", n, bits, nearest, bad);
    }
    free(x); free(y); free(ref); free(absum);
}

static void check_bcast_allgather(MPI_Comm comm, size_t n, int bits, uint64_t seed) {
    float *x = malloc(n * sizeof(float)), *all = malloc(n * P * sizeof(float));
    double eps = bits == 32 ? 0 : bits == 8 ? 0.75 : ldexp(1.0, -(bits - 9));
    int root = (int)(seed % P);
    mt_fill(x, n, seed, R);
    float *x0 = malloc(n * sizeof(float));
    memcpy(x0, x, n * sizeof(float));
    MPI_Bcast(x, (int)n, MPI_FLOAT, root, comm);
    MT_CHECK(mt_bcast_ok(x, x0, n * sizeof(float), root, comm), "bcast: root's buffer written or receivers differ");
    free(x0);
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i) {
        float v = mt_value(seed, root, i);
        if (!(fabs((double)x[i] - v) <= eps * fabs(v))) ++bad;
    }
    MT_CHECK(bad == 0, "bcast n=%zu bits=%d: %zu values outside the bound", n, bits, bad);
    /* allgather, in place */
    mt_fill(all + (size_t)R * n, n, seed + 1, R);
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, (int)n, MPI_FLOAT, comm);
    MT_CHECK(mt_identical(all, n * P * sizeof(float), comm), "allgather: ranks differ");
    bad = 0;
    for (int r = 0; r < P; ++r)
        for (size_t i = 0; i < n; ++i) {
            float v = mt_value(seed + 1, r, i);
            if (!(fabs((double)all[r * n + i] - v) <= eps * fabs(v))) ++bad;
        }
    MT_CHECK(bad == 0, "allgather n=%zu bits=%d: %zu values outside the bound", n, bits, bad);
    free(x); free(all);
}

int main(int argc, char **argv) {
    mt_init(&argc, &argv, &R, &P);
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    set(comm, "policy", "static");
    set(comm, "min_bytes", "0");
    char v[64];
    MT_CHECK(compmpi_comm_get(comm, "min_bytes", v, sizeof v) == MPI_SUCCESS && strcmp(v, "0") == 0, "get: %s", v);

    /* arg "quick" (valgrind runs): small sizes, two widths */
    int quick = argc > 1 && strcmp(argv[1], "quick") == 0;
    size_t sizes[] = {1, 15, 16, 17, (size_t)16 * P - 1, 1000, 65537, 1 << 20};
    size_t nsizes = quick ? 6 : sizeof sizes / sizeof sizes[0];
    const char *bits[] = {"16", "32", "8", "24"};
    for (int b = 0; b < (quick ? 2 : 4); ++b)
        for (int nearest = 0; nearest <= 1; ++nearest) {
            set(comm, "bits", bits[b]);
            set(comm, "rounding", nearest ? "nearest" : "trunc");
            for (size_t s = 0; s < nsizes; ++s) {
                int nb = atoi(bits[b]);
                if (nb > 8) check_allreduce(comm, sizes[s], nb, nearest, (int)(s % 2), 100 + s);
                if (!nearest) check_bcast_allgather(comm, sizes[s], nb, 200 + s);
            }
        }
    MPI_Comm_free(&comm);
    return mt_finish();
}

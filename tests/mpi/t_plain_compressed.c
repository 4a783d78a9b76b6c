// SPDX-License-Identifier: BSD-3-Clause
/* A plain MPI program (no libcompmpi header) run under LD_PRELOAD with the default
 * settings (awp): large float sums come back close to the exact sum, bit-identical on every
 * rank; allgather likewise; bcast leaves the root's buffer bit for bit as it was and gives
 * every other rank the same bits. Bounds hold for any bitpack width >= 8 bits.
 * Arguments: the number of floats (default 1000003); bits=W: also hold every result to the
 * bound of a static W-bit bitpack (W >= 16), which 8 bits (the awp start) cannot meet. */
#include "mpitest.h"

int main(int argc, char **argv) {
    int rank, size;
    mt_init(&argc, &argv, &rank, &size);
    size_t n = 1000003;
    int bits = 0;
    for (int a = 1; a < argc; ++a) {
        if (strncmp(argv[a], "bits=", 5) == 0) bits = atoi(argv[a] + 5);
        else n = (size_t)atol(argv[a]);
    }
    /* W-bit bitpack keeps sign, exponent and W-9 mantissa bits: truncation errs by less
     * than 2^-(W-9) of |v|; the allreduce quantises contributions, then the sum (fp32
     * sums add ~P 2^-24); bcast and allgather quantise once */
    const double rel = bits >= 16 ? ldexp(1.0, -(bits - 9)) : 1.0;
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    float *all = malloc(n * size * sizeof(float));
    double *exact = calloc(n, sizeof(double)), *absum = calloc(n, sizeof(double));
    for (int it = 0; it < 3; ++it) {
        for (int r = 0; r < size; ++r)
            for (size_t i = 0; i < n; ++i) {
                double v = mt_value(it + 10, r, i);
                exact[i] = (r ? exact[i] : 0) + v;
                absum[i] = (r ? absum[i] : 0) + fabs(v);
            }
        mt_fill(x, n, it + 10, rank);
        /* alternate in-place and separate buffers */
        if (it % 2) {
            memcpy(y, x, n * sizeof(float));
            MT_CHECK(MPI_Allreduce(MPI_IN_PLACE, y, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS, "rc");
        } else {
            MT_CHECK(MPI_Allreduce(x, y, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS, "rc");
        }
        /* 8-bit bitpack keeps sign + 7 exponent bits: a truncated value lies in (v/4, v],
         * a rounded one in [v/2, 2v], so each quantisation errs by at most |v| and keeps
         * the sign; contributions then the sum are quantised: |result - exact| <= 3 S,
         * S = sum of |x_j| (the tight bounds per width are in t_compressed) */
        size_t bad = 0;
        for (size_t i = 0; i < n; ++i)
            if (!(fabs(y[i] - exact[i]) <= 3.0 * absum[i] + 1e-30)) ++bad;
        MT_CHECK(bad == 0, "%zu of %zu sums outside the 8-bit bound", bad, n);
        if (bits) {
            bad = 0;
            for (size_t i = 0; i < n; ++i)
                if (!(fabs(y[i] - exact[i]) <= (2.0 * rel + rel * rel + size * 0x1p-23) * absum[i] + 1e-30)) ++bad;
            MT_CHECK(bad == 0, "%zu of %zu sums outside the %d-bit bound", bad, n, bits);
        }
        MT_CHECK(mt_identical(y, n * sizeof(float), MPI_COMM_WORLD), "allreduce results differ across ranks");

        memcpy(y, x, n * sizeof(float));
        MPI_Bcast(y, (int)n, MPI_FLOAT, it % size, MPI_COMM_WORLD);
        /* the root's buffer is input: bit for bit unchanged; receivers identical */
        MT_CHECK(mt_bcast_ok(y, x, n * sizeof(float), it % size, MPI_COMM_WORLD),
                 "bcast: root's buffer written or receivers differ");
        bad = 0;
        for (size_t i = 0; i < n; ++i) {
            double v = mt_value(it + 10, it % size, i);
            if (!(fabs(y[i] - v) <= (bits ? rel : 1.0) * fabs(v) + 1e-30) || (v != 0 && y[i] * v < 0)) ++bad;
        }
        MT_CHECK(bad == 0, "%zu bcast values outside the bound", bad);

        MPI_Allgather(x, (int)n, MPI_FLOAT, all, (int)n, MPI_FLOAT, MPI_COMM_WORLD);
        MT_CHECK(mt_identical(all, n * size * sizeof(float), MPI_COMM_WORLD), "allgather results differ across ranks");
        bad = 0;
        for (int r = 0; r < size; ++r)
            for (size_t i = 0; i < n; i += 7) {
                double v = mt_value(it + 10, r, i);
                if (!(fabs(all[r * n + i] - v) <= (bits ? rel : 1.0) * fabs(v) + 1e-30)) ++bad;
            }
        MT_CHECK(bad == 0, "%zu allgather values outside the bound", bad);
    }
    free(x); free(y); free(all); free(exact); free(absum);
    return mt_finish();
}

// SPDX-License-Identifier: BSD-3-Clause
/* Every codec through every collective: allreduce (in place and not), bcast, allgather on
 * gradient-like data. Each result is bit-identical on all ranks and within the codec's
 * relative l2 error bound (argument list codec=bound, bounds measured with margin; see
 * docs/codecs.md). codec=bound,abs also holds every value within abs of the exact one
 * (bcast, allgather) and within P * abs plus fp32 rounding in allreduce: a codec with an
 * absolute error bound per contribution (zfp's fixed accuracy). Also prints the errors. */
#include "compmpi.h"
#include "mpitest.h"

static int R, P;

static double max_abs_err(const float *y, const double *exact, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; ++i) m = fmax(m, fabs(y[i] - exact[i]));
    return m;
}

static double rel_l2(const float *y, const double *exact, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; ++i) {
        double d = y[i] - exact[i];
        num += d * d;
        den += exact[i] * exact[i];
    }
    return sqrt(num / (den > 0 ? den : 1));
}

int main(int argc, char **argv) {
    mt_init(&argc, &argv, &R, &P);
    const size_t n = 100003;
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float)), *all = malloc(n * P * sizeof(float));
    double *exact = calloc(n, sizeof(double)), *ref = malloc(n * sizeof(double)), *refall = malloc(n * P * sizeof(double));
    mt_fill(x, n, 31, R);
    for (int r = 0; r < P; ++r)
        for (size_t i = 0; i < n; ++i) {
            double v = mt_value(31, r, i);
            exact[i] += v;
            refall[r * n + i] = v;
        }
    for (size_t i = 0; i < n; ++i) ref[i] = mt_value(31, 0, i);
    for (int a = 1; a < argc; ++a) {
        char name[64];
        double bound = 0, abs_bound = -1;
        if (sscanf(argv[a], "%63[^=]=%lf,%lf", name, &bound, &abs_bound) < 2) {
            MT_CHECK(0, "bad argument %s (want codec=bound)", argv[a]);
            continue;
        }
        MPI_Comm c;
        MPI_Comm_dup(MPI_COMM_WORLD, &c);
        MT_CHECK(compmpi_comm_set(c, "codec", name) == MPI_SUCCESS, "codec %s", name);
        compmpi_comm_set(c, "policy", "static");
        double e[4], ea[4];
        /* allreduce */
        MPI_Allreduce(x, y, (int)n, MPI_FLOAT, MPI_SUM, c);
        MT_CHECK(mt_identical(y, n * sizeof(float), c), "%s allreduce: ranks differ", name);
        e[0] = rel_l2(y, exact, n);
        ea[0] = max_abs_err(y, exact, n);
        memcpy(y, x, n * sizeof(float));
        MPI_Allreduce(MPI_IN_PLACE, y, (int)n, MPI_FLOAT, MPI_SUM, c);
        MT_CHECK(mt_identical(y, n * sizeof(float), c), "%s in-place allreduce: ranks differ", name);
        e[1] = rel_l2(y, exact, n);
        ea[1] = max_abs_err(y, exact, n);
        /* bcast from rank 0 */
        memcpy(y, x, n * sizeof(float));
        MPI_Bcast(y, (int)n, MPI_FLOAT, 0, c);
        MT_CHECK(mt_bcast_ok(y, x, n * sizeof(float), 0, c), "%s bcast: root's buffer written or receivers differ", name);
        e[2] = rel_l2(y, ref, n);
        ea[2] = max_abs_err(y, ref, n);
        /* allgather */
        MPI_Allgather(x, (int)n, MPI_FLOAT, all, (int)n, MPI_FLOAT, c);
        MT_CHECK(mt_identical(all, n * P * sizeof(float), c), "%s allgather: ranks differ", name);
        e[3] = rel_l2(all, refall, n * P);
        ea[3] = max_abs_err(all, refall, n * P);
        /* the worst rank (the bcast root keeps its exact input: its error is 0) */
        MPI_Allreduce(MPI_IN_PLACE, e, 4, MPI_DOUBLE, MPI_MAX, c);
        if (R == 0) printf("%-10s rel_l2 allreduce %.3e in-place %.3e bcast %.3e allgather %.3e (bound %.3g)\n", name,
                           e[0], e[1], e[2], e[3], bound);
        for (int k = 0; k < 4; ++k) MT_CHECK(e[k] <= bound, "%s: error %.3e (collective %d) above %.3g", name, e[k], k, bound);
        if (abs_bound >= 0) {
            MPI_Allreduce(MPI_IN_PLACE, ea, 4, MPI_DOUBLE, MPI_MAX, c);
            if (R == 0) printf("%-10s max abs allreduce %.3e in-place %.3e bcast %.3e allgather %.3e (bound %.3g, allreduce %d x)\n",
                               name, ea[0], ea[1], ea[2], ea[3], abs_bound, P);
            /* allreduce: P contributions, each within abs_bound, summed in fp32 (|sum| < 64) */
            const double ar = P * abs_bound + P * 64 * 0x1p-24;
            for (int k = 0; k < 4; ++k)
                MT_CHECK(ea[k] <= (k < 2 ? ar : abs_bound), "%s: max abs error %.3e (collective %d) above %.3g", name, ea[k],
                         k, k < 2 ? ar : abs_bound);
        }
        MPI_Comm_free(&c);
    }
    free(x); free(y); free(all); free(exact); free(ref); free(refall);
    return mt_finish();
}

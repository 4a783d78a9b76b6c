// SPDX-License-Identifier: BSD-3-Clause
/* Lossy only where asked (issue 43, lossy_types): an unmodified program allreduces,
 * broadcasts, allgathers and reduce-scatters floats and doubles; the testlist runs it under
 * each lossy setting. Arguments say what each element type must see:
 *   --float=lossy|exact  --double=lossy|exact
 * exact: every result is the exact one bit for bit (the data are small integers times a
 * power of two, so every sum is exact in any order: MPI's, the lossless codec's, ours); lossy:
 * some element of every result differs from it (compression reached the type). Always: every
 * rank holds the same bits, and the bcast root's buffer is never written. */
#include "mpitest.h"

enum { N = 1 << 15 };
static int P, R;
static int want_lossy[2]; /* [0] floats, [1] doubles */

/* rank r's element i: an integer below 2^20 in magnitude times 2^-10 (floats hold it exactly,
 * and sums of up to 8 such values) or below 2^40 times 2^-20 (doubles) */
static double val(int dbl, int r, size_t i) {
    const double u = mt_uniform(dbl ? 91 : 19, r, i) * 2.0 - 1.0;
    return dbl ? ldexp(floor(u * ldexp(1.0, 40)), -20) : ldexp(floor(u * ldexp(1.0, 20)), -10);
}
static void fill(int dbl, void *x, size_t n, int r, size_t off) {
    for (size_t i = 0; i < n; ++i)
        if (dbl) ((double *)x)[i] = val(1, r, off + i);
        else ((float *)x)[i] = (float)val(0, r, off + i);
}
static double get(int dbl, const void *x, size_t i) { return dbl ? ((const double *)x)[i] : ((const float *)x)[i]; }

/* 1 if x[0..n) equals want(i) everywhere, 0 if some element differs */
static int equals(int dbl, const void *x, size_t n, double (*want)(int, size_t, void *), void *ctx) {
    for (size_t i = 0; i < n; ++i)
        if (get(dbl, x, i) != want(dbl, i, ctx)) return 0;
    return 1;
}
static double want_sum(int dbl, size_t i, void *ctx) {
    const size_t off = *(const size_t *)ctx;
    double s = 0;
    for (int r = 0; r < P; ++r) s += dbl ? val(1, r, off + i) : (double)(float)val(0, r, off + i);
    return s;
}
static double want_root(int dbl, size_t i, void *ctx) { return val(dbl, *(const int *)ctx, i); }
static double want_gather(int dbl, size_t i, void *ctx) {
    (void)ctx;
    return val(dbl, (int)(i / N), i % N);
}

static void expect(int dbl, const char *what, int exact) {
    const char *t = dbl ? "double" : "float";
    int all = 0;
    MPI_Allreduce(&exact, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD); /* lossy: any rank's result */
    if (want_lossy[dbl]) {
        int any = 0, inexact = !exact;
        MPI_Allreduce(&inexact, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        MT_CHECK(any, "%s of %ss: expected compressed (lossy) values, got the exact result on every rank", what, t);
    } else {
        MT_CHECK(exact, "%s of %ss: expected the exact result bit for bit, some element differs", what, t);
    }
}

static void run(int dbl) {
    const MPI_Datatype t = dbl ? MPI_DOUBLE : MPI_FLOAT;
    const size_t es = dbl ? 8 : 4;
    void *in = malloc(N * es), *out = malloc((size_t)P * N * es), *orig = malloc(N * es);
    size_t off = 0;
    /* allreduce */
    fill(dbl, in, N, R, 0);
    MPI_Allreduce(in, out, N, t, MPI_SUM, MPI_COMM_WORLD);
    MT_CHECK(mt_identical(out, N * es, MPI_COMM_WORLD), "allreduce of %ss: ranks differ", dbl ? "double" : "float");
    expect(dbl, "allreduce", equals(dbl, out, N, want_sum, &off));
    /* bcast from the last rank */
    int root = P - 1;
    fill(dbl, out, N, root, 0);
    memcpy(orig, out, N * es);
    MPI_Bcast(out, N, t, root, MPI_COMM_WORLD);
    MT_CHECK(mt_bcast_ok(out, orig, N * es, root, MPI_COMM_WORLD), "bcast of %ss: root written or ranks differ",
             dbl ? "double" : "float");
    int ex = R == root ? 1 : equals(dbl, out, N, want_root, &root);
    if (R == root && want_lossy[dbl]) ex = 0; /* the root holds its own data; the others tell */
    expect(dbl, "bcast", ex);
    /* allgather */
    fill(dbl, in, N, R, 0);
    MPI_Allgather(in, N, t, out, N, t, MPI_COMM_WORLD);
    MT_CHECK(mt_identical(out, (size_t)P * N * es, MPI_COMM_WORLD), "allgather of %ss: ranks differ",
             dbl ? "double" : "float");
    expect(dbl, "allgather", equals(dbl, out, (size_t)P * N, want_gather, NULL));
    /* reduce-scatter: each rank's block of the sum */
    void *rin = malloc((size_t)P * N * es);
    fill(dbl, rin, (size_t)P * N, R, 0);
    MPI_Reduce_scatter_block(rin, out, N, t, MPI_SUM, MPI_COMM_WORLD);
    off = (size_t)R * N;
    expect(dbl, "reduce_scatter_block", equals(dbl, out, N, want_sum, &off));
    free(rin);
    free(in), free(out), free(orig);
}

int main(int argc, char **argv) {
    mt_init(&argc, &argv, &R, &P);
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--float=lossy")) want_lossy[0] = 1;
        else if (!strcmp(argv[i], "--double=lossy")) want_lossy[1] = 1;
        else if (strcmp(argv[i], "--float=exact") && strcmp(argv[i], "--double=exact")) {
            if (R == 0) fprintf(stderr, "t_plain_lossy_types: unknown argument %s\n", argv[i]);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    mt_watchdog("t_plain_lossy_types", 300);
    /* twice: the second call of each shape runs what awp and the settings chose for it */
    for (int rep = 0; rep < 2; ++rep) {
        run(0);
        run(1);
    }
    return mt_finish();
}

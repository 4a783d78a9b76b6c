// SPDX-License-Identifier: BSD-3-Clause
/* Small counts (issue 42, "edge cases that log errors"): an unmodified program allreduces
 * (blocking, non-blocking, persistent), broadcasts, allgathers and reduce-scatters every count
 * 0..64 of floats and of doubles -- empty buffers, count 1, odd counts, counts below the rank
 * count (empty chunks for some ranks). The testlist runs it under each codec with
 * min_bytes=0 and checks that stderr stays clean: no codec may fail to encode or decode such
 * a buffer (each did log "encode of N values failed" and fall back, or worse).
 * Arguments:
 *   tol=X       largest error allowed, relative to the largest sum of magnitudes of a result
 *               (0, the default: every result bit for bit the exact one)
 *   max=N       largest count (default 64)
 *   also=N      one count more after 0..max (repeatable: a few large ones, where the
 *               two-phase allreduce replaces the allgather path)
 *   report      rank 0 prints the largest relative error seen (to choose tol)
 * Always: every rank holds the same bits, and the bcast root's buffer is never written. The
 * data are small integers times a power of two, so every exact sum is exact in any order. */
#include "mpitest.h"

static int P, R;
static double tol = 0;
static int max_count = 64;
static int report = 0;
static int also[8], n_also = 0;
static double worst = 0; /* largest err / scale seen */

/* rank r's element i of call `seed`: an integer in [-2^10, 2^10] times 2^-6 (floats and doubles
 * hold it and every sum of a few thousand of them exactly) */
static double val(int seed, int r, size_t i) {
    const double u = mt_uniform((uint64_t)seed, r, i) * 2.0 - 1.0;
    return ldexp(floor(u * 1024.0), -6);
}
static void fill(int dbl, void *x, size_t n, int seed, int r, size_t off) {
    for (size_t i = 0; i < n; ++i)
        if (dbl) ((double *)x)[i] = val(seed, r, off + i);
        else ((float *)x)[i] = (float)val(seed, r, off + i);
}
static double get(int dbl, const void *x, size_t i) { return dbl ? ((const double *)x)[i] : ((const float *)x)[i]; }

/* max |x_i - want_i| over the largest sum of magnitudes (tol = 0: any difference counts) */
static int close_enough(int dbl, const void *x, const double *want, const double *mag, size_t n) {
    double err = 0, scale = 0;
    for (size_t i = 0; i < n; ++i) {
        const double d = fabs(get(dbl, x, i) - want[i]);
        if (tol == 0 && d != 0 && !report) return 0;
        if (!(d <= err)) err = d; /* NaN counts */
        if (mag[i] > scale) scale = mag[i];
    }
    if (err / (scale > 0 ? scale : 1) > worst) worst = err / (scale > 0 ? scale : 1);
    return tol == 0 || err <= tol * (scale > 0 ? scale : 1);
}

/* want/mag[0..n) = sum over ranks (of |.|) of element off+i of call seed */
static void sums(double *want, double *mag, size_t n, int seed, size_t off) {
    for (size_t i = 0; i < n; ++i) {
        want[i] = mag[i] = 0;
        for (int r = 0; r < P; ++r) want[i] += val(seed, r, off + i), mag[i] += fabs(val(seed, r, off + i));
    }
}

enum { AR_BLOCKING, AR_NONBLOCKING, AR_PERSISTENT, AR_FORMS };
static const char *form_name[AR_FORMS] = {"MPI_Allreduce", "MPI_Iallreduce", "MPI_Allreduce_init"};

static void allreduce(int form, const void *in, void *out, int n, MPI_Datatype t) {
    MPI_Request rq;
    switch (form) {
    case AR_BLOCKING: MPI_Allreduce(in, out, n, t, MPI_SUM, MPI_COMM_WORLD); return;
    case AR_NONBLOCKING:
        MPI_Iallreduce(in, out, n, t, MPI_SUM, MPI_COMM_WORLD, &rq);
        MPI_Wait(&rq, MPI_STATUS_IGNORE);
        return;
    default:
#if MPI_VERSION >= 4
        MPI_Allreduce_init(in, out, n, t, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &rq);
        for (int k = 0; k < 2; ++k) { /* twice: a persistent request restarts */
            MPI_Start(&rq);
            MPI_Wait(&rq, MPI_STATUS_IGNORE);
        }
        MPI_Request_free(&rq);
#endif
        return;
    }
}

static void run(int dbl, int n) {
    const MPI_Datatype t = dbl ? MPI_DOUBLE : MPI_FLOAT;
    const char *tn = dbl ? "double" : "float";
    const size_t es = dbl ? 8 : 4, total = (size_t)P * (size_t)n;
    /* +8: never malloc(0), which may return NULL */
    char *in = malloc(total * es + 8), *out = malloc(total * es + 8), *orig = malloc(total * es + 8);
    double *want = malloc((total + 1) * sizeof(double)), *mag = malloc((total + 1) * sizeof(double));
    const int seed = 1000 * dbl + n;

    for (int form = 0; form < AR_FORMS; ++form) {
        if (form == AR_PERSISTENT && MPI_VERSION < 4) continue;
        fill(dbl, in, (size_t)n, seed, R, 0);
        allreduce(form, in, out, n, t);
        sums(want, mag, (size_t)n, seed, 0);
        MT_CHECK(mt_identical(out, (size_t)n * es, MPI_COMM_WORLD), "%s of %d %ss: ranks differ", form_name[form], n,
                 tn);
        MT_CHECK(close_enough(dbl, out, want, mag, (size_t)n), "%s of %d %ss: result off by more than tol=%g",
                 form_name[form], n, tn, tol);
    }
    /* in place */
    fill(dbl, out, (size_t)n, seed, R, 0);
    MPI_Allreduce(MPI_IN_PLACE, out, n, t, MPI_SUM, MPI_COMM_WORLD);
    sums(want, mag, (size_t)n, seed, 0);
    MT_CHECK(mt_identical(out, (size_t)n * es, MPI_COMM_WORLD), "in-place allreduce of %d %ss: ranks differ", n, tn);
    MT_CHECK(close_enough(dbl, out, want, mag, (size_t)n), "in-place allreduce of %d %ss: off by more than tol=%g", n,
             tn, tol);

    /* bcast from the last rank: the others get the root's data */
    const int root = P - 1;
    fill(dbl, out, (size_t)n, seed, root, 0);
    memcpy(orig, out, (size_t)n * es);
    MPI_Bcast(out, n, t, root, MPI_COMM_WORLD);
    MT_CHECK(mt_bcast_ok(out, orig, (size_t)n * es, root, MPI_COMM_WORLD), "bcast of %d %ss: root written or ranks differ",
             n, tn);
    for (int i = 0; i < n; ++i) want[i] = val(seed, root, (size_t)i), mag[i] = fabs(want[i]);
    MT_CHECK(close_enough(dbl, out, want, mag, (size_t)n), "bcast of %d %ss: off by more than tol=%g", n, tn, tol);

    /* allgather: block r = rank r's data */
    fill(dbl, in, (size_t)n, seed, R, 0);
    MPI_Allgather(in, n, t, out, n, t, MPI_COMM_WORLD);
    MT_CHECK(mt_identical(out, total * es, MPI_COMM_WORLD), "allgather of %d %ss: ranks differ", n, tn);
    for (int r = 0; r < P; ++r)
        for (int i = 0; i < n; ++i) {
            const size_t k = (size_t)r * (size_t)n + (size_t)i;
            want[k] = val(seed, r, (size_t)i), mag[k] = fabs(want[k]);
        }
    MT_CHECK(close_enough(dbl, out, want, mag, total), "allgather of %d %ss: off by more than tol=%g", n, tn, tol);

    /* reduce-scatter: this rank's block of the sum of P blocks of n */
    fill(dbl, in, total, seed, R, 0);
    MPI_Reduce_scatter_block(in, out, n, t, MPI_SUM, MPI_COMM_WORLD);
    sums(want, mag, (size_t)n, seed, (size_t)R * (size_t)n);
    MT_CHECK(close_enough(dbl, out, want, mag, (size_t)n), "reduce_scatter_block of %d %ss: off by more than tol=%g", n,
             tn, tol);

    free(in), free(out), free(orig), free(want), free(mag);
}

int main(int argc, char **argv) {
    mt_init(&argc, &argv, &R, &P);
    for (int i = 1; i < argc; ++i) {
        if (!strncmp(argv[i], "tol=", 4)) tol = atof(argv[i] + 4);
        else if (!strncmp(argv[i], "max=", 4)) max_count = atoi(argv[i] + 4);
        else if (!strcmp(argv[i], "report")) report = 1;
        else if (!strncmp(argv[i], "also=", 5) && n_also < 8) also[n_also++] = atoi(argv[i] + 5);
        else {
            if (R == 0) fprintf(stderr, "t_small_counts: unknown argument %s\n", argv[i]);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    mt_watchdog("t_small_counts", 240);
    for (int n = 0; n <= max_count; ++n) {
        run(0, n);
        run(1, n);
    }
    for (int k = 0; k < n_also; ++k) {
        run(0, also[k]);
        run(1, also[k]);
    }
    if (report) {
        double all = 0;
        MPI_Reduce(&worst, &all, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (R == 0) printf("t_small_counts: largest relative error %.3g\n", all);
    }
    return mt_finish();
}

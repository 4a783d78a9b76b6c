// SPDX-License-Identifier: BSD-3-Clause
/* A plain MPI program: MPI_Reduce_scatter_block and MPI_Reduce_scatter of floats with MPI_SUM
 * (and, with MPI-4, their _c forms), run with libcompmpi preloaded.
 *
 * Every run checks, on every rank, against MPI's own result (PMPI) of the same data:
 *   - block and vector forms (blocks of different sizes, zero counts), in place and not;
 *   - in place gives the same bits as out of place; the send buffer is never written;
 *   - a NaN/Inf in one rank's data (in any block): every rank's result is MPI's, bit for bit;
 *   - non-float data (double, int) and other ops (MPI_MAX): MPI's result bit for bit;
 *   - below min_bytes: MPI's result bit for bit;
 *   - MPICH's MPIX_C_FLOAT16 bcast / allgather: MPI's bits (passed through);
 *   - MPI-4: MPI_Iallreduce_c, MPI_Iallgather_c, MPI_Ibcast_c and the persistent
 *     MPI_Allreduce_init_c, MPI_Allgather_init_c, MPI_Bcast_init_c give the int forms' bits;
 *   - MPI_Ireduce_scatter_block / MPI_Ireduce_scatter (and with MPI-4 their _c and persistent
 *     forms, MPI_Reduce_scatter*_init_c included): the blocking call's bits at a static
 *     width, MPI's with --all-exact, the tolerance otherwise; the recvcounts array may be
 *     reused as soon as the call returns.
 * Arguments:
 *   tol=X      normwise: |y - exact|_2 <= X |exact|_2 for every compressed block (with
 *              stochastic: over the whole reduced vector, all ranks' blocks together);
 *   bits=B     bitpack at B bits, truncation (COMPMPI_CODEC=bitpack COMPMPI_BITS=B): every
 *              element equals the recomputation of the algorithm (each rank's data is known
 *              here): sum over ranks j in rank order of trunc_B(x_j), rank r's own block
 *              exact -- phase 1 of the two-phase allreduce -- and some element differs from
 *              the exact sum (the call was compressed);
 *   ar         with bits=B and COMPMPI_CHUNK_BYTES=0: the compressed MPI_Allreduce of the same
 *              data (chunks = the blocks) holds trunc_B(y) in block r;
 *   stochastic a stochastic codec (terngrad, qsgd): each call draws other random numbers, so
 *              the in-place and _c calls are held to tol, not to the first call's bits;
 *   quick      sizes / 8 (valgrind; run with COMPMPI_MIN_BYTES=1K);
 *   --all-exact  every result equals MPI's bit for bit (compression off). */
#include "mpitest.h"

static int rank, size;
static double tol = -1;
static int bits = 0, ar = 0, all_exact = 0, stochastic = 0;
static size_t scale = 1; /* quick: sizes / 8 (valgrind) */

static float trunc_bits(float v, int b) {
    uint32_t u;
    memcpy(&u, &v, 4);
    u &= b >= 32 ? 0xFFFFFFFFu : ~(0xFFFFFFFFu >> b);
    memcpy(&v, &u, 4);
    return v;
}

/* x of rank j, element i of the whole input (every rank can compute any rank's data) */
static float xval(uint64_t seed, int j, size_t i) { return mt_value(seed, j, i); }

/* y: this rank's result (count floats at offset off of the input); z: MPI's exact result. */
static void check_block(const char *what, uint64_t seed, const float *y, const float *z, size_t off, size_t count) {
    if (all_exact) {
        MT_CHECK(memcmp(y, z, count * sizeof(float)) == 0, "%s: differs from MPI's result", what);
        return;
    }
    if (tol >= 0) {
        double e = 0, s = 0;
        for (size_t i = 0; i < count; ++i) e += ((double)y[i] - z[i]) * ((double)y[i] - z[i]), s += (double)z[i] * z[i];
        if (stochastic) { /* the whole reduced vector (every rank calls this alike): the noise of
                           * one small block is not the codec's error over the buffer */
            double v[2] = {e, s}, w[2];
            PMPI_Allreduce(v, w, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
            e = w[0], s = w[1];
        }
        MT_CHECK(sqrt(e) <= tol * sqrt(s), "%s: error %g > %g of |exact|", what, sqrt(e / (s > 0 ? s : 1)), tol);
    }
    if (bits) {
        size_t wrong = 0, differ = 0;
        for (size_t i = 0; i < count; ++i) {
            float acc = 0;
            for (int j = 0; j < size; ++j) {
                float v = xval(seed, j, off + i);
                float d = j == rank ? v : trunc_bits(v, bits);
                acc = j == 0 ? d : acc + d;
            }
            wrong += memcmp(&acc, &y[i], 4) != 0;
            differ += y[i] != z[i];
        }
        MT_CHECK(wrong == 0, "%s: %zu of %zu elements differ from the recomputed sum of truncated contributions",
                 what, wrong, count);
        MT_CHECK(count < 64 || differ > 0, "%s: result equals the exact sum: not compressed?", what);
    }
}

static void fill(float *x, size_t n, uint64_t seed) {
    for (size_t i = 0; i < n; ++i) x[i] = xval(seed, rank, i);
}

/* A non-blocking or persistent form's result yn against the blocking call's y (MPI's z):
 * bits=B (static width, deterministic) the same bits as the blocking call; --all-exact
 * MPI's bits; stochastic codecs and tol= runs the tolerance (each call draws its own random
 * numbers, awp may pick another width); always the same on every rank where deterministic. */
static void check_nb(const char *what, uint64_t seed, const float *yn, const float *y, const float *z, size_t off,
                     size_t count) {
    if (all_exact) MT_CHECK(memcmp(yn, z, count * 4) == 0, "%s: differs from MPI's result", what);
    else if (bits) MT_CHECK(memcmp(yn, y, count * 4) == 0, "%s: differs from the blocking call", what);
    else check_block(what, seed, yn, z, off, count);
}

/* MPI_Ireduce_scatter_block / MPI_Ireduce_scatter (counts != NULL) and, with MPI-4, their
 * _c and persistent forms (two MPI_Start rounds each): compressed like the blocking call
 * (the progress thread runs the same algorithm), checked by check_nb. The counts array is
 * overwritten right after the non-blocking call returns: the library keeps its own copy. */
static void test_nb_forms(const float *x, size_t b, const int *counts, uint64_t seed, const float *y, const float *z,
                          size_t off, size_t cr) {
    float *yn = malloc(cr * 4 + 4);
    MPI_Request rq;
    int *cw = NULL;
    if (counts) {
        cw = malloc(sizeof(int) * (size_t)size);
        memcpy(cw, counts, sizeof(int) * (size_t)size);
    }
    char what[96];
    snprintf(what, sizeof what, "%s non-blocking", counts ? "vector" : "block");
    if (counts) {
        MPI_Ireduce_scatter(x, yn, cw, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &rq);
        for (int j = 0; j < size; ++j) cw[j] = -1; /* the user may reuse the array: our copy is used */
    } else {
        MPI_Ireduce_scatter_block(x, yn, (int)b, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &rq);
    }
    MPI_Wait(&rq, MPI_STATUS_IGNORE);
    check_nb(what, seed, yn, y, z, off, cr);
    if (cw) memcpy(cw, counts, sizeof(int) * (size_t)size);
#if MPI_VERSION >= 4
    snprintf(what, sizeof what, "%s non-blocking _c", counts ? "vector" : "block");
    MPI_Count *cc = malloc(sizeof(MPI_Count) * (size_t)size);
    for (int j = 0; j < size; ++j) cc[j] = counts ? counts[j] : (MPI_Count)b;
    if (counts) MPI_Ireduce_scatter_c(x, yn, cc, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &rq);
    else MPI_Ireduce_scatter_block_c(x, yn, (MPI_Count)b, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &rq);
    MPI_Wait(&rq, MPI_STATUS_IGNORE);
    check_nb(what, seed, yn, y, z, off, cr);
    if (counts) MPI_Reduce_scatter_init(x, yn, cw, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &rq);
    else MPI_Reduce_scatter_block_init(x, yn, (int)b, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &rq);
    for (int t = 0; t < 2; ++t) {
        memset(yn, 0xFF, cr * 4); /* NaN: a run that writes nothing is seen */
        MPI_Start(&rq);
        MPI_Wait(&rq, MPI_STATUS_IGNORE);
        snprintf(what, sizeof what, "%s persistent, start %d", counts ? "vector" : "block", t);
        check_nb(what, seed, yn, y, z, off, cr);
    }
    MPI_Request_free(&rq);
    /* the persistent _c forms: compressed like the int forms */
    if (counts) MPI_Reduce_scatter_init_c(x, yn, cc, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &rq);
    else MPI_Reduce_scatter_block_init_c(x, yn, (MPI_Count)b, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &rq);
    for (int j = 0; j < size; ++j) cc[j] = -1; /* our copy is used */
    for (int t = 0; t < 2; ++t) {
        memset(yn, 0xFF, cr * 4);
        MPI_Start(&rq);
        MPI_Wait(&rq, MPI_STATUS_IGNORE);
        snprintf(what, sizeof what, "%s persistent _c, start %d", counts ? "vector" : "block", t);
        check_nb(what, seed, yn, y, z, off, cr);
    }
    MPI_Request_free(&rq);
    free(cc);
#endif
    free(yn), free(cw);
}

/* Block form: b floats per rank. */
static void test_block(size_t b, uint64_t seed) {
    const size_t n = b * (size_t)size;
    float *x = malloc(n * 4), *keep = malloc(n * 4), *y = malloc(b * 4 + 4), *z = malloc(b * 4 + 4);
    float *inpl = malloc(n * 4);
    fill(x, n, seed);
    memcpy(keep, x, n * 4);
    MPI_Reduce_scatter_block(x, y, (int)b, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    PMPI_Reduce_scatter_block(x, z, (int)b, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MT_CHECK(memcmp(x, keep, n * 4) == 0, "block %zu: send buffer written", b);
    char what[64];
    snprintf(what, sizeof what, "block b=%zu", b);
    check_block(what, seed, y, z, b * (size_t)rank, b);
    /* in place: the input is the receive buffer; same bits as out of place */
    memcpy(inpl, x, n * 4);
    MPI_Reduce_scatter_block(MPI_IN_PLACE, inpl, (int)b, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    if (stochastic) check_block("block in place", seed, inpl, z, b * (size_t)rank, b);
    else MT_CHECK(memcmp(inpl, y, b * 4) == 0, "block %zu in place differs from out of place", b);
    if (ar && bits && b % 16 == 0) { /* the allreduce's chunks are these blocks */
        float *a = malloc(n * 4);
        MPI_Allreduce(x, a, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        size_t wrong = 0;
        for (size_t i = 0; i < b; ++i) {
            float t = trunc_bits(y[i], bits);
            wrong += memcmp(&t, &a[b * (size_t)rank + i], 4) != 0;
        }
        MT_CHECK(wrong == 0, "block %zu: %zu elements of trunc(y) differ from the compressed allreduce's block", b,
                 wrong);
        free(a);
    }
#if MPI_VERSION >= 4
    float *yc = malloc(b * 4 + 4);
    MPI_Reduce_scatter_block_c(x, yc, (MPI_Count)b, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    if (stochastic) check_block("block _c", seed, yc, z, b * (size_t)rank, b);
    else MT_CHECK(memcmp(yc, y, b * 4) == 0, "block %zu: the _c form differs", b);
    free(yc);
#endif
    test_nb_forms(x, b, NULL, seed, y, z, b * (size_t)rank, b);
    MT_CHECK(memcmp(x, keep, n * 4) == 0, "block %zu: send buffer written by a non-blocking form", b);
    free(x), free(keep), free(y), free(z), free(inpl);
}

/* Vector form: counts differ by rank, some are zero. */
static void test_vector(const int *counts, uint64_t seed) {
    size_t n = 0, off = 0;
    for (int j = 0; j < size; ++j) {
        if (j == rank) off = n;
        n += (size_t)counts[j];
    }
    const size_t cr = (size_t)counts[rank];
    float *x = malloc(n * 4 + 4), *keep = malloc(n * 4 + 4), *y = malloc(cr * 4 + 4), *z = malloc(cr * 4 + 4);
    float *inpl = malloc(n * 4 + 4);
    fill(x, n, seed);
    memcpy(keep, x, n * 4);
    MPI_Reduce_scatter(x, y, counts, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    PMPI_Reduce_scatter(x, z, counts, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MT_CHECK(memcmp(x, keep, n * 4) == 0, "vector: send buffer written");
    char what[96];
    snprintf(what, sizeof what, "vector n=%zu rank block %zu", n, cr);
    check_block(what, seed, y, z, off, cr);
    memcpy(inpl, x, n * 4);
    MPI_Reduce_scatter(MPI_IN_PLACE, inpl, counts, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    if (stochastic) check_block("vector in place", seed, inpl, z, off, cr);
    else MT_CHECK(memcmp(inpl, y, cr * 4) == 0, "vector in place differs from out of place");
#if MPI_VERSION >= 4
    MPI_Count *cc = malloc(sizeof(MPI_Count) * (size_t)size);
    for (int j = 0; j < size; ++j) cc[j] = counts[j];
    float *yc = malloc(cr * 4 + 4);
    MPI_Reduce_scatter_c(x, yc, cc, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    if (stochastic) check_block("vector _c", seed, yc, z, off, cr);
    else MT_CHECK(memcmp(yc, y, cr * 4) == 0, "vector: the _c form differs");
    free(yc), free(cc);
#endif
    test_nb_forms(x, 0, counts, seed, y, z, off, cr);
    MT_CHECK(memcmp(x, keep, n * 4) == 0, "vector: send buffer written by a non-blocking form");
    free(x), free(keep), free(y), free(z), free(inpl);
}

/* NaN/Inf in one rank's data, in the block of rank `victim`: MPI's result everywhere. */
static void test_nonfinite(void) {
    const size_t b = 6000 / scale, n = b * (size_t)size;
    float bads[] = {NAN, INFINITY, -INFINITY};
    float *x = malloc(n * 4), *y = malloc(b * 4), *z = malloc(b * 4);
    int *counts = malloc(sizeof(int) * (size_t)size);
    for (int k = 0; k < 3; ++k) {
        const int victim = k % size;
        fill(x, n, 40 + k);
        if (rank == size - 1) x[b * (size_t)victim + 17 + k] = bads[k];
        MPI_Reduce_scatter_block(x, y, (int)b, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        PMPI_Reduce_scatter_block(x, z, (int)b, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        MT_CHECK(memcmp(y, z, b * 4) == 0, "block with %g in rank %d's block: differs from MPI's", bads[k], victim);
        for (int j = 0; j < size; ++j) counts[j] = (int)b + 16 * j;
        size_t tot = 0, cr = (size_t)counts[rank];
        for (int j = 0; j < size; ++j) tot += (size_t)counts[j];
        float *xv = malloc(tot * 4), *yv = malloc(cr * 4), *zv = malloc(cr * 4);
        fill(xv, tot, 50 + k);
        if (rank == 0) xv[tot - 1 - (size_t)k] = bads[k]; /* in the last rank's block */
        MPI_Reduce_scatter(xv, yv, counts, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        PMPI_Reduce_scatter(xv, zv, counts, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        MT_CHECK(memcmp(yv, zv, cr * 4) == 0, "vector with %g: differs from MPI's", bads[k]);
        free(xv), free(yv), free(zv);
    }
    /* the next clean call is compressed again */
    fill(x, n, 99);
    MPI_Reduce_scatter_block(x, y, (int)b, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    PMPI_Reduce_scatter_block(x, z, (int)b, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    check_block("block after a fallback", 99, y, z, b * (size_t)rank, b);
    free(x), free(y), free(z), free(counts);
}

/* Not eligible: MPI's result bit for bit. */
static void test_passthrough(void) {
    const size_t b = 5000, n = b * (size_t)size;
    double *xd = malloc(n * 8), *yd = malloc(b * 8), *zd = malloc(b * 8);
    int *xi = malloc(n * 4), *yi = malloc(b * 4), *zi = malloc(b * 4);
    float *x = malloc(n * 4), *y = malloc(b * 4), *z = malloc(b * 4);
    for (size_t i = 0; i < n; ++i) xd[i] = xval(7, rank, i) * 1.000001, xi[i] = (int)(i * 31 + (size_t)rank);
    fill(x, n, 8);
    /* doubles with MPI_SUM are compressed since issue 30 (t_fp64); other ops pass through */
    MPI_Reduce_scatter_block(xd, yd, (int)b, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    PMPI_Reduce_scatter_block(xd, zd, (int)b, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    MT_CHECK(memcmp(yd, zd, b * 8) == 0, "double MPI_MIN: differs from MPI's");
    MPI_Reduce_scatter_block(xi, yi, (int)b, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    PMPI_Reduce_scatter_block(xi, zi, (int)b, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MT_CHECK(memcmp(yi, zi, b * 4) == 0, "int: differs from MPI's");
    MPI_Reduce_scatter_block(x, y, (int)b, MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD);
    PMPI_Reduce_scatter_block(x, z, (int)b, MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD);
    MT_CHECK(memcmp(y, z, b * 4) == 0, "MPI_MAX: differs from MPI's");
    int *counts = malloc(sizeof(int) * (size_t)size);
    for (int j = 0; j < size; ++j) counts[j] = (int)b;
    MPI_Reduce_scatter(xd, yd, counts, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    PMPI_Reduce_scatter(xd, zd, counts, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MT_CHECK(memcmp(yd, zd, b * 8) == 0, "vector double MPI_MAX: differs from MPI's");
    /* below min_bytes (4K default): 8 floats in all */
    for (int j = 0; j < size; ++j) counts[j] = j == 0 ? 8 : 0;
    MPI_Reduce_scatter(x, y, counts, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    PMPI_Reduce_scatter(x, z, counts, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MT_CHECK(memcmp(y, z, (size_t)counts[rank] * 4) == 0, "small: differs from MPI's");
    free(xd), free(yd), free(zd), free(xi), free(yi), free(zi), free(x), free(y), free(z), free(counts);
}

/* 16-bit floats (src/base/mpi_family.h): MPICH's MPIX_C_FLOAT16 moves but cannot be summed (MPICH
 * 4.0.2 aborts), so only bcast and allgather are called: MPI's bits, passed through. */
#ifdef MPIX_C_FLOAT16
/* IEEE binary16 bits of f (truncating; normal range, else signed zero or infinity): the test
 * only compares bytes, and clang 14 has no _Float16 on x86 */
static uint16_t half_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    const int e = (int)((u >> 23) & 0xff) - 127 + 15;
    if (e <= 0) return sign;
    if (e >= 31) return (uint16_t)(sign | 0x7c00u);
    return (uint16_t)(sign | (uint16_t)(e << 10) | (uint16_t)((u >> 13) & 0x3ffu));
}
#endif

static void test_float16(void) {
#ifdef MPIX_C_FLOAT16
    const int n = 4096;
    uint16_t *x = malloc(n * 2), *y = malloc((size_t)n * 2 * (size_t)size), *z = malloc((size_t)n * 2 * (size_t)size);
    for (int i = 0; i < n; ++i) x[i] = half_bits(xval(11, rank, (size_t)i));
    MPI_Allgather(x, n, MPIX_C_FLOAT16, y, n, MPIX_C_FLOAT16, MPI_COMM_WORLD);
    PMPI_Allgather(x, n, MPIX_C_FLOAT16, z, n, MPIX_C_FLOAT16, MPI_COMM_WORLD);
    MT_CHECK(memcmp(y, z, (size_t)n * 2 * (size_t)size) == 0, "float16 allgather differs from MPI's");
    memcpy(y, x, n * 2);
    MPI_Bcast(y, n, MPIX_C_FLOAT16, size - 1, MPI_COMM_WORLD);
    memcpy(z, x, n * 2);
    PMPI_Bcast(z, n, MPIX_C_FLOAT16, size - 1, MPI_COMM_WORLD);
    MT_CHECK(memcmp(y, z, n * 2) == 0, "float16 bcast differs from MPI's");
    free(x), free(y), free(z);
#endif
}

/* MPI-4 large-count non-blocking forms (counts <= INT_MAX): compressed like the int forms.
 * Deterministic codecs (bits=B): the same bits as MPI_Iallreduce & co. of the same data, on
 * every rank; --all-exact: MPI's bits. */
static void test_nb_c(void) {
#if MPI_VERSION >= 4
    if (!bits && !all_exact) return;
    const size_t n = 20000 / scale;
    float *x = malloc(n * 4), *a = malloc(n * 4 * (size_t)size), *b = malloc(n * 4 * (size_t)size);
    MPI_Request rq[2];
    MPI_Status sts[2];
    fill(x, n, 21);
    MPI_Iallreduce_c(x, a, (MPI_Count)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &rq[0]);
    MPI_Iallreduce(x, b, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &rq[1]);
    MPI_Waitall(2, rq, sts);
    if (all_exact) PMPI_Allreduce(x, b, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MT_CHECK(memcmp(a, b, n * 4) == 0, "MPI_Iallreduce_c differs from MPI_Iallreduce");
    MT_CHECK(mt_identical(a, n * 4, MPI_COMM_WORLD), "MPI_Iallreduce_c: ranks differ");
    MPI_Iallgather_c(x, (MPI_Count)n, MPI_FLOAT, a, (MPI_Count)n, MPI_FLOAT, MPI_COMM_WORLD, &rq[0]);
    MPI_Iallgather(x, (int)n, MPI_FLOAT, b, (int)n, MPI_FLOAT, MPI_COMM_WORLD, &rq[1]);
    MPI_Waitall(2, rq, sts);
    if (all_exact) PMPI_Allgather(x, (int)n, MPI_FLOAT, b, (int)n, MPI_FLOAT, MPI_COMM_WORLD);
    MT_CHECK(memcmp(a, b, n * 4 * (size_t)size) == 0, "MPI_Iallgather_c differs from MPI_Iallgather");
    memcpy(a, x, n * 4);
    memcpy(b, x, n * 4);
    MPI_Ibcast_c(a, (MPI_Count)n, MPI_FLOAT, 0, MPI_COMM_WORLD, &rq[0]);
    MPI_Ibcast(b, (int)n, MPI_FLOAT, 0, MPI_COMM_WORLD, &rq[1]);
    MPI_Waitall(2, rq, sts);
    MT_CHECK(memcmp(a, b, n * 4) == 0, "MPI_Ibcast_c differs from MPI_Ibcast");
    MT_CHECK(rank != 0 || memcmp(a, x, n * 4) == 0, "MPI_Ibcast_c: the root's buffer was written");
    /* the persistent _c forms against the non-blocking int forms (b), two starts each */
    MPI_Request pr[3];
    MPI_Status st3[3];
    float *c = malloc(n * 4 * (size_t)size), *g = malloc(n * 4 * (size_t)size), *bc = malloc(n * 4);
    MPI_Allreduce_init_c(x, a, (MPI_Count)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &pr[0]);
    MPI_Allgather_init_c(x, (MPI_Count)n, MPI_FLOAT, c, (MPI_Count)n, MPI_FLOAT, MPI_COMM_WORLD, MPI_INFO_NULL, &pr[1]);
    MPI_Bcast_init_c(bc, (MPI_Count)n, MPI_FLOAT, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &pr[2]);
    MPI_Iallreduce(x, b, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &rq[0]);
    MPI_Iallgather(x, (int)n, MPI_FLOAT, g, (int)n, MPI_FLOAT, MPI_COMM_WORLD, &rq[1]);
    MPI_Waitall(2, rq, sts);
    if (all_exact) {
        PMPI_Allreduce(x, b, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        PMPI_Allgather(x, (int)n, MPI_FLOAT, g, (int)n, MPI_FLOAT, MPI_COMM_WORLD);
    }
    for (int t = 0; t < 2; ++t) {
        memset(a, 0xFF, n * 4);
        memset(c, 0xFF, n * 4 * (size_t)size);
        if (rank == 0) memcpy(bc, x, n * 4);
        else memset(bc, 0xFF, n * 4);
        MPI_Startall(3, pr);
        MPI_Waitall(3, pr, st3);
        MT_CHECK(memcmp(a, b, n * 4) == 0, "MPI_Allreduce_init_c start %d differs from MPI_Iallreduce", t);
        /* --all-exact: MPICH 4.0.2's own persistent allgather copies the caller's block into
         * the result at its first start only: a later start leaves that block stale */
        if (!all_exact || t == 0)
            MT_CHECK(memcmp(c, g, n * 4 * (size_t)size) == 0,
                     "MPI_Allgather_init_c start %d differs from MPI_Iallgather", t);
        memcpy(b + n, x, n * 4); /* scratch: the root's data as the int-form bcast delivers it */
        if (all_exact) PMPI_Bcast(b + n, (int)n, MPI_FLOAT, 0, MPI_COMM_WORLD);
        else MPI_Bcast(b + n, (int)n, MPI_FLOAT, 0, MPI_COMM_WORLD);
        MT_CHECK(memcmp(bc, b + n, n * 4) == 0, "MPI_Bcast_init_c start %d differs from MPI_Bcast", t);
        MT_CHECK(rank != 0 || memcmp(bc, x, n * 4) == 0, "MPI_Bcast_init_c: the root's buffer was written");
    }
    for (int i = 0; i < 3; ++i) MPI_Request_free(&pr[i]);
    free(c), free(g), free(bc);
    free(x), free(a), free(b);
#endif
}

int main(int argc, char **argv) {
    mt_init(&argc, &argv, &rank, &size);
    for (int i = 1; i < argc; ++i) {
        if (strncmp(argv[i], "tol=", 4) == 0) tol = atof(argv[i] + 4);
        else if (strncmp(argv[i], "bits=", 5) == 0) bits = atoi(argv[i] + 5);
        else if (strcmp(argv[i], "ar") == 0) ar = 1;
        else if (strcmp(argv[i], "--all-exact") == 0) all_exact = 1;
        else if (strcmp(argv[i], "stochastic") == 0) stochastic = 1;
        else if (strcmp(argv[i], "quick") == 0) scale = 8;
    }
    test_block(16384 / scale, 1);
    test_block(3001 / scale, 2); /* blocks not a multiple of 16 */
    int *counts = malloc(sizeof(int) * (size_t)size);
    for (int j = 0; j < size; ++j) /* rank 1: nothing */
        counts[j] = j == 1 ? 0 : (int)((6000 + 2500 * (size_t)j) / scale) + 3 * (j % 2);
    test_vector(counts, 3);
    for (int j = 0; j < size; ++j) counts[j] = j == size - 1 ? (int)(30001 / scale) : 7; /* one large block */
    test_vector(counts, 4);
    for (int j = 0; j < size; ++j) counts[j] = (int)(16384 / scale); /* equal counts through the vector form */
    test_vector(counts, 1);
    free(counts);
    test_nonfinite();
    test_passthrough();
    test_float16();
    test_nb_c();
    return mt_finish();
}

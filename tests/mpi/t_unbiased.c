// SPDX-License-Identifier: BSD-3-Clause
/* The compressed MPI_Allreduce of the stochastic codecs is unbiased end to end.
 *
 *   terngrad (Wen et al. 2017, eq. 1-4, 21, Alg. 1): every rank clips its gradient at
 *            c sigma of its whole buffer (c = terngrad_clip = 2.5) and ternarises it with the
 *            scaler shared by all ranks, so E[allreduce] = sum over ranks of the clipped
 *            gradients;
 *   qsgd     (Alistarh et al. 2017): E[allreduce] = the exact sum.
 *
 * Same data on every call, T calls (every call draws other random numbers: the streams
 * derive from the call counter; half the calls in place). Per element i the mean m_i and
 * the sample variance v_i of the T results; the test aggregates the per-element biases
 * m_i - ref_i, weighted by w_i, into Z = sum w_i (m_i - ref_i) / sqrt(sum w_i^2 v_i / T), which
 * is N(0, 1) for an unbiased collective (elements are ternarised independently; CLT over
 * elements and calls). Weights: 1 (total), sign(ref_i) (shrinkage towards 0), and sign(ref_i)
 * within each sextile of |ref_i| (the old two-phase allreduce rounded the owner's share to
 * the levels deterministically: small values vanished). Every |Z| must be < 4.
 * Also: every call's result is bit-identical on all ranks (hash over all calls).
 *
 * Error feedback ("ef:CODEC", data without outliers): q8 -- deterministic rounding, biased --
 * with error_feedback=1 the mean of T calls is within a quarter of the error without;
 * terngrad -- unbiased but clipped -- the mean with feedback is no worse than without.
 *
 * Arguments: codec names (terngrad, qsgd; "terngrad_bucket=B" for terngrad with buckets),
 * "ef:CODEC" for the error-feedback check.
 * Environment (testlist): COMPMPI_CHUNK_BYTES (pipelined), COMPMPI_NODE_SIZE (hierarchical). */
#include "compmpi.h"
#include "mpitest.h"

#define NBINS 6

static int R, P;

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* gradient-like data with a few outliers (clipping must matter) */
static float value(int rank, size_t i) {
    float v = mt_value(77, rank, i);
    if (i % 211 == 5) v *= 40.0f;
    return v;
}

/* c sigma of x[0..n) as the library computes it: population sigma in double; none (inf)
 * when c = 0 or sigma = 0 */
static float clip_threshold(const float *x, size_t n, double c) {
    double s = 0, s2 = 0;
    for (size_t i = 0; i < n; ++i) s += x[i], s2 += (double)x[i] * x[i];
    const double mean = s / n, var = s2 / n - mean * mean;
    const float t = (float)(c * sqrt(var > 0 ? var : 0));
    return c > 0 && t > 0 ? t : INFINITY;
}

static void run(const char *spec, size_t n, int T) {
    char codec[32] = {0};
    unsigned bucket = 0;
    if (sscanf(spec, "terngrad_bucket=%u", &bucket) == 1) strcpy(codec, "terngrad");
    else snprintf(codec, sizeof codec, "%s", spec);
    const int tern = strcmp(codec, "terngrad") == 0;
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    MT_CHECK(compmpi_comm_set(c, "codec", codec) == MPI_SUCCESS, "codec %s", codec);
    MT_CHECK(compmpi_comm_set(c, "policy", "static") == MPI_SUCCESS, "policy");
    MT_CHECK(compmpi_comm_set(c, "min_bytes", "0") == MPI_SUCCESS, "min_bytes");
    if (bucket) {
        char b[32];
        snprintf(b, sizeof b, "%u", bucket);
        MT_CHECK(compmpi_comm_set(c, "terngrad_bucket", b) == MPI_SUCCESS, "terngrad_bucket");
    }
    const double clip = 2.5; /* terngrad_clip default */

    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float)), *g = malloc(n * sizeof(float));
    double *ref = calloc(n, sizeof(double)), *mean = calloc(n, sizeof(double)), *m2 = calloc(n, sizeof(double));
    for (size_t i = 0; i < n; ++i) x[i] = value(R, i);
    /* the reference: sum over ranks of each rank's (clipped) gradient; terngrad's shared
     * scaler (eq. 4): the max over ranks of max |clipped g| */
    float scaler = 0;
    for (int r = 0; r < P; ++r) {
        for (size_t i = 0; i < n; ++i) g[i] = value(r, i);
        const float cs = tern ? clip_threshold(g, n, clip) : INFINITY;
        for (size_t i = 0; i < n; ++i) ref[i] += fmin(fmax(g[i], -cs), cs);
        for (size_t i = 0; i < n; ++i) scaler = fmaxf(scaler, fminf(fabsf(g[i]), cs));
    }
    /* one bucket, flat algorithm: the sum of P ternaries on the shared grid {-s, 0, s} is
     * k s with an integer |k| <= P, exactly (the paper's server sums the ternary gradients;
     * phase 2 carries the 2P+1 levels) */
    const int grid = tern && !bucket && !getenv("COMPMPI_NODE_SIZE");
    uint64_t h = 1469598103934665603ull;
    for (int t = 0; t < T; ++t) {
        if (t % 2) {
            memcpy(y, x, n * sizeof(float));
            MPI_Allreduce(MPI_IN_PLACE, y, (int)n, MPI_FLOAT, MPI_SUM, c);
        } else {
            MPI_Allreduce(x, y, (int)n, MPI_FLOAT, MPI_SUM, c);
        }
        h = (h ^ mt_hash(y, n * sizeof(float))) * 1099511628211ull;
        if (grid) {
            size_t off = 0, first = n;
            for (size_t i = 0; i < n; ++i) {
                const double k = rint(y[i] / (double)scaler);
                if (!(fabs(k) <= P && y[i] == (float)(k * scaler))) off += first == n ? (first = i, 1) : 1;
            }
            MT_CHECK(off == 0, "%s: call %d: %zu values off the grid k s (s = %a), first y[%zu] = %a", spec, t, off,
                     (double)scaler, first, first < n ? (double)y[first] : 0.0);
        }
        for (size_t i = 0; i < n; ++i) { /* Welford */
            const double d = y[i] - mean[i];
            mean[i] += d / (t + 1);
            m2[i] += d * (y[i] - mean[i]);
        }
    }
    MT_CHECK(mt_identical(&h, sizeof h, c), "%s: results differ between ranks", spec);
    for (size_t i = 0; i < n; ++i) MT_CHECK(x[i] == value(R, i), "%s: input buffer written", spec);

    /* bins of |ref|: sextiles */
    double *sorted = malloc(n * sizeof(double)), edge[NBINS];
    for (size_t i = 0; i < n; ++i) sorted[i] = fabs(ref[i]);
    qsort(sorted, n, sizeof(double), cmp_double);
    for (int b = 0; b < NBINS; ++b) edge[b] = sorted[(b + 1) * (n - 1) / NBINS];
    free(sorted);
    double num[NBINS + 2] = {0}, den[NBINS + 2] = {0}, absref = 0, mse = 0, energy = 0;
    size_t cnt[NBINS + 2] = {0};
    for (size_t i = 0; i < n; ++i) {
        const double d = mean[i] - ref[i], var = m2[i] / (T - 1) / T, sg = ref[i] > 0 ? 1 : ref[i] < 0 ? -1 : 0;
        int b = 0;
        while (b < NBINS - 1 && fabs(ref[i]) > edge[b]) ++b;
        num[b] += sg * d, den[b] += sg * sg * var, cnt[b]++;
        num[NBINS] += d, den[NBINS] += var, cnt[NBINS]++;
        num[NBINS + 1] += sg * d, den[NBINS + 1] += sg * sg * var, cnt[NBINS + 1]++;
        absref += fabs(ref[i]);
        mse += m2[i] / T + d * d, energy += ref[i] * ref[i];
    }
    if (R == 0) printf("%-20s P=%d E||y - ref||^2 / ||ref||^2 = %.4f (one call)\n", spec, P, mse / energy);
    const char *what[NBINS + 2] = {"|ref| 1st/6", "2nd/6", "3rd/6", "4th/6", "5th/6", "6th/6", "total", "shrinkage"};
    for (int b = 0; b < NBINS + 2; ++b) {
        if (!cnt[b]) continue;
        const double z = den[b] > 0 ? num[b] / sqrt(den[b]) : (num[b] == 0 ? 0 : INFINITY);
        if (R == 0)
            printf("%-20s P=%d %-10s n=%-6zu Z=%+8.2f  bias/sum|ref| %+.2e\n", spec, P, what[b], cnt[b], z,
                   num[b] / absref);
        MT_CHECK(fabs(z) < 4, "%s: %s: aggregated bias %.3e is %.1f standard errors", spec, what[b], num[b], z);
    }
    free(x); free(y); free(g); free(ref); free(mean); free(m2);
    MPI_Comm_free(&c);
}

/* Error feedback: the mean of T calls on the same data converges to the exact (unclipped)
 * sum -- the residual carries what clipping, ternarisation or 8-bit rounding dropped -- while
 * without feedback it keeps the codec's bias (terngrad: clipping; q8: deterministic rounding).
 * Returns the relative l2 error of the mean of T calls. */
static double ef_mean_error(const char *codec, unsigned bucket, int bits, int feedback, size_t n, int T) {
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    compmpi_comm_set(c, "codec", codec);
    compmpi_comm_set(c, "policy", "static");
    compmpi_comm_set(c, "min_bytes", "0");
    if (bits) {
        char b[16];
        snprintf(b, sizeof b, "%d", bits);
        MT_CHECK(compmpi_comm_set(c, "bits", b) == MPI_SUCCESS, "bits");
    }
    if (bucket) {
        char b[32];
        snprintf(b, sizeof b, "%u", bucket);
        compmpi_comm_set(c, "terngrad_bucket", b);
    }
    MT_CHECK(compmpi_comm_set(c, "error_feedback", feedback ? "1" : "0") == MPI_SUCCESS, "error_feedback");
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    double *mean = calloc(n, sizeof(double)), *exact = calloc(n, sizeof(double));
    /* gradient-like data without the outliers (their clipped mass would take many calls) */
    for (size_t i = 0; i < n; ++i) x[i] = mt_value(78, R, i);
    for (int r = 0; r < P; ++r)
        for (size_t i = 0; i < n; ++i) exact[i] += mt_value(78, r, i);
    uint64_t h = 1469598103934665603ull;
    for (int t = 0; t < T; ++t) {
        MPI_Allreduce(x, y, (int)n, MPI_FLOAT, MPI_SUM, c);
        h = (h ^ mt_hash(y, n * sizeof(float))) * 1099511628211ull;
        for (size_t i = 0; i < n; ++i) mean[i] += y[i] / (double)T;
    }
    MT_CHECK(mt_identical(&h, sizeof h, c), "%s feedback %d: results differ between ranks", codec, feedback);
    double num = 0, den = 0;
    for (size_t i = 0; i < n; ++i) num += (mean[i] - exact[i]) * (mean[i] - exact[i]), den += exact[i] * exact[i];
    free(x); free(y); free(mean); free(exact);
    MPI_Comm_free(&c);
    return sqrt(num / den);
}

static void run_ef(const char *spec, size_t n, int T) {
    char codec[32] = {0};
    unsigned bucket = 0;
    int bits = 0;
    if (sscanf(spec, "terngrad_bucket=%u", &bucket) == 1) strcpy(codec, "terngrad");
    else if (sscanf(spec, "qsgd_bits=%d", &bits) == 1) strcpy(codec, "qsgd");
    else snprintf(codec, sizeof codec, "%s", spec);
    const double plain = ef_mean_error(codec, bucket, bits, 0, n, T), ef = ef_mean_error(codec, bucket, bits, 1, n, T);
    if (R == 0)
        printf("ef:%-17s P=%d relative error of the mean of %d calls vs the exact sum: without feedback %.4f, "
               "with %.4f\n", spec, P, T, plain, ef);
    if (strcmp(codec, "q8") == 0) /* deterministic rounding: feedback removes its bias */
        MT_CHECK(ef < plain / 4, "%s: feedback did not remove the bias: %.4f vs %.4f", spec, ef, plain);
    else if (strcmp(codec, "qsgd") == 0 && bits < 6) /* variance bound >= 1: feedback has no effect (it diverged: 25x) */
        MT_CHECK(ef < 1.5 * plain, "%s: feedback should have no effect, mean error %.4f vs %.4f", spec, ef, plain);
    else /* unbiased noise dominates both means; feedback must not make it worse */
        MT_CHECK(ef < plain, "%s: feedback made the mean worse: %.4f vs %.4f", spec, ef, plain);
}

int main(int argc, char **argv) {
    mt_init(&argc, &argv, &R, &P);
    const size_t n = 30000;
    const int T = 32;
    for (int a = 1; a < argc; ++a) {
        if (strncmp(argv[a], "ef:", 3) == 0) run_ef(argv[a] + 3, n, T);
        else run(argv[a], n, T);
    }
    return mt_finish();
}

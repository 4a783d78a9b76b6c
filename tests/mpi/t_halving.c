// SPDX-License-Identifier: BSD-3-Clause
/* The compressed recursive halving-doubling allreduce (allreduce_algorithm=halving_doubling,
 * coll/allreduce/allreduce_halving.cc) at any rank count (power of two, or folded):
 *
 *   bitpack   widths 16, 24, 32 (argument quick: 16 and 32, four sizes), both roundings: identical bits on all ranks, input never written,
 *             nothing written past the buffer, and every element within the bound of L
 *             roundings of partial sums: |y - sum| <= ((1 + eps)^L - 1) sum|x| + fp32 sums,
 *             eps = 2^-(bits-9) truncated (half rounded, docs/codecs/bitpack.md), L = log2 Q + 1
 *             (+1 with a fold): each rounding layer (fold, the k steps, the final blob) acts on
 *             disjoint partial sums of at most sum|x|; 32 bits: only the fp32 additions;
 *   terngrad  one bucket: no re-quantisation -- the result is exactly k s for integers
 *             |k| <= P on one grid s (a sum of P ternaries sent as levels at every step);
 *   q8        one quantisation per contribution (Dettmers; sums travel in fp32): the relative
 *             l2 error of the allreduce is no more than 1.2x that of ONE q8 quantisation (the
 *             bcast of a buffer); one more 8-bit re-quantisation of the sums would give ~1.4x;
 *   NaN/Inf   a NaN on one rank (an extra rank of the fold, and the last rank), and partial
 *             sums that overflow fp32 midway: the exact PMPI_Allreduce result, bit for bit;
 *   auto      (from 4 ranks) one node (node_size=0): the two-phase result bit for bit;
 *             one rank per node (node_size=1): the algorithm the alpha-beta rule names
 *             (rule_halving: 16 KiB buffers are latency-bound, halving-doubling from 4 ranks;
 *             1 MiB: two-phase at 4 and 5 ranks, halving-doubling at 8); an unknown
 *             algorithm name is refused. Argument noauto: skip these (8 ranks, to save time).
 * Error figures are printed (docs/design.md quotes them). */
#include "compmpi.h"
#include "mpitest.h"

static int R, P, Q, K, REM;

static void set(MPI_Comm c, const char *k, const char *v) {
    MT_CHECK(compmpi_comm_set(c, k, v) == MPI_SUCCESS, "compmpi_comm_set(%s, %s)", k, v);
}

static MPI_Comm comm_with(const char *codec, const char *alg) {
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    set(c, "codec", codec);
    if (strcmp(codec, "none") != 0) {
        set(c, "policy", "static");
        set(c, "min_bytes", "0");
        set(c, "cost_model", "off");
        set(c, "allreduce_algorithm", alg);
        set(c, "hierarchy", "off"); /* no node split: fewer collectives in this test */
    }
    return c;
}

static double rel_l2(const float *y, const double *exact, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; ++i) {
        const double d = y[i] - exact[i];
        num += d * d;
        den += exact[i] * exact[i];
    }
    return sqrt(num / (den > 0 ? den : 1));
}

static void check_bitpack(MPI_Comm c, size_t n, int bits, int nearest, int inplace, uint64_t seed) {
    float *x = malloc((n + 1) * sizeof(float)), *x0 = malloc((n + 1) * sizeof(float));
    float *y = malloc((n + 1) * sizeof(float));
    double *sum = calloc(n + 1, sizeof(double)), *absum = calloc(n + 1, sizeof(double));
    for (int r = 0; r < P; ++r)
        for (size_t i = 0; i < n; ++i) {
            const double v = mt_value(seed, r, i);
            sum[i] += v;
            absum[i] += fabs(v);
        }
    mt_fill(x, n, seed, R);
    memcpy(x0, x, n * sizeof(float));
    y[n] = 42.0f;
    if (inplace) {
        memcpy(y, x, n * sizeof(float));
        MT_CHECK(MPI_Allreduce(MPI_IN_PLACE, y, (int)n, MPI_FLOAT, MPI_SUM, c) == MPI_SUCCESS, "rc");
    } else {
        MT_CHECK(MPI_Allreduce(x, y, (int)n, MPI_FLOAT, MPI_SUM, c) == MPI_SUCCESS, "rc");
        MT_CHECK(memcmp(x, x0, n * sizeof(float)) == 0, "n=%zu bits=%d: input written", n, bits);
    }
    MT_CHECK(y[n] == 42.0f, "wrote past the buffer");
    MT_CHECK(mt_identical(y, n * sizeof(float), c), "n=%zu bits=%d nearest=%d: ranks differ", n, bits, nearest);
    const double eps = bits == 32 ? 0 : ldexp(1.0, -(bits - 9)) / (nearest ? 2 : 1);
    const int L = K + 1 + (REM > 0);
    const double layers = pow(1 + eps, L) - 1;
    size_t bad = 0;
    double worst = 0;
    for (size_t i = 0; i < n; ++i) {
        const double err = fabs((double)y[i] - sum[i]);
        const double bound = layers * absum[i] + (P + L) * ldexp(absum[i], -23) * (1 + layers) + 1e-37;
        if (!(err <= bound)) ++bad;
        if (absum[i] > 0 && err / absum[i] > worst) worst = err / absum[i];
    }
    MT_CHECK(bad == 0, "n=%zu bits=%d nearest=%d: %zu values outside the bound of %d roundings", n, bits, nearest, bad,
             L);
    if (R == 0 && n == 65537)
        printf("bitpack %2d bits %-7s P=%d: max |y - sum| / sum|x| = %.3e (bound of %d roundings %.3e), rel_l2 %.3e\n",
               bits, nearest ? "nearest" : "trunc", P, worst, L, layers, rel_l2(y, sum, n));
    free(x); free(x0); free(y); free(sum); free(absum);
}

/* terngrad (one bucket, shared scaler): the sum of the P ternaries arrives exactly */
static void check_terngrad_grid(size_t n) {
    MPI_Comm c = comm_with("terngrad", "halving_doubling");
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    mt_fill(x, n, 5, R);
    MT_CHECK(MPI_Allreduce(x, y, (int)n, MPI_FLOAT, MPI_SUM, c) == MPI_SUCCESS, "rc");
    MT_CHECK(mt_identical(y, n * sizeof(float), c), "terngrad: ranks differ");
    float s = INFINITY;
    for (size_t i = 0; i < n; ++i)
        if (y[i] != 0 && fabsf(y[i]) < s) s = fabsf(y[i]);
    size_t off = 0, nonzero = 0;
    for (size_t i = 0; i < n; ++i) {
        const double k = rint((double)y[i] / s);
        if (!(fabs(k) <= P && y[i] == (float)(k * s))) ++off;
        nonzero += y[i] != 0;
    }
    MT_CHECK(nonzero > n / 4, "terngrad: only %zu nonzero values", nonzero);
    MT_CHECK(off == 0, "terngrad P=%d: %zu values are not k s, |k| <= P (a re-quantised sum)", P, off);
    free(x); free(y);
    MPI_Comm_free(&c);
}

/* q8: each contribution quantised once, the sums exact */
static void check_q8_once(size_t n) {
    MPI_Comm c = comm_with("q8", "halving_doubling");
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    double *sum = calloc(n, sizeof(double)), *one = malloc(n * sizeof(double));
    for (int r = 0; r < P; ++r)
        for (size_t i = 0; i < n; ++i) sum[i] += mt_value(9, r, i);
    mt_fill(x, n, 9, R);
    MT_CHECK(MPI_Allreduce(x, y, (int)n, MPI_FLOAT, MPI_SUM, c) == MPI_SUCCESS, "rc");
    MT_CHECK(mt_identical(y, n * sizeof(float), c), "q8: ranks differ");
    const double e_ar = rel_l2(y, sum, n);
    /* one quantisation: rank 0's buffer broadcast (the root encodes it once) */
    for (size_t i = 0; i < n; ++i) one[i] = mt_value(9, 0, i);
    mt_fill(x, n, 9, 0);
    MT_CHECK(MPI_Bcast(x, (int)n, MPI_FLOAT, 0, c) == MPI_SUCCESS, "rc");
    double e_one = rel_l2(x, one, n);
    MPI_Bcast(&e_one, 1, MPI_DOUBLE, 1 % P, MPI_COMM_WORLD); /* a receiver's (decoded) copy */
    if (R == 0) printf("q8 P=%d: allreduce rel_l2 %.4e, one quantisation %.4e (ratio %.3f)\n", P, e_ar, e_one, e_ar / e_one);
    MT_CHECK(e_ar <= 1.2 * e_one, "q8 P=%d: allreduce error %.4e > 1.2 x one quantisation's %.4e", P, e_ar, e_one);
    free(x); free(y); free(sum); free(one);
    MPI_Comm_free(&c);
}

/* NaN on rank `bad` (or huge values everywhere: partial sums overflow) -> the exact result */
static void check_nonfinite(MPI_Comm e, const char *codec, size_t n, int bad, int overflow) {
    MPI_Comm c = comm_with(codec, "halving_doubling");
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float)), *z = malloc(n * sizeof(float));
    mt_fill(x, n, 3, R);
    if (overflow) {
        for (size_t i = 0; i < n; i += 97) x[i] = 3e38f;
    } else if (R == bad) {
        x[n / 3] = NAN;
    }
    MT_CHECK(MPI_Allreduce(x, y, (int)n, MPI_FLOAT, MPI_SUM, c) == MPI_SUCCESS, "rc");
    MT_CHECK(MPI_Allreduce(x, z, (int)n, MPI_FLOAT, MPI_SUM, e) == MPI_SUCCESS, "rc");
    MT_CHECK(memcmp(y, z, n * sizeof(float)) == 0, "%s P=%d %s: not the exact result", codec, P,
             overflow ? "overflow" : "NaN");
    free(x); free(y); free(z);
    MPI_Comm_free(&c);
}

/* The rule of docs/design.md for bitpack 16 bits on one rank per node, from the blob format
 * (with link_alpha_beta=25000, the alpha*beta of 2 us at 100 Gbit/s):
 * a blob of m floats is 32 + 2m bytes, strides rounded up to 64, chunks of ceil(n/p) rounded
 * up to 16 floats; time ~ messages * 25000 + bytes (2 us at 100 Gbit/s), halving-doubling
 * when 10% below two-phase, from 4 ranks. */
static size_t stride16(size_t m) { return (32 + 2 * m + 63) / 64 * 64; }
static size_t chunk16(size_t n, int p) { return ((n + p - 1) / p + 15) / 16 * 16; }
static int rule_halving(size_t n) {
    if (P < 4) return 0;
    const double a = 2e-6 * 100e9 / 8;
    const double two = 2.0 * (P - 1) * a + 2.0 * (P - 1) * stride16(chunk16(n, P));
    const size_t base = chunk16(n, Q), fin = stride16(base);
    double hd = (2.0 * K + (REM ? 2 : 0)) * a + (double)fin * (Q - 1);
    for (int s = 0; s < K; ++s) hd += stride16(base * (size_t)(Q >> (s + 1)));
    if (REM) hd += stride16(n) + (double)fin * Q;
    return hd < 0.9 * two;
}

/* auto: the same bits as the algorithm the rule names; cs = auto, twophase, halving_doubling */
static void auto_comms(MPI_Comm cs[3], const char *node_size) {
    const char *alg[3] = {"auto", "twophase", "halving_doubling"};
    for (int i = 0; i < 3; ++i) {
        cs[i] = comm_with("bitpack", alg[i]);
        set(cs[i], "bits", "16");
        set(cs[i], "hierarchy", "auto"); /* the node count auto reads */
        set(cs[i], "node_size", node_size);
        if (i == 0) set(cs[i], "link_alpha_beta", "25000"); /* the rule below (measured otherwise: t_auto_choice) */
    }
}

static void check_auto(MPI_Comm cs[3], size_t n, const char *node_size, int want_halving) {
    float *x = malloc(n * sizeof(float)), *y[3];
    mt_fill(x, n, 11, R);
    for (int i = 0; i < 3; ++i) {
        y[i] = malloc(n * sizeof(float));
        MT_CHECK(MPI_Allreduce(x, y[i], (int)n, MPI_FLOAT, MPI_SUM, cs[i]) == MPI_SUCCESS, "rc");
    }
    const int same_t = memcmp(y[0], y[1], n * sizeof(float)) == 0, same_h = memcmp(y[0], y[2], n * sizeof(float)) == 0;
    const int differ = memcmp(y[1], y[2], n * sizeof(float)) != 0;
    if (differ) /* (they may coincide by chance at 2 ranks: the same roundings) */
        MT_CHECK(want_halving ? same_h : same_t, "auto, n=%zu node_size=%s P=%d: expected %s", n, node_size, P,
                 want_halving ? "halving_doubling" : "twophase");
    else
        MT_CHECK(same_t && same_h, "auto: neither algorithm's result");
    for (int i = 0; i < 3; ++i) free(y[i]);
    free(x);
}

int main(int argc, char **argv) {
    mt_init(&argc, &argv, &R, &P);
    for (Q = 1; Q * 2 <= P; Q *= 2) {}
    for (K = 0; (1 << K) < Q; ++K) {}
    REM = P - Q;
    const int quick = argc > 1 && strcmp(argv[1], "quick") == 0;
    int noauto = 0;
    for (int i = 1; i < argc; ++i) noauto |= strcmp(argv[i], "noauto") == 0;
    const double t0 = MPI_Wtime();

    /* quick: 16 and 32 bits, four sizes */
    const size_t all_sizes[] = {1, 17, (size_t)16 * P - 1, 65537, 15, 1000};
    const int nsizes = quick ? 4 : 6;
    const int widths[] = {16, 32, 24};
    for (int w = 0; w < (quick ? 2 : 3); ++w)
        for (int nearest = 0; nearest <= 1; ++nearest)
        {
            MPI_Comm c = comm_with("bitpack", "halving_doubling");
            char b[16];
            snprintf(b, sizeof b, "%d", widths[w]);
            set(c, "bits", b);
            set(c, "rounding", nearest ? "nearest" : "trunc");
            for (int s = 0; s < nsizes; ++s) check_bitpack(c, all_sizes[s], widths[w], nearest, s % 2, 100 + s);
            MPI_Comm_free(&c);
        }
    if (R == 0) printf("[%.1f s] bitpack\n", MPI_Wtime() - t0);
    check_terngrad_grid(40000);
    check_q8_once(65536);
    if (R == 0) printf("[%.1f s] terngrad, q8\n", MPI_Wtime() - t0);
    {
        MPI_Comm e = comm_with("none", "");
        check_nonfinite(e, "bitpack", 5000, 0, 0);
        check_nonfinite(e, "terngrad", 5000, P - 1, 0);
        check_nonfinite(e, "q8", 5000, P - 1, 0);
        check_nonfinite(e, "bitpack", 5000, -1, 1);
        MPI_Comm_free(&e);
    }
    {
        MPI_Comm c;
        MPI_Comm_dup(MPI_COMM_WORLD, &c);
        MT_CHECK(compmpi_comm_set(c, "allreduce_algorithm", "ring") != MPI_SUCCESS, "allreduce_algorithm=ring accepted");
        MPI_Comm_free(&c);
    }
    if (R == 0) printf("[%.1f s] nonfinite\n", MPI_Wtime() - t0);
    if (P >= 4 && !noauto) { /* below 4 ranks auto is two-phase whatever the nodes */
        MPI_Comm one[3], per[3];
        auto_comms(one, "0");
        auto_comms(per, "1");
        check_auto(one, 4096, "0", 0);
        check_auto(per, 4096, "1", rule_halving(4096));
        check_auto(per, (size_t)1 << 18, "1", rule_halving((size_t)1 << 18));
        if (R == 0) printf("auto, one rank per node, P=%d: 16 KiB %s, 1 MiB %s\n", P,
                           rule_halving(4096) ? "halving_doubling" : "twophase",
                           rule_halving((size_t)1 << 18) ? "halving_doubling" : "twophase");
        for (int i = 0; i < 3; ++i) {
            MPI_Comm_free(&one[i]);
            MPI_Comm_free(&per[i]);
        }
        if (R == 0) printf("[%.1f s] auto\n", MPI_Wtime() - t0);
    }
    return mt_finish();
}

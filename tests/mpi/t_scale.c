// SPDX-License-Identifier: BSD-3-Clause
/* Correctness at scale (issue 28, part 3): every dense allreduce algorithm (two-phase, also
 * pipelined; recursive halving-doubling, folded where P is not a power of two; hierarchical
 * through node_size; auto), the sparse allreduce (allgather and SparCML paths), and every
 * codec family through allreduce, bcast, allgather and reduce_scatter_block, meant for 13, 16
 * and 32 oversubscribed ranks with small buffers (the default 6007 floats per rank).
 *
 *   same bits   every allreduce, allgather and bcast result is bit-identical on all ranks
 *               (64-bit hashes compared once at the end, one allreduce for all of them); a
 *               bcast root keeps its input;
 *   bound       deterministic codecs with a per-element bound (bitpack truncated 2^-(b-9),
 *               fp16 2^-11 plus its subnormal floor, bf16 2^-8): every element of the result
 *               within ((1+eps)^L - 1) sum|x| + fp32 summation, L = the roundings the
 *               algorithm applies (two-phase 2, halving-doubling log2 Q + 1, +1 with a fold;
 *               bcast, allgather, reduce-scatter 1); q8, rangefloat, topk, fft_topk, sparse:
 *               relative l2 error within the bound t_codecs holds them to;
 *   plausible   stochastic codecs (terngrad, qsgd; unbiasedness is t_unbiased's): every value
 *               finite, relative l2 error below a loose bound;
 *   exact       codec=none and calls that are not eligible (int, double, MPI_MAX, below
 *               min_bytes): the same bytes as the PMPI_* call on the same data.
 * Each configuration is one communicator made by MPI_Comm_dup_with_info with compmpi_*
 * hints (one collective call per configuration). Per-rank timing of the phases is printed by
 * rank 0 (information only). Arguments: n=FLOATS (default 6007), quick (fewer cases: the
 * allreduce algorithms with bitpack, q8, terngrad, topk; bcast/allgather/reduce-scatter with
 * bitpack and terngrad; the exact paths). */
#define _GNU_SOURCE /* strtok_r */
#include "compmpi.h"
#include "mpitest.h"

static int R, P;
static size_t N = 6007;
static double T0;

/* ---- data and references ---- */

enum { DENSE, SPARSE, NDATA };
static float *X[NDATA];         /* this rank's input */
static double *S[NDATA];        /* exact sum over ranks (double) */
static double *A[NDATA];        /* sum over ranks of |x| */
static double AMAX[NDATA];      /* max_i A[i] */

/* sparse data: about 3% nonzeros per rank, at positions that differ by rank */
static float value_of(int data, int r, size_t i) {
    if (data == SPARSE && mt_uniform(77, r, i) >= 0.03) return 0.0f;
    return mt_value(data == DENSE ? 31 : 37, r, i);
}

static void make_data(void) {
    for (int d = 0; d < NDATA; ++d) {
        X[d] = malloc(N * sizeof(float));
        S[d] = calloc(N, sizeof(double));
        A[d] = calloc(N, sizeof(double));
        for (int r = 0; r < P; ++r)
            for (size_t i = 0; i < N; ++i) {
                const float v = value_of(d, r, i);
                if (r == R) X[d][i] = v;
                S[d][i] += v;
                A[d][i] += fabs(v);
            }
        AMAX[d] = 0;
        for (size_t i = 0; i < N; ++i) AMAX[d] = fmax(AMAX[d], A[d][i]);
    }
}

/* ---- deferred same-bits checks: one allreduce at the end for all of them ---- */

#define MAX_HASHES 512
static uint64_t HASH[MAX_HASHES];
static char HNAME[MAX_HASHES][80];
static int NH;

static void same_bits(const char *name, const void *p, size_t bytes) {
    if (NH == MAX_HASHES) {
        MT_CHECK(0, "too many checks");
        return;
    }
    HASH[NH] = mt_hash(p, bytes);
    snprintf(HNAME[NH++], sizeof HNAME[0], "%s", name);
}

static void check_same_bits(void) {
    uint64_t *v = malloc(2 * sizeof(uint64_t) * (size_t)NH), *m = malloc(2 * sizeof(uint64_t) * (size_t)NH);
    for (int k = 0; k < NH; ++k) v[2 * k] = HASH[k], v[2 * k + 1] = ~HASH[k];
    MPI_Allreduce(v, m, 2 * NH, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    for (int k = 0; k < NH; ++k)
        MT_CHECK(m[2 * k] == HASH[k] && m[2 * k + 1] == ~HASH[k], "%s: ranks hold different bits", HNAME[k]);
    if (R == 0) printf("same bits on all %d ranks: %d results compared\n", P, NH);
    free(v);
    free(m);
}

/* ---- relative l2 errors: sums of squares per check, summed over ranks at the end (a
 * reduce-scatter's blocks differ by rank: its error is that of the whole reduced vector) ---- */

#define MAX_ERRS 256
static double ERR2[2 * MAX_ERRS]; /* num, den */
static double EBOUND[MAX_ERRS];   /* bound on the relative l2 error, 0: none */
static char ENAME[MAX_ERRS][80];
static int NE;

static void note_err(const char *name, double num, double den, double bound) {
    if (NE == MAX_ERRS) {
        MT_CHECK(0, "too many checks");
        return;
    }
    ERR2[2 * NE] = num, ERR2[2 * NE + 1] = den;
    EBOUND[NE] = bound;
    snprintf(ENAME[NE++], sizeof ENAME[0], "%s", name);
}

static void check_errors(void) {
    PMPI_Allreduce(MPI_IN_PLACE, ERR2, 2 * NE, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); /* bookkeeping: exact */
    for (int k = 0; k < NE; ++k) {
        const double rel = sqrt(ERR2[2 * k] / (ERR2[2 * k + 1] > 0 ? ERR2[2 * k + 1] : 1));
        if (R == 0) printf("%-64s rel_l2 %.3e%s\n", ENAME[k], rel, EBOUND[k] > 0 ? "" : " (per-element bound)");
        if (EBOUND[k] > 0) MT_CHECK(rel <= EBOUND[k], "%s: relative l2 error %.3e above %.3g", ENAME[k], rel, EBOUND[k]);
    }
}

/* ---- codecs ---- */

enum kind {
    K_ELEM, /* per-element bound: eps relative per rounding, delta * max absolute per rounding */
    K_L2,   /* relative l2 bound (deterministic codecs without a per-element one) */
    K_STOCH /* stochastic: finite, relative l2 below a loose bound */
};
struct codec {
    const char *name;
    const char *hints; /* extra compmpi_ hints, "key=value,..." */
    enum kind kind;
    double eps, delta, l2;
    int sparse;        /* a sparse codec: its own allreduce path, no dense algorithm */
    int quick;         /* in the quick set */
};
static const struct codec CODECS[] = {
    {"bitpack", "bits=16", K_ELEM, 0x1p-7, 0, 0, 0, 1},
    {"fp16", "", K_ELEM, 0x1p-11, 0x1p-38, 0, 0, 0},
    {"bf16", "", K_ELEM, 0x1p-8, 0, 0, 0, 0},
    {"rangefloat", "", K_L2, 0, 0, 0.027, 0, 0},
    {"q8", "", K_L2, 0, 0, 0.035, 0, 1},
    {"terngrad", "", K_STOCH, 0, 0, 2.5, 0, 1},
    {"qsgd", "", K_STOCH, 0, 0, 6.0, 0, 0},
    /* topk drops the smallest theta = 85% of the values, at most 85% of the energy: sqrt(0.85)
     * per contribution (a reduce-scatter's blocks of gaussian values: ~0.65, measured) */
    {"topk", "", K_L2, 0, 0, 0.922, 1, 1},
    {"sparse", "", K_L2, 0, 0, 1e-6, 1, 0},
    {"fft_topk", "", K_L2, 0, 0, 1.1, 1, 0},
};
#define NCODECS (int)(sizeof CODECS / sizeof CODECS[0])

static void hint(MPI_Info info, const char *k, const char *v) {
    char key[64];
    snprintf(key, sizeof key, "compmpi_%s", k);
    MPI_Info_set(info, key, v);
}

/* A communicator with the codec (static policy, no cost model, every size compressed) and
 * extra settings "key=value,..." (may be NULL). */
static MPI_Comm comm_with(const char *codec, const char *codec_hints, const char *extra) {
    MPI_Info info;
    MPI_Info_create(&info);
    hint(info, "codec", codec);
    if (strcmp(codec, "none") != 0) {
        hint(info, "policy", "static");
        hint(info, "cost_model", "off");
        hint(info, "min_bytes", "0");
        hint(info, "hierarchy", "off");
    }
    const char *lists[2] = {codec_hints, extra};
    for (int l = 0; l < 2; ++l) {
        if (!lists[l] || !*lists[l]) continue;
        char buf[256], *save = NULL;
        snprintf(buf, sizeof buf, "%s", lists[l]);
        for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            char *eq = strchr(t, '=');
            if (!eq) continue;
            *eq = 0;
            hint(info, t, eq + 1);
        }
    }
    MPI_Comm c;
    MT_CHECK(MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &c) == MPI_SUCCESS, "dup_with_info %s", codec);
    MPI_Info_free(&info);
    return c;
}

/* y[0..n) against the exact sums s (abs sums a): the codec's bound with L roundings, or its
 * l2 bound / plausibility. Local to this rank (every rank checks its own result); a result
 * checked in parts accumulates into one struct check before check_done. */
struct check {
    double num, den;
    size_t bad, nonfinite;
};

static void check_part(struct check *k, const struct codec *cd, const float *y, const double *s, const double *a,
                       double amax, size_t n, int L) {
    const double layers = pow(1 + cd->eps, L) - 1;
    for (size_t i = 0; i < n; ++i) {
        if (!isfinite(y[i])) {
            ++k->nonfinite;
            continue;
        }
        const double d = (double)y[i] - s[i];
        k->num += d * d;
        k->den += s[i] * s[i];
        if (cd->kind == K_ELEM) {
            const double bound = layers * a[i] + (P + L) * ldexp(a[i], -23) * (1 + layers) + L * cd->delta * amax + 1e-37;
            if (!(fabs(d) <= bound)) ++k->bad;
        }
    }
}

static void check_done(const char *name, const struct codec *cd, const struct check *k, int L) {
    note_err(name, k->num, k->den, cd->kind == K_ELEM ? 0 : cd->l2);
    MT_CHECK(k->nonfinite == 0, "%s: %zu values not finite", name, k->nonfinite);
    MT_CHECK(k->bad == 0, "%s: %zu values outside the bound of %d roundings (eps %.3g)", name, k->bad, L, cd->eps);
}

static void check_values(const char *name, const struct codec *cd, const float *y, const double *s, const double *a,
                         double amax, size_t n, int L) {
    struct check k = {0, 0, 0, 0};
    check_part(&k, cd, y, s, a, amax, n, L);
    check_done(name, cd, &k, L);
}

/* s, a = rank r's input (dense data) and its absolute values; returns max |x| */
static double rank_input(int r, double *s, double *a) {
    double amax = 0;
    for (size_t i = 0; i < N; ++i) {
        s[i] = value_of(DENSE, r, i);
        a[i] = fabs(s[i]);
        amax = fmax(amax, a[i]);
    }
    return amax;
}

static int log2_floor(int p) {
    int k = 0;
    while ((2 << k) <= p) ++k;
    return k;
}

/* Roundings of a deterministic codec's allreduce by algorithm over p ranks. */
static int roundings(const char *alg, int p) {
    if (!strcmp(alg, "halving_doubling")) return log2_floor(p) + 1 + ((p & (p - 1)) != 0);
    if (!strcmp(alg, "twophase")) return 2;
    return log2_floor(p) + 2; /* auto: either */
}

/* ---- the collectives ---- */

static void allreduce_case(const struct codec *cd, int data, const char *alg, const char *extra, int leaders, int inplace) {
    char name[80];
    snprintf(name, sizeof name, "allreduce %s %s%s%s%s%s", cd->name, alg, data == SPARSE ? " sparse-data" : "",
             extra ? " " : "", extra ? extra : "", inplace ? " in-place" : "");
    char ex[160] = "";
    if (!cd->sparse) snprintf(ex, sizeof ex, "allreduce_algorithm=%s", alg); /* (no effect on sparse codecs) */
    if (extra) snprintf(ex + strlen(ex), sizeof ex - strlen(ex), "%s%s", *ex ? "," : "", extra);
    MPI_Comm c = comm_with(cd->name, cd->hints, ex);
    float *y = malloc((N + 1) * sizeof(float));
    y[N] = 42.0f;
    int rc;
    if (inplace) {
        memcpy(y, X[data], N * sizeof(float));
        rc = MPI_Allreduce(MPI_IN_PLACE, y, (int)N, MPI_FLOAT, MPI_SUM, c);
    } else {
        rc = MPI_Allreduce(X[data], y, (int)N, MPI_FLOAT, MPI_SUM, c);
    }
    MT_CHECK(rc == MPI_SUCCESS, "%s: rc %d", name, rc);
    MT_CHECK(y[N] == 42.0f, "%s: wrote past the buffer", name);
    same_bits(name, y, N * sizeof(float));
    check_values(name, cd, y, S[data], A[data], AMAX[data], N, roundings(alg, leaders));
    free(y);
    MPI_Comm_free(&c);
}

/* bcast (root P-1), allgather, reduce_scatter_block through one communicator */
static void other_colls(const struct codec *cd) {
    char name[80];
    MPI_Comm c = comm_with(cd->name, cd->hints, NULL);
    const int root = P - 1;
    float *y = malloc(N * (size_t)P * sizeof(float));
    double *s = malloc(N * sizeof(double)), *a = malloc(N * sizeof(double));
    /* bcast: the root's data; the root keeps its input bit for bit */
    memcpy(y, X[DENSE], N * sizeof(float));
    MT_CHECK(MPI_Bcast(y, (int)N, MPI_FLOAT, root, c) == MPI_SUCCESS, "bcast rc");
    snprintf(name, sizeof name, "bcast %s", cd->name);
    if (R == root) {
        MT_CHECK(memcmp(y, X[DENSE], N * sizeof(float)) == 0, "%s: the root's buffer was written", name);
        note_err(name, 0, 0, 0); /* (the error list stays aligned across ranks) */
    } else {
        same_bits(name, y, N * sizeof(float)); /* receivers (the root adds its own hash below) */
        const double amax = rank_input(root, s, a);
        check_values(name, cd, y, s, a, amax, N, 1);
    }
    if (R == root) { /* keep the hash list aligned: the root reports rank 0's receiver bits */
        float *z = malloc(N * sizeof(float));
        MPI_Recv(z, (int)N * 4, MPI_BYTE, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        same_bits(name, z, N * sizeof(float));
        free(z);
    } else if (R == 0) {
        MPI_Send(y, (int)N * 4, MPI_BYTE, root, 7, MPI_COMM_WORLD);
    }
    /* allgather: every rank holds every decoded block, its own too */
    MT_CHECK(MPI_Allgather(X[DENSE], (int)N, MPI_FLOAT, y, (int)N, MPI_FLOAT, c) == MPI_SUCCESS, "allgather rc");
    snprintf(name, sizeof name, "allgather %s", cd->name);
    same_bits(name, y, N * (size_t)P * sizeof(float));
    struct check k = {0, 0, 0, 0};
    for (int r = 0; r < P; ++r) {
        const double amax = rank_input(r, s, a);
        check_part(&k, cd, y + (size_t)r * N, s, a, amax, N, 1);
    }
    check_done(name, cd, &k, 1);
    /* reduce_scatter_block: P blocks of m floats out of the first P m of the input */
    const size_t m = N / (size_t)P;
    MT_CHECK(MPI_Reduce_scatter_block(X[DENSE], y, (int)m, MPI_FLOAT, MPI_SUM, c) == MPI_SUCCESS, "rsb rc");
    snprintf(name, sizeof name, "reduce_scatter_block %s", cd->name);
    check_values(name, cd, y, S[DENSE] + (size_t)R * m, A[DENSE] + (size_t)R * m, AMAX[DENSE], m, 1);
    free(y);
    free(s);
    free(a);
    MPI_Comm_free(&c);
}

/* ---- exact paths: the same bytes as MPI's own call ---- */

static void exact_paths(void) {
    MPI_Comm none = comm_with("none", "", NULL);
    MPI_Comm dflt;
    MPI_Comm_dup(MPI_COMM_WORLD, &dflt); /* the environment's settings (awp bitpack) */
    const size_t bytes = N * sizeof(float);
    float *y = malloc(bytes * (size_t)P), *z = malloc(bytes * (size_t)P);
    /* codec=none: every collective is MPI's */
    MPI_Allreduce(X[DENSE], y, (int)N, MPI_FLOAT, MPI_SUM, none);
    PMPI_Allreduce(X[DENSE], z, (int)N, MPI_FLOAT, MPI_SUM, none);
    MT_CHECK(memcmp(y, z, bytes) == 0, "codec=none allreduce differs from PMPI_Allreduce");
    MPI_Allgather(X[DENSE], (int)N, MPI_FLOAT, y, (int)N, MPI_FLOAT, none);
    PMPI_Allgather(X[DENSE], (int)N, MPI_FLOAT, z, (int)N, MPI_FLOAT, none);
    MT_CHECK(memcmp(y, z, bytes * (size_t)P) == 0, "codec=none allgather differs");
    memcpy(y, X[DENSE], bytes);
    memcpy(z, X[DENSE], bytes);
    MPI_Bcast(y, (int)N, MPI_FLOAT, 1 % P, none);
    PMPI_Bcast(z, (int)N, MPI_FLOAT, 1 % P, none);
    MT_CHECK(memcmp(y, z, bytes) == 0, "codec=none bcast differs");
    const int m = (int)(N / (size_t)P);
    MPI_Reduce_scatter_block(X[DENSE], y, m, MPI_FLOAT, MPI_SUM, none);
    PMPI_Reduce_scatter_block(X[DENSE], z, m, MPI_FLOAT, MPI_SUM, none);
    MT_CHECK(memcmp(y, z, (size_t)m * sizeof(float)) == 0, "codec=none reduce_scatter_block differs");
    /* not eligible under the default (compressing) settings: other types and ops, small */
    MPI_Allreduce(X[DENSE], y, (int)N, MPI_FLOAT, MPI_MAX, dflt);
    PMPI_Allreduce(X[DENSE], z, (int)N, MPI_FLOAT, MPI_MAX, dflt);
    MT_CHECK(memcmp(y, z, bytes) == 0, "MPI_MAX allreduce differs");
    MPI_Allreduce(X[DENSE], y, 100, MPI_FLOAT, MPI_SUM, dflt); /* 400 bytes: below min_bytes */
    PMPI_Allreduce(X[DENSE], z, 100, MPI_FLOAT, MPI_SUM, dflt);
    MT_CHECK(memcmp(y, z, 400) == 0, "small allreduce differs");
    int *iv = malloc(bytes), *iy = malloc(bytes), *iz = malloc(bytes);
    for (size_t i = 0; i < N; ++i) iv[i] = (int)(X[DENSE][i] * 1e6f);
    MPI_Allreduce(iv, iy, (int)N, MPI_INT, MPI_SUM, dflt);
    PMPI_Allreduce(iv, iz, (int)N, MPI_INT, MPI_SUM, dflt);
    MT_CHECK(memcmp(iy, iz, bytes) == 0, "MPI_INT allreduce differs");
    double *dv = malloc(N * sizeof(double)), *dy = malloc(N * sizeof(double)), *dz = malloc(N * sizeof(double));
    for (size_t i = 0; i < N; ++i) dv[i] = X[DENSE][i];
    /* doubles with MPI_SUM are compressed since issue 30 (t_fp64); MPI_MAX passes through */
    MPI_Allreduce(dv, dy, (int)N, MPI_DOUBLE, MPI_MAX, dflt);
    PMPI_Allreduce(dv, dz, (int)N, MPI_DOUBLE, MPI_MAX, dflt);
    MT_CHECK(memcmp(dy, dz, N * sizeof(double)) == 0, "MPI_DOUBLE MPI_MAX allreduce differs");
    free(iv); free(iy); free(iz); free(dv); free(dy); free(dz); free(y); free(z);
    MPI_Comm_free(&none);
    MPI_Comm_free(&dflt);
}

static void stamp(const char *what) {
    if (R == 0) printf("[%6.1f s] %s\n", MPI_Wtime() - T0, what), fflush(stdout);
}

int main(int argc, char **argv) {
    mt_init(&argc, &argv, &R, &P);
    T0 = MPI_Wtime();
    int quick = 0;
    for (int a = 1; a < argc; ++a) {
        if (!strncmp(argv[a], "n=", 2)) N = strtoul(argv[a] + 2, NULL, 10);
        else if (!strcmp(argv[a], "quick")) quick = 1;
        else MT_CHECK(0, "unknown argument %s", argv[a]);
    }
    make_data();
    stamp("data");

    /* the node split for the hierarchy: nodes of 4 ranks (13 ranks: 4+4+4+1) */
    const int node = 4, nodes = P > node ? (P + node - 1) / node : P; /* one node: the flat algorithm */
    char hier[64];
    snprintf(hier, sizeof hier, "hierarchy=auto,node_size=%d", node);

    for (int k = 0; k < NCODECS; ++k) {
        const struct codec *cd = &CODECS[k];
        if (quick && !cd->quick) continue;
        if (cd->sparse) {
            /* dense data (allgather path), sparse data (SparCML's reduce-scatter where sparse
             * enough), and among the hierarchy's leaders */
            allreduce_case(cd, DENSE, "sparse-path", NULL, P, 0);
            allreduce_case(cd, SPARSE, "sparse-path", NULL, P, 0);
            if (!quick || !strcmp(cd->name, "topk")) allreduce_case(cd, SPARSE, "sparse-path", hier, nodes, 0);
        } else {
            allreduce_case(cd, DENSE, "twophase", NULL, P, 0);
            allreduce_case(cd, DENSE, "halving_doubling", NULL, P, 1);
            if (cd->kind != K_STOCH || !quick) allreduce_case(cd, DENSE, "twophase", "chunk_bytes=8K", P, 1);
            allreduce_case(cd, DENSE, "halving_doubling", hier, nodes, 0);
            if (!strcmp(cd->name, "bitpack")) {
                allreduce_case(cd, DENSE, "twophase", hier, nodes, 0);
                allreduce_case(cd, DENSE, "auto", hier, nodes, 0);
                allreduce_case(cd, DENSE, "auto", "hierarchy=auto,node_size=1", P, 0);
            }
        }
        if (!quick || !strcmp(cd->name, "bitpack") || !strcmp(cd->name, "terngrad")) other_colls(cd);
        stamp(cd->name);
    }
    exact_paths();
    stamp("exact paths");
    check_same_bits();
    check_errors();
    stamp("done");
    for (int d = 0; d < NDATA; ++d) free(X[d]), free(S[d]), free(A[d]);
    return mt_finish();
}

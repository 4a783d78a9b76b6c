// SPDX-License-Identifier: BSD-3-Clause
/* Doubles through every entry point (issue 30): MPI_DOUBLE, MPI_REAL8, MPI_DOUBLE_PRECISION
 * and a derived type of doubles, through the blocking, non-blocking, persistent (MPI-4) and
 * large-count (_c) forms of allreduce, bcast, allgather and reduce-scatter, with bitpack at
 * 16..64 bits. Every result: compressed (it differs from MPI's own on a twin communicator
 * with codec none) below 64 bits, within bitpack's bound of the exact (long double) result,
 * identical on every rank; the bcast root's buffer untouched; 64 bits: the two-phase
 * allreduce is the rank-order double sum, bit for bit. */
#include "compmpi.h"
#include "mpitest.h"

enum { N = 3000 }; /* a multiple of 3: the derived type below */
static int P, R;
static MPI_Datatype tvec; /* a contiguous derived type of 3 doubles */

static void set(MPI_Comm c, const char *k, const char *v) {
    MT_CHECK(compmpi_comm_set(c, k, v) == MPI_SUCCESS, "compmpi_comm_set(%s, %s)", k, v);
}
static double val(int r, size_t i, int call) {
    return (mt_uniform(77 + (uint64_t)call, r, i) - 0.5) * ldexp(1.0, (int)(i % 40) - 20);
}

/* form: 0 blocking, 1 non-blocking, 2 persistent, 3 large-count; coll: 0 allreduce,
 * 1 bcast, 2 allgather, 3 reduce_scatter_block, 4 reduce_scatter */
static int call(int coll, int form, const double *in, double *out, MPI_Datatype t, MPI_Comm c) {
    MPI_Request rq = MPI_REQUEST_NULL;
    const int root = 1 % P;
    int cnt = t == tvec ? N / 3 : N;
    switch (coll * 4 + form) {
        case 0: return MPI_Allreduce(in, out, N, t, MPI_SUM, c);
        case 1: MPI_Iallreduce(in, out, N, t, MPI_SUM, c, &rq); break;
#if MPI_VERSION >= 4
        case 2: MPI_Allreduce_init(in, out, N, t, MPI_SUM, c, MPI_INFO_NULL, &rq); MPI_Start(&rq); MPI_Wait(&rq, MPI_STATUS_IGNORE); return MPI_Request_free(&rq);
        case 3: return MPI_Allreduce_c(in, out, N, t, MPI_SUM, c);
        case 6: MPI_Bcast_init(out, cnt, t, root, c, MPI_INFO_NULL, &rq); MPI_Start(&rq); MPI_Wait(&rq, MPI_STATUS_IGNORE); return MPI_Request_free(&rq);
        case 7: return MPI_Bcast_c(out, cnt, t, root, c);
        case 10: MPI_Allgather_init(in, cnt, t, out, cnt, t, c, MPI_INFO_NULL, &rq); MPI_Start(&rq); MPI_Wait(&rq, MPI_STATUS_IGNORE); return MPI_Request_free(&rq);
        case 11: return MPI_Allgather_c(in, cnt, t, out, cnt, t, c);
        case 14: MPI_Reduce_scatter_block_init(in, out, N, t, MPI_SUM, c, MPI_INFO_NULL, &rq); MPI_Start(&rq); MPI_Wait(&rq, MPI_STATUS_IGNORE); return MPI_Request_free(&rq);
        case 15: return MPI_Reduce_scatter_block_c(in, out, N, t, MPI_SUM, c);
#endif
        case 4: return MPI_Bcast(out, cnt, t, root, c);
        case 5: MPI_Ibcast(out, cnt, t, root, c, &rq); break;
        case 8: return MPI_Allgather(in, cnt, t, out, cnt, t, c);
        case 9: MPI_Iallgather(in, cnt, t, out, cnt, t, c, &rq); break;
        case 12: return MPI_Reduce_scatter_block(in, out, N, t, MPI_SUM, c);
        case 13: MPI_Ireduce_scatter_block(in, out, N, t, MPI_SUM, c, &rq); break;
        default: {
            int *counts = malloc(sizeof(int) * (size_t)P);
            for (int j = 0; j < P; ++j) counts[j] = N + j;
            int rc = MPI_Reduce_scatter(in, out, counts, t, MPI_SUM, c);
            free(counts);
            return rc;
        }
    }
    return MPI_Wait(&rq, MPI_STATUS_IGNORE);
}

static void one(MPI_Comm c, MPI_Comm ref, int coll, int form, int bits, int nearest, MPI_Datatype t, const char *tn,
                int callno) {
    if (getenv("T_FP64_VERBOSE") && R == 0) fprintf(stderr, "case coll %d form %d bits %d %s\n", coll, form, bits, tn);
    const size_t total = coll >= 3 ? (size_t)(N + P) * P : coll == 2 ? (size_t)N * P : N;
    const size_t rn = coll == 2 ? (size_t)N * P : coll == 4 ? (size_t)(N + R) : N;
    const size_t off = coll == 3 ? (size_t)R * N : 0;
    size_t off4 = 0;
    for (int j = 0; j < R; ++j) off4 += (size_t)(N + j);
    const int root = 1 % P;
    double *in = malloc(total * 8), *out = malloc((rn + 1) * 8), *twin = malloc((rn + 1) * 8), *orig = malloc(N * 8);
    for (size_t i = 0; i < total; ++i) in[i] = val(R, i, callno);
    for (int pass = 0; pass < 2; ++pass) {
        double *o = pass ? out : twin;
        if (coll == 1) memcpy(o, in, N * 8);
        o[rn] = 42;
        MT_CHECK(call(coll, form, in, o, t, pass ? c : ref) == MPI_SUCCESS, "coll %d form %d %s: rc", coll, form, tn);
        MT_CHECK(o[rn] == 42, "coll %d form %d: wrote past the result", coll, form);
    }
    if (coll == 1 && R == root) MT_CHECK(memcmp(out, in, N * 8) == 0, "bcast form %d %s: root's buffer changed", form, tn);
    if (coll == 0 || coll == 2) MT_CHECK(mt_identical(out, rn * 8, c), "coll %d form %d %s: ranks differ", coll, form, tn);
    if (coll == 1) {
        memcpy(orig, in, N * 8);
        MT_CHECK(mt_bcast_ok(out, orig, N * 8, root, c), "bcast form %d %s: receivers differ", form, tn);
    }
    int diff = memcmp(out, twin, rn * 8) != 0, any = 0;
    MPI_Allreduce(&diff, &any, 1, MPI_INT, MPI_MAX, c);
    if (bits < 64) MT_CHECK(any, "coll %d form %d %s bits %d: not compressed", coll, form, tn, bits);
    /* bound: bitpack keeps bits-12 mantissa bits; two encodes at most along a path */
    const double u = ldexp(1.0, -(bits - 12)) / (nearest ? 2 : 1);
    size_t bad = 0;
    for (size_t j = 0; j < rn; ++j) {
        long double S = 0, A = 0;
        for (int r = 0; r < P; ++r) {
            size_t src = coll == 3 ? off + j : coll == 4 ? off4 + j : j;
            int who = r;
            if (coll == 2) { who = (int)(j / N); src = j % N; if (r != who) continue; }
            if (coll == 1 && r != root) continue;
            long double x = val(who, src, callno);
            S += x, A += fabsl(x);
        }
        long double lim = (bits == 64 ? 0 : 2.0L * u * (1 + u) * A) + (P + 1) * ldexp(1.0, -53) * A + 1e-300L;
        if (!(fabsl((long double)out[j] - S) <= lim)) ++bad;
    }
    MT_CHECK(bad == 0, "coll %d form %d %s bits %d nearest %d: %zu values beyond bitpack's bound", coll, form, tn, bits,
             nearest, bad);
    free(in), free(out), free(twin), free(orig);
}

int main(int argc, char **argv) {
    mt_init(&argc, &argv, &R, &P);
    MPI_Type_contiguous(3, MPI_DOUBLE, &tvec);
    MPI_Type_commit(&tvec);
    MPI_Comm c, ref;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    MPI_Comm_dup(MPI_COMM_WORLD, &ref);
    set(ref, "codec", "none");
    set(c, "cost_model", "off");
    set(c, "lossy_types", "fp32,fp64"); /* bitpack on doubles is the point: opted in (issue 43) */
    set(c, "policy", "static");
    set(c, "allreduce_algorithm", "twophase");
    const int forms = MPI_VERSION >= 4 ? 4 : 2;
    int callno = 0;
    const int widths[] = {16, 32, 48, 64};
    for (int w = 0; w < 4; ++w) {
        char b[8];
        snprintf(b, sizeof b, "%d", widths[w]);
        set(c, "bits", b);
        set(c, "rounding", w % 2 ? "nearest" : "trunc");
        for (int coll = 0; coll < 5; ++coll)
            for (int form = 0; form < (coll == 4 ? 1 : forms); ++form)
                one(c, ref, coll, form, widths[w], w % 2, MPI_DOUBLE, "MPI_DOUBLE", ++callno);
    }
    set(c, "bits", "32");
    set(c, "rounding", "trunc");
    /* the Fortran names and a derived type (bcast and allgather: MPI defines MPI_SUM on predefined types only) */
    one(c, ref, 0, 0, 32, 0, MPI_REAL8, "MPI_REAL8", ++callno);
    one(c, ref, 0, 1, 32, 0, MPI_DOUBLE_PRECISION, "MPI_DOUBLE_PRECISION", ++callno);
    one(c, ref, 1, 0, 32, 0, tvec, "contiguous(3, MPI_DOUBLE)", ++callno);
    one(c, ref, 2, 1, 32, 0, tvec, "contiguous(3, MPI_DOUBLE)", ++callno);
    /* 64 bits, two-phase: the rank-order double sum, bit for bit */
    set(c, "bits", "64");
    {
        double *x = malloc(N * 8), *y = malloc(N * 8);
        for (size_t i = 0; i < N; ++i) x[i] = val(R, i, 999);
        MPI_Allreduce(x, y, N, MPI_DOUBLE, MPI_SUM, c);
        size_t bad = 0;
        for (size_t i = 0; i < N; ++i) {
            double s = val(0, i, 999);
            for (int r = 1; r < P; ++r) s += val(r, i, 999);
            if (memcmp(&s, &y[i], 8)) ++bad;
        }
        MT_CHECK(bad == 0, "64 bits: %zu values differ from the rank-order double sum", bad);
        free(x), free(y);
    }
    MPI_Type_free(&tvec);
    MPI_Comm_free(&c);
    MPI_Comm_free(&ref);
    return mt_finish();
}

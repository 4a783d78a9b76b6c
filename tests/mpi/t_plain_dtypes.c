// SPDX-License-Identifier: BSD-3-Clause
/* A plain MPI program (no libcompmpi header) whose ranks describe the same data with
 * different datatypes, as MPI allows when the type signatures match: MPI_FLOAT on some
 * ranks, contiguous / vector / permuted-indexed / struct / resized types of floats on
 * others, MPI_REAL and MPI_REAL4 for allreduce, and the MPI-4 _c forms. Every variant must
 * give every rank the same floats (in signature order), within the 8-bit bitpack bound of
 * the root's data or of the exact sum, leave the gaps of non-contiguous layouts untouched,
 * and not hang. Run with 3 or 4 ranks (rank 1 and 2 get the odd types); argument: the
 * number of floats (default 65536, even). Runs plain too (exact results meet the bounds).
 */
#include "mpitest.h"

#define SENTINEL (-12345.0f)

static int rank, size;
static size_t n;

/* 8-bit bitpack keeps sign + 7 exponent bits: truncation or rounding errs by at most |v| and
 * keeps the sign (as in t_plain_compressed). */
static size_t bad_copy(const float *y, const float *v, size_t cnt) {
    size_t bad = 0;
    for (size_t i = 0; i < cnt; ++i)
        if (!(fabs((double)y[i] - v[i]) <= fabs((double)v[i]) + 1e-30) || (v[i] != 0 && y[i] * v[i] < 0)) ++bad;
    return bad;
}

/* The n floats of a buffer in signature order, per layout. */
enum layout { L_FLOAT, L_CONTIG, L_VECTOR2, L_SWAP_PAIRS, L_STRUCT2 };
static const char *lname[] = {"float", "contig(n)", "vector(n,1,2)", "indexed{1,0}", "struct{f,f}"};

typedef struct {
    MPI_Datatype type;
    int count;
    size_t floats_in_buf; /* buffer size in floats */
} desc;

static desc make_desc(enum layout L) {
    desc d = {MPI_FLOAT, (int)n, n};
    switch (L) {
        case L_FLOAT: break;
        case L_CONTIG:
            MPI_Type_contiguous((int)n, MPI_FLOAT, &d.type);
            d.count = 1;
            break;
        case L_VECTOR2: /* every other float: gaps between */
            MPI_Type_vector((int)n, 1, 2, MPI_FLOAT, &d.type);
            d.count = 1;
            d.floats_in_buf = 2 * n;
            break;
        case L_SWAP_PAIRS: { /* 2 floats in memory order {1,0}: dense, not in order */
            int bl[2] = {1, 1}, dp[2] = {1, 0};
            MPI_Type_indexed(2, bl, dp, MPI_FLOAT, &d.type);
            d.count = (int)(n / 2);
            break;
        }
        case L_STRUCT2: { /* struct { float a, b; }: dense and in order */
            int bl[2] = {1, 1};
            MPI_Aint dp[2] = {0, 4};
            MPI_Datatype ty[2] = {MPI_FLOAT, MPI_FLOAT};
            MPI_Type_create_struct(2, bl, dp, ty, &d.type);
            d.count = (int)(n / 2);
            break;
        }
    }
    if (d.type != MPI_FLOAT) MPI_Type_commit(&d.type);
    return d;
}
static void free_desc(desc *d) {
    if (d->type != MPI_FLOAT) MPI_Type_free(&d->type);
}
/* position in the buffer of signature float i */
static size_t pos(enum layout L, size_t i) {
    switch (L) {
        case L_VECTOR2: return 2 * i;
        case L_SWAP_PAIRS: return i ^ 1;
        default: return i;
    }
}
static void put(enum layout L, float *buf, size_t nbuf, const float *v) {
    for (size_t i = 0; i < nbuf; ++i) buf[i] = SENTINEL;
    for (size_t i = 0; i < n; ++i) buf[pos(L, i)] = v[i];
}
static void get(enum layout L, const float *buf, float *v) {
    for (size_t i = 0; i < n; ++i) v[i] = buf[pos(L, i)];
}
static size_t gaps_touched(enum layout L, const float *buf, size_t nbuf) {
    size_t bad = 0;
    if (L == L_VECTOR2)
        for (size_t i = 1; i < nbuf; i += 2) bad += buf[i] != SENTINEL;
    return bad;
}

/* bcast from root; layout per rank from lay[] (ranks beyond the array use MPI_FLOAT). */
static void t_bcast(int root, const enum layout *lay, int nlay, int large, uint64_t seed) {
    enum layout L = rank < nlay ? lay[rank] : L_FLOAT;
    desc d = make_desc(L);
    float *buf = malloc(d.floats_in_buf * sizeof(float)), *v = malloc(n * sizeof(float)), *y = calloc(n, sizeof(float));
    for (size_t i = 0; i < n; ++i) v[i] = mt_value(seed, root, i);
    if (rank == root) put(L, buf, d.floats_in_buf, v);
    else {
        float *junk = malloc(n * sizeof(float));
        for (size_t i = 0; i < n; ++i) junk[i] = 1.0e6f;
        put(L, buf, d.floats_in_buf, junk);
        free(junk);
    }
    int rc;
#if MPI_VERSION >= 4
    if (large) rc = MPI_Bcast_c(buf, (MPI_Count)d.count, d.type, root, MPI_COMM_WORLD);
    else
#endif
        rc = MPI_Bcast(buf, d.count, d.type, root, MPI_COMM_WORLD);
    (void)large;
    MT_CHECK(rc == MPI_SUCCESS, "bcast rc %d", rc);
    get(L, buf, y);
    size_t bad = bad_copy(y, v, n);
    MT_CHECK(bad == 0, "bcast%s root %d as %s: %zu of %zu values outside the bound", large ? "_c" : "", root,
             lname[L], bad, n);
    /* the root keeps its input (ADT: the sender keeps the fp32 master copy); the receivers
     * hold the same bits among themselves */
    MPI_Comm recv;
    MPI_Comm_split(MPI_COMM_WORLD, rank == root, rank, &recv);
    if (rank == root) MT_CHECK(memcmp(y, v, n * sizeof(float)) == 0, "bcast root's buffer written");
    else MT_CHECK(mt_identical(y, n * sizeof(float), recv), "bcast%s root %d: receivers differ (this rank: %s)",
                  large ? "_c" : "", root, lname[L]);
    MPI_Comm_free(&recv);
    MT_CHECK(gaps_touched(L, buf, d.floats_in_buf) == 0, "bcast wrote into the gaps of %s", lname[L]);
    free(buf); free(v); free(y);
    free_desc(&d);
}

/* allgather: send and receive layouts per rank; block layouts of the receive buffer follow
 * the receive type (a vector type is resized to 2n floats so blocks interleave gaps). */
static void t_allgather(const enum layout *slay, const enum layout *rlay, int nlay, int inplace, int large,
                        uint64_t seed) {
    enum layout SL = rank < nlay ? slay[rank] : L_FLOAT, RL = rank < nlay ? rlay[rank] : L_FLOAT;
    desc sd = make_desc(SL), rd = make_desc(RL);
    MPI_Datatype rtype = rd.type;
    int rcount = rd.count;
    size_t block = rd.floats_in_buf; /* floats a block occupies in the receive buffer */
    if (RL == L_VECTOR2) {
        MPI_Type_create_resized(rd.type, 0, (MPI_Aint)(2 * n * sizeof(float)), &rtype);
        MPI_Type_commit(&rtype);
    }
    float *sbuf = malloc(sd.floats_in_buf * sizeof(float)), *rbuf = malloc(block * size * sizeof(float));
    float *v = malloc(n * sizeof(float)), *y = malloc(n * size * sizeof(float));
    mt_fill(v, n, seed, rank);
    put(SL, sbuf, sd.floats_in_buf, v);
    for (size_t i = 0; i < block * size; ++i) rbuf[i] = SENTINEL;
    if (inplace) put(RL, rbuf + block * rank, block, v);
    const void *s = inplace ? MPI_IN_PLACE : sbuf;
    int rc;
#if MPI_VERSION >= 4
    if (large) rc = MPI_Allgather_c(s, (MPI_Count)sd.count, sd.type, rbuf, (MPI_Count)rcount, rtype, MPI_COMM_WORLD);
    else
#endif
        rc = MPI_Allgather(s, sd.count, sd.type, rbuf, rcount, rtype, MPI_COMM_WORLD);
    MT_CHECK(rc == MPI_SUCCESS, "allgather rc %d", rc);
    size_t bad = 0, gaps = 0;
    for (int r = 0; r < size; ++r) {
        get(RL, rbuf + block * r, y + n * r);
        for (size_t i = 0; i < n; ++i) v[i] = mt_value(seed, r, i);
        bad += bad_copy(y + n * r, v, n);
        gaps += gaps_touched(RL, rbuf + block * r, block);
    }
    MT_CHECK(bad == 0, "allgather%s%s send %s recv %s: %zu values outside the bound", large ? "_c" : "",
             inplace ? " in place" : "", lname[SL], lname[RL], bad);
    MT_CHECK(gaps == 0, "allgather wrote into %zu gaps of %s", gaps, lname[RL]);
    MT_CHECK(mt_identical(y, n * size * sizeof(float), MPI_COMM_WORLD), "allgather%s: ranks differ (send %s recv %s)",
             large ? "_c" : "", lname[SL], lname[RL]);
    if (rtype != rd.type) MPI_Type_free(&rtype);
    free(sbuf); free(rbuf); free(v); free(y);
    free_desc(&sd);
    free_desc(&rd);
}

/* allreduce: MPI_SUM is defined on predefined types only, so the variants are the
 * predefined 4-byte float types (MPI_REAL, MPI_REAL4 where they are 4 bytes). */
static void t_allreduce(const MPI_Datatype *types, int ntypes, int inplace, int large, uint64_t seed) {
    MPI_Datatype t = rank < ntypes ? types[rank] : MPI_FLOAT;
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    double *exact = calloc(n, sizeof(double)), *absum = calloc(n, sizeof(double));
    for (int r = 0; r < size; ++r)
        for (size_t i = 0; i < n; ++i) {
            double v = mt_value(seed, r, i);
            exact[i] += v;
            absum[i] += fabs(v);
        }
    mt_fill(x, n, seed, rank);
    if (inplace) memcpy(y, x, n * sizeof(float));
    const void *s = inplace ? MPI_IN_PLACE : x;
    int rc;
#if MPI_VERSION >= 4
    if (large) rc = MPI_Allreduce_c(s, y, (MPI_Count)n, t, MPI_SUM, MPI_COMM_WORLD);
    else
#endif
        rc = MPI_Allreduce(s, y, (int)n, t, MPI_SUM, MPI_COMM_WORLD);
    MT_CHECK(rc == MPI_SUCCESS, "allreduce rc %d", rc);
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i) /* contributions and the sum quantised: 3 S (t_plain_compressed) */
        if (!(fabs(y[i] - exact[i]) <= 3.0 * absum[i] + 1e-30)) ++bad;
    MT_CHECK(bad == 0, "allreduce%s%s: %zu sums outside the bound", large ? "_c" : "", inplace ? " in place" : "", bad);
    MT_CHECK(mt_identical(y, n * sizeof(float), MPI_COMM_WORLD), "allreduce%s: ranks differ", large ? "_c" : "");
    free(x); free(y); free(exact); free(absum);
}

int main(int argc, char **argv) {
    mt_init(&argc, &argv, &rank, &size);
    n = argc > 1 ? (size_t)atol(argv[1]) : 65536;
    n &= ~(size_t)1;
    int real4 = 0;
    if (MPI_REAL4 != MPI_DATATYPE_NULL) MPI_Type_size(MPI_REAL4, &real4);
    int real = 0;
    MPI_Type_size(MPI_REAL, &real);

    for (int large = 0; large <= (MPI_VERSION >= 4); ++large) {
        uint64_t seed = 100 + 50 * large;
        /* the reported failure: root MPI_FLOAT, the others one contiguous(n) */
        const enum layout a[] = {L_FLOAT, L_CONTIG, L_CONTIG, L_CONTIG};
        t_bcast(0, a, 4, large, seed + 1);
        /* the reverse, and a root that is not rank 0 */
        const enum layout b[] = {L_FLOAT, L_CONTIG, L_FLOAT, L_FLOAT};
        t_bcast(1, b, 4, large, seed + 2);
        /* non-contiguous and permuted layouts on receivers, dense struct on another */
        const enum layout c[] = {L_FLOAT, L_VECTOR2, L_SWAP_PAIRS, L_STRUCT2};
        t_bcast(0, c, 4, large, seed + 3);
        /* a root whose data needs packing */
        const enum layout d[] = {L_VECTOR2, L_FLOAT, L_CONTIG, L_SWAP_PAIRS};
        t_bcast(0, d, 4, large, seed + 4);
        const enum layout e[] = {L_FLOAT, L_FLOAT, L_SWAP_PAIRS, L_FLOAT};
        t_bcast(2 % size, e, 4, large, seed + 5);

        /* the reported hang: rank 0 receives into contiguous(n), the others n MPI_FLOAT */
        const enum layout fl[] = {L_FLOAT, L_FLOAT, L_FLOAT, L_FLOAT};
        const enum layout r0[] = {L_CONTIG, L_FLOAT, L_FLOAT, L_FLOAT};
        t_allgather(fl, r0, 4, 0, large, seed + 6);
        t_allgather(r0, fl, 4, 0, large, seed + 7);
        /* packed send and receive sides, in place too */
        const enum layout sx[] = {L_FLOAT, L_VECTOR2, L_SWAP_PAIRS, L_STRUCT2};
        const enum layout rx[] = {L_STRUCT2, L_SWAP_PAIRS, L_VECTOR2, L_CONTIG};
        t_allgather(sx, rx, 4, 0, large, seed + 8);
        t_allgather(fl, rx, 4, 1, large, seed + 9);

        /* allreduce: MPI_REAL / MPI_REAL4 beside MPI_FLOAT when they are 4-byte floats */
        MPI_Datatype ts[4] = {MPI_FLOAT, MPI_FLOAT, MPI_FLOAT, MPI_FLOAT};
        if (real == 4) ts[1] = MPI_REAL;
        if (real4 == 4) ts[2] = MPI_REAL4;
        ts[0] = ts[1];
        t_allreduce(ts, 4, 0, large, seed + 10);
        t_allreduce(ts, 4, 1, large, seed + 11);
    }
    return mt_finish();
}

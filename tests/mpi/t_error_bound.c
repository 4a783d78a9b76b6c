// SPDX-License-Identifier: BSD-3-Clause
/* error_bound (docs/error_bound.md) as a property: for random data of several distributions,
 * every collective and allreduce algorithm, floats and doubles, abs and rel bounds, every
 * element of every compressed result is within the bound of the exact result (long double
 * sums of the ranks' data, which every rank regenerates). A result equal to MPI's own (codec
 * none on a twin communicator) may be a pass-through and is only checked for identical bits;
 * for bounds every codec can hold (loose ones) the call must have been compressed.
 *   argv[1] = "quick": fewer distributions (the larger rank counts).
 *   argv[1] or argv[2] = "sz": the same property for codec sz, named explicitly (abs bounds:
 *   sz has no relative model; sz_mode plain and lorenzo alternate over the algorithms); and the
 *   planner's own choice where sz moves the fewest bytes (bcast and allgather of data within 1
 *   at abs:1e-4 floats / abs:1e-10 doubles: kernels/sz, docs/error_bound.md) is sz's: the same
 *   bits as the explicit sz, within the bound, different from bitpack's. */
#include <float.h>

#include "compmpi.h"
#include "mpitest.h"

enum { NDIST = 6 };
static const char *dist_name[NDIST] = {"uniform", "gauss1e3", "wide", "sparse", "cancel", "subnormal"};

/* value of (dist, rank, i) as a double; floats round it */
static double gen(int dist, uint64_t seed, int r, size_t i) {
    double u = mt_uniform(seed, r, i), v = mt_uniform(seed + 1, r, i);
    switch (dist) {
        case 0: return 2 * u - 1;
        case 1: return 1e3 * (u + v + mt_uniform(seed + 2, r, i) - 1.5);
        case 2: return (v < 0.5 ? -1 : 1) * ldexp(0.5 + u, (int)(60 * mt_uniform(seed + 3, r, i)) - 30);
        case 3: return v < 0.7 ? 0.0 : 2 * u - 1;
        case 4: return (r % 2 ? -1.0 : 1.0) * (1 + (double)(i % 7)) + 1e-5 * (u - 0.5);
        default: return v < 0.1 ? 1e-40 * u : 2 * u - 1; /* float subnormals in a tenth */
    }
}

typedef struct {
    MPI_Comm c, ref; /* with the bound / codec none */
    int rank, size;
} Pair;

static void set(MPI_Comm c, const char *k, const char *v) {
    MT_CHECK(compmpi_comm_set(c, k, v) == MPI_SUCCESS, "compmpi_comm_set(%s, %s)", k, v);
}

static int compressed_somewhere(const void *a, const void *b, size_t bytes, MPI_Comm comm) {
    int d = memcmp(a, b, bytes) != 0, any = 0;
    MPI_Allreduce(&d, &any, 1, MPI_INT, MPI_MAX, comm);
    return any;
}

/* One case: coll 0 allreduce, 1 reduce_scatter_block, 2 allgather, 3 bcast, 4 iallreduce.
 * dbl: doubles. bound > 0 abs, < 0 rel. must: the call must be compressed. */
static void run_case(Pair *p, int coll, int dbl, int dist, double bound, int must, const char *alg) {
    const int P = p->size, rank = p->rank;
    const size_t n = 3000, es = dbl ? 8 : 4;
    const size_t total = coll == 1 ? n * (size_t)P : n, rn = coll == 1 ? n : coll == 2 ? n * (size_t)P : n;
    const uint64_t seed = 1000 + 17 * (uint64_t)dist + (uint64_t)coll;
    char *in = malloc(total * es), *out = malloc(rn * es), *ref = malloc(rn * es);
    long double *S = malloc(rn * sizeof(long double)), *A = malloc(rn * sizeof(long double));
    const int root = 1 % P;
    /* this rank's input, and the exact result with its magnitude sum */
    for (size_t i = 0; i < total; ++i) {
        double v = gen(dist, seed, rank, i);
        if (dbl) ((double *)in)[i] = v;
        else ((float *)in)[i] = (float)v;
    }
    for (size_t j = 0; j < rn; ++j) S[j] = A[j] = 0;
    for (int r = 0; r < P; ++r) {
        for (size_t j = 0; j < rn; ++j) {
            size_t src = j;                                  /* allreduce, bcast */
            int who = r;
            if (coll == 1) src = (size_t)rank * n + j;       /* this rank's block */
            if (coll == 2) { who = (int)(j / n); src = j % n; if (r != who) continue; }
            if (coll == 3 && r != root) continue;
            double v = gen(dist, seed, who, src);
            long double x = dbl ? (long double)v : (long double)(float)v;
            S[j] += x;
            A[j] += fabsl(x);
        }
    }
    char set_alg[64];
    snprintf(set_alg, sizeof set_alg, "%s", alg);
    for (int pass = 0; pass < 2; ++pass) {
        MPI_Comm c = pass ? p->c : p->ref;
        void *o = pass ? out : ref;
        MPI_Datatype t = dbl ? MPI_DOUBLE : MPI_FLOAT;
        MPI_Request rq;
        switch (coll) {
            case 0: MPI_Allreduce(in, o, (int)n, t, MPI_SUM, c); break;
            case 1: MPI_Reduce_scatter_block(in, o, (int)n, t, MPI_SUM, c); break;
            case 2: MPI_Allgather(in, (int)n, t, o, (int)n, t, c); break;
            case 3: memcpy(o, in, n * es); MPI_Bcast(o, (int)n, t, root, c); break;
            default:
                /* the reference is MPI's blocking allreduce: what libcompmpi's exact path runs for
                 * a non-blocking call it does not compress (Open MPI's libnbc sums in another
                 * order, which would look like compression) */
                if (pass) MPI_Iallreduce(in, o, (int)n, t, MPI_SUM, c, &rq), MPI_Wait(&rq, MPI_STATUS_IGNORE);
                else MPI_Allreduce(in, o, (int)n, t, MPI_SUM, c);
                break;
        }
    }
    const char *cname[] = {"allreduce", "reduce_scatter_block", "allgather", "bcast", "iallreduce"};
    const int same_bits = coll == 1 ? 1 : mt_identical(out, rn * es, p->c);
    if (coll != 1 && coll != 3) MT_CHECK(same_bits, "%s %s %s: ranks differ", cname[coll], dist_name[dist], alg);
    if (coll == 3 && rank == root) MT_CHECK(memcmp(out, in, n * es) == 0, "bcast root changed");
    const int comp = compressed_somewhere(out, ref, rn * es, p->c);
    if (must) MT_CHECK(comp, "%s of %s (%s, %s, bound %g, P=%d): not compressed", cname[coll], dbl ? "doubles" : "floats",
                       dist_name[dist], alg, bound, P);
    if (comp) {
        /* reference sums in long double: their own error is far below any bound tested */
        size_t bad = 0, first = 0;
        long double worst = 0;
        for (size_t j = 0; j < rn; ++j) {
            long double R = dbl ? (long double)((double *)out)[j] : (long double)((float *)out)[j];
            long double lim = bound > 0 ? bound : -bound * A[j];
            lim += 64 * P * LDBL_EPSILON * A[j];
            long double e = fabsl(R - S[j]);
            if (!(e <= lim)) {
                if (!bad) first = j;
                ++bad;
            }
            if (A[j] > 0 && e / (bound > 0 ? 1 : A[j]) > worst) worst = e / (bound > 0 ? 1 : A[j]);
        }
        MT_CHECK(bad == 0, "%s of %s (%s, %s, %s:%g, P=%d): %zu elements beyond the bound, first %zu: |%Lg - %Lg| (A %Lg)",
                 cname[coll], dbl ? "doubles" : "floats", dist_name[dist], alg, bound > 0 ? "abs" : "rel",
                 bound > 0 ? bound : -bound, P, bad, first,
                 dbl ? (long double)((double *)out)[first] : (long double)((float *)out)[first], S[first], A[first]);
    }
    free(in), free(out), free(ref), free(S), free(A);
}

/* sz: the planner chooses sz by itself where it moves the fewest bytes: the same bits as the
 * explicit sz (every element within the bound: run_case), and not bitpack's */
static void sz_chosen(Pair *p, int coll, int dbl) {
    const int P = p->size;
    const size_t n = 3000, es = dbl ? 8 : 4, rn = coll == 2 ? n * (size_t)P : n;
    MPI_Comm ca, cs, cb;
    MPI_Comm_dup(MPI_COMM_WORLD, &ca);
    MPI_Comm_dup(MPI_COMM_WORLD, &cs);
    MPI_Comm_dup(MPI_COMM_WORLD, &cb);
    MPI_Comm cm[3] = {ca, cs, cb};
    for (int k = 0; k < 3; ++k) {
        set(cm[k], "min_bytes", "0");
        set(cm[k], "cost_model", "off");
        set(cm[k], "error_bound", dbl ? "abs:1e-10" : "abs:1e-4");
    }
    set(cs, "codec", "sz");
    set(cb, "codec", "bitpack");
    char *in = malloc(n * es), *o[3];
    for (size_t i = 0; i < n; ++i) {
        const double v = gen(0, 77, p->rank, i);
        if (dbl) ((double *)in)[i] = v;
        else ((float *)in)[i] = (float)v;
    }
    const MPI_Datatype t = dbl ? MPI_DOUBLE : MPI_FLOAT;
    for (int k = 0; k < 3; ++k) {
        o[k] = malloc(rn * es);
        if (coll == 2) MPI_Allgather(in, (int)n, t, o[k], (int)n, t, cm[k]);
        else memcpy(o[k], in, n * es), MPI_Bcast(o[k], (int)n, t, 0, cm[k]);
    }
    /* the root keeps its input: compare on a receiver */
    const int look = coll == 2 || p->rank != 0;
    int same = !look || memcmp(o[0], o[1], rn * es) == 0, differs = look && memcmp(o[0], o[2], rn * es) != 0;
    int all_same = 0, any_differs = 0;
    MPI_Allreduce(&same, &all_same, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&differs, &any_differs, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MT_CHECK(all_same && any_differs, "%s of %s at abs bound, P=%d: the planner's choice is not sz (same as sz: %d, "
             "differs from bitpack: %d)", coll == 2 ? "allgather" : "bcast", dbl ? "doubles" : "floats", P, all_same,
             any_differs);
    for (int k = 0; k < 3; ++k) free(o[k]), MPI_Comm_free(&cm[k]);
    free(in);
}

static int run_sz(Pair *p, int quick) {
    const char *algs[] = {"lorenzo", "plain", "hierarchical_lorenzo", "hierarchical_plain"};
    const double bounds[][2] = {/* floats, doubles: abs loose, abs tight */ {1e-1, 1e-1}, {1e-4, 1e-10}};
    for (int dbl = 0; dbl < 2; ++dbl)
        for (int coll = 2; coll < 4; ++coll) sz_chosen(p, coll, dbl);
    for (int a = 0; a < 4; ++a) {
        MPI_Comm_dup(MPI_COMM_WORLD, &p->c);
        MPI_Comm_dup(MPI_COMM_WORLD, &p->ref);
        set(p->ref, "codec", "none");
        set(p->c, "min_bytes", "0");
        set(p->c, "cost_model", "off");
        set(p->c, "codec", "sz");
        set(p->c, "sz_mode", a % 2 ? "plain" : "lorenzo");
        /* sz's allreduce is the allgather of the contributions (allreduce_algorithm has no
         * effect); pairs of ranks as nodes: the hierarchical one, node sums encoded */
        if (a >= 2) set(p->c, "node_size", "2");
        else set(p->c, "hierarchy", "off");
        for (int dbl = 0; dbl < 2; ++dbl)
            for (int b = 0; b < 2; ++b) {
                char v[64];
                const double x = bounds[b][dbl];
                snprintf(v, sizeof v, "abs:%g", x);
                set(p->c, "error_bound", v);
                for (int dist = 0; dist < NDIST; ++dist) {
                    if (quick && dist % 2) continue;
                    /* sz holds any bound above the summation's own error: every case but the wide
                     * values' (up to 2^30: fp32 sums alone exceed 0.1) */
                    const int must = b == 0 && dist != 2;
                    for (int coll = 0; coll < 5; ++coll) {
                        if (a != 3 && coll != 0 && coll != 4) continue;
                        /* reduce-scatter takes no variable-size payload: MPI's own result */
                        run_case(p, coll, dbl, dist, x, must && coll != 1, algs[a]);
                    }
                }
            }
        MPI_Comm_free(&p->c);
        MPI_Comm_free(&p->ref);
    }
    return mt_finish();
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int quick = 0, szmode = 0;
    for (int i = 1; i < argc; ++i) {
        quick |= strcmp(argv[i], "quick") == 0;
        szmode |= strcmp(argv[i], "sz") == 0;
    }
    Pair p;
    MPI_Comm_rank(MPI_COMM_WORLD, &p.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &p.size);
    if (szmode) return run_sz(&p, quick);
    {
        /* refused with a message, never silently overridden: a stochastic codec, error feedback,
         * a relative bound of 1 or more */
        MPI_Comm c;
        MPI_Comm_dup(MPI_COMM_WORLD, &c);
        set(c, "error_bound", "rel:1e-3");
        MT_CHECK(compmpi_comm_set(c, "codec", "q8") != MPI_SUCCESS, "codec q8 accepted under error_bound");
        MT_CHECK(compmpi_comm_set(c, "error_feedback", "1") != MPI_SUCCESS, "error feedback accepted under error_bound");
        MT_CHECK(compmpi_comm_set(c, "error_bound", "rel:2") != MPI_SUCCESS, "rel:2 accepted");
        MT_CHECK(compmpi_comm_set(c, "error_bound", "abs:-1") != MPI_SUCCESS, "abs:-1 accepted");
        set(c, "codec", "bitpack");
        set(c, "bits", "16");
        MPI_Comm_free(&c);
    }
    const char *algs[] = {"twophase", "halving_doubling", "hierarchical", "auto"};
    const double bounds[][2] = {/* floats, doubles: rel loose, rel tight, abs loose, abs tight */
                                {-1e-2, -1e-2}, {-2e-6, -1e-12}, {1e-1, 1e-1}, {1e-4, 1e-10}};
    for (int a = 0; a < 4; ++a) {
        MPI_Comm_dup(MPI_COMM_WORLD, &p.c);
        MPI_Comm_dup(MPI_COMM_WORLD, &p.ref);
        set(p.ref, "codec", "none");
        set(p.c, "min_bytes", "0");
        set(p.c, "cost_model", "off"); /* compress every eligible call: the property needs compressed results */
        if (a == 2) {
            set(p.c, "hierarchy", "on"); /* (auto: hierarchical or flat by measurement) */
            set(p.c, "node_size", "2"); /* pairs of ranks as nodes: the hierarchical allreduce */
            set(p.c, "allreduce_algorithm", "auto");
        } else {
            set(p.c, "hierarchy", "off");
            set(p.c, "allreduce_algorithm", algs[a]);
        }
        if (a == 0) set(p.c, "chunk_bytes", "4K"); /* pipelined segments */
        for (int dbl = 0; dbl < 2; ++dbl)
            for (int b = 0; b < 4; ++b) {
                char v[64];
                const double x = bounds[b][dbl];
                snprintf(v, sizeof v, "%s:%g", x > 0 ? "abs" : "rel", x > 0 ? x : -x);
                set(p.c, "error_bound", v);
                for (int dist = 0; dist < NDIST; ++dist) {
                    if (quick && dist % 2) continue;
                    /* wide values reach 2^30: an absolute 0.1 is tighter than the data's precision there */
                    /* cancel: the sums of a pair carry few significant bits, which a narrow width holds exactly */
                    const int loose = (b == 0 || (b == 2 && dist != 2 && dist != 1)) && dist != 5 && dist != 4;
                    for (int coll = 0; coll < 5; ++coll) {
                        if (a != 3 && coll != 0 && coll != 4) continue; /* other collectives once */
                        run_case(&p, coll, dbl, dist, x, loose && (coll != 1 || p.size > 1), algs[a]);
                    }
                }
            }
        MPI_Comm_free(&p.c);
        MPI_Comm_free(&p.ref);
    }
    return mt_finish();
}

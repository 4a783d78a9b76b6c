// SPDX-License-Identifier: BSD-3-Clause
/* hierarchy=auto with allreduce_algorithm=auto where the hierarchy applies (emulated nodes of 2
 * ranks, node_size=2): the hierarchical and the flat allreduce are timed on the first calls of
 * each size, their times agreed over the ranks, and every rank then runs the faster one
 * (coll/allreduce/allreduce_choice.cc, coll_allreduce_nodes).
 *
 * bitpack 16 bits, buffers of 16 Ki and 256 Ki floats, `calls` calls each (default 50, past the
 * exploration's bound of 48 calls). Every auto result is compared bit for bit with the results
 * of the same data from the algorithms run explicitly on their own communicators:
 * hierarchical (hierarchy=on; two-phase and halving-doubling among the leaders) and flat
 * (hierarchy=off; two-phase and halving-doubling). Each rank names which family auto ran (the
 * node sums are rounded once, the flat contributions each: the two differ in their bits);
 * every rank must name the same one at every call, and the last two calls (decided) the same.
 *
 * Argument want=flat|hierarchical: the decision the samples must lead to (the testlist skews
 * them with COMPMPI_FAULT=hier_skew so that one candidate must win): the last two calls ran it.
 * Argument fixed=BYTES: link_alpha_beta set, so the flat candidate's own choice (two-phase or
 * halving-doubling) is the model's, never explored, and the hierarchy's stage model predicts
 * nothing. Without it the stage model predicts both candidates first; it decides alone only
 * across hosts where its predictions are 4x apart, which hier_skew:model=1 arranges on this one
 * host (then no call is timed and every call runs the wanted one). Argument calls=K. */
#include "compmpi.h"
#include "mpitest.h"

static int R, P;

static void set(MPI_Comm c, const char *k, const char *v) {
    MT_CHECK(compmpi_comm_set(c, k, v) == MPI_SUCCESS, "compmpi_comm_set(%s, %s)", k, v);
}

static MPI_Comm comm_of(const char *hierarchy, const char *alg, const char *ab) {
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    set(c, "codec", "bitpack");
    set(c, "policy", "static");
    set(c, "bits", "16");
    set(c, "min_bytes", "0");
    set(c, "cost_model", "off");
    set(c, "hierarchy", hierarchy);
    if (strcmp(hierarchy, "off") != 0) set(c, "node_size", "2");
    set(c, "allreduce_algorithm", alg);
    if (ab) set(c, "link_alpha_beta", ab);
    return c;
}

int main(int argc, char **argv) {
    mt_init(&argc, &argv, &R, &P);
    int want = -1, calls = 50;
    const char *fixed = NULL;
    for (int a = 1; a < argc; ++a) {
        if (!strcmp(argv[a], "want=hierarchical"))
            want = 0;
        else if (!strcmp(argv[a], "want=flat"))
            want = 1;
        else if (!strncmp(argv[a], "fixed=", 6))
            fixed = argv[a] + 6;
        else if (!strncmp(argv[a], "calls=", 6))
            calls = atoi(argv[a] + 6);
        else
            MT_CHECK(0, "unknown argument %s", argv[a]);
    }
    MT_CHECK(P >= 4, "needs 2 or more nodes of 2 ranks (P=%d)", P);
    MT_CHECK(calls >= 2, "calls=%d: at least 2", calls);
    /* references: 0, 1 hierarchical (leaders: two-phase, halving-doubling); 2, 3 flat */
    MPI_Comm refs[4] = {comm_of("on", "twophase", NULL), comm_of("on", "halving_doubling", NULL),
                        comm_of("off", "twophase", NULL), comm_of("off", "halving_doubling", NULL)};
    MPI_Comm aut = comm_of("auto", "auto", fixed);
    const size_t sizes[] = {16384, 262144};
    const int ns = (int)(sizeof sizes / sizeof *sizes);
    const size_t nmax = sizes[ns - 1];
    float *x = malloc(nmax * sizeof(float)), *ya = malloc(nmax * sizeof(float));
    float *y[4];
    for (int i = 0; i < 4; ++i) y[i] = malloc(nmax * sizeof(float));
    int *all = malloc(sizeof(int) * (size_t)P);
    static const char *names[] = {"hierarchical", "flat", "either", "neither"};
    for (int k = 0; k < ns; ++k) {
        const size_t n = sizes[k], bytes = n * sizeof(float);
        mt_fill(x, n, 70 + (uint64_t)k, R);
        for (int i = 0; i < 4; ++i) MPI_Allreduce(x, y[i], (int)n, MPI_FLOAT, MPI_SUM, refs[i]);
        int differ = 1;
        for (int i = 0; i < 2; ++i)
            for (int j = 2; j < 4; ++j) differ &= memcmp(y[i], y[j], bytes) != 0;
        MT_CHECK(differ, "n=%zu: a hierarchical and a flat result have the same bits: the test cannot tell them apart",
                 n);
        int last = -1;
        for (int call = 1; call <= calls; ++call) {
            MPI_Allreduce(x, ya, (int)n, MPI_FLOAT, MPI_SUM, aut);
            const int is_h = !memcmp(ya, y[0], bytes) || !memcmp(ya, y[1], bytes);
            const int is_f = !memcmp(ya, y[2], bytes) || !memcmp(ya, y[3], bytes);
            const int mine = is_h && is_f ? 2 : is_h ? 0 : is_f ? 1 : 3;
            MT_CHECK(mine < 2, "n=%zu call %d: auto's result is %s algorithm's", n, call,
                     mine == 2 ? "both" : "neither");
            MPI_Allgather(&mine, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
            int same = 1;
            for (int r = 1; r < P; ++r) same &= all[r] == all[0];
            MT_CHECK(same, "n=%zu call %d: ranks ran different algorithms (rank 0: %s, rank %d: %s)", n, call,
                     names[all[0]], R, names[mine]);
            MT_CHECK(mt_identical(ya, bytes, MPI_COMM_WORLD), "n=%zu call %d: auto results differ between ranks", n,
                     call);
            if (call == calls) {
                MT_CHECK(mine == last, "n=%zu: the last two calls (decided) ran different algorithms", n);
                if (want >= 0)
                    MT_CHECK(mine == want, "n=%zu: with the samples skewed toward %s, auto decided %s", n,
                             names[want], names[mine]);
                if (R == 0) printf("P=%d n=%zu: auto decided %s on every rank\n", P, n, names[mine]);
            }
            last = mine;
        }
    }
    free(x);
    free(ya);
    for (int i = 0; i < 4; ++i) free(y[i]), MPI_Comm_free(&refs[i]);
    free(all);
    MPI_Comm_free(&aut);
    return mt_finish();
}

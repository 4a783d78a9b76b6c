// SPDX-License-Identifier: BSD-3-Clause
/* allreduce_algorithm=auto with alpha and beta measured on the communicator (link_alpha_beta=0,
 * coll/allreduce/allreduce_choice.cc): every rank makes the same choice, call after call,
 * through the exploration of close cases (both algorithms timed on the first 6 calls, up to 14
 * where their samples overlap).
 *
 * One rank per node (node_size=1, so auto weighs halving-doubling against two-phase), bitpack
 * 16 bits. For buffers of 1 Ki to 256 Ki floats, 16 calls each: every auto result is compared bit
 * for bit with the two-phase and the halving-doubling results of the same data (computed on
 * their own communicators): each rank names the algorithm auto ran (the two differ in their
 * roundings), and every rank must name the same one at every call; calls 15 and 16 (decided:
 * at most 14 exploring calls) the same algorithm. A choice that differed between ranks would also deadlock or mix blobs;
 * the comparison shows it directly.
 *
 * Argument skewed (with COMPMPI_FAULT=link_skew:rank=R): rank R's probe measures 1000x its
 * latency and its explored two-phase calls take 1000x their time; the agreed (MAX) numbers
 * make every rank settle on halving-doubling at every size, where rank R alone would, were
 * they not agreed.
 * Argument fixed=BYTES: link_alpha_beta set (the model alone, no probe): the same checks. */
#include "compmpi.h"
#include "mpitest.h"

static int R, P;

static MPI_Comm comm_alg(const char *alg, const char *ab) {
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "compmpi_codec", "bitpack");
    MPI_Info_set(info, "compmpi_bits", "16");
    MPI_Info_set(info, "compmpi_min_bytes", "0");
    MPI_Info_set(info, "compmpi_cost_model", "off");
    MPI_Info_set(info, "compmpi_hierarchy", "auto");
    MPI_Info_set(info, "compmpi_node_size", "1");
    MPI_Info_set(info, "compmpi_allreduce_algorithm", alg);
    if (ab && !strcmp(alg, "auto")) MPI_Info_set(info, "compmpi_link_alpha_beta", ab);
    MPI_Comm c;
    MT_CHECK(MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &c) == MPI_SUCCESS, "dup %s", alg);
    MPI_Info_free(&info);
    return c;
}

int main(int argc, char **argv) {
    mt_init(&argc, &argv, &R, &P);
    int skewed = 0;
    const char *fixed = NULL;
    for (int a = 1; a < argc; ++a) {
        if (!strcmp(argv[a], "skewed"))
            skewed = 1;
        else if (!strncmp(argv[a], "fixed=", 6))
            fixed = argv[a] + 6;
        else
            MT_CHECK(0, "unknown argument %s", argv[a]);
    }
    MPI_Comm two = comm_alg("twophase", NULL), hd = comm_alg("halving_doubling", NULL), aut = comm_alg("auto", fixed);
    const size_t sizes[] = {1024, 16384, 65536, 262144};
    const int ns = (int)(sizeof sizes / sizeof *sizes);
    const size_t nmax = sizes[ns - 1];
    float *x = malloc(nmax * sizeof(float)), *yt = malloc(nmax * sizeof(float)), *yh = malloc(nmax * sizeof(float)),
          *ya = malloc(nmax * sizeof(float));
    int *all = malloc(sizeof(int) * (size_t)P);
    for (int k = 0; k < ns; ++k) {
        const size_t n = sizes[k];
        mt_fill(x, n, 40 + (uint64_t)k, R);
        MPI_Allreduce(x, yt, (int)n, MPI_FLOAT, MPI_SUM, two);
        MPI_Allreduce(x, yh, (int)n, MPI_FLOAT, MPI_SUM, hd);
        int last = -1;
        for (int call = 1; call <= 16; ++call) {
            MPI_Allreduce(x, ya, (int)n, MPI_FLOAT, MPI_SUM, aut);
            const int is_t = memcmp(ya, yt, n * sizeof(float)) == 0, is_h = memcmp(ya, yh, n * sizeof(float)) == 0;
            const int differ = memcmp(yt, yh, n * sizeof(float)) != 0;
            /* 0 twophase, 1 halving-doubling, 2 either (same bits), 3 neither */
            const int mine = is_t && is_h ? 2 : is_t ? 0 : is_h ? 1 : 3;
            MT_CHECK(differ,
                     "n=%zu: two-phase and halving-doubling gave the same bits: the test cannot tell them apart", n);
            MT_CHECK(mine != 3, "n=%zu: auto's result is neither algorithm's", n);
            MPI_Allgather(&mine, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
            int same = 1;
            for (int r = 1; r < P; ++r) same &= all[r] == all[0];
            MT_CHECK(same, "n=%zu call %d: ranks chose different algorithms (rank 0: %d, rank %d: %d)", n, call, all[0],
                     R, mine);
            MT_CHECK(mt_identical(ya, n * sizeof(float), MPI_COMM_WORLD),
                     "n=%zu call %d: auto results differ between ranks", n, call);
            if (call == 16) MT_CHECK(mine == last, "n=%zu: calls 15 and 16 (decided) ran different algorithms", n);
            if (skewed && call >= 15)
                MT_CHECK(mine == 1,
                         "n=%zu call %d: with one rank's link 1000x slower (agreed), auto ran %s, not halving-doubling",
                         n, call, mine == 0 ? "two-phase" : "?");
            if (R == 0 && call >= 15)
                printf("P=%d n=%zu call %d: auto ran %s on every rank\n", P, n, call,
                       mine == 0   ? "twophase"
                       : mine == 1 ? "halving_doubling"
                                   : "?");
            last = mine;
        }
    }
    free(x);
    free(yt);
    free(yh);
    free(ya);
    free(all);
    MPI_Comm_free(&two);
    MPI_Comm_free(&hd);
    MPI_Comm_free(&aut);
    return mt_finish();
}

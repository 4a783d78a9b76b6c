// SPDX-License-Identifier: BSD-3-Clause
/* A plain MPI program (no libcompmpi header): every call libcompmpi must not compress gives
 * exactly what MPI itself gives. The reference is the PMPI_ entry point, which no
 * interposer replaces. Run with and without LD_PRELOAD. */
#include "mpitest.h"

#define N 100000

static void check_same(const void *a, const void *b, size_t bytes, const char *what) {
    MT_CHECK(memcmp(a, b, bytes) == 0, "%s differs from the PMPI result", what);
}

int main(int argc, char **argv) {
    int rank, size;
    mt_init(&argc, &argv, &rank, &size);
    float *f = malloc(N * sizeof(float) * 2), *g = malloc(N * sizeof(float) * 2);
    float *fa = malloc(N * sizeof(float) * size * 2), *fb = malloc(N * sizeof(float) * size * 2);
    double *d = malloc(N * sizeof(double)), *e = malloc(N * sizeof(double)), *din = malloc(N * sizeof(double));
    int *ia = malloc(N * sizeof(int)), *ib = malloc(N * sizeof(int)), *iin = malloc(N * sizeof(int));
    float *in = malloc(N * sizeof(float));
    mt_fill(in, N, 1, rank);
    for (int i = 0; i < N; ++i) {
        din[i] = in[i] * 1.000001;
        iin[i] = (int)(in[i] * 1e6f);
    }

    /* int sums; doubles with MPI_MAX (a double MPI_SUM is compressed since issue 30: t_fp64) */
    MPI_Allreduce(iin, ia, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    PMPI_Allreduce(iin, ib, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    check_same(ia, ib, N * sizeof(int), "int allreduce");
    MPI_Allreduce(din, d, N, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    PMPI_Allreduce(din, e, N, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    check_same(d, e, N * sizeof(double), "double max allreduce");

    /* floats below the default 64 KiB threshold */
    MPI_Allreduce(in, f, 1000, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    PMPI_Allreduce(in, g, 1000, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    check_same(f, g, 1000 * sizeof(float), "small float allreduce");

    /* other ops on large floats */
    MPI_Op ops[] = {MPI_MAX, MPI_MIN, MPI_PROD};
    for (int o = 0; o < 3; ++o) {
        MPI_Allreduce(in, f, N, MPI_FLOAT, ops[o], MPI_COMM_WORLD);
        PMPI_Allreduce(in, g, N, MPI_FLOAT, ops[o], MPI_COMM_WORLD);
        check_same(f, g, N * sizeof(float), "float MAX/MIN/PROD allreduce");
    }

    /* derived datatypes whose signature is not all floats (derived types of floats alone are
     * eligible since the signature rule: tests/mpi/t_plain_dtypes.c). MPI defines SUM only
     * on predefined types, so these go through bcast and allgather. */
    MPI_Datatype pair;
    {
        int bl[2] = {1, 1};
        MPI_Aint dp[2] = {0, 4};
        MPI_Datatype ty[2] = {MPI_FLOAT, MPI_INT};
        MPI_Type_create_struct(2, bl, dp, ty, &pair);
    }
    MPI_Type_commit(&pair);
    memcpy(f, in, N * sizeof(float));
    MPI_Bcast(f, N / 2, pair, 0, MPI_COMM_WORLD);
    memcpy(g, in, N * sizeof(float));
    PMPI_Bcast(g, N / 2, pair, 0, MPI_COMM_WORLD);
    check_same(f, g, N * sizeof(float), "struct{float,int} bcast");
    MPI_Allgather(in, N / 2, pair, fa, N / 2, pair, MPI_COMM_WORLD);
    PMPI_Allgather(in, N / 2, pair, fb, N / 2, pair, MPI_COMM_WORLD);
    check_same(fa, fb, (size_t)N * size * sizeof(float), "struct{float,int} allgather");
    MPI_Type_free(&pair);
    MPI_Datatype strided;
    MPI_Type_vector(N / 4, 1, 2, MPI_INT, &strided);
    MPI_Type_commit(&strided);
    memcpy(f, in, N * sizeof(float));
    MPI_Bcast(f, 1, strided, size - 1, MPI_COMM_WORLD);
    memcpy(g, in, N * sizeof(float));
    PMPI_Bcast(g, 1, strided, size - 1, MPI_COMM_WORLD);
    check_same(f, g, N * sizeof(float), "vector(MPI_INT) bcast");
    MPI_Type_free(&strided);

    /* MPI_IN_PLACE on ineligible calls */
    memcpy(ia, iin, N * sizeof(int));
    memcpy(ib, iin, N * sizeof(int));
    MPI_Allreduce(MPI_IN_PLACE, ia, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    PMPI_Allreduce(MPI_IN_PLACE, ib, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    check_same(ia, ib, N * sizeof(int), "in-place int allreduce");
    memcpy(f, in, N * sizeof(float));
    memcpy(g, in, N * sizeof(float));
    MPI_Allreduce(MPI_IN_PLACE, f, N, MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD);
    PMPI_Allreduce(MPI_IN_PLACE, g, N, MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD);
    check_same(f, g, N * sizeof(float), "in-place float MAX allreduce");

    /* bcast and allgather of non-float and small float */
    memcpy(d, din, N * sizeof(double));
    MPI_Bcast(d, N, MPI_INT64_T, size - 1, MPI_COMM_WORLD); /* 8-byte integers (doubles: t_fp64) */
    memcpy(e, din, N * sizeof(double));
    PMPI_Bcast(e, N, MPI_INT64_T, size - 1, MPI_COMM_WORLD);
    check_same(d, e, N * sizeof(double), "int64 bcast");
    memcpy(f, in, 100 * sizeof(float));
    MPI_Bcast(f, 100, MPI_FLOAT, 0, MPI_COMM_WORLD);
    memcpy(g, in, 100 * sizeof(float));
    PMPI_Bcast(g, 100, MPI_FLOAT, 0, MPI_COMM_WORLD);
    check_same(f, g, 100 * sizeof(float), "small float bcast");
    MPI_Allgather(iin, N, MPI_INT, fa, N, MPI_INT, MPI_COMM_WORLD);
    PMPI_Allgather(iin, N, MPI_INT, fb, N, MPI_INT, MPI_COMM_WORLD);
    check_same(fa, fb, (size_t)N * size * sizeof(int), "int allgather");
    memcpy(fa + rank * 50, in, 50 * sizeof(float));
    memcpy(fb + rank * 50, in, 50 * sizeof(float));
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, fa, 50, MPI_FLOAT, MPI_COMM_WORLD);
    PMPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, fb, 50, MPI_FLOAT, MPI_COMM_WORLD);
    check_same(fa, fb, (size_t)50 * size * sizeof(float), "small in-place float allgather");

    /* --all-exact: libcompmpi is configured off (codec none, no collectives, or ranks that
     * disagree): even large float sums are exact. --all-exact-fft-hint: the same on a
     * duplicate of MPI_COMM_WORLD given compmpi_codec=fft_topk (cost model off) by hints,
     * for runs whose ranks' FFTs differ (COMPMPI_FAULT=fft_differ) */
    const int fft_hint = argc > 1 && strcmp(argv[1], "--all-exact-fft-hint") == 0;
    if (argc > 1 && (strcmp(argv[1], "--all-exact") == 0 || fft_hint)) {
        MPI_Comm comm = MPI_COMM_WORLD;
        if (fft_hint) {
            MPI_Info info;
            MPI_Info_create(&info);
            MPI_Info_set(info, "compmpi_codec", "fft_topk");
            MPI_Info_set(info, "compmpi_cost_model", "off");
            MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &comm);
            MPI_Info_free(&info);
        }
        MPI_Allreduce(in, f, N, MPI_FLOAT, MPI_SUM, comm);
        PMPI_Allreduce(in, g, N, MPI_FLOAT, MPI_SUM, comm);
        check_same(f, g, N * sizeof(float), "large float allreduce");
        memcpy(f, in, N * sizeof(float));
        MPI_Bcast(f, N, MPI_FLOAT, 0, comm);
        memcpy(g, in, N * sizeof(float));
        PMPI_Bcast(g, N, MPI_FLOAT, 0, comm);
        check_same(f, g, N * sizeof(float), "large float bcast");
        MPI_Allgather(in, N, MPI_FLOAT, fa, N, MPI_FLOAT, comm);
        PMPI_Allgather(in, N, MPI_FLOAT, fb, N, MPI_FLOAT, comm);
        check_same(fa, fb, (size_t)N * size * sizeof(float), "large float allgather");
        if (fft_hint) MPI_Comm_free(&comm);
    }

    /* a communicator of one rank never compresses */
    memcpy(f, in, N * sizeof(float));
    MPI_Allreduce(in, f, N, MPI_FLOAT, MPI_SUM, MPI_COMM_SELF);
    check_same(f, in, N * sizeof(float), "allreduce on MPI_COMM_SELF");

    /* inter-communicator: even ranks vs odd ranks */
    if (size >= 2) {
        MPI_Comm half, inter;
        MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
        MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, rank % 2 ? 0 : 1, 99, &inter);
        MPI_Allreduce(in, f, N, MPI_FLOAT, MPI_SUM, inter);
        PMPI_Allreduce(in, g, N, MPI_FLOAT, MPI_SUM, inter);
        check_same(f, g, N * sizeof(float), "inter-communicator allreduce");
        MPI_Comm_free(&inter);
        MPI_Comm_free(&half);
    }

    free(f); free(g); free(fa); free(fb); free(d); free(e); free(din); free(ia); free(ib); free(iin); free(in);
    return mt_finish();
}

// SPDX-License-Identifier: BSD-3-Clause
/* The memo of exact verdicts (src/runtime/verdict.h) never outlives what it was derived from: the
 * same call signature, repeated, follows every change of the communicator's settings at
 * once -- a hint that lowers min_bytes makes the next identical call compressed, codec none
 * makes it exact again, a freed communicator's handle reused by a new one starts from the
 * new one's settings. Whether a call was compressed is read from its bits: with 2 ranks the
 * exact sum is x0 + x1 in fp32, which a lossy codec does not reproduce. Run preloaded with
 * the cost model off (the test runner's default), so that settings alone decide. */
#include "mpitest.h"

static const int n = 16384; /* 64 KiB */
static float *x, *y, *exact;

static void set_hint(MPI_Comm comm, const char *key, const char *value) {
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, key, value);
    MPI_Comm_set_info(comm, info);
    MPI_Info_free(&info);
}

/* 1 if this call's result is the exact sum, checked on every rank alike */
static int run_exact(MPI_Comm comm, int inplace) {
    if (inplace) {
        memcpy(y, x, sizeof(float) * n);
        MPI_Allreduce(MPI_IN_PLACE, y, n, MPI_FLOAT, MPI_SUM, comm);
    } else {
        MPI_Allreduce(x, y, n, MPI_FLOAT, MPI_SUM, comm);
    }
    int mine = memcmp(y, exact, sizeof(float) * n) == 0, all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MT_CHECK(mt_identical(y, sizeof(float) * n, comm), "ranks hold different results");
    return all;
}

int main(int argc, char **argv) {
    int rank, size;
    mt_init(&argc, &argv, &rank, &size);
    const int preloaded = argc > 1 && !strcmp(argv[1], "--preloaded");
    x = malloc(sizeof(float) * n), y = malloc(sizeof(float) * n), exact = malloc(sizeof(float) * n);
    float *other = malloc(sizeof(float) * n);
    mt_fill(x, n, 3, rank);
    mt_exact_sum(exact, other, (size_t)n, 3, size);
    if (size != 2) {
        if (rank == 0) printf("# 2 ranks only: the exact sum is then known bit for bit\n");
        MPI_Finalize();
        return 1;
    }
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    for (int inplace = 0; inplace < 2; ++inplace) {
        set_hint(comm, "compmpi_min_bytes", "1M");
        for (int k = 0; k < 5; ++k) MT_CHECK(run_exact(comm, inplace), "below min_bytes: call %d not exact", k);
        set_hint(comm, "compmpi_min_bytes", "4K");
        for (int k = 0; k < 3; ++k)
            MT_CHECK(run_exact(comm, inplace) == !preloaded, "min_bytes lowered: call %d %s", k,
                     preloaded ? "not compressed" : "not exact (plain MPI)");
        set_hint(comm, "compmpi_codec", "none");
        for (int k = 0; k < 3; ++k) MT_CHECK(run_exact(comm, inplace), "codec none: call %d not exact", k);
        set_hint(comm, "compmpi_codec", "bitpack");
        MT_CHECK(run_exact(comm, inplace) == !preloaded, "codec back to bitpack: %s",
                 preloaded ? "not compressed" : "not exact (plain MPI)");
        set_hint(comm, "compmpi_collectives", "bcast");
        MT_CHECK(run_exact(comm, inplace), "allreduce disabled: not exact");
        set_hint(comm, "compmpi_collectives", "allreduce,allgather,bcast");
        MT_CHECK(run_exact(comm, inplace) == !preloaded, "allreduce enabled again: %s",
                 preloaded ? "not compressed" : "not exact (plain MPI)");
    }
    /* a freed communicator's handle, likely reused: the new one's settings count */
    set_hint(comm, "compmpi_min_bytes", "1M");
    MT_CHECK(run_exact(comm, 0), "below min_bytes: not exact");
    MPI_Comm_free(&comm);
    for (int k = 0; k < 3; ++k) {
        MPI_Comm_dup(MPI_COMM_WORLD, &comm);
        MT_CHECK(run_exact(comm, 0) == !preloaded, "new communicator %d: %s", k,
                 preloaded ? "not compressed" : "not exact (plain MPI)");
        set_hint(comm, "compmpi_min_bytes", "1M");
        MT_CHECK(run_exact(comm, 0), "new communicator %d below min_bytes: not exact", k);
        MPI_Comm_free(&comm);
    }
    free(x), free(y), free(exact), free(other);
    return mt_finish();
}

// SPDX-License-Identifier: BSD-3-Clause
/* libcompmpi under SimGrid SMPI: the SMPI quirks the library handles (src/mpi_family.h),
 * held as behaviour. Run by tests/smpi/smoke.sh at 4 simulated ranks with
 * COMPMPI_CODEC=bitpack COMPMPI_BITS=16 (static, compressed); prints " No Errors".
 *  1. A compressed MPI_Allreduce on MPI_COMM_WORLD, rank 0 arriving late, then
 *     MPI_Comm_dup(MPI_COMM_WORLD) at once: SMPI calls every rank's attribute copy
 *     callback on the duplicating rank; it must not wait for a rank still inside the
 *     allreduce (the simulation hung before mpi_attr_foreign()). Every rank ends with the
 *     same bits, and the result is compressed (not the exact sum).
 *  2. The pipelined two-phase allreduce (MPI_Ialltoall/MPI_Iallgather per segment) on a
 *     duplicate with small segments: same bits everywhere, close to the exact sum.
 *  3. MPI_Bcast of derived types of floats (struct, resized, subarray), whose envelopes
 *     SMPI reports wrongly: they pass through, every receiver gets the root's exact bits
 *     at the right places. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compmpi.h"

static int g_rank, g_errs;

#define CHECK(cond, ...)                                  \
    do {                                                  \
        if (!(cond)) {                                    \
            g_errs++;                                     \
            fprintf(stderr, "rank %d: FAIL: ", g_rank);   \
            fprintf(stderr, __VA_ARGS__);                 \
            fprintf(stderr, "\n");                        \
        }                                                 \
    } while (0)

static unsigned long long hash(const void *p, size_t bytes) {
    const unsigned char *b = p;
    unsigned long long h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < bytes; ++i) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static int same_everywhere(const void *p, size_t bytes, MPI_Comm comm) {
    unsigned long long h = hash(p, bytes), lo = 0, hi = 0;
    PMPI_Allreduce(&h, &lo, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, comm);
    PMPI_Allreduce(&h, &hi, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, comm);
    return lo == hi;
}

static double rel_err(const float *x, const float *ref, int n) {
    double num = 0, den = 0;
    for (int i = 0; i < n; ++i) num += ((double)x[i] - ref[i]) * ((double)x[i] - ref[i]), den += (double)ref[i] * ref[i];
    return den > 0 ? sqrt(num / den) : 0;
}

static void fill(float *x, int n, int rank) {
    for (int i = 0; i < n; ++i) x[i] = (float)(((i * 7919 + rank * 104729) % 2001) - 1000) * 1e-3f;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int size;
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const int n = 1 << 18; /* 1 MiB of floats */
    float *in = malloc(n * 4), *out = malloc(n * 4), *ref = malloc(n * 4);
    fill(in, n, g_rank);
    PMPI_Allreduce(in, ref, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);

    /* 1 */
    for (int it = 0; it < 3; ++it) {
        if (g_rank == 0) { /* late: the others wait inside the allreduce */
            volatile double x = 0;
            for (int i = 0; i < 3000000; ++i) x += i;
        }
        CHECK(MPI_Allreduce(in, out, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS, "allreduce on world");
        MPI_Comm d;
        CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &d) == MPI_SUCCESS, "dup of world");
        MPI_Comm_free(&d);
    }
    CHECK(same_everywhere(out, (size_t)n * 4, MPI_COMM_WORLD), "world allreduce: ranks differ");
    const double e1 = rel_err(out, ref, n);
    CHECK(e1 > 0 && e1 < 2e-2, "world allreduce: relative error %.3e (compressed bitpack 16 expected)", e1);

    /* 2 */
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    CHECK(compmpi_comm_set(c, "chunk_bytes", "64K") == MPI_SUCCESS, "chunk_bytes");
    CHECK(compmpi_comm_set(c, "allreduce_algorithm", "twophase") == MPI_SUCCESS, "allreduce_algorithm");
    for (int it = 0; it < 2; ++it) MPI_Allreduce(in, out, n, MPI_FLOAT, MPI_SUM, c);
    CHECK(same_everywhere(out, (size_t)n * 4, c), "pipelined allreduce: ranks differ");
    const double e2 = rel_err(out, ref, n);
    CHECK(e2 > 0 && e2 < 2e-2, "pipelined allreduce: relative error %.3e", e2);
    MPI_Comm_free(&c);

    /* 3 */
    MPI_Datatype st, rs, sa;
    int bl[2] = {1, 1};
    MPI_Aint disp[2] = {0, 4};
    MPI_Datatype ty[2] = {MPI_FLOAT, MPI_FLOAT};
    MPI_Type_create_struct(2, bl, disp, ty, &st);
    MPI_Type_commit(&st);
    MPI_Type_create_resized(MPI_FLOAT, 0, 8, &rs);
    MPI_Type_commit(&rs);
    int full[1] = {2048}, sub[1] = {1024}, start[1] = {512};
    MPI_Type_create_subarray(1, full, sub, start, MPI_ORDER_C, MPI_FLOAT, &sa);
    MPI_Type_commit(&sa);
    struct {
        const char *name;
        MPI_Datatype t;
        int count;
    } cases[] = {{"struct{float,float}", st, 4096}, {"resized(float, 8 bytes)", rs, 4096}, {"subarray", sa, 1}};
    for (int k = 0; k < 3; ++k) {
        float *b = malloc(8192 * 4), *want = malloc(8192 * 4);
        for (int i = 0; i < 8192; ++i) want[i] = (float)i * 0.25f + 1.0f;
        if (g_rank == 0) memcpy(b, want, 8192 * 4);
        else for (int i = 0; i < 8192; ++i) b[i] = -1.0f;
        CHECK(MPI_Bcast(b, cases[k].count, cases[k].t, 0, MPI_COMM_WORLD) == MPI_SUCCESS, "bcast %s", cases[k].name);
        int bad = 0;
        for (int i = 0; i < 8192; ++i) {
            const int covered = k == 0 ? 1 : k == 1 ? (i % 2 == 0) : (i >= 512 && i < 1536);
            if (i >= 2048 && k == 2) break;
            if (covered ? b[i] != want[i] : (g_rank != 0 && b[i] != -1.0f)) bad++;
        }
        CHECK(bad == 0, "bcast %s: %d floats wrong (derived types must pass through exactly)", cases[k].name, bad);
        free(want);
        free(b);
    }
    MPI_Type_free(&sa);
    MPI_Type_free(&rs);
    MPI_Type_free(&st);

    int all = 0;
    PMPI_Allreduce(&g_errs, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0) {
        if (all == 0) printf(" No Errors\n");
        else printf(" Found %d errors\n", all);
    }
    free(ref);
    free(out);
    free(in);
    MPI_Finalize();
    return all != 0;
}

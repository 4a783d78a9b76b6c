// SPDX-License-Identifier: BSD-3-Clause
/* float_digest -- a digest of float results over every codec and collective, to show that a
 * change leaves existing float results bit for bit unchanged (issue 30: doubles were added
 * without touching the float path). Run the same binary preloaded with the library before and
 * after the change and compare the lines:
 *
 *   mpicc.mpich -O2 -o /tmp/float_digest tools/float_digest.c
 *   mpiexec.mpich -n 3 -genv LD_PRELOAD $OLD/libcompmpi.so /tmp/float_digest > before.txt
 *   mpiexec.mpich -n 3 -genv LD_PRELOAD $NEW/libcompmpi.so /tmp/float_digest > after.txt
 *   diff before.txt after.txt
 *
 * Settings go through MPI_Info hints on duplicates of MPI_COMM_WORLD (compmpi_codec, ...),
 * cost model off, so every call is compressed. Rank 0 prints one line per case: the case and an
 * FNV-1a hash of rank 0's result (all ranks' results are checked identical where MPI requires). */
#include <mpi.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t fnv(const void *p, size_t n) {
    const unsigned char *c = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; ++i) h = (h ^ c[i]) * 1099511628211ull;
    return h;
}
static float val(int r, size_t i) {
    uint64_t z = (uint64_t)r * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull + 12345;
    z = (z ^ (z >> 31)) * 0x94D049BB133111EBull;
    z ^= z >> 29;
    double u = (double)(z >> 11) / 9007199254740992.0;
    return (float)((u - 0.5) * pow(10.0, (double)(i % 9) - 4));
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, P;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    const char *cases[][4] = {
        /* codec, bits, rounding, allreduce_algorithm */
        {"bitpack", "16", "trunc", "twophase"}, {"bitpack", "24", "nearest", "twophase"},
        {"bitpack", "16", "trunc", "halving_doubling"}, {"bitpack", "8", "trunc", "twophase"},
        {"fp16", "0", "trunc", "twophase"}, {"bf16", "0", "trunc", "twophase"},
        {"q8", "0", "trunc", "twophase"}, {"terngrad", "0", "trunc", "twophase"},
        {"qsgd", "0", "trunc", "twophase"}, {"topk", "0", "trunc", "twophase"},
        {"fft_topk", "0", "trunc", "twophase"}, {"sparse", "0", "trunc", "twophase"},
        {"rangefloat", "0", "trunc", "twophase"},
    };
    const size_t n = 40000;
    float *x = malloc(n * P * 4), *y = malloc(n * P * 4);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
        MPI_Info info;
        MPI_Info_create(&info);
        MPI_Info_set(info, "compmpi_codec", cases[c][0]);
        MPI_Info_set(info, "compmpi_policy", "static");
        if (strcmp(cases[c][1], "0")) MPI_Info_set(info, "compmpi_bits", cases[c][1]);
        if (!strcmp(cases[c][0], "bitpack")) MPI_Info_set(info, "compmpi_rounding", cases[c][2]);
        MPI_Info_set(info, "compmpi_allreduce_algorithm", cases[c][3]);
        MPI_Info_set(info, "compmpi_cost_model", "off");
        MPI_Info_set(info, "compmpi_seed", "7");
        MPI_Comm comm;
        MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &comm);
        MPI_Info_free(&info);
        for (int coll = 0; coll < 4; ++coll) {
            for (size_t i = 0; i < n * P; ++i) x[i] = val(rank, i);
            size_t rn = n;
            const char *name = "allreduce";
            if (coll == 0) MPI_Allreduce(x, y, (int)n, MPI_FLOAT, MPI_SUM, comm);
            if (coll == 1) name = "allgather", rn = n * P, MPI_Allgather(x, (int)n, MPI_FLOAT, y, (int)n, MPI_FLOAT, comm);
            if (coll == 2) {
                name = "bcast";
                memcpy(y, x, n * 4);
                MPI_Bcast(y, (int)n, MPI_FLOAT, P - 1, comm);
            }
            if (coll == 3) name = "reduce_scatter_block", MPI_Reduce_scatter_block(x, y, (int)n, MPI_FLOAT, MPI_SUM, comm);
            uint64_t h = fnv(y, rn * 4), hs[2] = {h, ~h}, r[2];
            PMPI_Allreduce(hs, r, 2, MPI_UINT64_T, MPI_MAX, comm);
            const int same = r[0] == h && r[1] == ~h;
            if (rank == 0)
                printf("%-10s bits=%-2s %-7s %-16s %-20s %016llx%s\n", cases[c][0], cases[c][1], cases[c][2], cases[c][3],
                       name, (unsigned long long)h, coll == 3 || coll == 2 ? "" : same ? "" : " (ranks differ)");
        }
        MPI_Comm_free(&comm);
    }
    free(x), free(y);
    MPI_Finalize();
    return 0;
}

// SPDX-License-Identifier: BSD-3-Clause
/* The application's thread gets control back with the vector registers' upper halves clean
 * after every intercepted call, whatever codec ran (kernels/simd.h, simd_upper_clean).
 * Legacy-SSE code run with them in use pays a false dependency on every instruction: after
 * one compressed call, MPICH's own MPI_Reduce_local of 128K floats took 142 us instead of
 * 40 us for the rest of the job (docs/design.md, "Vector state at the MPI boundary").
 *
 * Read from the CPU (XGETBV with ECX = 1: XINUSE bits 2 and 6), not from timings. Each codec
 * is chosen by an MPI_Info hint on a duplicate of MPI_COMM_WORLD, so the program knows
 * nothing of libcompmpi; --expect-lossy (preloaded runs) also requires that the allreduce
 * was compressed, so that the check is not vacuous. */
#include <cpuid.h>

#include "mpitest.h"

static int xinuse_ok;

static int upper_state(void) {
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(1));
    (void)hi;
    return (int)(lo & 0x44u);
}

#define CHECK_CLEAN(what, codec)                                                                       \
    do {                                                                                               \
        if (xinuse_ok) {                                                                               \
            int st_ = upper_state();                                                                   \
            MT_CHECK(st_ == 0, "after %s with codec %s: upper halves in use (XINUSE 0x%x)", what, codec, st_); \
        }                                                                                              \
    } while (0)

int main(int argc, char **argv) {
    int rank, size;
    mt_init(&argc, &argv, &rank, &size);
    const int expect_lossy = argc > 1 && !strcmp(argv[1], "--expect-lossy");
    unsigned a, b, c, d;
    xinuse_ok = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 27)) && (c & (1u << 28)) &&
                __get_cpuid_count(0xD, 1, &a, &b, &c, &d) && (a & (1u << 2));
    if (!xinuse_ok && rank == 0) printf("# this CPU cannot report XINUSE (no AVX or no XGETBV ECX=1): nothing to check\n");

    const char *codecs[] = {"bitpack", "fp16", "bf16", "q8", "terngrad", "qsgd", "topk", "fft_topk", "rangefloat", "none"};
    const int n = 300007; /* above the kernels' OpenMP threshold, not a multiple of any vector width */
    float *x = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n), *g = malloc(sizeof(float) * n * size);
    float *exact = malloc(sizeof(float) * n), *other = malloc(sizeof(float) * n);
    mt_fill(x, n, 5, rank);
    mt_exact_sum(exact, other, (size_t)n, 5, size);
    for (size_t k = 0; k < sizeof codecs / sizeof *codecs; ++k) {
        MPI_Info info;
        MPI_Comm comm;
        MPI_Info_create(&info);
        MPI_Info_set(info, "compmpi_codec", codecs[k]);
        MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &comm);
        MPI_Info_free(&info);

        MPI_Allreduce(x, y, n, MPI_FLOAT, MPI_SUM, comm);
        CHECK_CLEAN("MPI_Allreduce", codecs[k]);
        if (expect_lossy && strcmp(codecs[k], "none") != 0 && size == 2)
            MT_CHECK(memcmp(y, exact, sizeof(float) * n) != 0, "codec %s: the allreduce was not compressed", codecs[k]);
        memcpy(y, x, sizeof(float) * n);
        MPI_Allreduce(MPI_IN_PLACE, y, n, MPI_FLOAT, MPI_SUM, comm);
        CHECK_CLEAN("MPI_Allreduce(MPI_IN_PLACE)", codecs[k]);
        MPI_Allgather(x, n / size, MPI_FLOAT, g, n / size, MPI_FLOAT, comm);
        CHECK_CLEAN("MPI_Allgather", codecs[k]);
        memcpy(y, x, sizeof(float) * n);
        MPI_Bcast(y, n, MPI_FLOAT, 0, comm);
        CHECK_CLEAN("MPI_Bcast", codecs[k]);
        MPI_Reduce_scatter_block(x, y, n / size, MPI_FLOAT, MPI_SUM, comm);
        CHECK_CLEAN("MPI_Reduce_scatter_block", codecs[k]);
        MPI_Request req;
        MPI_Iallreduce(x, y, n, MPI_FLOAT, MPI_SUM, comm, &req);
        CHECK_CLEAN("MPI_Iallreduce", codecs[k]);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        CHECK_CLEAN("MPI_Wait", codecs[k]);
        MPI_Comm_free(&comm);
    }
    free(x), free(y), free(g), free(exact), free(other);
    return mt_finish();
}

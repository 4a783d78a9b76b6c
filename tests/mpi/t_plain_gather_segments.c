// SPDX-License-Identifier: BSD-3-Clause
/* The pipelined allgather path of codecs quantised once per contribution (q8, qsgd; 2 ranks):
 * q8 in segments gives the same bits as q8 in one piece -- every segment is encoded with the
 * whole contribution's scale (CodecOps::whole_scale) -- and qsgd in segments stays within its
 * error bound with identical bits on every rank. Each variant runs on a communicator of its
 * own (hints compmpi_codec, compmpi_chunk_bytes), so the program knows nothing of libcompmpi.
 * --preloaded: also require the calls to be compressed (not bit-exact). */
#include "mpitest.h"

static MPI_Comm comm_with(const char *codec, const char *chunk) {
    MPI_Info info;
    MPI_Comm c;
    MPI_Info_create(&info);
    MPI_Info_set(info, "compmpi_codec", codec);
    MPI_Info_set(info, "compmpi_policy", "static");
    MPI_Info_set(info, "compmpi_chunk_bytes", chunk);
    MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &c);
    MPI_Info_free(&info);
    return c;
}

int main(int argc, char **argv) {
    int rank, size;
    mt_init(&argc, &argv, &rank, &size);
    const int preloaded = argc > 1 && !strcmp(argv[1], "--preloaded");
    const int n = 300007; /* 18 segments of 64 KiB (16384 floats) and a shorter last one */
    float *x = malloc(sizeof(float) * n), *one = malloc(sizeof(float) * n), *seg = malloc(sizeof(float) * n);
    float *exact = malloc(sizeof(float) * n), *other = malloc(sizeof(float) * n);
    mt_exact_sum(exact, other, (size_t)n, 21, size);
    mt_fill(x, n, 21, rank);
    const char *codecs[] = {"q8", "qsgd"};
    const double bound[] = {0.035, 2.9}; /* relative l2 error, as t_codecs */
    for (int k = 0; k < 2; ++k) {
        MPI_Comm whole = comm_with(codecs[k], "0"), pieces = comm_with(codecs[k], "64K");
        for (int it = 0; it < 3; ++it) {
            MPI_Allreduce(x, one, n, MPI_FLOAT, MPI_SUM, whole);
            MPI_Allreduce(x, seg, n, MPI_FLOAT, MPI_SUM, pieces);
            MT_CHECK(mt_identical(seg, sizeof(float) * n, MPI_COMM_WORLD), "%s in segments: ranks differ", codecs[k]);
            if (k == 0)
                MT_CHECK(memcmp(one, seg, sizeof(float) * n) == 0, "q8 in segments differs from q8 in one piece");
            double e = 0, r2 = 0;
            for (int i = 0; i < n; ++i) e += ((double)seg[i] - exact[i]) * ((double)seg[i] - exact[i]), r2 += (double)exact[i] * exact[i];
            MT_CHECK(sqrt(e / r2) < bound[k], "%s in segments: relative error %g", codecs[k], sqrt(e / r2));
            if (preloaded) MT_CHECK(e > 0, "%s in segments: not compressed", codecs[k]);
        }
        /* in place, the same bits as out of place (q8: deterministic) */
        if (k == 0) {
            memcpy(seg, x, sizeof(float) * n);
            MPI_Allreduce(MPI_IN_PLACE, seg, n, MPI_FLOAT, MPI_SUM, pieces);
            MT_CHECK(memcmp(one, seg, sizeof(float) * n) == 0, "q8 in segments, in place, differs");
        }
        MPI_Comm_free(&whole);
        MPI_Comm_free(&pieces);
    }
    free(x), free(one), free(seg), free(exact), free(other);
    return mt_finish();
}

// SPDX-License-Identifier: BSD-3-Clause
/* fft_topk allreduce through the spectral sum (fft_sum_domain=spectral, the default): the P
 * received contributions are added coefficient by coefficient in rank order and inverted
 * once per block. Checked against what the codec's own per-contribution decodes give, which
 * a compressed MPI_Allgather of the same inputs hands every rank (D_j = decode(encode(x_j))):
 *   - fft_sum_domain=spatial equals D_0 + D_1 + ... + D_{P-1} (rank order) bit for bit;
 *   - spectral differs from that only by fp32 rounding: |spectral - spatial| <=
 *     2 (7 log2 B + P + 1) eps sum_j |D_j| (one FFT's error bound, Higham Thm 24.2, plus the
 *     P-1 additions in either domain);
 *   - |spectral - sum_j x_j| <= sum_j |D_j - x_j| + that rounding bound (triangle inequality
 *     over the codec's own errors: the spectral sum is as accurate as the codec allows);
 *   - every rank holds the same bits, and the input buffer is never written. */
#include "compmpi.h"
#include "mpitest.h"

/* smooth gradient-like data of rank r: normal noise through two one-pole low-pass filters
 * (rho 0.995), unit variance, plus 0.1 x noise; times (r + 1) */
static void smooth(float *x, size_t n, int r) {
    double *b = malloc(n * sizeof(double)), y = 0, z = 0, ss = 0;
    for (size_t i = 0; i < n; ++i) {
        double u1 = mt_uniform(31, r, 2 * i) + 1e-12, u2 = mt_uniform(31, r, 2 * i + 1);
        y = 0.995 * y + sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
        z = 0.995 * z + y;
        b[i] = z;
        ss += z * z;
    }
    double sd = sqrt(ss / (double)n);
    for (size_t i = 0; i < n; ++i) {
        double u1 = mt_uniform(32, r, 2 * i) + 1e-12, u2 = mt_uniform(32, r, 2 * i + 1);
        x[i] = (float)((b[i] / sd + 0.1 * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2)) * (r + 1));
    }
    free(b);
}

int main(int argc, char **argv) {
    int rank, P;
    mt_init(&argc, &argv, &rank, &P);
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    compmpi_comm_set(comm, "codec", "fft_topk");
    compmpi_comm_set(comm, "policy", "static");
    compmpi_comm_set(comm, "min_bytes", "0");
    const double eps = ldexp(1.0, -24), B = 16384; /* fft_block default */
    const size_t sizes[] = {70001, 262144};
    for (int si = 0; si < 2; ++si) {
        const size_t n = sizes[si];
        float *all_x = malloc(n * P * sizeof(float)), *g = malloc(n * P * sizeof(float));
        float *x = malloc(n * sizeof(float)), *keep = malloc(n * sizeof(float));
        float *y = malloc(n * sizeof(float)), *y2 = malloc(n * sizeof(float)), *ref = malloc(n * sizeof(float));
        for (int r = 0; r < P; ++r) smooth(all_x + n * r, n, r);
        memcpy(x, all_x + n * rank, n * sizeof(float));
        memcpy(keep, x, n * sizeof(float));
        /* D_j on every rank: the compressed allgather (own block decoded too, allgather_own=decoded) */
        MPI_Allgather(x, (int)n, MPI_FLOAT, g, (int)n, MPI_FLOAT, comm);
        double codec_err = 0, sum_d = 0;
        int lossy = 0;
        for (int r = 0; r < P; ++r) {
            double e = 0, d = 0;
            for (size_t i = 0; i < n; ++i) {
                double v = g[n * r + i], w = all_x[n * r + i];
                e += (v - w) * (v - w);
                d += v * v;
                lossy |= v != w;
            }
            codec_err += sqrt(e);
            sum_d += sqrt(d);
        }
        MT_CHECK(lossy, "n=%zu: allgather was not compressed", n);
        for (size_t i = 0; i < n; ++i) {
            float a = g[i];
            for (int r = 1; r < P; ++r) a += g[n * r + i];
            ref[i] = a;
        }
        /* spectral (default) */
        MPI_Allreduce(x, y, (int)n, MPI_FLOAT, MPI_SUM, comm);
        /* spatial: the rank-order sum of per-contribution decodes */
        compmpi_comm_set(comm, "fft_sum_domain", "spatial");
        MPI_Allreduce(x, y2, (int)n, MPI_FLOAT, MPI_SUM, comm);
        compmpi_comm_set(comm, "fft_sum_domain", "spectral");
        MT_CHECK(memcmp(x, keep, n * sizeof(float)) == 0, "input written");
        MT_CHECK(memcmp(y2, ref, n * sizeof(float)) == 0, "n=%zu: spatial sum is not D_0 + ... + D_{P-1}", n);
        double dss = 0, dex = 0, nx = 0;
        for (size_t i = 0; i < n; ++i) {
            double ex = 0;
            for (int r = 0; r < P; ++r) ex += all_x[n * r + i];
            dss += ((double)y[i] - ref[i]) * ((double)y[i] - ref[i]);
            dex += (y[i] - ex) * (y[i] - ex);
            nx += ex * ex;
        }
        dss = sqrt(dss), dex = sqrt(dex), nx = sqrt(nx);
        const double round_bound = 2.0 * (7.0 * log2(B) + P + 1) * eps * sum_d;
        if (rank == 0)
            printf("n=%zu P=%d: |spectral-spatial|/sum|D_j| %.2e (bound %.2e); rel. error vs exact sum %.5f "
                   "(bound %.5f)\n", n, P, dss / sum_d, round_bound / sum_d, dex / nx, (codec_err + round_bound) / nx);
        MT_CHECK(dss <= round_bound, "n=%zu: spectral - spatial %.3e > %.3e", n, dss, round_bound);
        MT_CHECK(dex <= codec_err + round_bound, "n=%zu: error %.3e > codec bound %.3e", n, dex, codec_err + round_bound);
        MT_CHECK(mt_identical(y, n * sizeof(float), comm), "n=%zu: ranks differ (spectral)", n);
        MT_CHECK(mt_identical(y2, n * sizeof(float), comm), "n=%zu: ranks differ (spatial)", n);
        /* the exchange in pieces of about chunk_bytes of input (y and y2 came from one exchange:
         * these inputs are below the 4 MiB default), the blocks decoded while later pieces are in
         * flight: the same bits, spectral and spatial, and in place */
        float *y3 = malloc(n * sizeof(float));
        compmpi_comm_set(comm, "chunk_bytes", "16K");
        MPI_Allreduce(x, y3, (int)n, MPI_FLOAT, MPI_SUM, comm);
        MT_CHECK(memcmp(y3, y, n * sizeof(float)) == 0, "n=%zu: spectral sum in pieces differs", n);
        compmpi_comm_set(comm, "fft_sum_domain", "spatial");
        MPI_Allreduce(x, y3, (int)n, MPI_FLOAT, MPI_SUM, comm);
        compmpi_comm_set(comm, "fft_sum_domain", "spectral");
        MT_CHECK(memcmp(y3, y2, n * sizeof(float)) == 0, "n=%zu: spatial sum in pieces differs", n);
        memcpy(y3, x, n * sizeof(float));
        MPI_Allreduce(MPI_IN_PLACE, y3, (int)n, MPI_FLOAT, MPI_SUM, comm);
        MT_CHECK(memcmp(y3, y, n * sizeof(float)) == 0, "n=%zu: in-place sum in pieces differs", n);
        MPI_Request rq;
        MPI_Iallreduce(x, y3, (int)n, MPI_FLOAT, MPI_SUM, comm, &rq);
        MPI_Wait(&rq, MPI_STATUS_IGNORE);
        MT_CHECK(memcmp(y3, y, n * sizeof(float)) == 0, "n=%zu: non-blocking sum in pieces differs", n);
        MT_CHECK(memcmp(x, keep, n * sizeof(float)) == 0, "input written (pieces)");
        compmpi_comm_set(comm, "chunk_bytes", "4M");
        free(y3);
        free(all_x); free(g); free(x); free(keep); free(y); free(y2); free(ref);
    }
    MPI_Comm_free(&comm);
    return mt_finish();
}

// SPDX-License-Identifier: BSD-3-Clause
/* awp decisions are identical on every rank by construction, whatever buffers the ranks use
 * (issue 14). A plain program run under LD_PRELOAD: 40 calls of 262144 floats; rank 0
 * always uses one buffer, rank r > 0 cycles through min(r + 1, 4) buffers, so no rank's buffer
 * addresses follow another's. Before awp state was keyed by shared call arguments, the
 * bcast variant failed at the 12th call (rank 0 at 16 bits, rank 1 at 8: "Message
 * truncated", then a hang).
 *
 * Arguments: bcast | allreduce | allgather, and optionally "const" (the same data every
 * call) instead of data whose l2-norm falls by 1% per call.
 *
 * Checks per call: no hang (alarm), receivers / all ranks hold identical bits, the bcast
 * root's buffer is unchanged; the bit width is read off the data (bitpack trunc keeps the
 * top `bits` bits of each float) and must be the same on every rank; for bcast it must
 * follow Algorithm 1 (Zhuang et al.) replayed here on the root's norms with the
 * COMPMPI_AWP_* constants of the run; the width must rise at least once when the
 * environment asks for a run that raises (COMPMPI_AWP_PRESET=custom). */
#include <signal.h>
#include <unistd.h>

#include "mpitest.h"

enum { N = 262144, CALLS = 40 };

static uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
/* The smallest width w in {8,16,24,32} with trunc_w(ref) == got for every element, or -1. */
static int width_of(const float *got, const float *ref, size_t n) {
    for (int w = 8; w <= 32; w += 8) {
        uint32_t mask = w == 32 ? 0xFFFFFFFFu : ~(0xFFFFFFFFu >> w);
        size_t i = 0;
        while (i < n && bits_of(got[i]) == (bits_of(ref[i]) & mask)) ++i;
        if (i == n) return w;
    }
    return -1;
}
static double scale_of(int call, int constant) { return constant ? 1.0 : pow(0.99, call); }
static void fill(float *x, int rank, int call, int constant) {
    double s = scale_of(call, constant);
    for (size_t i = 0; i < N; ++i) x[i] = (float)(mt_value(17, rank, i) * s);
}
static double norm_of(const float *x, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; ++i) s += (double)x[i] * x[i];
    return sqrt(s);
}
static double env_num(const char *name, double dflt) {
    const char *v = getenv(name);
    return v ? atof(v) : dflt;
}

int main(int argc, char **argv) {
    alarm(300); /* a hang is a failure, well before the runner's 600 s timeout */
    int rank, size;
    mt_init(&argc, &argv, &rank, &size);
    const char *coll = argc > 1 ? argv[1] : "bcast";
    const int constant = argc > 2 && strcmp(argv[2], "const") == 0;
    const int nbuf = rank + 1 < 4 ? rank + 1 : 4;
    float *send[4], *recv[4];
    const size_t rlen = strcmp(coll, "allgather") == 0 ? (size_t)N * size : N;
    for (int b = 0; b < nbuf && b < 4; ++b) {
        send[b] = malloc(N * sizeof(float));
        recv[b] = malloc(rlen * sizeof(float));
    }
    float *ref = malloc(rlen * sizeof(float)), *orig = malloc(N * sizeof(float));
    double *exact = malloc(N * sizeof(double));
    /* the run's awp constants (the environment every rank shares), for the bcast replay */
    const int custom = getenv("COMPMPI_AWP_PRESET") && strcmp(getenv("COMPMPI_AWP_PRESET"), "custom") == 0;
    const int legacy = getenv("COMPMPI_AWP_RULE") && strcmp(getenv("COMPMPI_AWP_RULE"), "legacy_abs") == 0;
    const double T = custom ? env_num("COMPMPI_AWP_THRESHOLD", -2e-5) : -2e-5;
    const int interval = custom ? (int)env_num("COMPMPI_AWP_INTERVAL", 2000) : 2000;
    int alg_bits = 8, alg_counter = 0, have_prev = 0; /* Algorithm 1, N = 8 */
    double prev = 0;
    int widths[CALLS];

    for (int call = 0; call < CALLS; ++call) {
        const int b = call % nbuf;
        float *in = send[b], *out = recv[b];
        int width = -1, same = 1;
        if (strcmp(coll, "bcast") == 0) {
            fill(orig, 0, call, constant); /* the root's data, known to every rank */
            if (rank == 0) memcpy(out, orig, N * sizeof(float));
            else for (size_t i = 0; i < N; ++i) out[i] = -1.0f - (float)call; /* stale contents */
            MT_CHECK(MPI_Bcast(out, N, MPI_FLOAT, 0, MPI_COMM_WORLD) == MPI_SUCCESS, "bcast rc");
            same = mt_bcast_ok(out, orig, N * sizeof(float), 0, MPI_COMM_WORLD);
            if (rank != 0) width = width_of(out, orig, N);
            MPI_Bcast(&width, 1, MPI_INT, size - 1, MPI_COMM_WORLD); /* a receiver's width */
            /* Algorithm 1 on the root's norms: the width of this call, then the update */
            if (!legacy) {
                MT_CHECK(width == (alg_bits < 32 ? alg_bits : 32), "call %d: width %d, Algorithm 1 says %d", call + 1,
                         width, alg_bits < 32 ? alg_bits : 32);
                double norm = norm_of(orig, N);
                if (have_prev && (norm - prev) / prev < T) ++alg_counter;
                if (alg_counter == interval) alg_bits += 8, alg_counter = 0;
                prev = norm, have_prev = 1;
            }
        } else if (strcmp(coll, "allgather") == 0) {
            fill(in, rank, call, constant);
            MT_CHECK(MPI_Allgather(in, N, MPI_FLOAT, out, N, MPI_FLOAT, MPI_COMM_WORLD) == MPI_SUCCESS, "allgather rc");
            same = mt_identical(out, rlen * sizeof(float), MPI_COMM_WORLD);
            for (int r = 0; r < size; ++r) {
                fill(ref + (size_t)r * N, r, call, constant);
                int w = width_of(out + (size_t)r * N, ref + (size_t)r * N, N);
                if (r == 0) width = w;
                else if (w != width) width = -1;
            }
        } else {
            fill(in, rank, call, constant);
            MT_CHECK(MPI_Allreduce(in, out, N, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS, "allreduce rc");
            same = mt_identical(out, N * sizeof(float), MPI_COMM_WORLD);
            /* the width is not readable off a sum: the error against the exact sum tells
             * 8 bits (error > 1e-2) from 32 (exact up to fp32 summation order, < 1e-6) */
            for (int r = 0; r < size; ++r) {
                fill(ref, r, call, constant);
                for (size_t i = 0; i < N; ++i) exact[i] = (r ? exact[i] : 0) + ref[i];
            }
            double e2 = 0, x2 = 0;
            for (size_t i = 0; i < N; ++i) e2 += (out[i] - exact[i]) * (out[i] - exact[i]), x2 += exact[i] * exact[i];
            double rel = sqrt(e2 / x2);
            width = rel < 1e-6 ? 32 : rel > 1e-2 ? 8 : 0; /* 0: in between */
        }
        MT_CHECK(same, "call %d: ranks hold different bits (bcast: or the root's buffer was written)", call + 1);
        MT_CHECK(width != -1, "call %d: no single bit width explains the data", call + 1);
        int wmin = 0, wmax = 0;
        MPI_Allreduce(&width, &wmin, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        MPI_Allreduce(&width, &wmax, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        MT_CHECK(wmin == wmax, "call %d: widths differ across ranks (%d..%d)", call + 1, wmin, wmax);
        widths[call] = width;
    }
    if (rank == 0) {
        printf("%s%s widths:", coll, constant ? " const" : "");
        for (int call = 0; call < CALLS; ++call) printf(" %d", widths[call]);
        printf("\n");
    }
    if (custom) {
        MT_CHECK(widths[0] == 8, "first call at %d bits, expected 8", widths[0]);
        MT_CHECK(widths[CALLS - 1] == 32, "last call at %d bits: the run was meant to reach 32", widths[CALLS - 1]);
    }
    for (int b = 0; b < nbuf && b < 4; ++b) free(send[b]), free(recv[b]);
    free(ref); free(orig); free(exact);
    return mt_finish();
}

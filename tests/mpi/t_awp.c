// SPDX-License-Identifier: BSD-3-Clause
/* AWP (Zhuang et al., Algorithm 1) through real collectives: widths follow the paper's rule
 * on the sender's norm (bcast) and on the shared result (allreduce); every rank reports the
 * same state; named presets refuse constants set beside them; the earlier rule stays
 * available as awp_rule=legacy_abs; reset forgets. */
#include "compmpi.h"
#include "mpitest.h"

static void set(MPI_Comm c, const char *k, const char *v) {
    MT_CHECK(compmpi_comm_set(c, k, v) == MPI_SUCCESS, "set %s=%s", k, v);
}

/* bits of the next call with this key, checked equal on every rank */
static int query(MPI_Comm c, const char *coll, int n, int root) {
    int bits = -1, lo, hi;
    long long calls = -1;
    MT_CHECK(compmpi_comm_query_awp(c, coll, n, root, &bits, &calls) == MPI_SUCCESS, "query");
    MPI_Allreduce(&bits, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&bits, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MT_CHECK(lo == hi, "%s: ranks report different widths %d..%d", coll, lo, hi);
    return bits;
}

int main(int argc, char **argv) {
    int rank, size;
    mt_init(&argc, &argv, &rank, &size);
    const int n = 100000;
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float)), *z = malloc(n * sizeof(float));
    float *x0 = malloc(n * sizeof(float));
    mt_fill(x, n, 3, rank);

    /* a named preset fixes T, INTERVAL, N and the start: setting one beside it is refused */
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MT_CHECK(compmpi_comm_set(comm, "awp_threshold", "-0.01") == MPI_ERR_INFO_VALUE, "T beside preset resnet accepted");
    set(comm, "awp_preset", "custom");
    set(comm, "awp_interval", "3");
    set(comm, "awp_threshold", "-0.01"); /* negative T: the norm must fall by more than 1% */

    /* bcast of data whose norm falls 5% per call: delta = -0.05 < T at every call after the
     * first, the counter fills every 3 calls and -- cumulative, every call compared, no
     * skip after a raise -- the width rises after calls 4, 7 and 10 */
    const int expect[14] = {0, 8, 8, 8, 16, 16, 16, 24, 24, 24, 32, 32, 32, 32};
    for (int call = 0; call < 14; ++call) {
        int bits = query(comm, "bcast", n, 0);
        MT_CHECK(bits == expect[call], "bcast: before call %d: bits %d, expected %d", call + 1, bits, expect[call]);
        float s = powf(0.95f, (float)call);
        for (int i = 0; i < n; ++i) x0[i] = mt_value(3, 0, i) * s;
        if (rank == 0) memcpy(y, x0, n * sizeof(float));
        else memset(y, 0, n * sizeof(float));
        MPI_Bcast(y, n, MPI_FLOAT, 0, comm);
        MT_CHECK(mt_bcast_ok(y, x0, n * sizeof(float), 0, comm), "call %d: root written or receivers differ", call + 1);
    }

    /* allreduce: the norm is the result's (shared by every rank). Falling 10% per call it
     * reaches 32 bits; the result is then exact up to fp32 summation order */
    for (int call = 0; call < 30; ++call) {
        for (int i = 0; i < n; ++i) z[i] = x[i] * powf(0.9f, (float)call);
        MPI_Allreduce(z, y, n, MPI_FLOAT, MPI_SUM, comm);
        MT_CHECK(mt_identical(y, n * sizeof(float), comm), "allreduce call %d: ranks differ", call + 1);
    }
    MT_CHECK(query(comm, "allreduce", n, -1) == 32, "falling allreduce did not reach 32 bits");
    int bits = -1;
    compmpi_comm_query_buffer(comm, y, n, &bits, NULL); /* the compatible form: allreduce's state */
    MT_CHECK(bits == 32, "compmpi_comm_query_buffer: %d", bits);
    MPI_Allreduce(x, y, n, MPI_FLOAT, MPI_SUM, comm);
    PMPI_Allreduce(x, z, n, MPI_FLOAT, MPI_SUM, comm);
    size_t diff = 0;
    for (int i = 0; i < n; ++i) diff += fabsf(y[i] - z[i]) > 1e-6f * (fabsf(z[i]) + 1e-3f);
    MT_CHECK(diff == 0, "32-bit awp result far from exact in %zu places", diff);

    /* a rising norm (doubling every call) never counts for T < 0 */
    float *w = malloc((n + 16) * sizeof(float));
    for (int call = 0; call < 10; ++call) {
        for (int i = 0; i < n + 16; ++i) w[i] = x[i % n] * (float)(1 << call);
        MPI_Allreduce(MPI_IN_PLACE, w, n + 16, MPI_FLOAT, MPI_SUM, comm);
    }
    MT_CHECK(query(comm, "allreduce", n + 16, -1) == 8, "rising buffer left 8 bits");

    /* reset forgets */
    compmpi_comm_reset_state(comm);
    MT_CHECK(query(comm, "bcast", n, 0) == 0, "after reset: still tracked");

    /* awp_rule=legacy_abs: |delta| < T (positive), any miss resets, the call after a raise
     * only records: with a constant input 8 (calls 1-4), 16 (5-8), 24 (9-12), 32 (13-) */
    MPI_Comm leg;
    MPI_Comm_dup(MPI_COMM_WORLD, &leg);
    set(leg, "awp_preset", "custom");
    MT_CHECK(compmpi_comm_set(leg, "awp_rule", "legacy_abs") == MPI_ERR_INFO_VALUE, "legacy_abs with T < 0 accepted");
    set(leg, "awp_threshold", "0.01");
    set(leg, "awp_interval", "3");
    set(leg, "awp_rule", "legacy_abs");
    const int expect_legacy[14] = {0, 8, 8, 8, 16, 16, 16, 16, 24, 24, 24, 24, 32, 32};
    for (int call = 0; call < 14; ++call) {
        int b = query(leg, "allreduce", n, -1);
        MT_CHECK(b == expect_legacy[call], "legacy: before call %d: bits %d, expected %d", call + 1, b,
                 expect_legacy[call]);
        MPI_Allreduce(x, y, n, MPI_FLOAT, MPI_SUM, leg);
        MT_CHECK(mt_identical(y, n * sizeof(float), leg), "legacy call %d: ranks differ", call + 1);
    }

    free(x); free(y); free(z); free(w); free(x0);
    MPI_Comm_free(&comm);
    MPI_Comm_free(&leg);
    return mt_finish();
}

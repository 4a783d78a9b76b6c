/* AWP progression through real collectives: a buffer starts at awp_start_bits and rises by
 * awp_step after awp_interval calls whose l2-norm changes less than awp_threshold; a buffer
 * whose norm keeps changing stays put; every rank agrees; reset forgets. */
#include "compmpi.h"
#include "mpitest.h"

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MT_CHECK(compmpi_comm_set(comm, "policy", "awp") == 0, "set");
    MT_CHECK(compmpi_comm_set(comm, "awp_interval", "3") == 0, "set");
    MT_CHECK(compmpi_comm_set(comm, "awp_threshold", "0.01") == 0, "set");
    const int n = 100000;
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float)), *z = malloc(n * sizeof(float));
    mt_fill(x, n, 3, rank);

    /* stalled norm: the same input every call. Call 1 records the norm, calls 2-4 stall,
     * raise to 16; the first call at a new width only records again; so 8 (calls 1-4),
     * 16 (5-8), 24 (9-12), 32 (13-) */
    int expect[14] = {8, 8, 8, 8, 16, 16, 16, 16, 24, 24, 24, 24, 32, 32};
    for (int call = 0; call < 14; ++call) {
        int bits = -1;
        long long calls = -1;
        compmpi_comm_query_buffer(comm, y, n, &bits, &calls);
        MT_CHECK(bits == (call ? expect[call] : 0), "before call %d: bits %d, expected %d", call + 1, bits,
                 call ? expect[call] : 0);
        MPI_Allreduce(x, y, n, MPI_FLOAT, MPI_SUM, comm);
        int all_same = mt_identical(y, n * sizeof(float), comm);
        MT_CHECK(all_same, "call %d: ranks differ", call + 1);
    }
    /* at 32 bits the result is exact */
    MPI_Allreduce(x, y, n, MPI_FLOAT, MPI_SUM, comm);
    PMPI_Allreduce(x, z, n, MPI_FLOAT, MPI_SUM, comm);
    size_t diff = 0;
    for (int i = 0; i < n; ++i) diff += fabsf(y[i] - z[i]) > 1e-6f * (fabsf(z[i]) + 1e-3f);
    MT_CHECK(diff == 0, "32-bit awp result far from exact in %zu places", diff);

    /* a buffer whose norm doubles every call never rises */
    float *w = malloc(n * sizeof(float));
    for (int call = 0; call < 10; ++call) {
        for (int i = 0; i < n; ++i) w[i] = x[i] * (float)(1 << call);
        MPI_Allreduce(MPI_IN_PLACE, w, n, MPI_FLOAT, MPI_SUM, comm);
    }
    int bits = 0;
    compmpi_comm_query_buffer(comm, w, n, &bits, NULL);
    MT_CHECK(bits == 8, "changing buffer rose to %d bits", bits);

    /* reset forgets */
    compmpi_comm_reset_state(comm);
    compmpi_comm_query_buffer(comm, y, n, &bits, NULL);
    MT_CHECK(bits == 0, "after reset: %d", bits);

    free(x); free(y); free(z); free(w);
    MPI_Comm_free(&comm);
    return mt_finish();
}

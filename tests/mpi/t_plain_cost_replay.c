// SPDX-License-Identifier: BSD-3-Clause
/* Record / replay of the cost model's decisions (settings cost_record / cost_replay,
 * src/runtime/costmodel.h; driven by tests/mpi/cost_replay.sh). A program that knows nothing of
 * libcompmpi (run preloaded) calls allreduce and allgather on two size classes, kCalls times
 * each, on inputs that depend only on the call, checks that every rank holds the same bits,
 * and prints (rank 0) an FNV-1a hash of the results of the calls from kFrom on -- those that
 * follow the longest exploration (kCostExploreCompMax = 28 calls a class): a run that
 * recorded its decisions and a run that replays them take the same paths there, so print the
 * same hash, whatever the timings (or the test-only timing fault) of the replaying run. */
#include "mpitest.h"

enum { kCalls = 40, kFrom = 28, kSizes = 2 };

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

int main(int argc, char **argv) {
    int rank, size;
    mt_init(&argc, &argv, &rank, &size);
    const size_t sizes[kSizes] = {4096, 65536}; /* floats: 16 KiB, 256 KiB per rank */
    const size_t nmax = sizes[kSizes - 1] * (size_t)size;
    float *in = malloc(nmax * sizeof(float)), *out = malloc(nmax * sizeof(float));
    uint64_t h = 1469598103934665603ull;
    for (int call = 0; call < kCalls; ++call)
        for (int s = 0; s < kSizes; ++s)
            for (int coll = 0; coll < 2; ++coll) {
                const size_t n = sizes[s], outn = coll ? n * (size_t)size : n;
                mt_fill(in, n, 1000 + (uint64_t)call * 7 + (uint64_t)s * 3 + (uint64_t)coll, rank);
                if (coll == 0) MPI_Allreduce(in, out, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
                else MPI_Allgather(in, (int)n, MPI_FLOAT, out, (int)n, MPI_FLOAT, MPI_COMM_WORLD);
                MT_CHECK(mt_identical(out, outn * sizeof(float), MPI_COMM_WORLD), "coll %d n=%zu call %d: ranks differ",
                         coll, n, call);
                if (call >= kFrom) h = fnv(h, out, outn * sizeof(float));
            }
    if (rank == 0) printf("t_plain_cost_replay: results_hash=%016llx\n", (unsigned long long)h);
    free(in);
    free(out);
    return mt_finish();
}

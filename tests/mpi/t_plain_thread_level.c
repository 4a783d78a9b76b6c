// SPDX-License-Identifier: BSD-3-Clause
/* The thread level a program gets is the one it asked for (issue 42, part 1): libcompmpi's
 * default nb_progress=auto never raises it. A plain MPI program:
 *
 *   t_plain_thread_level [init|single|funneled|serialized|multiple] [expect:LEVEL]
 *
 * init: MPI_Init; otherwise MPI_Init_thread at that level. expect:LEVEL (default: the level
 * asked, single for init): MPI_Query_thread and MPI_Init_thread's provided must be it;
 * expect0:LEVEL: rank 0's (an MPMD line whose rank 0 runs with other settings). Then a
 * float MPI_Iallreduce, MPI_Ibcast and MPI_Iallgather of 64 Ki values (above min_bytes) and
 * the blocking MPI_Allreduce of the same data, each checked: the non-blocking results against
 * PMPI_Allreduce & co. bit for bit when the line says `exact` (they passed through), against
 * the exact sum within 1% of the largest |value| otherwise (bitpack's default width). The
 * testlist lines read COMPMPI_STATS to tell which calls were compressed. */
#include "mpitest.h"

static int level_of(const char *s) {
    if (!strcmp(s, "single") || !strcmp(s, "init")) return MPI_THREAD_SINGLE;
    if (!strcmp(s, "funneled")) return MPI_THREAD_FUNNELED;
    if (!strcmp(s, "serialized")) return MPI_THREAD_SERIALIZED;
    if (!strcmp(s, "multiple")) return MPI_THREAD_MULTIPLE;
    return -1;
}

int main(int argc, char **argv) {
    const char *ask = argc > 1 ? argv[1] : "init";
    int expect = level_of(ask), expect0 = -1, exact = 0;
    for (int a = 2; a < argc; ++a) {
        if (!strncmp(argv[a], "expect:", 7)) expect = level_of(argv[a] + 7);
        else if (!strncmp(argv[a], "expect0:", 8)) expect0 = level_of(argv[a] + 8);
        else if (!strcmp(argv[a], "exact")) exact = 1;
    }
    int provided = -1, rank, size;
    if (!strcmp(ask, "init")) MPI_Init(&argc, &argv), provided = -2;
    else MPI_Init_thread(&argc, &argv, level_of(ask), &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0 && expect0 >= 0) expect = expect0;
    int query = -1;
    MPI_Query_thread(&query);
    MT_CHECK(query == expect, "asked %s: MPI_Query_thread says %d, expected %d", ask, query, expect);
    if (provided != -2) MT_CHECK(provided == query, "MPI_Init_thread's provided %d, MPI_Query_thread %d", provided, query);

    const size_t n = 65536;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *ref = malloc(n * sizeof *ref);
    float *g = malloc(n * (size_t)size * sizeof *g), *gref = malloc(n * (size_t)size * sizeof *gref);
    mt_fill(x, n, 11, rank);
    PMPI_Allreduce(x, ref, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    float amax = 0;
    for (size_t i = 0; i < n; ++i) amax = fmaxf(amax, fabsf(ref[i]));
    MPI_Request rq;
    /* allreduce: the non-blocking form, then the blocking one (compressed under every level) */
    for (int form = 0; form < 2; ++form) {
        if (form == 0) {
            MPI_Iallreduce(x, y, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &rq);
            MPI_Wait(&rq, MPI_STATUS_IGNORE);
        } else {
            MPI_Allreduce(x, y, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        }
        size_t bad = 0;
        for (size_t i = 0; i < n; ++i) {
            if (form == 0 && exact) bad += memcmp(&y[i], &ref[i], sizeof(float)) != 0;
            else bad += !(fabsf(y[i] - ref[i]) <= 0.01f * amax);
        }
        MT_CHECK(bad == 0, "%s allreduce: %zu of %zu values wrong", form ? "blocking" : "non-blocking", bad, n);
    }
    /* bcast from rank 0, allgather: inputs' bits through PMPI, compared */
    memcpy(y, x, n * sizeof *y);
    MPI_Ibcast(y, (int)n, MPI_FLOAT, 0, MPI_COMM_WORLD, &rq);
    MPI_Wait(&rq, MPI_STATUS_IGNORE);
    memcpy(ref, x, n * sizeof *ref);
    PMPI_Bcast(ref, (int)n, MPI_FLOAT, 0, MPI_COMM_WORLD);
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i)
        bad += exact ? memcmp(&y[i], &ref[i], sizeof(float)) != 0 : !(fabsf(y[i] - ref[i]) <= 0.01f * amax);
    MT_CHECK(bad == 0, "ibcast: %zu of %zu values wrong", bad, n);
    MPI_Iallgather(x, (int)n, MPI_FLOAT, g, (int)n, MPI_FLOAT, MPI_COMM_WORLD, &rq);
    MPI_Wait(&rq, MPI_STATUS_IGNORE);
    PMPI_Allgather(x, (int)n, MPI_FLOAT, gref, (int)n, MPI_FLOAT, MPI_COMM_WORLD);
    bad = 0;
    for (size_t i = 0; i < n * (size_t)size; ++i)
        bad += exact ? memcmp(&g[i], &gref[i], sizeof(float)) != 0 : !(fabsf(g[i] - gref[i]) <= 0.01f * amax);
    MT_CHECK(bad == 0, "iallgather: %zu of %zu values wrong", bad, n * (size_t)size);
    free(x), free(y), free(ref), free(g), free(gref);
    return mt_finish();
}

// SPDX-License-Identifier: BSD-3-Clause
/* The cost model measures every entry point, and a result changes only in calls it decided
 * to compress (issue 29). A program that knows nothing of libcompmpi (run preloaded) calls
 * each entry point -- blocking, non-blocking and (MPI-4) persistent allreduce, bcast,
 * allgather and reduce_scatter_block, in place and not -- on two size classes, and checks:
 *   - every rank holds the same bits after every call; a bcast root's buffer is untouched;
 *   - the calls that explore (at least the first kExplore of each class: pairs of a timed exact
 *     call and a timed compressed run on a shadow output, src/runtime/costmodel.h) return MPI's exact result,
 *     bit for bit (before issue 29 the compressed ones returned awp's 8-bit values: MPICH's
 *     float bcast tests and OSU's validation failed under the default preload);
 *   - --all-exact (COMPMPI_FAULT=cost_plain: the model decides exact whatever it measured):
 *     every call returns MPI's exact result;
 *   - --compressed (COMPMPI_FAULT=cost_compress): the calls after exploration, up to the
 *     model's re-check, are compressed (none bit-exact on this data) and within bound=X
 *     (relative l2 error against the exact result).
 * The testlist lines read the statistics to see which path each call took: explored
 * (cost_explore), decided exact on a progress thread (cost_model_queued) or issued straight
 * to MPI's own non-blocking collective (cost_model).
 * Arguments: --all-exact | --compressed, calls=N (default 24), burst=B (issue B non-blocking
 * calls before waiting for them; default 1: issue then wait), bound=X (default 0.01).
 * The exact reference is MPI's own collective called through PMPI_* (past the preload): the
 * blocking one, and for the non-blocking and persistent forms also the non-blocking one --
 * MPI may sum in another order there (Open MPI's libnbc at 3 ranks does), and both are MPI's
 * exact result (an explored or queued call runs the blocking collective on the progress
 * thread, a call issued straight to MPI the non-blocking one). */
#include "mpitest.h"

/* kExplore: the calls every class explores at least (src/runtime/costmodel.h: 2 warm-up pairs and
 * 3 pairs, kCostExploreExactMin; exactly that under COMPMPI_FAULT=cost_plain/cost_compress,
 * kCostExploreForced, which also skips the re-checks) */
enum { kExplore = 10, kRecheck = 64, kMaxBurst = 16 };
enum Form { F_BLOCKING, F_NONBLOCKING, F_PERSISTENT, F_N };
enum Coll { C_ALLREDUCE, C_BCAST, C_ALLGATHER, C_RSB, C_N };
static const char *kForm[] = {"blocking", "nonblocking", "persistent"};
static const char *kColl[] = {"allreduce", "bcast", "allgather", "reduce_scatter_block"};

static int rank, size, mode, calls = 24, burst = 1;
static double bound = 0.01;

/* One call's buffers: input, output, the exact reference and the pristine input. */
struct Slot {
    float *in, *out, *ref, *ref_nb, *orig;
    MPI_Request req;
};

static size_t out_count(enum Coll c, size_t n) {
    return c == C_ALLGATHER ? n * (size_t)size : c == C_RSB ? n / (size_t)size : n;
}

static void fill(struct Slot *s, enum Coll c, size_t n, int inplace, uint64_t seed) {
    mt_fill(s->orig, n, seed, rank);
    memcpy(s->in, s->orig, n * sizeof(float));
    const size_t on = out_count(c, n);
    for (size_t i = 0; i < on; ++i) s->out[i] = -1.0f;
    if (c == C_BCAST) memcpy(s->out, s->orig, n * sizeof(float)); /* the root's data */
    if (inplace && c == C_ALLGATHER) memcpy(s->out + n * (size_t)rank, s->orig, n * sizeof(float));
    if (inplace && (c == C_ALLREDUCE || c == C_RSB)) memcpy(s->out, s->orig, n * sizeof(float));
}

/* MPI's exact result, through PMPI_*: blocking into s->ref, non-blocking into s->ref_nb */
static void reference(struct Slot *s, enum Coll c, size_t n, int root, int nonblocking) {
    const int blk = (int)(n / (size_t)size);
    MPI_Request r = MPI_REQUEST_NULL;
    if (nonblocking) switch (c) {
            case C_ALLREDUCE: PMPI_Iallreduce(s->orig, s->ref_nb, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &r); break;
            case C_BCAST:
                memcpy(s->ref_nb, s->orig, n * sizeof(float));
                PMPI_Ibcast(s->ref_nb, (int)n, MPI_FLOAT, root, MPI_COMM_WORLD, &r);
                break;
            case C_ALLGATHER:
                PMPI_Iallgather(s->orig, (int)n, MPI_FLOAT, s->ref_nb, (int)n, MPI_FLOAT, MPI_COMM_WORLD, &r);
                break;
            case C_RSB:
                PMPI_Ireduce_scatter_block(s->orig, s->ref_nb, blk, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &r);
                break;
            default: break;
        }
    PMPI_Wait(&r, MPI_STATUS_IGNORE);
    switch (c) {
        case C_ALLREDUCE: PMPI_Allreduce(s->orig, s->ref, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
        case C_BCAST:
            memcpy(s->ref, s->orig, n * sizeof(float));
            PMPI_Bcast(s->ref, (int)n, MPI_FLOAT, root, MPI_COMM_WORLD);
            break;
        case C_ALLGATHER: PMPI_Allgather(s->orig, (int)n, MPI_FLOAT, s->ref, (int)n, MPI_FLOAT, MPI_COMM_WORLD); break;
        case C_RSB: PMPI_Reduce_scatter_block(s->orig, s->ref, blk, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
        default: break;
    }
}

/* Issue the call (blocking: run it). persistent: *preq is the request, started here. */
static void issue(struct Slot *s, enum Form f, enum Coll c, size_t n, int inplace, int root, MPI_Request *preq) {
    const void *sb = inplace ? MPI_IN_PLACE : s->in;
    const int blk = (int)(n / (size_t)size);
    s->req = MPI_REQUEST_NULL;
    if (f == F_PERSISTENT) {
        MPI_Start(preq);
        s->req = *preq;
        return;
    }
    MPI_Request *r = f == F_NONBLOCKING ? &s->req : NULL;
    switch (c) {
        case C_ALLREDUCE:
            if (r) MPI_Iallreduce(sb, s->out, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, r);
            else MPI_Allreduce(sb, s->out, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            break;
        case C_BCAST:
            if (r) MPI_Ibcast(s->out, (int)n, MPI_FLOAT, root, MPI_COMM_WORLD, r);
            else MPI_Bcast(s->out, (int)n, MPI_FLOAT, root, MPI_COMM_WORLD);
            break;
        case C_ALLGATHER:
            if (inplace) sb = MPI_IN_PLACE;
            if (r) MPI_Iallgather(sb, (int)n, MPI_FLOAT, s->out, (int)n, MPI_FLOAT, MPI_COMM_WORLD, r);
            else MPI_Allgather(sb, (int)n, MPI_FLOAT, s->out, (int)n, MPI_FLOAT, MPI_COMM_WORLD);
            break;
        case C_RSB:
            if (r) MPI_Ireduce_scatter_block(sb, s->out, blk, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, r);
            else MPI_Reduce_scatter_block(sb, s->out, blk, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            break;
        default: break;
    }
}

#if MPI_VERSION >= 4
static void persistent_init(struct Slot *s, enum Coll c, size_t n, int inplace, int root, MPI_Request *req) {
    const void *sb = inplace ? MPI_IN_PLACE : s->in;
    const int blk = (int)(n / (size_t)size);
    switch (c) {
        case C_ALLREDUCE:
            MPI_Allreduce_init(sb, s->out, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, req);
            break;
        case C_BCAST: MPI_Bcast_init(s->out, (int)n, MPI_FLOAT, root, MPI_COMM_WORLD, MPI_INFO_NULL, req); break;
        case C_ALLGATHER:
            MPI_Allgather_init(sb, (int)n, MPI_FLOAT, s->out, (int)n, MPI_FLOAT, MPI_COMM_WORLD, MPI_INFO_NULL, req);
            break;
        case C_RSB:
            MPI_Reduce_scatter_block_init(sb, s->out, blk, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, req);
            break;
        default: break;
    }
}
#endif

/* Check call number k of a class (0-based) after it completed. */
static void check(struct Slot *s, enum Form f, enum Coll c, size_t n, int root, int k) {
    const size_t on = out_count(c, n);
    if (c == C_BCAST)
        MT_CHECK(mt_bcast_ok(s->out, s->orig, n * sizeof(float), root, MPI_COMM_WORLD),
                 "%s %s n=%zu call %d: root changed or receivers differ", kForm[f], kColl[c], n, k);
    else if (c != C_RSB) /* reduce-scatter: every rank holds its own block */
        MT_CHECK(mt_identical(s->out, on * sizeof(float), MPI_COMM_WORLD), "%s %s n=%zu call %d: ranks differ",
                 kForm[f], kColl[c], n, k);
    MT_CHECK(memcmp(s->in, s->orig, n * sizeof(float)) == 0, "%s %s: the input was written", kForm[f], kColl[c]);
    int exact = memcmp(s->out, s->ref, on * sizeof(float)) == 0 ||
                (f != F_BLOCKING && memcmp(s->out, s->ref_nb, on * sizeof(float)) == 0);
    MPI_Allreduce(MPI_IN_PLACE, &exact, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    double e2 = 0, r2 = 0;
    for (size_t i = 0; i < on; ++i) {
        const double d = (double)s->out[i] - s->ref[i];
        e2 += d * d, r2 += (double)s->ref[i] * s->ref[i];
    }
    if (k < kExplore)
        MT_CHECK(exact, "%s %s n=%zu call %d: an exploring call changed the result", kForm[f], kColl[c], n, k);
    else if (mode == 1)
        MT_CHECK(exact, "%s %s n=%zu call %d: decided exact, but the result differs", kForm[f], kColl[c], n, k);
    else if (mode == 2 && k < kExplore + kRecheck)
        MT_CHECK(!exact && sqrt(e2 / r2) < bound, "%s %s n=%zu call %d: decided compressed: exact=%d rel err %g",
                 kForm[f], kColl[c], n, k, exact, sqrt(e2 / r2));
}

int main(int argc, char **argv) {
    mt_init(&argc, &argv, &rank, &size);
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--all-exact")) mode = 1;
        else if (!strcmp(argv[i], "--compressed")) mode = 2;
        else if (!strncmp(argv[i], "calls=", 6)) calls = atoi(argv[i] + 6);
        else if (!strncmp(argv[i], "burst=", 6)) burst = atoi(argv[i] + 6);
        else if (!strncmp(argv[i], "bound=", 6)) bound = atof(argv[i] + 6);
    }
    if (burst < 1) burst = 1;
    if (burst > kMaxBurst) burst = kMaxBurst;
    /* the blocking calls' size classes (powers of two from 4 KiB per rank) apart from the
     * others': a class the blocking calls decided is not explored again by the non-blocking
     * ones, which take that decision as it stands (the non-blocking calls' own table and each
     * persistent request's are separate) */
    const size_t nmax = ((size_t)1024 << 7) * (size_t)size;
    struct Slot slot[kMaxBurst];
    for (int b = 0; b < kMaxBurst; ++b) {
        slot[b].in = malloc(nmax * sizeof(float)), slot[b].out = malloc(nmax * sizeof(float));
        slot[b].ref = malloc(nmax * sizeof(float)), slot[b].orig = malloc(nmax * sizeof(float));
        slot[b].ref_nb = malloc(nmax * sizeof(float));
    }
    int forms = F_N;
#if MPI_VERSION < 4
    forms = F_PERSISTENT; /* Open MPI 4.1: no persistent collectives */
#endif
    for (int f = 0; f < forms; ++f)
        for (int c = 0; c < C_N; ++c)
            for (int si = 0; si < 2; ++si)
                for (int inplace = 0; inplace < 2; ++inplace) {
                    if (c == C_BCAST && inplace) continue;
                    const int cls = (f == F_BLOCKING ? 0 : 4) + inplace * 2 + si;
                    const size_t n = ((size_t)1024 << cls) / (size_t)size * (size_t)size;
                    const int root = size - 1;
                    const int nb = f == F_BLOCKING ? 1 : burst;
                    MPI_Request preq[kMaxBurst];
#if MPI_VERSION >= 4
                    if (f == F_PERSISTENT) /* one request per slot: each its own class */
                        for (int b = 0; b < nb; ++b) persistent_init(&slot[b], c, n, inplace, root, &preq[b]);
#endif
                    for (int k0 = 0; k0 < calls; k0 += nb) {
                        const int m = k0 + nb <= calls ? nb : calls - k0;
                        for (int b = 0; b < m; ++b) {
                            fill(&slot[b], c, n, inplace, 1000u + (unsigned)(k0 + b) * 7u + (unsigned)c);
                            reference(&slot[b], c, n, root, f != F_BLOCKING);
                        }
                        for (int b = 0; b < m; ++b) issue(&slot[b], f, c, n, inplace, root, &preq[b]);
                        for (int b = 0; b < m; ++b) MPI_Wait(&slot[b].req, MPI_STATUS_IGNORE);
                        /* persistent: request b's own call count is k0 / nb */
                        for (int b = 0; b < m; ++b) check(&slot[b], f, c, n, root, f == F_PERSISTENT ? k0 / nb : k0 + b);
                    }
#if MPI_VERSION >= 4
                    if (f == F_PERSISTENT)
                        for (int b = 0; b < nb; ++b) MPI_Request_free(&preq[b]);
#endif
                }
    for (int b = 0; b < kMaxBurst; ++b)
        free(slot[b].in), free(slot[b].out), free(slot[b].ref), free(slot[b].ref_nb), free(slot[b].orig);
    return mt_finish();
}

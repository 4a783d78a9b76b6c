// SPDX-License-Identifier: BSD-3-Clause
/* Fault injection (test-only switch COMPMPI_FAULT, src/base/fault.h): one rank's encoder fails,
 * one blob is corrupted or cut short after encoding, one PMPI call inside a compressed
 * algorithm returns an error, a workspace allocation fails, or a rank aborts or dies in the
 * middle of a collective. The testlist names the fault; this program checks that every rank
 * reaches the same outcome and nothing hangs:
 *   - every call: every rank holds the same bits, the input buffer is untouched;
 *   - the faulted call (arg fallback=N, 1-based): the result is EXACT (the exact fallback),
 *     every other call is compressed (lossy, so not exact): the fallback happened exactly
 *     there and nowhere else; fallback=none: every call compressed; fallback=all: every call
 *     exact (e.g. settings differ across ranks: the communicator passes through);
 *   - mpi_error, rank_abort, rank_kill, alloc_*: the program sets MPI_ERRORS_RETURN (arg
 *     errors=return) or an error handler that reports and returns (arg errors=handler) on
 *     its communicator; the testlist expects the job to end (a clean abort naming the cause),
 *     never to hang and never to hand a rank an error while its peers wait;
 *   - app_abort=N: the last rank calls MPI_Abort itself while call N is in flight (a
 *     non-blocking or persistent form: between issuing it and waiting; blocking: just before
 *     entering it, while its peers are inside).
 * Collectives (coll=): allreduce, allgather, bcast, reduce_scatter_block, their non-blocking
 * forms iallreduce, iallgather, ibcast, ireduce_scatter_block (run by the progress thread)
 * and the MPI-4 persistent forms allreduce_init, allgather_init, bcast_init,
 * reduce_scatter_block_init (one request started every call).
 * Data are multiples of 1/16 in [-64, 64): sums over a few ranks are exact in any order, so
 * the exact result is known locally; bitpack's widths cannot carry them exactly.
 * Arguments: coll=NAME  calls=K  fallback=N|none|all  root=R  n=ELEMS  app_abort=N
 *            errors=fatal|return|handler  segment=E (pipelined allreduce, E elements per
 *            segment: only the faulted first segment of call N falls back)
 * A watchdog (alarm) ends a hung run after 120 s with a "watchdog" line, which
 * tests/mpi/run_tests.sh counts as a failure even where the line expects the job to fail. */
#include "mpitest.h"

static int g_rank;

static void on_error(MPI_Comm *comm, int *code, ...) {
    (void)comm;
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(*code, s, &len);
    fprintf(stderr, "t_fault: rank %d: error handler called: %s\n", g_rank, s);
    fflush(stderr);
}

enum { BLOCKING, NONBLOCKING, PERSISTENT };
enum { AR, AG, BC, RS };

/* Issue (blocking: run) one collective of kind base in form `form`; *req for the others.
 * A persistent request is made at the first call (its buffers stay the same) and started. */
static int issue(int base, int form, const float *in, float *out, size_t n, int root, MPI_Comm comm,
                 MPI_Request *req) {
    const int c = (int)n;
    if (form == BLOCKING) {
        *req = MPI_REQUEST_NULL;
        if (base == AR) return MPI_Allreduce(in, out, c, MPI_FLOAT, MPI_SUM, comm);
        if (base == AG) return MPI_Allgather(in, c, MPI_FLOAT, out, c, MPI_FLOAT, comm);
        if (base == BC) return MPI_Bcast(out, c, MPI_FLOAT, root, comm);
        return MPI_Reduce_scatter_block(in, out, c, MPI_FLOAT, MPI_SUM, comm);
    }
    if (form == NONBLOCKING) {
        if (base == AR) return MPI_Iallreduce(in, out, c, MPI_FLOAT, MPI_SUM, comm, req);
        if (base == AG) return MPI_Iallgather(in, c, MPI_FLOAT, out, c, MPI_FLOAT, comm, req);
        if (base == BC) return MPI_Ibcast(out, c, MPI_FLOAT, root, comm, req);
        return MPI_Ireduce_scatter_block(in, out, c, MPI_FLOAT, MPI_SUM, comm, req);
    }
#if MPI_VERSION >= 4
    if (*req == MPI_REQUEST_NULL) {
        int rc;
        if (base == AR) rc = MPI_Allreduce_init(in, out, c, MPI_FLOAT, MPI_SUM, comm, MPI_INFO_NULL, req);
        else if (base == AG) rc = MPI_Allgather_init(in, c, MPI_FLOAT, out, c, MPI_FLOAT, comm, MPI_INFO_NULL, req);
        else if (base == BC) rc = MPI_Bcast_init(out, c, MPI_FLOAT, root, comm, MPI_INFO_NULL, req);
        else rc = MPI_Reduce_scatter_block_init(in, out, c, MPI_FLOAT, MPI_SUM, comm, MPI_INFO_NULL, req);
        if (rc != MPI_SUCCESS) return rc;
    }
    return MPI_Start(req);
#else
    (void)in, (void)out, (void)root, (void)comm, (void)req;
    return MPI_ERR_OTHER; /* MPI-3.1: no persistent collectives */
#endif
}

static float value(int rank, int call, size_t i) {
    uint64_t z = mt_mix(((uint64_t)call << 40) ^ ((uint64_t)rank << 32) ^ i);
    return (float)((int)(z % 2048) - 1024) / 16.0f;
}

int main(int argc, char **argv) {
    const char *coll = "allreduce", *errors = "fatal";
    int calls = 10, fallback = -1 /* none */, root = 0, app_abort = 0;
    size_t n = 20000, segment = 0;
    for (int i = 1; i < argc; ++i) {
        if (!strncmp(argv[i], "coll=", 5)) coll = argv[i] + 5;
        else if (!strncmp(argv[i], "calls=", 6)) calls = atoi(argv[i] + 6);
        else if (!strcmp(argv[i], "fallback=none")) fallback = -1;
        else if (!strcmp(argv[i], "fallback=all")) fallback = 0;
        else if (!strncmp(argv[i], "fallback=", 9)) fallback = atoi(argv[i] + 9);
        else if (!strncmp(argv[i], "root=", 5)) root = atoi(argv[i] + 5);
        else if (!strncmp(argv[i], "n=", 2)) n = (size_t)atol(argv[i] + 2);
        else if (!strncmp(argv[i], "segment=", 8)) segment = (size_t)atol(argv[i] + 8);
        else if (!strncmp(argv[i], "errors=", 7)) errors = argv[i] + 7;
        else if (!strncmp(argv[i], "app_abort=", 10)) app_abort = atoi(argv[i] + 10);
        else {
            fprintf(stderr, "t_fault: unknown argument '%s'\n", argv[i]);
            return 2;
        }
    }
    mt_watchdog("t_fault", 120);
    int size;
    mt_init(&argc, &argv, &g_rank, &size);
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    if (!strcmp(errors, "return")) {
        MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    } else if (!strcmp(errors, "handler")) {
        MPI_Errhandler eh;
        MPI_Comm_create_errhandler(on_error, &eh);
        MPI_Comm_set_errhandler(comm, eh);
        MPI_Errhandler_free(&eh);
    }
    /* the collective and its form: [i]NAME or NAME_init */
    int form = BLOCKING;
    char base_name[64];
    snprintf(base_name, sizeof base_name, "%s", coll);
    const size_t bl = strlen(base_name);
    if (bl > 5 && !strcmp(base_name + bl - 5, "_init")) form = PERSISTENT, base_name[bl - 5] = 0;
    else if (base_name[0] == 'i') form = NONBLOCKING, memmove(base_name, base_name + 1, bl);
    const int is_ar = !strcmp(base_name, "allreduce"), is_ag = !strcmp(base_name, "allgather"),
              is_bc = !strcmp(base_name, "bcast");
    const int is_rs = !strcmp(base_name, "reduce_scatter_block"); /* n elements per block */
    MT_CHECK(is_ar || is_ag || is_bc || is_rs, "coll=%s", coll);
#if MPI_VERSION < 4
    MT_CHECK(form != PERSISTENT, "coll=%s: this MPI has no persistent collectives", coll);
#endif
    const int base = is_ar ? AR : is_ag ? AG : is_bc ? BC : RS;
    MPI_Request req = MPI_REQUEST_NULL;
    const size_t out_n = is_ag ? n * (size_t)size : n, in_n = is_rs ? n * (size_t)size : n;
    float *in = malloc(in_n * sizeof(float)), *keep = malloc(in_n * sizeof(float));
    float *out = malloc(out_n * sizeof(float)), *want = malloc(out_n * sizeof(float));
    int errs_returned = 0;
    for (int k = 1; k <= calls; ++k) {
        for (size_t i = 0; i < in_n; ++i) in[i] = value(g_rank, k, i);
        memcpy(keep, in, in_n * sizeof(float));
        if (is_ar) {
            for (size_t i = 0; i < n; ++i) {
                float s = 0;
                for (int r = 0; r < size; ++r) s += value(r, k, i);
                want[i] = s;
            }
        } else if (is_rs) {
            for (size_t i = 0; i < n; ++i) {
                float s = 0;
                for (int r = 0; r < size; ++r) s += value(r, k, (size_t)g_rank * n + i);
                want[i] = s;
            }
        } else if (is_ag) {
            for (int r = 0; r < size; ++r)
                for (size_t i = 0; i < n; ++i) want[(size_t)r * n + i] = value(r, k, i);
        } else {
            for (size_t i = 0; i < n; ++i) want[i] = value(root, k, i);
            memcpy(out, in, n * sizeof(float));
        }
        const int aborts = k == app_abort && g_rank == size - 1;
        if (aborts && form == BLOCKING) { /* the peers enter the collective without us */
            fprintf(stderr, "t_fault: rank %d: MPI_Abort before call %d, the other ranks inside it\n", g_rank, k);
            usleep(200000); /* the launcher forwards the line before it ends the job */
            MPI_Abort(MPI_COMM_WORLD, 72);
        }
        int rc = issue(base, form, in, out, n, root, comm, &req);
        if (aborts) { /* the call is in flight on every rank */
            fprintf(stderr, "t_fault: rank %d: MPI_Abort with call %d in flight\n", g_rank, k);
            usleep(200000);
            MPI_Abort(MPI_COMM_WORLD, 72);
        }
        if (rc == MPI_SUCCESS && form != BLOCKING) rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) {
            /* only reached with errors=return|handler, and libcompmpi aborts before returning
             * an error from inside a compressed algorithm: reaching here is a failure */
            errs_returned++;
            MT_CHECK(0, "call %d returned MPI error %d instead of aborting the job", k, rc);
            break;
        }
        MT_CHECK(memcmp(in, keep, in_n * sizeof(float)) == 0, "call %d wrote the input buffer", k);
        if (is_bc) /* the root's buffer untouched, every receiver the same bits */
            MT_CHECK(mt_bcast_ok(out, keep, n * sizeof(float), root, comm), "call %d: bcast results differ", k);
        else if (!is_rs) /* reduce-scatter: each rank holds another block */
            MT_CHECK(mt_identical(out, out_n * sizeof(float), comm), "call %d: ranks hold different results", k);
        /* the root of a bcast keeps its own data whatever happened: judge on the receivers */
        int exact = memcmp(out, want, out_n * sizeof(float)) == 0, all_exact = 0, any_exact = 0;
        if (is_bc && g_rank == root) exact = -1;
        int e1 = exact < 0 ? 1 : exact, e2 = exact < 0 ? 0 : exact;
        MPI_Allreduce(&e1, &all_exact, 1, MPI_INT, MPI_LAND, comm);
        MPI_Allreduce(&e2, &any_exact, 1, MPI_INT, MPI_LOR, comm);
        const int expect_exact = fallback == 0 || fallback == k;
        if (segment && k == fallback) {
            /* pipelined allreduce: the segment the fault hit (the first: its encode comes
             * first) runs exactly, the others stay compressed */
            int e_first = memcmp(out, want, segment * sizeof(float)) == 0;
            int e_rest = memcmp(out + segment, want + segment, (out_n - segment) * sizeof(float)) == 0;
            int all_first = 0, any_rest = 0;
            MPI_Allreduce(&e_first, &all_first, 1, MPI_INT, MPI_LAND, comm);
            MPI_Allreduce(&e_rest, &any_rest, 1, MPI_INT, MPI_LOR, comm);
            MT_CHECK(all_first, "call %d: the faulted segment [0, %zu) is not exact", k, segment);
            MT_CHECK(!any_rest, "call %d: the segments after the faulted one are exact", k);
            continue;
        }
        if (expect_exact) MT_CHECK(all_exact, "call %d: expected the exact fallback, the result is not exact", k);
        else MT_CHECK(!any_exact, "call %d: expected a compressed (lossy) result, got the exact one", k);
    }
    (void)errs_returned;
    if (req != MPI_REQUEST_NULL) MPI_Request_free(&req); /* the persistent request */
    free(in);
    free(keep);
    free(out);
    free(want);
    MPI_Comm_free(&comm);
    return mt_finish();
}

/* Fault injection (test-only switch COMPMPI_FAULT, src/base/fault.h): one rank's encoder fails,
 * one blob is corrupted after encoding, or one PMPI call inside a compressed algorithm
 * returns an error. The testlist names the fault; this program checks that every rank
 * reaches the same outcome and nothing hangs:
 *   - every call: every rank holds the same bits, the input buffer is untouched;
 *   - the faulted call (arg fallback=N, 1-based): the result is EXACT (the exact fallback),
 *     every other call is compressed (lossy, so not exact): the fallback happened exactly
 *     there and nowhere else; fallback=none: every call compressed; fallback=all: every call
 *     exact (e.g. settings differ across ranks: the communicator passes through);
 *   - mpi_error: the program sets MPI_ERRORS_RETURN (arg errors=return) or an error handler
 *     that reports and returns (arg errors=handler) on MPI_COMM_WORLD; the testlist expects
 *     the job to abort cleanly (no rank can tell the others), never to hang.
 * Data are multiples of 1/16 in [-64, 64): sums over a few ranks are exact in any order, so
 * the exact result is known locally; bitpack's widths cannot carry them exactly.
 * Arguments: coll=allreduce|allgather|bcast|reduce_scatter_block  calls=K  fallback=N|none|all  root=R  n=ELEMS
 *            errors=fatal|return|handler  segment=E (pipelined allreduce, E elements per
 *            segment: only the faulted first segment of call N falls back)
 * A watchdog (alarm) ends a hung run after 120 s, well before the testlist timeout. */
#include <signal.h>
#include <unistd.h>

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

static float value(int rank, int call, size_t i) {
    uint64_t z = mt_mix(((uint64_t)call << 40) ^ ((uint64_t)rank << 32) ^ i);
    return (float)((int)(z % 2048) - 1024) / 16.0f;
}

int main(int argc, char **argv) {
    const char *coll = "allreduce", *errors = "fatal";
    int calls = 10, fallback = -1 /* none */, root = 0;
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
        else {
            fprintf(stderr, "t_fault: unknown argument '%s'\n", argv[i]);
            return 2;
        }
    }
    alarm(120);
    MPI_Init(&argc, &argv);
    int size;
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
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
    const int is_ar = !strcmp(coll, "allreduce"), is_ag = !strcmp(coll, "allgather"), is_bc = !strcmp(coll, "bcast");
    const int is_rs = !strcmp(coll, "reduce_scatter_block"); /* n elements per block */
    MT_CHECK(is_ar || is_ag || is_bc || is_rs, "coll=%s", coll);
    const size_t out_n = is_ag ? n * (size_t)size : n, in_n = is_rs ? n * (size_t)size : n;
    float *in = malloc(in_n * sizeof(float)), *keep = malloc(in_n * sizeof(float));
    float *out = malloc(out_n * sizeof(float)), *want = malloc(out_n * sizeof(float));
    int errs_returned = 0;
    for (int k = 1; k <= calls; ++k) {
        for (size_t i = 0; i < in_n; ++i) in[i] = value(g_rank, k, i);
        memcpy(keep, in, in_n * sizeof(float));
        int rc;
        if (is_ar) {
            for (size_t i = 0; i < n; ++i) {
                float s = 0;
                for (int r = 0; r < size; ++r) s += value(r, k, i);
                want[i] = s;
            }
            rc = MPI_Allreduce(in, out, (int)n, MPI_FLOAT, MPI_SUM, comm);
        } else if (is_rs) {
            for (size_t i = 0; i < n; ++i) {
                float s = 0;
                for (int r = 0; r < size; ++r) s += value(r, k, (size_t)g_rank * n + i);
                want[i] = s;
            }
            rc = MPI_Reduce_scatter_block(in, out, (int)n, MPI_FLOAT, MPI_SUM, comm);
        } else if (is_ag) {
            for (int r = 0; r < size; ++r)
                for (size_t i = 0; i < n; ++i) want[(size_t)r * n + i] = value(r, k, i);
            rc = MPI_Allgather(in, (int)n, MPI_FLOAT, out, (int)n, MPI_FLOAT, comm);
        } else {
            for (size_t i = 0; i < n; ++i) want[i] = value(root, k, i);
            memcpy(out, in, n * sizeof(float));
            rc = MPI_Bcast(out, (int)n, MPI_FLOAT, root, comm);
        }
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
    free(in);
    free(keep);
    free(out);
    free(want);
    MPI_Comm_free(&comm);
    return mt_finish();
}

// SPDX-License-Identifier: BSD-3-Clause
/* libcompmpi beside a PMPI profiler (README, "Beside a PMPI profiler"): a plain MPI program
 * run with the test profiler tests/mpi/prof/libtestprof.c preloaded before or after
 * libcompmpi. It allreduces, broadcasts and allgathers floats large enough to be compressed,
 * reads the profiler's counters around each call (testprof_get, found with dlsym) and checks
 * what the profiler saw and what the program got:
 *
 *   --expect=chained    libcompmpi first, chaining on (pmpi_chain=1, the default): the
 *                       profiler saw libcompmpi's exchanges of compressed bytes -- calls of
 *                       the kinds its algorithms use, none as large as the program's call,
 *                       (bcast, allgather) fewer bytes in all -- and never the program's call;
 *                       results within bitpack-16's error, the same on every rank, not exact
 *   --expect=unchained  libcompmpi first, COMPMPI_PMPI_CHAIN=0: the profiler saw nothing of
 *                       the collectives (libcompmpi called PMPI_* directly); results as above
 *   --expect=bypassed   the profiler first (or no libcompmpi): it saw exactly the program's
 *                       calls with the program's bytes and nothing else; results exact
 *   --mpit-chain-off    (with unchained) chaining switched off by an MPI_T write of the
 *                       control variable compmpi_pmpi_chain before MPI_Init, not by the
 *                       environment; after MPI_Init a second write is refused
 *   --reduce-scatter    then one MPI_Reduce_scatter_block of floats, a call the profiler does
 *                       not wrap: it reaches libcompmpi in every order (the bypassed order's
 *                       warning then comes from it); the result is checked, not the counters
 *
 * Run by tests/mpi/testlist with COMPMPI_CODEC=bitpack COMPMPI_BITS=16 (static) and 2 ranks
 * (an fp32 sum of two values is the same bits in any order: the bypassed allreduce is
 * compared bit for bit). The warning of the profiler-first order is checked by the testlist
 * (expect_stderr_count). */
#include <dlfcn.h>

#include "mpitest.h"

#define N (64 * 1024) /* allreduce and bcast: 256 KiB */
#define M (16 * 1024) /* allgather: 64 KiB per rank */

typedef int (*get_fn)(const char *, long long *, long long *, long long *);
static get_fn g_get;
static void (*g_reset)(void);

/* the call kinds that move data (not MPI_Wait, communicator calls, ...) */
static const char *const kTraffic[] = {"MPI_Allreduce", "MPI_Iallreduce", "MPI_Reduce", "MPI_Allgather",
                                       "MPI_Iallgather", "MPI_Bcast", "MPI_Ibcast", "MPI_Alltoall",
                                       "MPI_Ialltoall", "MPI_Alltoallv", "MPI_Sendrecv", "MPI_Send",
                                       "MPI_Recv", "MPI_Isend", "MPI_Irecv"};
#define NTRAFFIC (int)(sizeof kTraffic / sizeof kTraffic[0])

typedef struct {
    long long calls[NTRAFFIC], bytes[NTRAFFIC], max[NTRAFFIC];
    long long all_calls, all_bytes, all_max;
} Seen;

static void seen_read(Seen *s) {
    memset(s, 0, sizeof *s);
    for (int k = 0; k < NTRAFFIC; ++k) {
        g_get(kTraffic[k], &s->calls[k], &s->bytes[k], &s->max[k]);
        s->all_calls += s->calls[k];
        s->all_bytes += s->bytes[k];
        if (s->max[k] > s->all_max) s->all_max = s->max[k];
    }
}
static long long calls_of(const Seen *s, const char *kind) {
    for (int k = 0; k < NTRAFFIC; ++k)
        if (!strcmp(kTraffic[k], kind)) return s->calls[k];
    return 0;
}
static long long bytes_of(const Seen *s, const char *kind) {
    for (int k = 0; k < NTRAFFIC; ++k)
        if (!strcmp(kTraffic[k], kind)) return s->bytes[k];
    return 0;
}
static void seen_print(const char *what, const Seen *s) {
    printf("  %s: the profiler saw", what);
    for (int k = 0; k < NTRAFFIC; ++k)
        if (s->calls[k]) printf(" %s x%lld (%lld B)", kTraffic[k], s->calls[k], s->bytes[k]);
    printf("%s\n", s->all_calls ? "" : " nothing");
}

enum Expect { CHAINED, UNCHAINED, BYPASSED };

/* What the profiler saw of one program call `kind` of `bytes` bytes. `exchange_a`/`_b`: the
 * kinds libcompmpi's algorithm for it uses (one of them at least). `fewer`: its compressed
 * exchanges carry fewer bytes in all than the call (not so for the two-phase allreduce: a
 * reduce-scatter and an allgather of half-width blobs count 2 x 1/2 by this measure). */
static void check_seen(enum Expect e, const char *kind, long long bytes, const char *exchange_a,
                       const char *exchange_b, int fewer, int rank) {
    Seen s;
    seen_read(&s);
    if (rank == 0) seen_print(kind, &s);
    if (e == BYPASSED) {
        MT_CHECK(s.all_calls == 1 && calls_of(&s, kind) == 1 && bytes_of(&s, kind) == bytes,
                 "%s: the profiler should see the program's call only (1 call, %lld B); saw %lld calls, %lld B",
                 kind, bytes, s.all_calls, s.all_bytes);
    } else if (e == UNCHAINED) {
        MT_CHECK(s.all_calls == 0, "%s: chaining off, the profiler should see nothing; saw %lld calls (%lld B)",
                 kind, s.all_calls, s.all_bytes);
    } else {
        MT_CHECK(calls_of(&s, exchange_a) + calls_of(&s, exchange_b) > 0,
                 "%s: the profiler should see libcompmpi's %s/%s exchanges", kind, exchange_a, exchange_b);
        MT_CHECK(s.all_max < bytes, "%s: the profiler saw a call of %lld B, as large as the program's (%lld B)",
                 kind, s.all_max, bytes);
        if (fewer)
            MT_CHECK(s.all_bytes < bytes, "%s: the profiler saw %lld B, not fewer than the program's %lld B", kind,
                     s.all_bytes, bytes);
    }
}

/* decoded within bitpack-16's truncation (7 mantissa bits kept: relative error < 2^-7) */
static int close16(float got, double want, double scale) { return fabs(got - want) <= scale / 128.0 + 1e-30; }

int main(int argc, char **argv) {
    enum Expect e = BYPASSED;
    int reduce_scatter = 0, mpit_off = 0;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--expect=chained")) e = CHAINED;
        else if (!strcmp(argv[i], "--expect=unchained")) e = UNCHAINED;
        else if (!strcmp(argv[i], "--expect=bypassed")) e = BYPASSED;
        else if (!strcmp(argv[i], "--reduce-scatter")) reduce_scatter = 1;
        else if (!strcmp(argv[i], "--mpit-chain-off")) mpit_off = 1;
        else {
            fprintf(stderr, "t_plain_profiler: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    MPI_T_cvar_handle h = MPI_T_CVAR_HANDLE_NULL;
    int mpit_rc = MPI_SUCCESS;
    if (mpit_off) { /* before MPI_Init: the write takes the place of COMPMPI_PMPI_CHAIN=0 */
        int provided, idx, count, zero = 0;
        mpit_rc = MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
        if (mpit_rc == MPI_SUCCESS) mpit_rc = MPI_T_cvar_get_index("compmpi_pmpi_chain", &idx);
        if (mpit_rc == MPI_SUCCESS) mpit_rc = MPI_T_cvar_handle_alloc(idx, NULL, &h, &count);
        if (mpit_rc == MPI_SUCCESS) mpit_rc = MPI_T_cvar_write(h, &zero);
    }
    MPI_Init(&argc, &argv);
    int rank, P;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    g_get = (get_fn)dlsym(RTLD_DEFAULT, "testprof_get");
    g_reset = (void (*)(void))dlsym(RTLD_DEFAULT, "testprof_reset");
    if (!g_get || !g_reset) {
        fprintf(stderr, "t_plain_profiler: libtestprof.so is not loaded (testlist: preload_before:/preload_after:)\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (mpit_off) {
        MT_CHECK(mpit_rc == MPI_SUCCESS, "MPI_T write of compmpi_pmpi_chain before MPI_Init: error %d", mpit_rc);
        int one = 1;
        if (mpit_rc == MPI_SUCCESS) {
            MT_CHECK(MPI_T_cvar_write(h, &one) == MPI_T_ERR_CVAR_SET_NEVER,
                     "MPI_T write of compmpi_pmpi_chain after MPI_Init: not refused");
            MPI_T_cvar_handle_free(&h);
        }
    }
    const int lossy = e != BYPASSED;
    float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float)), *exact = malloc(N * sizeof(float));
    float *tmp = malloc(N * sizeof(float)), *g = malloc((size_t)M * P * sizeof(float));
    double *abssum = calloc(N, sizeof(double));

    /* ---- allreduce ---- */
    mt_fill(x, N, 31, rank);
    mt_exact_sum(exact, tmp, N, 31, P);
    for (int r = 0; r < P; ++r) {
        mt_fill(tmp, N, 31, r);
        for (int i = 0; i < N; ++i) abssum[i] += fabs(tmp[i]);
    }
    g_reset();
    MPI_Allreduce(x, y, N, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    check_seen(e, "MPI_Allreduce", 4LL * N, "MPI_Ialltoall", "MPI_Alltoall", 0, rank);
    int far = 0, differ = 0;
    for (int i = 0; i < N; ++i) {
        far += !close16(y[i], exact[i], 2 * abssum[i]);
        differ += y[i] != exact[i];
    }
    MT_CHECK(far == 0, "allreduce: %d elements beyond bitpack-16's error", far);
    if (lossy) MT_CHECK(differ > 0, "allreduce: every element exact: was it compressed?");
    else if (P == 2) MT_CHECK(differ == 0, "allreduce: %d elements differ from the exact sum", differ);
    MT_CHECK(mt_identical(y, N * sizeof(float), MPI_COMM_WORLD), "allreduce: ranks differ");

    /* ---- bcast from rank 0 ---- */
    mt_fill(exact, N, 32, 0);
    if (rank == 0) memcpy(y, exact, N * sizeof(float));
    else memset(y, 0, N * sizeof(float));
    g_reset();
    MPI_Bcast(y, N, MPI_FLOAT, 0, MPI_COMM_WORLD);
    check_seen(e, "MPI_Bcast", 4LL * N, "MPI_Bcast", "MPI_Ibcast", 1, rank);
    far = differ = 0;
    for (int i = 0; i < N; ++i) {
        far += !close16(y[i], exact[i], fabs(exact[i]));
        differ += y[i] != exact[i];
    }
    MT_CHECK(far == 0, "bcast: %d elements beyond bitpack-16's error", far);
    int differ_any = 0;
    MPI_Allreduce(&differ, &differ_any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) MT_CHECK(differ == 0, "bcast: the root's buffer changed");
    if (lossy && P > 1) MT_CHECK(differ_any > 0, "bcast: every receiver exact: was it compressed?");
    else MT_CHECK(differ == 0, "bcast: %d elements differ from the root's", differ);

    /* ---- allgather of M floats per rank ---- */
    mt_fill(x, M, 33, rank);
    g_reset();
    MPI_Allgather(x, M, MPI_FLOAT, g, M, MPI_FLOAT, MPI_COMM_WORLD);
    check_seen(e, "MPI_Allgather", 4LL * M * P, "MPI_Allgather", "MPI_Iallgather", 1, rank);
    far = differ = 0;
    for (int r = 0; r < P; ++r) {
        mt_fill(tmp, M, 33, r);
        for (int i = 0; i < M; ++i) {
            far += !close16(g[(size_t)r * M + i], tmp[i], fabs(tmp[i]));
            differ += g[(size_t)r * M + i] != tmp[i];
        }
    }
    MT_CHECK(far == 0, "allgather: %d elements beyond bitpack-16's error", far);
    if (lossy) MT_CHECK(differ > 0, "allgather: every element exact: was it compressed?");
    else MT_CHECK(differ == 0, "allgather: %d elements differ", differ);
    MT_CHECK(mt_identical(g, (size_t)M * P * sizeof(float), MPI_COMM_WORLD), "allgather: ranks differ");

    /* ---- reduce-scatter: not wrapped by the profiler, reaches libcompmpi in every order ---- */
    if (reduce_scatter) {
        float *in = malloc((size_t)M * P * sizeof(float)), *out = malloc(M * sizeof(float));
        mt_fill(in, (size_t)M * P, 34, rank);
        MPI_Reduce_scatter_block(in, out, M, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        far = 0;
        for (int i = 0; i < M; ++i) {
            double want = 0, scale = 0;
            for (int r = 0; r < P; ++r) {
                const float v = mt_value(34, r, (size_t)rank * M + i);
                want += v;
                scale += fabs(v);
            }
            far += !close16(out[i], want, 2 * scale + 1e-6 * fabs(want));
        }
        MT_CHECK(far == 0, "reduce_scatter_block: %d elements beyond bitpack-16's error", far);
        free(in);
        free(out);
    }

    int errs = 0;
    MPI_Allreduce(&mt_errors, &errs, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && errs == 0) printf(" No Errors\n");
    free(x), free(y), free(exact), free(tmp), free(g), free(abssum);
    if (mpit_off) MPI_T_finalize(); /* before MPI_Finalize: Open MPI 4.1 crashes in it after (t_mpit.c) */
    MPI_Finalize();
    return errs != 0;
}

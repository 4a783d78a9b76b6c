// SPDX-License-Identifier: BSD-3-Clause
/* Storms at the MPI boundary (linked -lcompmpi; docs/hardening.md, "Fault injection"):
 *
 * mode=nan (default): K calls rotating over allreduce, allgather, bcast,
 *   reduce_scatter_block, their non-blocking forms and (MPI-4) a persistent allreduce, each
 *   with one of five kinds of data, chosen per call: finite; one NaN on one rank; +Inf on one
 *   rank and -Inf on another; NaN in every element on every rank; finite values near FLT_MAX
 *   whose sums overflow. Whenever MPI's own result or any contribution it reads holds NaN/Inf,
 *   the result must be MPI's, bit for bit (the exact fallback, PMPI_* on the same arguments);
 *   finite data must stay compressed (not MPI's bits) and the same on every rank. Inputs are
 *   never written.
 *
 * mode=hints: K calls on one communicator whose compmpi_* hints change before every call
 *   (MPI_Comm_set_info, the same on every rank: codec, bits, theta), each result compared bit
 *   for bit with the same call on a communicator made once with those hints; every 4th call
 *   also a non-blocking allreduce issued before the next change and completed after it (the
 *   settings at issue count), every 5th a persistent allreduce made under the current hints
 *   and started after the next change (the settings at init count); every 7th call the hint
 *   differs across ranks (then the call must be MPI's bits, settings differ), every 11th an
 *   invalid value on every rank (MPI_ERR_INFO_VALUE; the call keeps the earlier settings).
 *
 * Arguments: mode=nan|hints calls=K n=ELEMS. A watchdog ends a hung run after 120 s with a
 * "watchdog" line (tests/mpi/run_tests.sh fails the line). Run with COMPMPI_COST_MODEL=off
 * (run_tests.sh sets it) so every eligible call compresses. */
#include <float.h>

#include "mpitest.h"

static int rank, size;

static float value(int r, int call, size_t i) {
    uint64_t z = mt_mix(((uint64_t)call << 40) ^ ((uint64_t)r << 32) ^ i);
    return (float)((int)(z % 2048) - 1024) / 16.0f + 1.0f / 32.0f; /* never 0: bitpack loses bits */
}

static int has_nonfinite(const float *x, size_t n) {
    for (size_t i = 0; i < n; ++i)
        if (!isfinite(x[i])) return 1;
    return 0;
}

/* ------------------------------------------------------------------ mode=nan */
enum { AR, AG, BC, RS, IAR, IAG, IBC, IRS, PAR, NKINDS };
static const char *kind_name[] = {"allreduce",  "allgather",  "bcast",  "reduce_scatter_block", "iallreduce",
                                  "iallgather", "ibcast",     "ireduce_scatter_block", "allreduce_init"};
enum { FINITE, ONE_NAN, INF_PAIR, ALL_NAN, OVERFLOW, NDATA };
static const char *data_name[] = {"finite", "one NaN", "+Inf and -Inf", "all NaN", "overflowing sums"};

static void fill(float *x, size_t n, int call, int data) {
    for (size_t i = 0; i < n; ++i) x[i] = value(rank, call, i);
    const size_t at = (size_t)(mt_mix((uint64_t)call * 31) % n);
    switch (data) {
        case ONE_NAN:
            if (rank == call % size) x[at] = NAN;
            break;
        case INF_PAIR:
            if (rank == call % size) x[at] = INFINITY;
            if (rank == (call + 1) % size) x[(at * 7) % n] = -INFINITY;
            break;
        case ALL_NAN:
            for (size_t i = 0; i < n; ++i) x[i] = NAN;
            break;
        case OVERFLOW:
            for (size_t i = 0; i < n; ++i) x[i] = (i % 2 ? -1.0f : 1.0f) * (FLT_MAX / 1.5f);
            break;
        default: break;
    }
}

static int nan_storm(int calls, size_t n) {
    const size_t P = (size_t)size;
    float *in = malloc(n * P * sizeof(float)), *keep = malloc(n * P * sizeof(float));
    float *out = malloc(n * P * sizeof(float)), *ref = malloc(n * P * sizeof(float));
    float *pin = malloc(n * sizeof(float)), *pout = malloc(n * sizeof(float)); /* the persistent request's */
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Request preq = MPI_REQUEST_NULL;
#if MPI_VERSION >= 4
    MPI_Allreduce_init(pin, pout, (int)n, MPI_FLOAT, MPI_SUM, comm, MPI_INFO_NULL, &preq);
#endif
    long exact_calls = 0, lossy_calls = 0;
    for (int k = 1; k <= calls; ++k) {
        const int kind = k % NKINDS, data = (int)(mt_mix((uint64_t)k) % NDATA);
        if (kind == PAR && preq == MPI_REQUEST_NULL) continue; /* MPI-3.1 */
        const int base = kind == PAR ? AR : kind >= IAR ? kind - IAR : kind, root = k % size;
        const size_t in_n = base == RS ? n * P : n, out_n = base == AG ? n * P : n;
        float *x = kind == PAR ? pin : in, *y = kind == PAR ? pout : out;
        fill(x, in_n, k, data);
        memcpy(keep, x, in_n * sizeof(float));
        /* the reference: MPI's own call on the same arguments */
        if (base == AR) PMPI_Allreduce(x, ref, (int)n, MPI_FLOAT, MPI_SUM, comm);
        else if (base == AG) PMPI_Allgather(x, (int)n, MPI_FLOAT, ref, (int)n, MPI_FLOAT, comm);
        else if (base == RS) PMPI_Reduce_scatter_block(x, ref, (int)n, MPI_FLOAT, MPI_SUM, comm);
        else memcpy(ref, x, n * sizeof(float)), PMPI_Bcast(ref, (int)n, MPI_FLOAT, root, comm);
        if (base == BC) memcpy(y, x, n * sizeof(float));
        MPI_Request req = MPI_REQUEST_NULL;
        switch (kind) {
            case AR: MPI_Allreduce(x, y, (int)n, MPI_FLOAT, MPI_SUM, comm); break;
            case AG: MPI_Allgather(x, (int)n, MPI_FLOAT, y, (int)n, MPI_FLOAT, comm); break;
            case BC: MPI_Bcast(y, (int)n, MPI_FLOAT, root, comm); break;
            case RS: MPI_Reduce_scatter_block(x, y, (int)n, MPI_FLOAT, MPI_SUM, comm); break;
            case IAR: MPI_Iallreduce(x, y, (int)n, MPI_FLOAT, MPI_SUM, comm, &req); break;
            case IAG: MPI_Iallgather(x, (int)n, MPI_FLOAT, y, (int)n, MPI_FLOAT, comm, &req); break;
            case IBC: MPI_Ibcast(y, (int)n, MPI_FLOAT, root, comm, &req); break;
            case IRS: MPI_Ireduce_scatter_block(x, y, (int)n, MPI_FLOAT, MPI_SUM, comm, &req); break;
            default: MPI_Start(&preq), req = preq; break;
        }
        if (req != MPI_REQUEST_NULL) MPI_Wait(kind == PAR ? &preq : &req, MPI_STATUS_IGNORE);
        MT_CHECK(memcmp(x, keep, in_n * sizeof(float)) == 0, "call %d (%s, %s): the input was written", k,
                 kind_name[kind], data_name[data]);
        /* nonfinite anywhere: in what any rank contributes (bcast: the root's data) or in MPI's result */
        int bad = base == BC ? (rank == root && has_nonfinite(keep, n)) : has_nonfinite(keep, in_n);
        bad |= has_nonfinite(ref, out_n);
        int any_bad = 0;
        MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_LOR, comm);
        const int same = memcmp(y, ref, out_n * sizeof(float)) == 0;
        if (any_bad) {
            ++exact_calls;
            MT_CHECK(same, "call %d (%s, %s): not MPI's result bit for bit", k, kind_name[kind], data_name[data]);
        } else {
            int all_same = 0;
            MPI_Allreduce(&same, &all_same, 1, MPI_INT, MPI_LAND, comm);
            /* the bcast root keeps its own data: judged on the receivers (all equal MPI's only if exact) */
            ++lossy_calls;
            MT_CHECK(!all_same || (base == BC && size == 1), "call %d (%s, finite): MPI's bits on every rank, "
                     "expected a compressed result", k, kind_name[kind]);
            if (base != RS)
                MT_CHECK(mt_identical(y, out_n * sizeof(float), comm) || base == BC,
                         "call %d (%s): ranks differ", k, kind_name[kind]);
            if (base == BC)
                MT_CHECK(mt_bcast_ok(y, keep, n * sizeof(float), root, comm), "call %d (%s): bcast differs", k,
                         kind_name[kind]);
        }
    }
    if (rank == 0)
        printf("t_storm: %d calls: %ld with NaN/Inf or overflow (MPI's bits checked), %ld finite (compressed)\n", calls,
               exact_calls, lossy_calls);
#if MPI_VERSION >= 4
    MPI_Request_free(&preq);
#endif
    MPI_Comm_free(&comm);
    free(in), free(keep), free(out), free(ref), free(pin), free(pout);
    return 0;
}

/* ---------------------------------------------------------------- mode=hints */
typedef struct {
    const char *codec, *bits, *theta;
} Hints;
/* deterministic codecs only: a result depends on the settings and data, not on the calls
 * made before (no awp, no stochastic rounding), so a second communicator reproduces it */
static const Hints kSets[] = {
    {"bitpack", "16", "0.85"}, {"fp16", "0", "0.85"},    {"q8", "0", "0.85"}, {"topk", "0", "0.5"},
    {"bitpack", "8", "0.85"},  {"none", "0", "0.85"},    {"bf16", "0", "0.85"}, {"rangefloat", "0", "0.85"},
    {"bitpack", "24", "0.85"}, {"fft_topk", "0", "0.7"},
};
enum { NSETS = sizeof kSets / sizeof *kSets };

static MPI_Info info_of(const Hints *h, const char *bits) {
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "compmpi_policy", "static");
    MPI_Info_set(info, "compmpi_codec", h->codec);
    MPI_Info_set(info, "compmpi_bits", bits ? bits : h->bits);
    MPI_Info_set(info, "compmpi_theta", h->theta);
    return info;
}

static int set_hints(MPI_Comm comm, const Hints *h, const char *bits) {
    MPI_Info info = info_of(h, bits);
    const int rc = MPI_Comm_set_info(comm, info);
    MPI_Info_free(&info);
    return rc;
}

static int hint_churn(int calls, size_t n) {
    MPI_Comm comm, ref[NSETS];
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    for (int s = 0; s < NSETS; ++s) {
        MPI_Info info = info_of(&kSets[s], NULL);
        MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &ref[s]);
        MPI_Info_free(&info);
    }
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float)), *want = malloc(n * sizeof(float));
    float *nx = malloc(n * sizeof(float)), *ny = malloc(n * sizeof(float)), *nwant = malloc(n * sizeof(float));
    float *px = malloc(n * sizeof(float)), *py = malloc(n * sizeof(float)), *pwant = malloc(n * sizeof(float));
    int cur = 0;
    set_hints(comm, &kSets[cur], NULL);
    long differ = 0, refused = 0, compared = 0;
    for (int k = 1; k <= calls; ++k) {
        /* a non-blocking call issued under the current hints, completed after they change */
        MPI_Request nreq = MPI_REQUEST_NULL, preq = MPI_REQUEST_NULL;
        int nset = cur, pset = cur;
        if (k % 4 == 0) {
            for (size_t i = 0; i < n; ++i) nx[i] = value(rank, -k, i);
            MPI_Iallreduce(nx, ny, (int)n, MPI_FLOAT, MPI_SUM, comm, &nreq);
        }
#if MPI_VERSION >= 4
        if (k % 5 == 0) MPI_Allreduce_init(px, py, (int)n, MPI_FLOAT, MPI_SUM, comm, MPI_INFO_NULL, &preq);
#endif
        const int next = (int)(mt_mix((uint64_t)k * 7) % NSETS);
        int expect = next, passthrough = 0;
        if (k % 11 == 0) { /* an invalid value on every rank: refused, the settings stay */
            MPI_Info info;
            MPI_Info_create(&info);
            MPI_Info_set(info, "compmpi_codec", "zstd");
            const int rc = MPI_Comm_set_info(comm, info);
            MPI_Info_free(&info);
            int cls = -1;
            MPI_Error_class(rc, &cls);
            MT_CHECK(rc != MPI_SUCCESS && cls == MPI_ERR_INFO_VALUE, "call %d: codec=zstd gave %d (class %d)", k, rc, cls);
            expect = cur, ++refused;
        } else if (k % 7 == 0 && size > 1 && !strcmp(kSets[next].codec, "bitpack")) {
            /* bits differ across ranks: the communicator passes through */
            set_hints(comm, &kSets[next], rank == 0 ? "24" : "16");
            passthrough = 1, ++differ;
        } else {
            MT_CHECK(set_hints(comm, &kSets[next], NULL) == MPI_SUCCESS, "call %d: set_info(%s)", k, kSets[next].codec);
        }
        cur = expect;
        for (size_t i = 0; i < n; ++i) x[i] = value(rank, k, i);
        MPI_Allreduce(x, y, (int)n, MPI_FLOAT, MPI_SUM, comm);
        if (passthrough) PMPI_Allreduce(x, want, (int)n, MPI_FLOAT, MPI_SUM, comm);
        else MPI_Allreduce(x, want, (int)n, MPI_FLOAT, MPI_SUM, ref[expect]);
        ++compared;
        MT_CHECK(memcmp(y, want, n * sizeof(float)) == 0, "call %d: %s result differs from a communicator made with "
                 "%s%s", k, passthrough ? "settings differ: the" : "the", passthrough ? "MPI's own" : kSets[expect].codec,
                 passthrough ? "" : " hints");
        if (passthrough) set_hints(comm, &kSets[cur], NULL); /* agreed again */
        if (nreq != MPI_REQUEST_NULL) {
            MPI_Wait(&nreq, MPI_STATUS_IGNORE);
            MPI_Allreduce(nx, nwant, (int)n, MPI_FLOAT, MPI_SUM, ref[nset]);
            ++compared;
            MT_CHECK(memcmp(ny, nwant, n * sizeof(float)) == 0, "call %d: the non-blocking allreduce issued under %s "
                     "hints differs from them", k, kSets[nset].codec);
        }
#if MPI_VERSION >= 4
        if (preq != MPI_REQUEST_NULL) {
            for (int s = 0; s < 2; ++s) {
                for (size_t i = 0; i < n; ++i) px[i] = value(rank, 1000000 + 2 * k + s, i);
                MPI_Start(&preq);
                MPI_Wait(&preq, MPI_STATUS_IGNORE);
                MPI_Allreduce(px, pwant, (int)n, MPI_FLOAT, MPI_SUM, ref[pset]);
                ++compared;
                MT_CHECK(memcmp(py, pwant, n * sizeof(float)) == 0, "call %d: the persistent allreduce made under %s "
                         "hints differs from them", k, kSets[pset].codec);
            }
            MPI_Request_free(&preq);
        }
#else
        (void)pset, (void)px, (void)py, (void)pwant;
#endif
    }
    if (rank == 0)
        printf("t_storm: %d hint changes, %ld results compared bit for bit, %ld with settings differing, "
               "%ld invalid values refused\n", calls, compared, differ, refused);
    for (int s = 0; s < NSETS; ++s) MPI_Comm_free(&ref[s]);
    MPI_Comm_free(&comm);
    free(x), free(y), free(want), free(nx), free(ny), free(nwant), free(px), free(py), free(pwant);
    return 0;
}

int main(int argc, char **argv) {
    const char *mode = "nan";
    int calls = 200;
    size_t n = 3000;
    for (int i = 1; i < argc; ++i) {
        if (!strncmp(argv[i], "mode=", 5)) mode = argv[i] + 5;
        else if (!strncmp(argv[i], "calls=", 6)) calls = atoi(argv[i] + 6);
        else if (!strncmp(argv[i], "n=", 2)) n = (size_t)atol(argv[i] + 2);
        else {
            fprintf(stderr, "t_storm: unknown argument '%s'\n", argv[i]);
            return 2;
        }
    }
    mt_watchdog("t_storm", 120);
    mt_init(&argc, &argv, &rank, &size);
    if (!strcmp(mode, "nan")) nan_storm(calls, n);
    else if (!strcmp(mode, "hints")) hint_churn(calls, n);
    else MT_CHECK(0, "mode=%s (nan | hints)", mode);
    return mt_finish();
}

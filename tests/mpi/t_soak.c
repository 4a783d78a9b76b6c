// SPDX-License-Identifier: BSD-3-Clause
/* Soak: many compressed collectives over hundreds of distinct buffers and dozens of
 * communicators created and freed, in every form (blocking, non-blocking, persistent) and
 * with several datatypes, checking that libcompmpi's memory, threads and communicators stay
 * bounded (docs/design.md, "Memory caps"). Calls rotate over four kinds of communicator:
 *   A  MPI_COMM_WORLD, bitpack with awp: allreduce of a new element count almost every
 *      call, so the awp table (key: collective, count, root) passes kMaxTrackedBuffers and
 *      must restart, never grow past it;
 *   B  a long-lived MPI_Comm_dup_with_info(topk, theta_schedule=linear): allreduce and
 *      allgather of new counts, so the theta-schedule table passes ScheduleState::kMaxShapes;
 *   C  a long-lived dup + MPI_Comm_set_info(error_feedback=1): allreduce into a new output
 *      address every call, so the error-feedback table (key: address, count) passes
 *      kMaxTrackedBuffers; its bytes stay under kMaxResidualBytes;
 *   P  a pool of communicators replaced one by one (MPI_Comm_dup, MPI_Comm_dup_with_info,
 *      MPI_Comm_split + MPI_Comm_set_info, dup + set_info, several codecs), each call one of
 *      eight operations in turn:
 *        0 MPI_Allreduce of MPI_FLOAT, MPI_REAL or MPI_INT (passed through, exact)
 *        1 MPI_Iallreduce          2 MPI_Allgather of MPI_FLOAT or a contiguous(4) type
 *        3 MPI_Iallgather          4 MPI_Bcast of MPI_FLOAT or a vector type with gaps
 *        5 MPI_Ibcast              6 MPI_Reduce_scatter_block or MPI_Ireduce_scatter
 *        7 MPI_Start of the communicator's persistent request (MPI-4; made anew every 8
 *          starts, cycling allreduce / allgather / bcast / reduce_scatter_block _init;
 *          MPI-3.1: an MPI_Iallreduce instead)
 *      Derived datatypes are made and freed around their call. Up to 4 non-blocking calls
 *      are in flight at once (over several communicators, so several progress threads);
 *      each is completed oldest first (every 32nd completion an MPI_Waitall of all), and all
 *      before a pool communicator is freed.
 * Checks: every 16th call every rank holds the same bits (bcast: the root's buffer
 * untouched; gaps of the vector type untouched) and, for the dense codecs' blocking float
 * calls, the result is within the codec's bound of the exact sum; MPI_INT results exact;
 * inputs are never written; after every call on A, B, C the test-only introspection
 * compmpi_test_state_sizes (src/runtime/state.h) shows each table within its cap, and the largest
 * size seen equals the cap (the cap was reached and held); the number of live communicator
 * states (communicators, progress channels' duplicates and persistent requests) never
 * exceeds what is alive and is back to 1 (MPI_COMM_WORLD) after the last free, and the
 * process's threads are back to their number before the first non-blocking call (every
 * progress thread joined); VmRSS grows by at most rss_slack MiB from the middle checkpoint
 * to the end (tables saturated by then when calls >= 20000). VmRSS, VmHWM, threads and live
 * states are printed at ten checkpoints (scripts/soak.sh records them).
 * Arguments: calls=N (default 20000) buffers=B (256) pool=L (6) churn=K (replace a pool
 * communicator every K pool calls; 100) rss_slack=MiB (16) quiet (no checkpoint lines)
 * forms=all|blocking (blocking: the pool's blocking float calls only, as before the
 * non-blocking and persistent forms were added: the test list's long-lived-table run).
 * Run with COMPMPI_MIN_BYTES=256 (counts from 64 floats are then compressed) and
 * COMPMPI_COST_MODEL=off (run_tests.sh sets it), so every eligible call really compresses. */
#include "mpitest.h"

/* test-only introspection (src/runtime/state.h, StateSize) */
int compmpi_test_state_sizes(MPI_Comm comm, long long *v, int nv);
enum { S_AWP, S_EF, S_EF_BYTES, S_SCHED, S_COST, S_WS, S_LIVE, S_N };
#define CAP_TRACKED 4096      /* kMaxTrackedBuffers */
#define CAP_SHAPES 4096       /* ScheduleState::kMaxShapes */
#define CAP_EF_BYTES (1LL << 30) /* kMaxResidualBytes */
#define SPAN 4352             /* distinct counts / addresses cycled: more than the caps */
#define MAXN (64 + SPAN)
#define DEPTH 4               /* non-blocking calls in flight at once */
#define SENTINEL (-7777.0f)   /* the gaps of the vector type */

static int rank, size;

static float value(int r, int b, size_t i) {
    uint64_t z = mt_mix(((uint64_t)b << 40) ^ ((uint64_t)r << 32) ^ i);
    return (float)((int)(z % 2048) - 1024) / 16.0f; /* multiples of 1/16 in [-64, 64) */
}

static long status_kib(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t k = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, k)) v = atol(line + k + 1);
    if (f) fclose(f);
    return v;
}

typedef struct {
    MPI_Comm comm;
    int dense; /* error bound checked: 1 bitpack (truncation), 2 fp16 / bf16, 0 none */
    const char *what;
    MPI_Request preq; /* its persistent request (MPI-4), or MPI_REQUEST_NULL */
    int pkind, pstarts;
    size_t pn;
    float *pin, *pout;
} Slot;

/* ------------------------------------------------------------------ non-blocking calls */
typedef struct {
    MPI_Request req;
    MPI_Comm comm;
    int kind; /* 0 allreduce, 1 allgather, 2 bcast, 3 reduce-scatter */
    int check, root;
    size_t on;        /* result floats */
    float *o;         /* the result (a buffer of its own per ring entry) */
    const float *in;  /* the input in[b] (checked unwritten) */
    size_t n;
    int b;
    long call;
} Pending;
static Pending ring[DEPTH];
static float *ring_out[DEPTH];
static int ring_head, ring_count;
static long completions, checked;

static long status_kib(const char *key);
/* the checks of a completed call that every rank makes at the same point (collective on comm) */
static void check_result(long call, MPI_Comm comm, int kind, const float *o, size_t on, const float *in, size_t n,
                         int root) {
    ++checked;
    if (kind == 2) MT_CHECK(mt_bcast_ok(o, in, n * sizeof(float), root, comm), "call %ld: bcast differs", call);
    else if (kind != 3) MT_CHECK(mt_identical(o, on * sizeof(float), comm), "call %ld: ranks differ", call);
    for (size_t e = 0; e < on; ++e)
        if (!isfinite(o[e])) {
            MT_CHECK(0, "call %ld: result[%zu] = %g", call, e, o[e]);
            break;
        }
}

static void complete_oldest(void) {
    Pending *p = &ring[ring_head];
    MPI_Wait(&p->req, MPI_STATUS_IGNORE);
    MT_CHECK(p->in[p->n - 1] == value(rank, p->b, p->n - 1) && p->in[0] == value(rank, p->b, 0),
             "call %ld (non-blocking) wrote its input", p->call);
    if (p->check) check_result(p->call, p->comm, p->kind, p->o, p->on, p->in, p->n, p->root);
    ring_head = (ring_head + 1) % DEPTH;
    --ring_count;
    ++completions;
}

/* every call in flight: now and then all at once (MPI_Waitall), else oldest first */
static void complete_all(void) {
    if (ring_count > 1 && completions % 32 == 0) {
        MPI_Request reqs[DEPTH];
        MPI_Status st[DEPTH];
        for (int k = 0; k < ring_count; ++k) reqs[k] = ring[(ring_head + k) % DEPTH].req;
        MPI_Waitall(ring_count, reqs, st);
        for (int k = 0; k < ring_count; ++k) ring[(ring_head + k) % DEPTH].req = MPI_REQUEST_NULL;
    }
    while (ring_count) complete_oldest();
}

/* a slot of the ring for a new call (completing the oldest when all are in flight) */
static Pending *ring_slot(float **o) {
    if (ring_count == DEPTH) complete_oldest();
    const int k = (ring_head + ring_count) % DEPTH;
    ++ring_count;
    *o = ring_out[k];
    return &ring[k];
}

/* ------------------------------------------------------------------ persistent requests */
#if MPI_VERSION >= 4
static void persistent_make(Slot *s, long m) {
    s->pkind = (int)(m % 4), s->pstarts = 0;
    s->pn = 64 + (size_t)((m * 97) % 2000);
    const int c = (int)s->pn;
    for (size_t i = 0; i < s->pn * (size_t)size; ++i) s->pin[i] = value(rank, 1000 + (int)(m % 64), i);
    switch (s->pkind) {
        case 0: MPI_Allreduce_init(s->pin, s->pout, c, MPI_FLOAT, MPI_SUM, s->comm, MPI_INFO_NULL, &s->preq); break;
        case 1: MPI_Allgather_init(s->pin, c, MPI_FLOAT, s->pout, c, MPI_FLOAT, s->comm, MPI_INFO_NULL, &s->preq); break;
        case 2: MPI_Bcast_init(s->pout, c, MPI_FLOAT, 0, s->comm, MPI_INFO_NULL, &s->preq); break;
        default: MPI_Reduce_scatter_block_init(s->pin, s->pout, c, MPI_FLOAT, MPI_SUM, s->comm, MPI_INFO_NULL, &s->preq);
    }
}
#endif
static void persistent_free(Slot *s) {
    if (s->preq != MPI_REQUEST_NULL) MPI_Request_free(&s->preq);
}

static MPI_Info info_of(const char *k1, const char *v1, const char *k2, const char *v2) {
    MPI_Info info;
    MPI_Info_create(&info);
    if (k1) MPI_Info_set(info, k1, v1);
    if (k2) MPI_Info_set(info, k2, v2);
    return info;
}

/* the m-th pool communicator: a different way of making one, and different settings */
static Slot make_pool_comm(int m) {
    Slot s = {MPI_COMM_NULL, 1, "", MPI_REQUEST_NULL, 0, 0, 0, NULL, NULL};
    MPI_Info info = MPI_INFO_NULL;
    switch (m % 6) {
        case 0: MPI_Comm_dup(MPI_COMM_WORLD, &s.comm); s.what = "dup"; break;
        case 1:
            s.dense = 2;
            info = info_of("compmpi_codec", "fp16", NULL, NULL);
            MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &s.comm);
            s.what = "dup_with_info(fp16)";
            break;
        case 2:
            MPI_Comm_split(MPI_COMM_WORLD, 0, size - 1 - rank, &s.comm); /* ranks reversed */
            s.dense = 2;
            info = info_of("compmpi_codec", "bf16", NULL, NULL);
            MPI_Comm_set_info(s.comm, info);
            s.what = "split+set_info(bf16)";
            break;
        case 3:
            MPI_Comm_dup(MPI_COMM_WORLD, &s.comm);
            info = info_of("compmpi_error_feedback", "1", NULL, NULL);
            MPI_Comm_set_info(s.comm, info);
            s.dense = 0; /* the result also carries earlier residuals */
            s.what = "dup+set_info(error_feedback)";
            break;
        case 4:
            info = info_of("compmpi_codec", "q8", NULL, NULL);
            MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &s.comm);
            s.dense = 0;
            s.what = "dup_with_info(q8)";
            break;
        default:
            info = info_of("compmpi_codec", "topk", "compmpi_theta", "0.5");
            MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &s.comm);
            MPI_Comm_set_info(s.comm, info);
            s.dense = 0;
            s.what = "split+set_info(topk)";
            break;
    }
    if (info != MPI_INFO_NULL) MPI_Info_free(&info);
    return s;
}

/* The pool's operations other than the blocking float allreduce / allgather / bcast (those
 * stay in main with their error bounds). o: a result buffer of MAXN * size floats, scratch:
 * as many. Every rank makes the same calls in the same order. */
static long persistent_made;
static void pool_other(long call, int op, int variant, Slot *s, const float *in, int b, size_t n, int root, int check,
                       float *o, float *scratch) {
    MPI_Comm comm = s->comm;
    float *ro;
    Pending *p;
    switch (op) {
        case 0: /* MPI_REAL (compressed: a 4-byte float type) or MPI_INT (passed through, exact) */
            if (variant == 1) {
                MPI_Allreduce(in, o, (int)n, MPI_REAL, MPI_SUM, comm);
                if (check) check_result(call, comm, 0, o, n, in, n, 0);
            } else {
                int *xi = (int *)scratch, *yi = (int *)o;
                for (size_t e = 0; e < n; ++e) xi[e] = (int)((rank * 7919 + (long)e * 31 + b) % 2001) - 1000;
                MPI_Allreduce(xi, yi, (int)n, MPI_INT, MPI_SUM, comm);
                long bad = 0;
                for (size_t e = 0; e < n; ++e) {
                    long want = 0;
                    for (int r = 0; r < size; ++r) want += (r * 7919 + (long)e * 31 + b) % 2001 - 1000;
                    bad += yi[e] != want;
                }
                MT_CHECK(bad == 0, "call %ld: MPI_INT allreduce not exact in %ld elements", call, bad);
            }
            return;
        case 2: { /* a contiguous(4) type: eligible, its element count n/4 * 4 */
            MPI_Datatype t4;
            MPI_Type_contiguous(4, MPI_FLOAT, &t4);
            MPI_Type_commit(&t4);
            const size_t n4 = n / 4;
            MPI_Allgather(in, (int)n4, t4, o, (int)n4, t4, comm);
            MPI_Type_free(&t4);
            if (check) check_result(call, comm, 1, o, n4 * 4 * (size_t)size, in, n4 * 4, 0);
            return;
        }
        case 4: { /* a vector type with gaps: packed, sent, unpacked; the gaps never written */
            MPI_Datatype tv;
            MPI_Type_vector((int)n, 1, 2, MPI_FLOAT, &tv);
            MPI_Type_commit(&tv);
            for (size_t e = 0; e < 2 * n; ++e) o[e] = e % 2 || rank != root ? SENTINEL : in[e / 2];
            memcpy(scratch, o, 2 * n * sizeof(float));
            MPI_Bcast(o, 1, tv, root, comm);
            MPI_Type_free(&tv);
            long gaps = 0;
            for (size_t e = 1; e < 2 * n; e += 2) gaps += o[e] != SENTINEL;
            MT_CHECK(gaps == 0, "call %ld: %ld gaps of the vector type written", call, gaps);
            if (check) MT_CHECK(mt_bcast_ok(o, scratch, 2 * n * sizeof(float), root, comm), "call %ld: bcast differs", call);
            return;
        }
        case 6: { /* reduce-scatter: blocking equal blocks, or non-blocking blocks of different sizes */
            const size_t nb = n / (size_t)size;
            if (variant == 0) {
                MPI_Reduce_scatter_block(in, o, (int)nb, MPI_FLOAT, MPI_SUM, comm);
                if (check) check_result(call, comm, 3, o, nb, in, nb, 0);
                return;
            }
            int counts[64];
            for (int r = 0; r < size && r < 64; ++r) counts[r] = (int)nb - (r % 2) * 3;
            p = ring_slot(&ro);
            MPI_Ireduce_scatter(in, ro, counts, MPI_FLOAT, MPI_SUM, comm, &p->req);
            *p = (Pending){p->req, comm, 3, check, 0, (size_t)counts[rank % 64], ro, in, n, b, call};
            return;
        }
        case 7: /* the communicator's persistent request, made anew every 8 starts */
#if MPI_VERSION >= 4
            if (s->preq == MPI_REQUEST_NULL || s->pstarts == 8) {
                persistent_free(s);
                persistent_make(s, persistent_made++);
            }
            ++s->pstarts;
            if (s->pkind == 2) memcpy(s->pout, s->pin, s->pn * sizeof(float)); /* the root's data */
            MPI_Start(&s->preq);
            MPI_Wait(&s->preq, MPI_STATUS_IGNORE);
            if (check)
                check_result(call, comm, s->pkind, s->pout, s->pkind == 1 ? s->pn * (size_t)size : s->pn, s->pin, s->pn, 0);
            return;
#endif
        case 1: /* MPI_Iallreduce (and op 7 without MPI-4) */
            p = ring_slot(&ro);
            MPI_Iallreduce(in, ro, (int)n, MPI_FLOAT, MPI_SUM, comm, &p->req);
            *p = (Pending){p->req, comm, 0, check, 0, n, ro, in, n, b, call};
            return;
        case 3:
            p = ring_slot(&ro);
            MPI_Iallgather(in, (int)n, MPI_FLOAT, ro, (int)n, MPI_FLOAT, comm, &p->req);
            *p = (Pending){p->req, comm, 1, check, 0, n * (size_t)size, ro, in, n, b, call};
            return;
        default: /* 5 */
            p = ring_slot(&ro);
            memcpy(ro, in, n * sizeof(float));
            MPI_Ibcast(ro, (int)n, MPI_FLOAT, root, comm, &p->req);
            *p = (Pending){p->req, comm, 2, check, root, n, ro, in, n, b, call};
            return;
    }
}

int main(int argc, char **argv) {
    long calls = 20000, churn = 100;
    int nbuf = 256, pool = 6, quiet = 0, blocking_only = 0;
    double rss_slack_mib = 16;
    for (int i = 1; i < argc; ++i) {
        if (!strncmp(argv[i], "calls=", 6)) calls = atol(argv[i] + 6);
        else if (!strncmp(argv[i], "buffers=", 8)) nbuf = atoi(argv[i] + 8);
        else if (!strncmp(argv[i], "pool=", 5)) pool = atoi(argv[i] + 5);
        else if (!strncmp(argv[i], "churn=", 6)) churn = atol(argv[i] + 6);
        else if (!strncmp(argv[i], "rss_slack=", 10)) rss_slack_mib = atof(argv[i] + 10);
        else if (!strcmp(argv[i], "quiet")) quiet = 1;
        else if (!strcmp(argv[i], "forms=blocking")) blocking_only = 1;
        else if (!strcmp(argv[i], "forms=all")) blocking_only = 0;
        else {
            fprintf(stderr, "t_soak: unknown argument '%s'\n", argv[i]);
            return 2;
        }
    }
    mt_init(&argc, &argv, &rank, &size);
    const double t0 = MPI_Wtime();

    /* hundreds of distinct buffers (inputs and outputs), allocated separately */
    float **in = malloc(sizeof(float *) * (size_t)nbuf), **out = malloc(sizeof(float *) * (size_t)nbuf);
    for (int b = 0; b < nbuf; ++b) {
        in[b] = malloc(sizeof(float) * MAXN);
        out[b] = malloc(sizeof(float) * MAXN * (size_t)size);
        for (size_t i = 0; i < MAXN; ++i) in[b][i] = value(rank, b, i);
    }
    float *arena = malloc(sizeof(float) * (SPAN + 256)); /* C: a new output address per call */
    float *want = malloc(sizeof(float) * MAXN * (size_t)size);
    for (int k = 0; k < DEPTH; ++k) ring_out[k] = malloc(sizeof(float) * MAXN * (size_t)size);

    /* A = MPI_COMM_WORLD (environment settings: bitpack, awp); B, C long-lived */
    MPI_Comm A = MPI_COMM_WORLD, B, C;
    MPI_Info ib = info_of("compmpi_codec", "topk", "compmpi_theta_schedule", "linear");
    MPI_Comm_dup_with_info(MPI_COMM_WORLD, ib, &B);
    MPI_Info_free(&ib);
    MPI_Comm_dup(MPI_COMM_WORLD, &C);
    MPI_Info ic = info_of("compmpi_error_feedback", "1", NULL, NULL);
    MPI_Comm_set_info(C, ic);
    MPI_Info_free(&ic);
    Slot *slot = malloc(sizeof(Slot) * (size_t)pool);
    float **slot_pin = malloc(sizeof(float *) * (size_t)pool), **slot_pout = malloc(sizeof(float *) * (size_t)pool);
    int made = 0;
    for (int s = 0; s < pool; ++s) {
        slot[s] = make_pool_comm(made++);
        slot_pin[s] = slot[s].pin = malloc(sizeof(float) * MAXN * (size_t)size);
        slot_pout[s] = slot[s].pout = malloc(sizeof(float) * MAXN * (size_t)size);
    }
    long threads_base = -1, threads_max = 0;

    long long maxv[3][S_N];
    memset(maxv, 0, sizeof maxv);
    long long live_max = 0;
    long rss_mid = -1, rss_end = -1;
    long pool_calls = 0, counter[3] = {0, 0, 0};
    for (long i = 0; i < calls; ++i) {
        /* the threads before any non-blocking call (the first comes at pool call 1: i = 7),
         * after each kind of compressed blocking call (their kernels' threads exist) */
        if (i == 4) threads_base = status_kib("Threads:");
        const int which = (int)(i % 4); /* 0 A, 1 B, 2 C, 3 pool */
        MPI_Comm comm;
        int kind = 0, dense = 1, root = 0; /* kind 0 allreduce, 1 allgather, 2 bcast */
        size_t n;
        int b;
        float *o;
        if (which < 3) {
            const long j = counter[which]++;
            b = (int)(j % nbuf);
            comm = which == 0 ? A : which == 1 ? B : C;
            n = which == 2 ? 256 : 64 + (size_t)(j % SPAN);
            o = which == 2 ? arena + (j % SPAN) : out[b];
            if (which == 1) kind = (int)(j % 2);
            dense = which == 0; /* B topk, C error feedback: no per-call bound */
        } else {
            const long j = pool_calls++;
            const int s = (int)(j % pool);
            if (j > 0 && j % churn == 0) { /* replace one pool communicator */
                const int r = (int)((j / churn) % pool);
                complete_all(); /* (freeing with calls in flight is legal; their checks use it) */
                persistent_free(&slot[r]);
                MPI_Comm_free(&slot[r].comm);
                slot[r] = make_pool_comm(made++);
                slot[r].pin = slot_pin[r], slot[r].pout = slot_pout[r];
            }
            comm = slot[s].comm;
            dense = slot[s].dense;
            b = (int)((j * 7) % nbuf);
            n = 64 + (size_t)((b * 13) % 2000);
            o = out[b];
            root = (int)((j / (blocking_only ? 3 : 8)) % size);
            /* forms=blocking: allreduce, allgather, bcast of MPI_FLOAT in turn */
            const int op = blocking_only ? (int)(j % 3) * 2 : (int)(j % 8);
            const int variant = blocking_only ? 0 : (int)((j / 8) % (op == 0 ? 3 : 2));
            if (op % 2 || op == 6 || variant) { /* everything but the blocking float calls */
                pool_other(i, op, variant, &slot[s], in[b], b, n, root, i % 64 < 4, o, want);
                MT_CHECK(in[b][n - 1] == value(rank, b, n - 1) && in[b][0] == value(rank, b, 0),
                         "call %ld wrote its input", i);
                goto next;
            }
            kind = op / 2;
        }
        int crank;
        MPI_Comm_rank(comm, &crank);
        const size_t on = kind == 1 ? n * (size_t)size : n;
        if (kind == 0) MPI_Allreduce(in[b], o, (int)n, MPI_FLOAT, MPI_SUM, comm);
        else if (kind == 1) MPI_Allgather(in[b], (int)n, MPI_FLOAT, o, (int)n, MPI_FLOAT, comm);
        else {
            memcpy(o, in[b], n * sizeof(float));
            MPI_Bcast(o, (int)n, MPI_FLOAT, root, comm);
        }
        {
            /* every 16th call of each kind of communicator: same bits everywhere, within bound */
            if (i % 64 < 4) {
                ++checked;
                if (kind == 2)
                    MT_CHECK(mt_bcast_ok(o, in[b], n * sizeof(float), root, comm), "call %ld: bcast differs", i);
                else
                    MT_CHECK(mt_identical(o, on * sizeof(float), comm), "call %ld: ranks differ", i);
                if (dense) {
                    /* the rank order of comm (split reverses it) */
                    int *wr = malloc(sizeof(int) * (size_t)size);
                    MPI_Allgather(&rank, 1, MPI_INT, wr, 1, MPI_INT, comm);
                    /* bitpack keeps the top bits of each float (sign, exponent, leading
                     * mantissa bits): |D(E(x)) - x| <= |x|, for every contribution and for
                     * the re-encoded partial sum, so |result - sum| <= 2 sum |x_r|;
                     * fp16 / bf16 of multiples of 1/16 in [-64, 64): rounding of the values
                     * and of the partial sums, at most 2^-7 of 128 twice per rank */
                    double worst = 0;
                    for (size_t e = 0; e < on; ++e) {
                        double w = 0, mag = 0;
                        if (kind == 0)
                            for (int r = 0; r < size; ++r) w += value(wr[r], b, e), mag += fabs(value(wr[r], b, e));
                        else if (kind == 1) w = value(wr[e / n], b, e % n), mag = fabs(w);
                        else w = value(wr[root], b, e), mag = fabs(w);
                        const double bound = dense == 1 ? 2 * mag : (kind == 0 ? size : 1) * 2.0;
                        const double excess = fabs(w - o[e]) - bound;
                        if (excess > worst) worst = excess;
                    }
                    MT_CHECK(worst <= 0, "call %ld (%s n=%zu kind %d): error exceeds its bound by %g", i,
                             which == 3 ? "pool" : "A", n, kind, worst);
                    free(wr);
                }
            }
        }
        MT_CHECK(in[b][n - 1] == value(rank, b, n - 1) && in[b][0] == value(rank, b, 0), "call %ld wrote its input", i);
    next:
        if (which < 3) {
            long long v[S_N];
            compmpi_test_state_sizes(comm, v, S_N);
            for (int k = 0; k < S_N; ++k) maxv[which][k] = v[k] > maxv[which][k] ? v[k] : maxv[which][k];
            MT_CHECK(v[S_AWP] <= CAP_TRACKED && v[S_EF] <= CAP_TRACKED && v[S_SCHED] <= CAP_SHAPES &&
                         v[S_EF_BYTES] <= CAP_EF_BYTES,
                     "call %ld: a table past its cap: awp %lld ef %lld (%lld bytes) sched %lld", i, v[S_AWP], v[S_EF],
                     v[S_EF_BYTES], v[S_SCHED]);
        }
        {
            long long v[S_N];
            compmpi_test_state_sizes(MPI_COMM_NULL, v, S_N);
            if (v[S_LIVE] > live_max) live_max = v[S_LIVE];
        }
        const long step = calls / 10 > 0 ? calls / 10 : 1;
        if ((i + 1) % step == 0) {
            const long rss = status_kib("VmRSS:"), hwm = status_kib("VmHWM:");
            if ((i + 1) / step == 5) rss_mid = rss;
            rss_end = rss;
            long long v[S_N];
            compmpi_test_state_sizes(A, v, S_N);
            const long threads = status_kib("Threads:");
            if (threads > threads_max) threads_max = threads;
            if (!quiet && rank == 0)
                printf("t_soak: call %ld/%ld t=%.1fs VmRSS=%ld KiB VmHWM=%ld KiB threads=%ld live_states=%lld "
                       "comms_made=%d persistent_made=%ld A: awp=%lld ws=%lld B: sched max %lld C: ef max %lld "
                       "(%lld KiB)\n",
                       i + 1, calls, MPI_Wtime() - t0, rss, hwm, threads, v[S_LIVE], made + 3, persistent_made,
                       v[S_AWP], v[S_WS], maxv[1][S_SCHED], maxv[2][S_EF], maxv[2][S_EF_BYTES] / 1024);
        }
    }
    /* the caps were reached (enough distinct keys) and held */
    if (counter[0] > CAP_TRACKED) MT_CHECK(maxv[0][S_AWP] == CAP_TRACKED, "A: awp table peaked at %lld", maxv[0][S_AWP]);
    if (counter[1] > CAP_SHAPES) MT_CHECK(maxv[1][S_SCHED] == CAP_SHAPES, "B: schedule table peaked at %lld", maxv[1][S_SCHED]);
    if (counter[2] > CAP_TRACKED) MT_CHECK(maxv[2][S_EF] == CAP_TRACKED, "C: residual table peaked at %lld", maxv[2][S_EF]);
    MT_CHECK(maxv[2][S_EF_BYTES] <= (long long)CAP_TRACKED * 256 * 4, "C: residuals use %lld bytes for %d of 256 floats",
             maxv[2][S_EF_BYTES], CAP_TRACKED);
    /* live states: WORLD, B, C and the pool (a dup's state exists from the dup on), and per pool
     * communicator at most its progress channel's two duplicates (`internal` and `direct`,
     * src/runtime/channel.h: each copies the communicator's state attribute) and one
     * persistent request */
    MT_CHECK(live_max <= 3 + 4 * pool, "%lld communicator states alive with %d communicators", live_max, 3 + pool);
    if (rss_mid > 0)
        MT_CHECK(rss_end - rss_mid <= (long)(rss_slack_mib * 1024), "VmRSS grew by %ld KiB from the middle to the end",
                 rss_end - rss_mid);
    complete_all();
    for (int s = 0; s < pool; ++s) persistent_free(&slot[s]), MPI_Comm_free(&slot[s].comm);
    MPI_Comm_free(&B);
    MPI_Comm_free(&C);
    long long v[S_N];
    compmpi_test_state_sizes(MPI_COMM_NULL, v, S_N);
    MT_CHECK(v[S_LIVE] == 1, "%lld communicator states alive after freeing all but MPI_COMM_WORLD", v[S_LIVE]);
    const long threads_end = status_kib("Threads:");
    if (threads_base > 0)
        MT_CHECK(threads_end <= threads_base, "%ld threads after every communicator was freed, %ld before the first "
                 "non-blocking call", threads_end, threads_base);
    if (rank == 0)
        printf("t_soak: %ld calls (%ld checked) over %d buffers, %d communicators and %ld persistent requests made and "
               "freed, %.1f s; VmRSS middle %ld KiB, end %ld KiB, VmHWM %ld KiB; threads %ld before, at most %ld at the "
               "checkpoints, %ld at the end; live states at most %lld\n",
               calls, checked, nbuf, made + 2, persistent_made, MPI_Wtime() - t0, rss_mid, rss_end,
               status_kib("VmHWM:"), threads_base, threads_max, threads_end, live_max);
    for (int k = 0; k < DEPTH; ++k) free(ring_out[k]);
    for (int s = 0; s < pool; ++s) free(slot_pin[s]), free(slot_pout[s]);
    free(slot_pin);
    free(slot_pout);
    for (int b = 0; b < nbuf; ++b) free(in[b]), free(out[b]);
    free(in);
    free(out);
    free(arena);
    free(want);
    free(slot);
    return mt_finish();
}

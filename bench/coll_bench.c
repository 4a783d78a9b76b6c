// SPDX-License-Identifier: BSD-3-Clause
/*
 * coll_bench — plain MPI benchmark of float MPI_Allreduce / MPI_Allgather /
 * MPI_Bcast / MPI_Reduce_scatter_block, meant to be run with and without libcompmpi
 * (LD_PRELOAD).
 *
 *   coll_bench [--coll allreduce|allgather|bcast|reduce_scatter_block|all|LIST] [--sizes 4M,16M,...]
 *              [--iters K] [--warmup W] [--data gradient|uniform|normal]
 *              [--seed S] [--check] [--inplace] [--root R] [--batch B]
 *
 * --sizes   bytes of float per rank buffer (allgather: the per-rank block;
 *           reduce_scatter_block: the whole input, P blocks of size / P, rounded down
 *           to whole floats; each rank's result is its block, so identical is "na");
 *           "all" is allreduce, allgather and bcast;
 *           suffixes K/M/G are binary (4M = 4194304 bytes = 1048576 floats).
 * --check   compute rel_err = ||result - exact||_2 / ||exact||_2 (max over
 *           ranks; exact computed here in double precision by regenerating
 *           every rank's data from the seed, no extra communication) and
 *           identical = 1 iff all ranks hold bit-identical results (64-bit hash
 *           compared with MPI_Allreduce(MPI_UINT64_T, MAX and MIN)).
 *           Without --check both are printed as "na".
 * --inplace allreduce, reduce_scatter_block: MPI_IN_PLACE on the receive buffer
 *           (holding the input); allgather: MPI_IN_PLACE with the rank's block already
 *           in the receive buffer.
 * --batch B each timed iteration runs B calls back to back (the input restored
 *           before the first only; bcast and allgather do not change their input,
 *           allreduce with --inplace is not allowed) and counts their time / B:
 *           small messages, whose single-call time is near the clock's and the
 *           barrier's resolution.
 * --paired  every iteration times two arms in the same job: MPI's own collective,
 *           called as PMPI_* (a preloaded libcompmpi defines only the MPI_* names, so
 *           these calls are plain MPI), and the MPI_* call (libcompmpi's, when it is
 *           preloaded); the arms alternate which goes first. Both see the same
 *           job speed state, which separate jobs on a small VM do not. Without a
 *           preloaded library both arms are plain MPI (a control: ratio ~1).
 *           Output adds t_plain_med_s, t_plain_min_s, ratio_med (the median over
 *           iterations of lib time / plain time) and ratio_lo/ratio_hi (a distribution-free
 *           95% confidence interval of that median); t_*_s are the MPI_* arm's.
 *           Not with --check. With --paired the output also has ratio_total: the sum of the
 *           library arm's times over ALL iterations, warm-ups included (where the cost model
 *           explores), over the plain arm's sum: what the whole run cost.
 * --warmup-lib L  with --paired: L more untimed warm-up calls of the library arm alone, before
 *           the W paired ones (where libcompmpi explores: the cost model, the timed algorithm
 *           choices; the plain arm needs no such warm-up). Their summed time (slowest rank)
 *           is printed as t_warmlib_s and is not in ratio_total.
 * --form F  blocking (default) | nonblocking (MPI_I* then MPI_Wait) | persistent (MPI-4:
 *           MPI_*_init once per size and arm, then MPI_Start + MPI_Wait per call; the plain
 *           arm uses PMPI_*_init/PMPI_Start/PMPI_Wait).
 * --plain-nonblocking  with --paired --form persistent: the plain arm issues MPI's non-blocking
 *           collective (PMPI_I* + PMPI_Wait) instead of starting MPI's persistent request: the
 *           baseline where MPI's persistent collective returns wrong data (MPICH < 4.1's
 *           persistent allgather below its ring threshold, pmodels/mpich#6423; docs/benchmarks.md
 *           §10b), so that libcompmpi's persistent calls are compared with a correct collective.
 * --overlap with --form nonblocking|persistent: between issuing and waiting each call, compute
 *           (a busy loop, no MPI calls) for as long as the plain collective alone took (its
 *           median over a first pass of the same iterations, the slowest rank's), as OSU's
 *           osu_i* overlap tests do; the times are then issue + compute + wait.
 * --cpu     CPU use while the timed calls ran, per arm (emulated clusters: were the cores,
 *           not the links, the limit?): cpu = CPU seconds of all ranks in the calls
 *           (getrusage, every thread) / (the calls' wall seconds x online cores), the job's
 *           share of the machine; host_busy = the fraction of all cores busy then, whoever used
 *           them (rank 0's /proc/stat; other jobs, niced ones too, count); rq_wait = the
 *           fraction of that time a rank's main thread was ready to run but waited for a core
 *           (/proc/self/schedstat, mean over ranks): well above 0, the cores were a limit.
 *           Output adds cpu=... host_busy=... rq_wait=... (with --paired also
 *           cpu_plain=... host_busy_plain=... rq_wait_plain=...).
 *
 * Output (rank 0, one line per collective and size, flushed immediately):
 *   coll=allreduce bytes=67108864 ranks=2 iters=5 t_min_s=... t_med_s=...
 *   t_max_s=... rel_err=... identical=1
 * Each iteration: restore the input buffer from a pristine copy (not timed),
 * MPI_Barrier, time the collective; the iteration's time is the max over ranks.
 * Lines starting with '#' are comments; "# coll_bench: done" is printed just
 * before MPI_Finalize (lets a driver tell a hang in MPI_Finalize from a hang in
 * the benchmark).
 *
 * Only MPI_Allreduce/MPI_Allgather/MPI_Bcast on MPI_FLOAT are the objects of
 * measurement; bookkeeping uses MPI_Barrier, MPI_Reduce on doubles and
 * MPI_Allreduce on MPI_UINT64_T, which libcompmpi passes through untouched.
 *
 * Build: mpicc.mpich -O2 -o coll_bench coll_bench.c -lm
 */
#define _GNU_SOURCE
#include <mpi.h>
#include "bench_init.h"
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

enum coll_kind { C_ALLREDUCE, C_ALLGATHER, C_BCAST, C_RSB, C_NKINDS };
enum form_kind { F_BLOCKING, F_NONBLOCKING, F_PERSISTENT };
static const char *form_names[] = {"blocking", "nonblocking", "persistent"};
static const char *coll_names[C_NKINDS] = {"allreduce", "allgather", "bcast", "reduce_scatter_block"};
enum data_kind { D_GRADIENT, D_UNIFORM, D_NORMAL };
static const char *data_names[] = {"gradient", "uniform", "normal"};

static int g_rank, g_size;

static void die(const char *fmt, const char *arg)
{
    if (g_rank == 0) {
        fprintf(stderr, "coll_bench: ");
        fprintf(stderr, fmt, arg);
        fprintf(stderr, "\n");
    }
    MPI_Abort(MPI_COMM_WORLD, 2);
    exit(2);
}

/* ---------------------------------------------------------------------------
 * Deterministic, counter-based data: value = f(seed, rank, global index), so
 * any rank can regenerate any other rank's data, any sub-range, in any order.
 */
static inline uint64_t mix64(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}
static inline uint64_t stream_key(uint64_t seed, uint64_t rank, uint64_t stream)
{
    return mix64(mix64(seed ^ 0x5eed5eed5eedULL) ^ mix64((rank << 8) ^ stream ^ 0xC0FFEE0000ULL));
}
static inline uint64_t hash_at(uint64_t key, uint64_t i) { return mix64(key ^ (i * 0xD6E8FEB86659FD93ULL)); }
/* uniform in (0,1) from 24 bits */
static inline double u24(uint64_t bits) { return ((double)(bits & 0xFFFFFF) + 0.5) * (1.0 / 16777216.0); }
static inline double normal_from(uint64_t h)
{
    double u1 = u24(h), u2 = u24(h >> 24);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

#define GRAD_BLOCK 4096 /* elements per "tensor block" sharing a scale */

/*
 * "gradient": per block of 4096 elements a log-normal scale common to all ranks
 * (1e-3 * exp(1.5 N), i.e. spans ~4 decades across blocks, like layers), times
 * a per-rank jitter exp(0.25 N); per element 0.6 * common N(0,1) (the "true"
 * gradient, same on all ranks) + per-rank N(0,1) noise; 2% exact zeros per
 * rank; 0.5% heavy-tail outliers multiplied by 1/sqrt(U) (Pareto tail, alpha=2,
 * up to ~4000x).
 */
static void gen_data(enum data_kind kind, uint64_t seed, int rank, size_t start, size_t n, float *out)
{
    uint64_t kr = stream_key(seed, (uint64_t)rank, 1);
    if (kind == D_UNIFORM) {
        for (size_t j = 0; j < n; j++)
            out[j] = (float)(2.0 * u24(hash_at(kr, start + j)) - 1.0);
        return;
    }
    if (kind == D_NORMAL) {
        for (size_t j = 0; j < n; j++)
            out[j] = (float)normal_from(hash_at(kr, start + j));
        return;
    }
    uint64_t kc = stream_key(seed, 0xFFFFFF, 2);             /* common to all ranks */
    uint64_t kbs = stream_key(seed, 0xFFFFFF, 3);            /* block scale, common */
    uint64_t kbj = stream_key(seed, (uint64_t)rank, 4);      /* per-rank block jitter */
    uint64_t kt = stream_key(seed, (uint64_t)rank, 5);       /* tail magnitudes */
    size_t j = 0;
    while (j < n) {
        size_t i = start + j;
        uint64_t b = i / GRAD_BLOCK;
        size_t bend = (b + 1) * GRAD_BLOCK - start;
        if (bend > n) bend = n;
        double scale = 1e-3 * exp(1.5 * normal_from(hash_at(kbs, b))) * exp(0.25 * normal_from(hash_at(kbj, b)));
        for (; j < bend; j++) {
            i = start + j;
            uint64_t h = hash_at(kr, i);
            unsigned sel = (unsigned)(h >> 48) & 0xFFFF;     /* 16 selector bits */
            if (sel < 1311) { out[j] = 0.0f; continue; }    /* 2% zeros */
            double v = 0.6 * normal_from(hash_at(kc, i)) + normal_from(h);
            if (sel >= 65536 - 328)                          /* 0.5% outliers */
                v /= sqrt(u24(hash_at(kt, i)));
            out[j] = (float)(scale * v);
        }
    }
}

/* 64-bit hash of a byte range (word-wise FNV-1a style + final mix). */
static uint64_t hash_bytes(const void *p, size_t nbytes)
{
    const unsigned char *c = p;
    uint64_t h = 0xcbf29ce484222325ULL;
    size_t nw = nbytes / 8;
    for (size_t k = 0; k < nw; k++) {
        uint64_t w;
        memcpy(&w, c + 8 * k, 8);
        h = (h ^ w) * 0x100000001B3ULL;
        h ^= h >> 32;
    }
    for (size_t k = nw * 8; k < nbytes; k++) h = (h ^ c[k]) * 0x100000001B3ULL;
    return mix64(h ^ nbytes);
}

/* ------------------------------------------------------------------------ */

static size_t parse_size(const char *s)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v <= 0) die("bad size '%s'", s);
    double mul = 1;
    switch (*end) {
    case 'k': case 'K': mul = 1024.0; end++; break;
    case 'm': case 'M': mul = 1024.0 * 1024; end++; break;
    case 'g': case 'G': mul = 1024.0 * 1024 * 1024; end++; break;
    default: break;
    }
    if (*end == 'i') end++;
    if (*end == 'B' || *end == 'b') end++;
    if (*end) die("bad size '%s' (use e.g. 4M, 65536, 1G)", s);
    double b = v * mul;
    if (b > (double)INT_MAX * 4.0) die("size '%s' too large", s);
    size_t bytes = (size_t)b;
    if (bytes % sizeof(float)) die("size '%s' is not a multiple of 4 bytes", s);
    return bytes;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#define CHUNK 65536

/* local sum of squares of (result - exact) and of exact, in double */
static double median_sorted(const double *v, int n)
{
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Distribution-free 95% confidence interval of the median of n sorted values: the order
 * statistics v[j-1], v[n-j] with j the largest rank for which P(Binomial(n, 1/2) < j) <= 0.025
 * (j = 1, the full range, when n is too small for 95%). */
static void median_ci(const double *v, int n, double *lo, double *hi)
{
    double p = pow(0.5, n), cdf = 0; /* P(B = i), P(B < j) */
    int j = 0;
    for (int i = 0; i < n; i++) {
        if (cdf + p > 0.025) break;
        cdf += p;
        j = i + 1;
        p = p * (n - i) / (i + 1);
    }
    if (j < 1) j = 1;
    *lo = v[j - 1];
    *hi = v[n - j];
}

/* --cpu: this rank's CPU seconds, and (rank 0) busy and total jiffies of the whole machine */
struct cpu_mark {
    double cpu, wait;
    unsigned long long busy, total;
};
static void cpu_mark(struct cpu_mark *m)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    m->cpu = ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + 1e-6 * (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
    m->wait = 0;
    unsigned long long run_ns, wait_ns;
    FILE *f = fopen("/proc/self/schedstat", "r");
    if (f && fscanf(f, "%llu %llu", &run_ns, &wait_ns) == 2) m->wait = 1e-9 * (double)wait_ns;
    if (f) fclose(f);
    m->busy = m->total = 0;
    f = g_rank == 0 ? fopen("/proc/stat", "r") : NULL;
    unsigned long long v[8] = {0};
    if (f && fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
                    &v[7]) == 8) {
        for (int i = 0; i < 8; i++) m->total += v[i];
        m->busy = m->total - v[3] - v[4]; /* all but idle and iowait */
    }
    if (f) fclose(f);
}
/* per arm: [0] CPU s, [1] wall s, [2] busy jiffies, [3] total jiffies, [4] run-queue wait s */
static void cpu_add(double acc[5], const struct cpu_mark *a, const struct cpu_mark *b, double wall)
{
    acc[0] += b->cpu - a->cpu;
    acc[1] += wall;
    acc[2] += (double)(b->busy - a->busy);
    acc[3] += (double)(b->total - a->total);
    acc[4] += b->wait - a->wait;
}
/* " cpu=.. host_busy=.." for one arm (rank 0; acc summed over ranks, host figures rank 0's) */
static void cpu_format(char *out, size_t len, const char *suffix, const double acc[5], double host_busy,
                       double host_total)
{
    const double cores = (double)sysconf(_SC_NPROCESSORS_ONLN);
    const double wall = acc[1] / g_size; /* acc[1]: every rank's wall seconds, summed */
    snprintf(out, len, " cpu%s=%.3f host_busy%s=%.3f rq_wait%s=%.3f", suffix, wall > 0 ? acc[0] / (wall * cores) : 0,
             suffix, host_total > 0 ? host_busy / host_total : 0, suffix, acc[1] > 0 ? acc[4] / acc[1] : 0);
}

/* One call of the collective under test through the MPI_* names (libcompmpi's, when it is
 * preloaded) or, for --paired's plain arm, the PMPI_* names (MPI's own, past any interposer). */
struct coll_fns {
    int (*allreduce)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm);
    int (*allgather)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm);
    int (*bcast)(void *, int, MPI_Datatype, int, MPI_Comm);
    int (*reduce_scatter_block)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm);
};
static const struct coll_fns mpi_fns = {MPI_Allreduce, MPI_Allgather, MPI_Bcast, MPI_Reduce_scatter_block};
static const struct coll_fns pmpi_fns = {PMPI_Allreduce, PMPI_Allgather, PMPI_Bcast, PMPI_Reduce_scatter_block};

/* The non-blocking and persistent forms, again through MPI_* or PMPI_* names. */
struct nb_fns {
    int (*iallreduce)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm, MPI_Request *);
    int (*iallgather)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm, MPI_Request *);
    int (*ibcast)(void *, int, MPI_Datatype, int, MPI_Comm, MPI_Request *);
    int (*ireduce_scatter_block)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm, MPI_Request *);
    int (*wait)(MPI_Request *, MPI_Status *);
#if MPI_VERSION >= 4
    int (*allreduce_init)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm, MPI_Info, MPI_Request *);
    int (*allgather_init)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm, MPI_Info,
                          MPI_Request *);
    int (*bcast_init)(void *, int, MPI_Datatype, int, MPI_Comm, MPI_Info, MPI_Request *);
    int (*reduce_scatter_block_init)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm, MPI_Info,
                                     MPI_Request *);
    int (*start)(MPI_Request *);
    int (*request_free)(MPI_Request *);
#endif
};
static const struct nb_fns mpi_nb = {MPI_Iallreduce, MPI_Iallgather, MPI_Ibcast, MPI_Ireduce_scatter_block, MPI_Wait,
#if MPI_VERSION >= 4
                                     MPI_Allreduce_init, MPI_Allgather_init, MPI_Bcast_init,
                                     MPI_Reduce_scatter_block_init, MPI_Start, MPI_Request_free
#endif
};
static const struct nb_fns pmpi_nb = {PMPI_Iallreduce, PMPI_Iallgather, PMPI_Ibcast, PMPI_Ireduce_scatter_block,
                                      PMPI_Wait,
#if MPI_VERSION >= 4
                                      PMPI_Allreduce_init, PMPI_Allgather_init, PMPI_Bcast_init,
                                      PMPI_Reduce_scatter_block_init, PMPI_Start, PMPI_Request_free
#endif
};

/* Busy computation for `s` seconds (no MPI call: MPI progresses nothing meanwhile unless it
 * has a thread of its own). */
static volatile double g_sink;
static void compute_for(double s)
{
    const double end = MPI_Wtime() + s;
    double x = 1.0;
    while (MPI_Wtime() < end)
        for (int i = 0; i < 64; i++) x = x * 1.0000001 + 1e-9;
    g_sink = x;
}

/* Issue one non-blocking call (nonblocking form) or start the persistent request *preq. */
static void issue_nb(const struct nb_fns *f, enum form_kind form, enum coll_kind ck, int inplace, float *src,
                     float *dst, int cnt, int blk, int root, MPI_Request *req, MPI_Request *preq)
{
#if MPI_VERSION >= 4
    if (form == F_PERSISTENT) {
        f->start(preq);
        *req = *preq;
        return;
    }
#else
    (void)preq;
    (void)form;
#endif
    switch (ck) {
    case C_ALLREDUCE:
        f->iallreduce(inplace ? MPI_IN_PLACE : src, dst, cnt, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, req);
        break;
    case C_ALLGATHER:
        if (inplace)
            f->iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, dst, cnt, MPI_FLOAT, MPI_COMM_WORLD, req);
        else
            f->iallgather(src, cnt, MPI_FLOAT, dst, cnt, MPI_FLOAT, MPI_COMM_WORLD, req);
        break;
    case C_BCAST: f->ibcast(dst, cnt, MPI_FLOAT, root, MPI_COMM_WORLD, req); break;
    case C_RSB:
        f->ireduce_scatter_block(inplace ? MPI_IN_PLACE : src, dst, blk, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, req);
        break;
    default: break;
    }
}

#if MPI_VERSION >= 4
static void init_persistent(const struct nb_fns *f, enum coll_kind ck, int inplace, float *src, float *dst, int cnt,
                            int blk, int root, MPI_Request *preq)
{
    switch (ck) {
    case C_ALLREDUCE:
        f->allreduce_init(inplace ? MPI_IN_PLACE : src, dst, cnt, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL,
                          preq);
        break;
    case C_ALLGATHER:
        if (inplace)
            f->allgather_init(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, dst, cnt, MPI_FLOAT, MPI_COMM_WORLD, MPI_INFO_NULL,
                              preq);
        else
            f->allgather_init(src, cnt, MPI_FLOAT, dst, cnt, MPI_FLOAT, MPI_COMM_WORLD, MPI_INFO_NULL, preq);
        break;
    case C_BCAST: f->bcast_init(dst, cnt, MPI_FLOAT, root, MPI_COMM_WORLD, MPI_INFO_NULL, preq); break;
    case C_RSB:
        f->reduce_scatter_block_init(inplace ? MPI_IN_PLACE : src, dst, blk, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                                     MPI_INFO_NULL, preq);
        break;
    default: break;
    }
}
#endif

static void run_coll(const struct coll_fns *f, enum coll_kind ck, int inplace, float *src, float *dst, int cnt,
                     int blk, int root)
{
    switch (ck) {
    case C_ALLREDUCE:
        f->allreduce(inplace ? MPI_IN_PLACE : src, dst, cnt, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
    case C_ALLGATHER:
        if (inplace)
            f->allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, dst, cnt, MPI_FLOAT, MPI_COMM_WORLD);
        else
            f->allgather(src, cnt, MPI_FLOAT, dst, cnt, MPI_FLOAT, MPI_COMM_WORLD);
        break;
    case C_BCAST:
        f->bcast(dst, cnt, MPI_FLOAT, root, MPI_COMM_WORLD);
        break;
    case C_RSB:
        f->reduce_scatter_block(inplace ? MPI_IN_PLACE : src, dst, blk, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
    default: break;
    }
}

static void check_error(enum coll_kind ck, enum data_kind dk, uint64_t seed, int root, size_t n,
                        const float *res, double *err2, double *ref2)
{
    float *tmp = malloc(CHUNK * sizeof(float));
    double *ex = malloc(CHUNK * sizeof(double));
    if (!tmp || !ex) die("out of memory (%s)", "check");
    double e2 = 0, r2 = 0;
    if (ck == C_ALLREDUCE || ck == C_RSB) {
        /* reduce_scatter_block: n is the block, this rank's, at offset rank * n */
        const size_t at = ck == C_RSB ? (size_t)g_rank * n : 0;
        for (size_t s = 0; s < n; s += CHUNK) {
            size_t m = n - s < CHUNK ? n - s : CHUNK;
            for (size_t j = 0; j < m; j++) ex[j] = 0;
            for (int r = 0; r < g_size; r++) {
                gen_data(dk, seed, r, at + s, m, tmp);
                for (size_t j = 0; j < m; j++) ex[j] += (double)tmp[j];
            }
            for (size_t j = 0; j < m; j++) {
                double d = (double)res[s + j] - ex[j];
                e2 += d * d;
                r2 += ex[j] * ex[j];
            }
        }
    } else {
        int r0 = ck == C_BCAST ? root : 0, r1 = ck == C_BCAST ? root + 1 : g_size;
        for (int r = r0; r < r1; r++) {
            const float *blk = res + (ck == C_BCAST ? 0 : (size_t)r * n);
            for (size_t s = 0; s < n; s += CHUNK) {
                size_t m = n - s < CHUNK ? n - s : CHUNK;
                gen_data(dk, seed, r, s, m, tmp);
                for (size_t j = 0; j < m; j++) {
                    double d = (double)blk[s + j] - (double)tmp[j];
                    e2 += d * d;
                    r2 += (double)tmp[j] * (double)tmp[j];
                }
            }
        }
    }
    free(tmp);
    free(ex);
    *err2 = e2;
    *ref2 = r2;
}

static void *xmalloc(size_t bytes)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 64)) die("out of memory allocating %s", "buffers");
    return p;
}

static void usage(void)
{
    if (g_rank == 0)
        fprintf(stderr,
                "usage: coll_bench [--coll allreduce|allgather|bcast|reduce_scatter_block|all|LIST] [--sizes 4M,...]\n"
                "                  [--iters K] [--warmup W] [--warmup-lib L] [--data gradient|uniform|normal]\n"
                "                  [--seed S] [--check] [--inplace] [--root R] [--batch B] [--paired] [--cpu]\n"
                "                  [--form blocking|nonblocking|persistent] [--overlap] [--plain-nonblocking]\n"
                "                  [--thread-level single|funneled|serialized|multiple]\n");
}

int main(int argc, char **argv)
{
    bench_init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);

    int colls[C_NKINDS], ncolls = 0;
    size_t sizes[64];
    int nsizes = 0, iters = 5, warmup = 1, warmup_lib = 0, check = 0, inplace = 0, root = 0, batch = 1, paired = 0, overlap = 0,
        cpu = 0, plain_nb = 0;
    enum form_kind form = F_BLOCKING;
    enum data_kind dk = D_GRADIENT;
    uint64_t seed = 42;
    const char *coll_arg = "all", *sizes_arg = "4M,16M,64M";

    for (int a = 1; a < argc; a++) {
        const char *o = argv[a];
        const char *v = a + 1 < argc ? argv[a + 1] : NULL;
#define NEEDV() do { if (!v) die("option %s needs a value", o); a++; } while (0)
        if (!strcmp(o, "--coll")) { NEEDV(); coll_arg = v; }
        else if (!strcmp(o, "--sizes")) { NEEDV(); sizes_arg = v; }
        else if (!strcmp(o, "--iters")) { NEEDV(); iters = atoi(v); }
        else if (!strcmp(o, "--warmup")) { NEEDV(); warmup = atoi(v); }
        else if (!strcmp(o, "--warmup-lib")) { NEEDV(); warmup_lib = atoi(v); }
        else if (!strcmp(o, "--seed")) { NEEDV(); seed = strtoull(v, NULL, 0); }
        else if (!strcmp(o, "--root")) { NEEDV(); root = atoi(v); }
        else if (!strcmp(o, "--batch")) { NEEDV(); batch = atoi(v); }
        else if (!strcmp(o, "--data")) {
            NEEDV();
            if (!strcmp(v, "gradient")) dk = D_GRADIENT;
            else if (!strcmp(v, "uniform")) dk = D_UNIFORM;
            else if (!strcmp(v, "normal")) dk = D_NORMAL;
            else die("unknown --data '%s'", v);
        }
        else if (!strcmp(o, "--check")) check = 1;
        else if (!strcmp(o, "--inplace")) inplace = 1;
        else if (!strcmp(o, "--paired")) paired = 1;
        else if (!strcmp(o, "--overlap")) overlap = 1;
        else if (!strcmp(o, "--plain-nonblocking")) plain_nb = 1;
        else if (!strcmp(o, "--form")) {
            NEEDV();
            if (!strcmp(v, "blocking")) form = F_BLOCKING;
            else if (!strcmp(v, "nonblocking")) form = F_NONBLOCKING;
            else if (!strcmp(v, "persistent")) form = F_PERSISTENT;
            else die("unknown --form '%s'", v);
        }
        else if (!strcmp(o, "--cpu")) cpu = 1;
        else if (!strcmp(o, "--thread-level") && a + 1 < argc) a++; /* bench_init */
        else if (!strcmp(o, "-h") || !strcmp(o, "--help")) { usage(); MPI_Finalize(); return 0; }
        else { usage(); die("unknown option '%s'", o); }
#undef NEEDV
    }
    if (iters < 1) die("--iters must be >= 1%s", "");
    if (warmup < 0) die("--warmup must be >= 0%s", "");
    if (warmup_lib < 0) die("--warmup-lib must be >= 0%s", "");
    if (warmup_lib > 0 && !paired) die("--warmup-lib needs --paired%s", "");
    if (root < 0 || root >= g_size) die("--root out of range%s", "");
    if (batch < 1) die("--batch must be >= 1%s", "");
    if (batch > 1 && inplace) die("--batch with --inplace would sum the sums%s", "");
    if (paired && check) die("--paired does not go with --check%s", "");
    if (overlap && form == F_BLOCKING) die("--overlap needs --form nonblocking or persistent%s", "");
    if (plain_nb && !(paired && form == F_PERSISTENT)) die("--plain-nonblocking needs --paired --form persistent%s", "");
#if MPI_VERSION < 4
    if (form == F_PERSISTENT) die("--form persistent needs an MPI-4 library%s", "");
#endif

    /* collectives */
    {
        char *s = strdup(coll_arg), *save = NULL;
        for (char *t = strtok_r(s, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            if (!strcmp(t, "all")) {
                for (int k = 0; k <= C_BCAST; k++) colls[ncolls++] = k;
                break;
            }
            int k;
            for (k = 0; k < C_NKINDS && strcmp(t, coll_names[k]); k++) ;
            if (k == C_NKINDS) die("unknown collective '%s'", t);
            if (ncolls < C_NKINDS) colls[ncolls++] = k;
        }
        free(s);
        if (!ncolls) die("no collective given%s", "");
    }
    /* sizes */
    {
        char *s = strdup(sizes_arg), *save = NULL;
        for (char *t = strtok_r(s, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            if (nsizes == 64) die("too many sizes%s", "");
            sizes[nsizes++] = parse_size(t);
        }
        free(s);
        if (!nsizes) die("no size given%s", "");
    }

    if (g_rank == 0) {
        int len;
        char ver[MPI_MAX_LIBRARY_VERSION_STRING];
        MPI_Get_library_version(ver, &len);
        for (char *q = ver; *q; q++) if (*q == '\t') *q = ' ';
        char *nl = strchr(ver, '\n');
        if (nl) *nl = 0;
        const char *pre = getenv("LD_PRELOAD");
        printf("# coll_bench ranks=%d iters=%d warmup=%d warmup_lib=%d batch=%d data=%s seed=%llu check=%d inplace=%d paired=%d form=%s overlap=%d preload=%s mpi=\"%s\"\n",
               g_size, iters, warmup, warmup_lib, batch, data_names[dk], (unsigned long long)seed, check, inplace, paired,
               form_names[form], overlap, pre && *pre ? pre : "none", ver);
        fflush(stdout);
    }

    double *times = malloc(sizeof(double) * iters), *tmax = malloc(sizeof(double) * iters);
    double *ptimes = malloc(sizeof(double) * iters), *ptmax = malloc(sizeof(double) * iters);
    double *ratios = malloc(sizeof(double) * iters);

    for (int ci = 0; ci < ncolls; ci++) {
        enum coll_kind ck = colls[ci];
        for (int si = 0; si < nsizes; si++) {
            size_t bytes = sizes[si], n = bytes / sizeof(float);
            int cnt = (int)n;
            const int blk = (int)(n / (size_t)g_size); /* reduce_scatter_block */
            if (ck == C_RSB) {
                n = (size_t)blk * (size_t)g_size;
                bytes = n * sizeof(float);
            }
            float *pristine = xmalloc(bytes);
            float *src = NULL, *dst = NULL;
            gen_data(dk, seed, g_rank, 0, n, pristine);
            if (ck == C_ALLREDUCE) {
                dst = xmalloc(bytes);
                if (!inplace) src = xmalloc(bytes);
                memset(dst, 0, bytes);
            } else if (ck == C_RSB) {
                dst = xmalloc(inplace ? bytes : (size_t)blk * sizeof(float));
                if (!inplace) src = xmalloc(bytes);
            } else if (ck == C_ALLGATHER) {
                dst = xmalloc(bytes * (size_t)g_size);
                if (!inplace) src = xmalloc(bytes);
                memset(dst, 0, bytes * (size_t)g_size);
            } else {
                dst = xmalloc(bytes);
            }

            MPI_Request preq[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL}; /* persistent: [library, plain] */
#if MPI_VERSION >= 4
            if (form == F_PERSISTENT) {
                init_persistent(&mpi_nb, ck, inplace, src, dst, cnt, blk, root, &preq[0]);
                if (paired) init_persistent(&pmpi_nb, ck, inplace, src, dst, cnt, blk, root, &preq[1]);
            }
#endif
            /* --overlap: a first pass (pass 0) times the plain collective alone; its median, the
             * slowest rank's, is the computation of the timed pass */
            double tcomp = 0, tot[2] = {0, 0}, twarm = 0;
            double cpu_acc[2][5] = {{0}}; /* --cpu: [0] the MPI_* arm, [1] the plain arm */
            for (int pass = overlap ? 0 : 1; pass < 2; pass++) {
            /* it < 0: --warmup-lib, the library arm alone */
            for (int it = pass == 1 ? -warmup_lib : 0; it < warmup + iters; it++)
            for (int arm = 0; arm < 1 + paired; arm++) {
                /* paired: arm 0 and 1 alternate between PMPI (plain) and MPI (library) */
                const int plain = paired && ((it + arm) % 2 == 0);
                if (pass == 0 && paired && !plain) continue;
                if (it < 0 && plain) continue;
                /* restore the input (not timed) */
                switch (ck) {
                case C_ALLREDUCE:
                case C_RSB:
                    memcpy(inplace ? dst : src, pristine, bytes);
                    break;
                case C_ALLGATHER:
                    memcpy(inplace ? dst + (size_t)g_rank * n : src, pristine, bytes);
                    break;
                case C_BCAST: /* root: the data; others: their own data, to be overwritten */
                    memcpy(dst, pristine, bytes);
                    break;
                default: break;
                }
                struct cpu_mark m0, m1;
                if (cpu) cpu_mark(&m0);
                MPI_Barrier(MPI_COMM_WORLD);
                double t0 = MPI_Wtime();
                for (int b = 0; b < batch; b++) {
                    if (form == F_BLOCKING) {
                        run_coll(plain ? &pmpi_fns : &mpi_fns, ck, inplace, src, dst, cnt, blk, root);
                        continue;
                    }
                    const struct nb_fns *f = plain ? &pmpi_nb : &mpi_nb;
                    MPI_Request req = MPI_REQUEST_NULL;
                    issue_nb(f, plain && plain_nb ? F_NONBLOCKING : form, ck, inplace, src, dst, cnt, blk, root, &req,
                             &preq[plain]);
                    if (pass == 1 && overlap) compute_for(tcomp);
                    f->wait(&req, MPI_STATUS_IGNORE);
                }
                double t = (MPI_Wtime() - t0) / batch;
                if (pass == 1 && it >= 0) tot[plain] += t * batch;
                if (it < 0) twarm += t * batch;
                if (it >= warmup) (plain ? ptimes : times)[it - warmup] = t;
                if (cpu && pass == 1 && it >= warmup) {
                    cpu_mark(&m1);
                    cpu_add(cpu_acc[plain], &m0, &m1, t * batch);
                }
            }
                if (pass == 0) { /* the plain (or only) arm's median, slowest rank */
                    double *pure = paired ? ptimes : times, med;
                    qsort(pure, iters, sizeof(double), cmp_double);
                    med = median_sorted(pure, iters);
                    MPI_Allreduce(&med, &tcomp, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
                }
            }
#if MPI_VERSION >= 4
            for (int k = 0; k < 2; k++)
                if (preq[k] != MPI_REQUEST_NULL) (k ? pmpi_nb : mpi_nb).request_free(&preq[k]);
#endif
            MPI_Reduce(times, tmax, iters, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
            if (paired) MPI_Reduce(ptimes, ptmax, iters, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);

            char cpu_s[240] = "";
            if (cpu) {
                double sum[2][5];
                MPI_Reduce(cpu_acc, sum, 10, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
                if (g_rank == 0) {
                    cpu_format(cpu_s, 120, "", sum[0], cpu_acc[0][2], cpu_acc[0][3]);
                    if (paired) cpu_format(cpu_s + strlen(cpu_s), 120, "_plain", sum[1], cpu_acc[1][2], cpu_acc[1][3]);
                }
            }
            char err_s[64] = "na", ident_s[8] = "na";
            if (check) {
                size_t rbytes = ck == C_ALLGATHER ? bytes * (size_t)g_size
                                : ck == C_RSB     ? (size_t)blk * sizeof(float)
                                                  : bytes;
                uint64_t h = hash_bytes(dst, rbytes), hmax = 0, hmin = 0;
                MPI_Allreduce(&h, &hmax, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
                MPI_Allreduce(&h, &hmin, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
                double e2, r2, rel, relmax = 0;
                check_error(ck, dk, seed, root, ck == C_RSB ? (size_t)blk : n, dst, &e2, &r2);
                rel = r2 > 0 ? sqrt(e2 / r2) : sqrt(e2);
                if (rel != rel) rel = INFINITY; /* NaN in result: report inf (MAX would drop NaN) */
                MPI_Reduce(&rel, &relmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
                snprintf(err_s, sizeof err_s, "%.3e", relmax);
                if (ck != C_RSB) snprintf(ident_s, sizeof ident_s, "%d", hmax == hmin);
            }
            double tot_max[3] = {0, 0, 0}, tot3[3] = {tot[0], tot[1], twarm};
            MPI_Reduce(tot3, tot_max, 3, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
            if (g_rank == 0) {
                char pair_s[300] = "";
                if (paired) {
                    double lo, hi;
                    for (int i = 0; i < iters; i++) ratios[i] = tmax[i] / ptmax[i];
                    qsort(ptmax, iters, sizeof(double), cmp_double);
                    qsort(ratios, iters, sizeof(double), cmp_double);
                    median_ci(ratios, iters, &lo, &hi);
                    snprintf(pair_s, sizeof pair_s,
                             " t_plain_min_s=%.9f t_plain_med_s=%.9f ratio_med=%.4f ratio_lo=%.4f ratio_hi=%.4f"
                             " ratio_total=%.4f t_warmlib_s=%.6f",
                             ptmax[0], median_sorted(ptmax, iters), median_sorted(ratios, iters), lo, hi,
                             tot_max[0] / tot_max[1], tot_max[2]);
                }
                qsort(tmax, iters, sizeof(double), cmp_double);
                char form_s[96] = "";
                if (form != F_BLOCKING)
                    snprintf(form_s, sizeof form_s, " form=%s%s%s", form_names[form], plain_nb ? "_vs_nonblocking" : "",
                             overlap ? " overlap=1" : "");
                if (overlap) snprintf(form_s + strlen(form_s), sizeof form_s - strlen(form_s), " t_compute_s=%.9f", tcomp);
                printf("coll=%s bytes=%zu ranks=%d iters=%d t_min_s=%.9f t_med_s=%.9f t_max_s=%.9f rel_err=%s identical=%s%s%s%s\n",
                       coll_names[ck], bytes, g_size, iters, tmax[0], median_sorted(tmax, iters), tmax[iters - 1],
                       err_s, ident_s, pair_s, form_s, cpu_s);
                fflush(stdout);
            }
            free(pristine);
            free(src);
            free(dst);
        }
    }
    free(times);
    free(tmax);
    free(ptimes);
    free(ptmax);
    free(ratios);
    if (g_rank == 0) {
        printf("# coll_bench: done\n");
        fflush(stdout);
    }
    /* Enter MPI_Finalize together: MPICH 4.0.2 ch4:ucx over UCX TCP can hang in
     * MPI_Finalize when one rank gets there long before another (its endpoint
     * close completes, it stops progressing, and the late rank's flush-close
     * then never completes). */
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}

// SPDX-License-Identifier: BSD-3-Clause
/* MPI collectives on device buffers under libcompmpi (docs/gpu.md, "GPU checks"): the same
 * program runs with host buffers, device buffers (cudaMalloc), managed buffers
 * (cudaMallocManaged) or mixed (even ranks device, odd ranks host), and prints one line
 *
 *     H <spec> <op> <count> <hash of the result>
 *
 * per result from rank 0. The blob format and the random streams are the CPU's, so every mode
 * must print the same lines as the host mode: tests/gpu/run_device.sh compares them. Inside
 * one run each result is checked to be identical on every rank, a bcast root's buffer
 * unchanged, and a result holding a NaN input equal to MPI's exact sum (the exact fallback).
 *
 *     t_gpu_coll MODE SPEC...     MODE: host | device | managed | mixed
 *     SPEC: settings separated by '/', each key=value, e.g.  codec=bitpack/bits=16
 *
 * Each SPEC runs on its own MPI_Comm_dup_with_info with the keys as compmpi_* hints, so the
 * program works under LD_PRELOAD (it calls nothing of libcompmpi's own API). Built only where
 * the CUDA toolkit is (src/cuda/local.mk); linked with the static CUDA runtime. */
#include <cuda_runtime.h>

#include "../mpi/mpitest.h"

static int R, P;
static int mode_dev; /* this rank's buffers: 0 host, 1 device, 2 managed */

#define CK(x)                                                                                       \
    do {                                                                                            \
        cudaError_t e_ = (x);                                                                       \
        if (e_ != cudaSuccess) {                                                                    \
            fprintf(stderr, "[rank %d] %s: %s (%s:%d)\n", R, #x, cudaGetErrorString(e_), __FILE__, __LINE__); \
            MPI_Abort(MPI_COMM_WORLD, 2);                                                           \
        }                                                                                           \
    } while (0)

static void *buf_alloc(size_t bytes) {
    void *p = NULL;
    if (mode_dev == 1) CK(cudaMalloc(&p, bytes));
    else if (mode_dev == 2) CK(cudaMallocManaged(&p, bytes, cudaMemAttachGlobal));
    else p = malloc(bytes);
    return p;
}
static void buf_free(void *p) {
    if (mode_dev) CK(cudaFree(p));
    else free(p);
}
static void put(void *dst, const void *src, size_t bytes) {
    if (mode_dev) CK(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
    else memcpy(dst, src, bytes);
}
static void get(void *dst, const void *src, size_t bytes) {
    if (mode_dev) CK(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
    else memcpy(dst, src, bytes);
}

/* One spec "a=1/b=2" as compmpi_* hints on a duplicate of MPI_COMM_WORLD. */
static MPI_Comm spec_comm(const char *spec) {
    MPI_Info info;
    MPI_Info_create(&info);
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s", spec);
    for (char *save = NULL, *kv = strtok_r(tmp, "/", &save); kv; kv = strtok_r(NULL, "/", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq) continue;
        *eq = 0;
        char key[96];
        snprintf(key, sizeof key, "compmpi_%s", kv);
        MPI_Info_set(info, key, eq + 1);
    }
    MPI_Comm c;
    MT_CHECK(MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &c) == MPI_SUCCESS, "spec %s refused", spec);
    MPI_Info_free(&info);
    return c;
}

static void report(const char *spec, const char *op, size_t n, const void *h, size_t bytes) {
    if (R == 0) printf("H %s %s %zu %016llx\n", spec, op, n, (unsigned long long)mt_hash(h, bytes));
}

/* Hash of every rank's block, in rank order (reduce-scatter results differ per rank). */
static void report_blocks(const char *spec, const char *op, size_t n, const float *h) {
    uint64_t mine = mt_hash(h, n * sizeof(float));
    uint64_t *all = (uint64_t *)malloc(sizeof(uint64_t) * (size_t)P);
    MPI_Allgather(&mine, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, MPI_COMM_WORLD);
    report(spec, op, n, all, sizeof(uint64_t) * (size_t)P);
    free(all);
}

static void run_spec(const char *spec, const size_t *sizes, int nsizes, int repeats) {
    MPI_Comm c = spec_comm(spec);
    for (int si = 0; si < nsizes; ++si) {
        const size_t n = sizes[si], bytes = n * sizeof(float);
        float *h = (float *)malloc(bytes * (size_t)P), *x = (float *)malloc(bytes * (size_t)P);
        float *exact = (float *)malloc(bytes), *tmp = (float *)malloc(bytes);
        float *d_in = (float *)buf_alloc(bytes * (size_t)P), *d_out = (float *)buf_alloc(bytes * (size_t)P);
        mt_fill(x, n * (size_t)P, 41, R);

        /* allreduce, out of place; repeated (awp and error feedback act across calls) */
        put(d_in, x, bytes);
        for (int k = 0; k < repeats; ++k) MPI_Allreduce(d_in, d_out, (int)n, MPI_FLOAT, MPI_SUM, c);
        get(h, d_out, bytes);
        MT_CHECK(mt_identical(h, bytes, c), "%s allreduce n=%zu: ranks differ", spec, n);
        report(spec, "allreduce", n, h, bytes);
        get(tmp, d_in, bytes);
        MT_CHECK(memcmp(tmp, x, bytes) == 0, "%s allreduce n=%zu: send buffer written", spec, n);

        /* allreduce in place */
        put(d_out, x, bytes);
        MPI_Allreduce(MPI_IN_PLACE, d_out, (int)n, MPI_FLOAT, MPI_SUM, c);
        get(h, d_out, bytes);
        MT_CHECK(mt_identical(h, bytes, c), "%s allreduce in place n=%zu: ranks differ", spec, n);
        report(spec, "allreduce_inplace", n, h, bytes);

        /* bcast from rank 0: the root's buffer is input */
        put(d_out, x, bytes);
        MPI_Bcast(d_out, (int)n, MPI_FLOAT, 0, c);
        get(h, d_out, bytes);
        MT_CHECK(mt_bcast_ok(h, x, bytes, 0, c), "%s bcast n=%zu: root written or receivers differ", spec, n);
        report(spec, "bcast", n, h, bytes);

        /* allgather */
        put(d_in, x, bytes);
        MPI_Allgather(d_in, (int)n, MPI_FLOAT, d_out, (int)n, MPI_FLOAT, c);
        get(h, d_out, bytes * (size_t)P);
        MT_CHECK(mt_identical(h, bytes * (size_t)P, c), "%s allgather n=%zu: ranks differ", spec, n);
        report(spec, "allgather", n, h, bytes * (size_t)P);

        /* reduce_scatter_block: n per block */
        put(d_in, x, bytes * (size_t)P);
        MPI_Reduce_scatter_block(d_in, d_out, (int)n, MPI_FLOAT, MPI_SUM, c);
        get(h, d_out, bytes);
        report_blocks(spec, "reduce_scatter_block", n, h);

        /* non-blocking allreduce */
        put(d_in, x, bytes);
        MPI_Request rq;
        MPI_Iallreduce(d_in, d_out, (int)n, MPI_FLOAT, MPI_SUM, c, &rq);
        MPI_Wait(&rq, MPI_STATUS_IGNORE);
        get(h, d_out, bytes);
        MT_CHECK(mt_identical(h, bytes, c), "%s iallreduce n=%zu: ranks differ", spec, n);
        report(spec, "iallreduce", n, h, bytes);

        /* a NaN on rank 0: the exact fallback (MPI's own sum) for the call, or for the
         * NaN's segment where the allreduce is pipelined (docs/design.md); nothing else NaN */
        if (P == 2 && n > 1) {
            float *y = (float *)malloc(bytes);
            memcpy(y, x, bytes);
            if (R == 0) y[n / 2] = NAN;
            put(d_in, y, bytes);
            MPI_Allreduce(d_in, d_out, (int)n, MPI_FLOAT, MPI_SUM, c);
            get(h, d_out, bytes);
            mt_exact_sum(exact, tmp, n, 41, P);
            size_t bad = 0, same = 0;
            for (size_t i = 0; i < n; ++i) {
                if (i == n / 2) bad += !isnan(h[i]);
                else bad += !isfinite(h[i]);
                same += memcmp(&h[i], &exact[i], sizeof(float)) == 0;
            }
            MT_CHECK(bad == 0, "%s NaN allreduce n=%zu: %zu elements NaN/Inf where they should not be", spec, n, bad);
            MT_CHECK(same * 2 > n || strstr(spec, "chunk_bytes") || n > 1048576,
                     "%s NaN allreduce n=%zu: only %zu of %zu elements MPI's exact sum", spec, n, same, n);
            MT_CHECK(same >= 1000 || n < 1000, "%s NaN allreduce n=%zu: %zu elements exact", spec, n, same);
            report(spec, "allreduce_nan", n, h, bytes);
            if (R == 0) { /* what differs, where a mode's bits differ from the host's */
                uint32_t nb;
                memcpy(&nb, &h[n / 2], 4);
                printf("H %s allreduce_nan_detail %zu exact=%zu nan=%08x\n", spec, n, same, nb);
            }
            free(y);
        }
        buf_free(d_in);
        buf_free(d_out);
        free(h);
        free(x);
        free(exact);
        free(tmp);
    }
    MPI_Comm_free(&c);
}

/* T_GPU_BENCH=iters: time MPI_Allreduce of 16 Mi floats (64 MiB) per spec instead of the
 * checks; the spec "plain" is what a program does without libcompmpi on an MPI that is not
 * CUDA-aware: copy down, MPI_Allreduce of the host buffer (compmpi_codec=none), copy up. */
static void bench(const char *spec, int iters) {
    const size_t n = (size_t)16 << 20, bytes = n * sizeof(float);
    const int plain = !strcmp(spec, "plain");
    MPI_Comm c = spec_comm(plain ? "codec=none" : spec);
    float *x = (float *)malloc(bytes), *hb = (float *)malloc(bytes);
    mt_fill(x, n, 43, R);
    float *d_in = (float *)buf_alloc(bytes), *d_out = (float *)buf_alloc(bytes);
    put(d_in, x, bytes);
    double t = 0;
    for (int k = -3; k < iters; ++k) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        if (plain) {
            get(hb, d_in, bytes);
            MPI_Allreduce(MPI_IN_PLACE, hb, (int)n, MPI_FLOAT, MPI_SUM, c);
            put(d_out, hb, bytes);
        } else {
            MPI_Allreduce(d_in, d_out, (int)n, MPI_FLOAT, MPI_SUM, c);
        }
        double dt = MPI_Wtime() - t0, mx = 0;
        MPI_Allreduce(&dt, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (k >= 0) t += mx;
    }
    if (R == 0) printf("B %s %s 64MiB allreduce %.4f s\n", spec, mode_dev == 1 ? "device" : "host", t / iters);
    buf_free(d_in);
    buf_free(d_out);
    free(x);
    free(hb);
    MPI_Comm_free(&c);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &R);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    if (argc < 3) {
        if (R == 0) fprintf(stderr, "usage: t_gpu_coll host|device|managed|mixed SPEC...\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const char *mode = argv[1];
    if (!strcmp(mode, "device")) mode_dev = 1;
    else if (!strcmp(mode, "managed")) mode_dev = 2;
    else if (!strcmp(mode, "mixed")) mode_dev = R % 2 == 0;
    else mode_dev = 0;
    if (mode_dev) {
        int ndev = 0;
        CK(cudaGetDeviceCount(&ndev));
        CK(cudaSetDevice(R % ndev));
    }
    /* Sizes the default min_bytes (4 KiB) admits: a call libcompmpi passes through goes to MPI
     * with the user's device pointers, and Debian's MPICH is not CUDA-aware. */
    const size_t sizes[] = {4099, 100003, 4194309};
    const char *reps = getenv("T_GPU_REPEATS"), *b = getenv("T_GPU_BENCH");
    if (b && atoi(b) > 0) {
        for (int a = 2; a < argc; ++a) bench(argv[a], atoi(b));
        return mt_finish();
    }
    for (int a = 2; a < argc; ++a) run_spec(argv[a], sizes, 3, reps ? atoi(reps) : 3);
    return mt_finish();
}

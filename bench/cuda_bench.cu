// SPDX-License-Identifier: BSD-3-Clause
/* Throughput of the CUDA codec kernels against the GPU's own copy bandwidth, measured in the
 * same run: cudaMemcpy device-to-device (the ceiling for a kernel that reads and writes),
 * pinned D2H/H2D (what the staged backend moves compressed bytes over), then per codec
 * encode / decode / decode-and-add, the l2 norm and the add kernel.
 *
 *   bench/cuda_bench [-n FLOATS] [-r REPS]       (default 64 Mi floats = 256 MiB, 20 reps)
 *
 * GB/s count fp32 bytes of the uncompressed side (4 n) per second, so a codec at 100% of
 * the D2D figure is as fast as copying the data once. Timing: CUDA events around REPS
 * back-to-back launches after one warm-up; best of 3 runs. Kernel-only: blob headers and
 * PCIe staging are the backend's and are not included (see the D2H/H2D lines for those). */
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "common/gpu_codec.cuh"
#include "topk/select.h"
#include "topk/topk.h"

using namespace compmpi;
using namespace compmpi::cuda;

namespace {

#define CK(x)                                                                                         \
    do {                                                                                              \
        cudaError_t e_ = (x);                                                                         \
        if (e_ != cudaSuccess) {                                                                      \
            std::fprintf(stderr, "cuda_bench: %s: %s (%s:%d)\n", #x, cudaGetErrorString(e_), __FILE__, __LINE__); \
            std::exit(1);                                                                             \
        }                                                                                             \
    } while (0)

/* Seconds per call of fn (best of 3 timed batches of reps calls). */
double time_it(int reps, const std::function<void()> &fn) {
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    fn();
    CK(cudaDeviceSynchronize());
    double best = 1e30;
    for (int t = 0; t < 3; ++t) {
        CK(cudaEventRecord(a));
        for (int r = 0; r < reps; ++r) fn();
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, a, b));
        best = std::min(best, ms / 1e3 / reps);
    }
    CK(cudaGetLastError());
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    return best;
}

__global__ void fill(float *x, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = static_cast<uint32_t>(i) * 2654435761u;
        h ^= h >> 15;
        x[i] = (static_cast<float>(h & 0xFFFFF) / 1048576.0f - 0.5f) * 1e-3f;
    }
}

}  // namespace

int main(int argc, char **argv) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0); /* lines reach a log even if a later case dies */
    size_t n = 64u << 20;
    int reps = 20;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!std::strcmp(argv[i], "-n")) n = std::strtoull(argv[i + 1], nullptr, 10);
        else if (!std::strcmp(argv[i], "-r")) reps = std::atoi(argv[i + 1]);
    }
    int dev = 0;
    cudaDeviceProp prop;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
        std::printf("cuda_bench: no CUDA device\n");
        return 0;
    }
    std::printf("device %d: %s (sm_%d%d), %zu floats (%.0f MiB), %d reps\n", dev, prop.name, prop.major, prop.minor, n,
                n * 4.0 / (1 << 20), reps);
    const double bytes = 4.0 * n;
    float *x, *y;
    uint8_t *payload;
    uint32_t *flag;
    double *parts;
    void *pinned;
    CK(cudaMalloc(&x, n * 4));
    CK(cudaMalloc(&y, n * 4));
    CK(cudaMalloc(&payload, n * 4 + 256));
    CK(cudaMalloc(&flag, 256));
    CK(cudaMalloc(&parts, (l2_blocks(n) + 1) * 8));
    CK(cudaMallocHost(&pinned, n * 4));
    fill<<<1024, 256>>>(x, n);
    CK(cudaMemset(y, 0, n * 4));
    CK(cudaDeviceSynchronize());

    const double t_d2d = time_it(reps, [&] { CK(cudaMemcpyAsync(y, x, n * 4, cudaMemcpyDeviceToDevice)); });
    const double d2d = bytes / t_d2d / 1e9;
    std::printf("%-28s %8.1f GB/s\n", "memcpy D2D", d2d);
    std::printf("%-28s %8.1f GB/s\n", "memcpy D2H (pinned)",
                bytes / time_it(std::max(1, reps / 4), [&] { CK(cudaMemcpyAsync(pinned, x, n * 4, cudaMemcpyDeviceToHost)); }) / 1e9);
    std::printf("%-28s %8.1f GB/s\n", "memcpy H2D (pinned)",
                bytes / time_it(std::max(1, reps / 4), [&] { CK(cudaMemcpyAsync(y, pinned, n * 4, cudaMemcpyHostToDevice)); }) / 1e9);
    std::printf("%-28s %8s %8s %8s   (fp32 GB/s, %% of D2D)\n", "kernel", "encode", "decode", "dec+add");

    struct Case {
        const char *name;
        const GpuCodec *g;
        int bits, variant;
        float clip_at = 0, shared = 0; /* terngrad as the allreduce calls it */
        float theta = 0;               /* topk */
    };
    const Case cases[] = {
        {"none", &gpu_codec_none, 0, 0},          {"bitpack 8 trunc", &gpu_codec_bitpack, 8, 0},
        {"bitpack 16 trunc (bf16)", &gpu_codec_bitpack, 16, 0}, {"bitpack 16 nearest", &gpu_codec_bitpack, 16, 1},
        {"bitpack 24 trunc", &gpu_codec_bitpack, 24, 0}, {"bitpack 32", &gpu_codec_bitpack, 32, 0},
        {"fp16 (scaled)", &gpu_codec_fp16, 16, 0},  {"bf16", &gpu_codec_bf16, 16, 0},
        {"terngrad base4", &gpu_codec_terngrad, 2, 0}, {"terngrad base3", &gpu_codec_terngrad, 2, 1},
        {"terngrad base4 (allreduce)", &gpu_codec_terngrad, 2, 0, 2.5f, 3.0f},
        {"terngrad levels 4 (phase 2)", &gpu_codec_terngrad, 4, 2},
        {"qsgd 4 bits", &gpu_codec_qsgd, 4, 0},     {"qsgd 8 bits", &gpu_codec_qsgd, 8, 0},
        {"topk 0.85 (bitmap)", &gpu_codec_topk, 0, 0, 0, 0, 0.85f},
        {"topk 0.99 (index list)", &gpu_codec_topk, 0, 0, 0, 0, 0.99f},
    };
    void *work = nullptr; /* bucket statistics of terngrad/qsgd (one bucket), topk's selection and scans */
    {
        CodecParams wp;
        wp.bits = 8;
        CodecParams tp;
        size_t wb = std::max(gpu_codec_qsgd.work_bytes(n, wp), gpu_codec_terngrad.work_bytes(n, wp));
        wb = std::max({wb, gpu_codec_topk.work_bytes(n, tp), gpu_codec_topk.decode_work_bytes(n, tp)});
        CK(cudaMalloc(&work, wb));
    }
    for (const Case &c : cases) {
        CodecParams p;
        p.bits = static_cast<uint8_t>(c.bits);
        p.variant = static_cast<uint8_t>(c.variant);
        p.seed = 12345;
        p.clip_at = c.clip_at;
        p.shared_scale = c.shared;
        p.theta = c.theta;
        size_t len = c.g == &gpu_codec_fp16 ? 4 + 2 * n : c.bits ? n * (c.bits / 8) : n * 4;
        if (c.g == &gpu_codec_terngrad)
            len = 4 + (c.variant == 0 ? (n + 3) / 4 : c.variant == 1 ? (n + 4) / 5 : (n * c.bits + 7) / 8);
        if (c.g == &gpu_codec_qsgd) len = 4 + (n * c.bits + 7) / 8;
        if (c.g == &gpu_codec_topk) len = topk::payload_bytes(n, sparse::keep_count(n, c.theta));
        const GpuEncodeArgs ea{nullptr, x, n, &p, payload, flag, flag + 1, nullptr, work};
        const double te = time_it(reps, [&] {
            CK(cudaMemsetAsync(flag, 0, 256));
            CK(c.g->encode(ea));
        });
        bool corrupt = false;
        /* decoders validate on the host copy of the payload (fp16 its scale, terngrad/qsgd
         * their scalers and code bytes): the whole payload, as the backend passes it */
        std::vector<uint8_t> head(len);
        CK(cudaMemcpy(head.data(), payload, len, cudaMemcpyDeviceToHost));
        GpuDecodeArgs da{nullptr, payload, head.data(), len, n, &p, y, false, nullptr, work};
        const double td = time_it(reps, [&] { CK(c.g->decode(da, &corrupt)); });
        da.add = true;
        const double ta = time_it(reps, [&] { CK(c.g->decode(da, &corrupt)); });
        std::printf("%-28s %8.1f %8.1f %8.1f   (%3.0f%% %3.0f%% %3.0f%%)%s\n", c.name, bytes / te / 1e9, bytes / td / 1e9,
                    bytes / ta / 1e9, 100 * t_d2d / te, 100 * t_d2d / td, 100 * t_d2d / ta, corrupt ? "  CORRUPT?" : "");
    }
    const double tl = time_it(reps, [&] { CK(launch_l2_partials(x, n, parts, nullptr)); });
    const double tadd = time_it(reps, [&] { CK(launch_add(y, x, n, nullptr)); });
    std::printf("%-28s %8.1f GB/s (%3.0f%% of D2D)\n", "l2 norm partials", bytes / tl / 1e9, 100 * t_d2d / tl);
    std::printf("%-28s %8.1f GB/s (%3.0f%% of D2D)\n", "add (dst += src)", bytes / tadd / 1e9, 100 * t_d2d / tadd);

    CK(cudaFree(work));
    CK(cudaFreeHost(pinned));
    CK(cudaFree(parts));
    CK(cudaFree(flag));
    CK(cudaFree(payload));
    CK(cudaFree(y));
    CK(cudaFree(x));
    return 0;
}

// SPDX-License-Identifier: BSD-3-Clause
/* Codec throughput against memcpy, measured in the same run on the same machine.
 *
 *   codec_bench [--mib N] [--reps R] [--codecs a,b] [--threads T]
 *
 * For every codec in the registry (each bit width for codecs that have several): encode,
 * decode, decode-accumulate and, for codecs with a summing decoder, decode_sum of two
 * payloads (sum2, the collective's decoder, with CodecParams::stream_out as the collective
 * sets it for a result of N MiB) of N MiB of gradient-like fp32, in GB/s of fp32
 * (bytes read or written on the float side), best of R runs, with 1 thread and with T threads
 * (default: all cores), and the ratio to memcpy's GB/s (bytes read) with the same threads.
 * bitpack is also run on each CPU path (scalar, AVX2, AVX-512). */
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "codec.h"
#include "runtime/policy.h"
#include "base/settings.h"
#include "simd.h"

using namespace compmpi;
using clk = std::chrono::steady_clock;

namespace {

size_t g_n;
int g_reps = 5;

template <class F> double best_seconds(F &&f) {
    f(); /* warm: page faults, caches, plans */
    double best = 1e30;
    for (int r = 0; r < g_reps; ++r) {
        auto t0 = clk::now();
        f();
        best = std::min(best, std::chrono::duration<double>(clk::now() - t0).count());
    }
    return best;
}

double memcpy_gbs(const float *src, float *dst, int threads) {
    const size_t bytes = g_n * 4, block = 1 << 20;
    const size_t nb = (bytes + block - 1) / block;
    double t = best_seconds([&] {
#pragma omp parallel for num_threads(threads) schedule(static)
        for (size_t b = 0; b < nb; ++b) {
            size_t lo = b * block, len = std::min(block, bytes - lo);
            std::memcpy(reinterpret_cast<char *>(dst) + lo, reinterpret_cast<const char *>(src) + lo, len);
        }
    });
    return bytes / t / 1e9;
}

std::vector<float> gradient_like(size_t n) {
    std::vector<float> v(n);
    uint64_t s = 12345;
    double scale = 1e-3;
    for (size_t i = 0; i < n; ++i) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        double u1 = ((s >> 11) + 1.0) / 9007199254740993.0;
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        double u2 = (s >> 11) / 9007199254740992.0;
        if (i % 4096 == 0) scale = std::pow(10.0, -5 + 4 * u2);
        v[i] = static_cast<float>(std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307 * u2) * scale);
    }
    return v;
}

void run(const CodecOps &c, CodecParams p, const std::vector<float> &x, std::vector<float> &y, std::vector<uint8_t> &blob,
         const char *label, double mcpy) {
    size_t len = 0;
    Status s = Status::ok;
    double te = best_seconds([&] { s = c.encode(x.data(), g_n, p, blob.data(), blob.size(), &len); });
    if (s != Status::ok) {
        std::printf("%-34s encode failed: %s\n", label, status_str(s));
        return;
    }
    double td = best_seconds([&] { c.decode(blob.data(), len, g_n, p, y.data()); });
    std::fill(y.begin(), y.end(), 0.0f);
    double ta = best_seconds([&] { c.decode_add(blob.data(), len, g_n, p, y.data()); });
    double gb = g_n * 4 / 1e9;
    std::printf("%-34s %3d  %7.2f %5.2fx  %7.2f %5.2fx  %7.2f %5.2fx  %6.2f", label, p.threads, gb / te, gb / te / mcpy,
                gb / td, gb / td / mcpy, gb / ta, gb / ta / mcpy, static_cast<double>(g_n * 4) / len);
    if (c.decode_sum) { /* the collective's decoder: two contributions summed into the result */
        const uint8_t *in[2] = {blob.data(), blob.data()};
        const size_t lens[2] = {len, len};
        /* as the collective calls it: streaming stores allowed for a result this large */
        p.stream_out = g_n * sizeof(float) >= stream_store_min_bytes();
        double ts = best_seconds([&] { c.decode_sum(in, lens, 2, g_n, p, y.data()); });
        std::printf("  %7.2f %5.2fx", gb / ts, gb / ts / mcpy);
    }
    std::printf("\n");
}

}  // namespace

int main(int argc, char **argv) {
    size_t mib = 64;
    int threads = omp_get_num_procs();
    std::string only;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--mib") && i + 1 < argc) mib = std::strtoul(argv[++i], nullptr, 10);
        else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) g_reps = std::atoi(argv[++i]);
        else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) threads = std::atoi(argv[++i]);
        else if (!std::strcmp(argv[i], "--codecs") && i + 1 < argc) only = std::string(",") + argv[++i] + ",";
        else {
            std::fprintf(stderr, "usage: codec_bench [--mib N] [--reps R] [--codecs a,b] [--threads T]\n");
            return 2;
        }
    }
    g_n = mib * (1u << 20) / 4;
    auto x = gradient_like(g_n);
    std::vector<float> y(g_n);
    std::vector<uint8_t> blob;
    std::printf("codec_bench: %zu MiB of fp32 (%zu values), best of %d; CPU path %s; GB/s of fp32 input\n", mib, g_n,
                g_reps, simd_name(simd_detect()));
    std::vector<int> tcounts{1};
    if (threads > 1) tcounts.push_back(threads);
    for (int t : tcounts) {
        double mc = memcpy_gbs(x.data(), y.data(), t);
        std::printf("\nmemcpy, %d thread(s): %.2f GB/s (bytes read)\n", t, mc);
        std::printf("%-34s %3s  %7s %6s  %7s %6s  %7s %6s  %6s  %7s %6s\n", "codec", "thr", "encode", "/mcpy", "decode", "/mcpy",
                    "dec+add", "/mcpy", "ratio", "sum2", "/mcpy");
        for (int id = 0; id < 256; ++id) {
            const CodecOps *c = codec_by_id(id);
            if (!c || (!only.empty() && only.find("," + std::string(c->name) + ",") == std::string::npos)) continue;
            /* the default width; bitpack at each of its widths */
            std::vector<int> widths{0};
            if (c->id == CodecId::bitpack) widths = {8, 16, 24};
            for (int b : widths) {
                std::vector<SimdLevel> lv{simd_detect()};
                if (c->id == CodecId::bitpack && b == 16 && t == 1)
                    for (int l = 0; l < static_cast<int>(simd_detect()); ++l) lv.push_back(static_cast<SimdLevel>(l));
                for (SimdLevel l : lv) {
                    /* the parameters a user gets by default (theta, blocks, buckets, ...) */
                    Settings s = settings_defaults();
                    s.codec = static_cast<int>(c->id);
                    s.bits = b;
                    CodecParams p;
                    if (codec_params_from_settings(*c, s, &p) != Status::ok) continue;
                    p.threads = t;
                    p.simd = l;
                    p.seed = 1;
                    if (c->check(p) != Status::ok) continue;
                    blob.resize(c->max_payload(g_n, p) + 64);
                    char label[96];
                    std::snprintf(label, sizeof label, "%s%s%d [%s]", c->name, p.bits ? " bits=" : "", p.bits,
                                  simd_name(l));
                    if (!p.bits) std::snprintf(label, sizeof label, "%s [%s]", c->name, simd_name(l));
                    run(*c, p, x, y, blob, label, mc);
                }
            }
        }
    }
    return 0;
}

// SPDX-License-Identifier: BSD-3-Clause
/* zfp fixed rate against bitpack of the same width, floats and doubles, with memcpy measured
 * in the same run on the same machine (docs/codecs/zfp.md, "Benchmark").
 *
 *   zfp_bench [--mib N] [--reps R] [--threads T]
 *
 * For each data set (gradient-like: normal values whose scale jumps by up to 10^4 every 4096
 * values; smooth: a sum of sines, ZFP's home ground), each element type and each width 8, 16,
 * 32 bits per value: the max abs and rms error of decode(encode(x)), the largest |x|, and
 * encode / decode throughput in GB/s of the element side (bytes read or written as floats or
 * doubles), best of R runs, with T threads (default 1), and memcpy's GB/s with T threads.
 * bitpack on doubles keeps 16..64 bits (no 8-bit form). */
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
#include "zfp/zfp.h"

using namespace compmpi;
using clk = std::chrono::steady_clock;

namespace {

size_t g_bytes = 64u << 20;
int g_reps = 5, g_threads = 1;

template <class F> double best_seconds(F &&f) {
    f(); /* warm: page faults, caches */
    double best = 1e30;
    for (int r = 0; r < g_reps; ++r) {
        auto t0 = clk::now();
        f();
        best = std::min(best, std::chrono::duration<double>(clk::now() - t0).count());
    }
    return best;
}

double memcpy_gbs(const void *src, void *dst, size_t bytes) {
    const size_t block = 1 << 20, nb = (bytes + block - 1) / block;
    const double t = best_seconds([&] {
#pragma omp parallel for num_threads(g_threads) schedule(static)
        for (size_t b = 0; b < nb; ++b) {
            const size_t lo = b * block, len = std::min(block, bytes - lo);
            std::memcpy(static_cast<char *>(dst) + lo, static_cast<const char *>(src) + lo, len);
        }
    });
    return bytes / t / 1e9;
}

template <class T> std::vector<T> data(size_t n, bool smooth) {
    std::vector<T> v(n);
    uint64_t s = 12345;
    double scale = 1e-3;
    for (size_t i = 0; i < n; ++i) {
        if (smooth) {
            const double t = static_cast<double>(i) / static_cast<double>(n);
            v[i] = static_cast<T>(std::sin(40 * t) + 0.3 * std::sin(1000 * t + 1) + 0.01 * std::sin(20000 * t));
            continue;
        }
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        const double u1 = ((s >> 11) + 1.0) / 9007199254740993.0;
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        const double u2 = (s >> 11) / 9007199254740992.0;
        if (i % 4096 == 0) scale = std::pow(10.0, -5 + 4 * u2);
        v[i] = static_cast<T>(std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307 * u2) * scale);
    }
    return v;
}


template <class T> void errors(const std::vector<T> &x, const std::vector<T> &y, double *maxabs, double *rms) {
    double m = 0, s = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        const double d = static_cast<double>(y[i]) - static_cast<double>(x[i]);
        m = std::max(m, std::fabs(d));
        s += d * d;
    }
    *maxabs = m;
    *rms = std::sqrt(s / static_cast<double>(x.size()));
}

void row(const char *set, const char *type, const char *codec, int bits, size_t bytes, double te, double td, double mabs,
         double rms, double xmax, double mc) {
    std::printf("%-8s %-5s %-8s %2d  maxabs %.3e  rms %.3e  (max|x| %.2e)  enc %6.2f GB/s (%.3f x memcpy)  dec %6.2f GB/s "
                "(%.3f x memcpy)\n",
                set, type, codec, bits, mabs, rms, xmax, bytes / te / 1e9, bytes / te / 1e9 / mc, bytes / td / 1e9,
                bytes / td / 1e9 / mc);
}

template <class T> void bench(bool smooth) {
    const bool d = sizeof(T) == 8;
    const size_t n = g_bytes / sizeof(T), bytes = n * sizeof(T);
    const char *set = smooth ? "smooth" : "gradient", *type = d ? "fp64" : "fp32";
    auto x = data<T>(n, smooth);
    std::vector<T> y(n);
    double xmax = 0;
    for (T v : x) xmax = std::max(xmax, std::fabs(static_cast<double>(v)));
    const double mc = memcpy_gbs(x.data(), y.data(), bytes);
    std::printf("%-8s %-5s memcpy %.2f GB/s, %zu values, %d thread(s)\n", set, type, mc, n, g_threads);
    const CodecOps &z = *codec_by_name("zfp"), &bp = *codec_by_name("bitpack");
    std::vector<uint8_t> blob(n * sizeof(T) + 4096);
    for (int bits : {8, 16, 32}) {
        CodecParams p;
        p.bits = static_cast<uint8_t>(bits);
        p.variant = zfp::kFixedRate;
        p.elem = d ? Elem::f64 : Elem::f32;
        p.threads = g_threads;
        size_t len = 0;
        Status s = Status::ok;
        double te, td, mabs, rms;
        if constexpr (sizeof(T) == 8) {
            te = best_seconds([&] { s = z.encode64(x.data(), n, p, blob.data(), blob.size(), &len); });
            if (s == Status::ok) td = best_seconds([&] { s = z.decode64(blob.data(), len, n, p, y.data()); });
        } else {
            te = best_seconds([&] { s = z.encode(x.data(), n, p, blob.data(), blob.size(), &len); });
            if (s == Status::ok) td = best_seconds([&] { s = z.decode(blob.data(), len, n, p, y.data()); });
        }
        if (s != Status::ok) {
            std::printf("%-8s %-5s zfp %d: %s\n", set, type, bits, status_str(s));
            continue;
        }
        errors(x, y, &mabs, &rms);
        row(set, type, "zfp", bits, bytes, te, td, mabs, rms, xmax, mc);
        if constexpr (sizeof(T) == 8) {
            /* bitpack on doubles: 16..64 bits (sign, 11 exponent bits, the top mantissa bits) */
            if (bits < bp.bits64_min) {
                std::printf("%-8s %-5s bitpack %d: no such width for doubles (the sign and 11 exponent bits need 12)\n",
                            set, type, bits);
                continue;
            }
            CodecParams q;
            q.bits = static_cast<uint8_t>(bits);
            q.elem = Elem::f64;
            q.simd = simd_detect();
            q.threads = g_threads;
            te = best_seconds([&] { s = bp.encode64(x.data(), n, q, blob.data(), blob.size(), &len); });
            td = best_seconds([&] { s = bp.decode64(blob.data(), len, n, q, y.data()); });
            errors(x, y, &mabs, &rms);
            row(set, type, "bitpack", bits, bytes, te, td, mabs, rms, xmax, mc);
        } else {
            CodecParams q;
            q.bits = static_cast<uint8_t>(bits);
            q.simd = simd_detect();
            q.threads = g_threads;
            te = best_seconds([&] { s = bp.encode(x.data(), n, q, blob.data(), blob.size(), &len); });
            td = best_seconds([&] { s = bp.decode(blob.data(), len, n, q, y.data()); });
            errors(x, y, &mabs, &rms);
            row(set, type, "bitpack", bits, bytes, te, td, mabs, rms, xmax, mc);
        }
    }
}

}  // namespace

int main(int argc, char **argv) {
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--mib" && i + 1 < argc) g_bytes = static_cast<size_t>(std::atol(argv[++i])) << 20;
        else if (a == "--reps" && i + 1 < argc) g_reps = std::atoi(argv[++i]);
        else if (a == "--threads" && i + 1 < argc) g_threads = std::max(1, std::atoi(argv[++i]));
        else {
            std::fprintf(stderr, "usage: zfp_bench [--mib N] [--reps R] [--threads T]\n");
            return 2;
        }
    }
    for (bool smooth : {false, true}) {
        bench<float>(smooth);
        bench<double>(smooth);
    }
    return 0;
}

// SPDX-License-Identifier: BSD-3-Clause
/* Throughput and fidelity of the sparsifying codecs (topk, fft_topk) and rangefloat, against
 * memcpy and against FFTW's transforms alone, measured in the same run.
 *
 *   sparse_bench [--mib N] [--reps R] [--threads T] [--theta X] [--bits B] [--blocks b1,b2,..] [--cpu]
 *                [--plan estimate|measure|patient]
 *
 * --plan: the FFTW planning rigor of each block length (fft_topk::tune_plans, as the fft_plan
 * setting does at MPI_Init), planned before that block's timings; the planning time is printed.
 *
 * --cpu times with process CPU time instead of the wall clock: meaningful for 1 thread on a
 * machine shared with other work (with T threads it sums the threads' time).
 *
 * Data: "smooth" gradient-like fp32 (low-pass filtered noise plus 10% white noise, the
 * generator of tests/unit/test_fft_topk.cc) for fidelity, so the relative L2 errors printed
 * are comparable with the unit test. GB/s are of fp32 input, best of R runs (wall clock).
 * "fftw" is one blockwise r2c + c2r pass over the buffer with the codec's plans (0 = one
 * transform); "enc/fftw" is encode time over that. */
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "fft_topk/fft_topk.h"
#include "rangefloat/rangefloat.h"
#include "topk/topk.h"

using namespace compmpi;
using clk = std::chrono::steady_clock;

namespace {

int g_reps = 5;
bool g_cpu = false; /* --cpu: process CPU time instead of wall clock (a loaded machine, 1 thread) */

double now() {
    if (g_cpu) {
        timespec ts;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        return ts.tv_sec + ts.tv_nsec * 1e-9;
    }
    return std::chrono::duration<double>(clk::now().time_since_epoch()).count();
}

template <class F> double best_seconds(F &&f) {
    f();
    double best = 1e30;
    for (int r = 0; r < g_reps; ++r) {
        const double t0 = now();
        f();
        best = std::min(best, now() - t0);
    }
    return best;
}

/* splitmix64 + Box-Muller; smooth = two passes of a one-pole low-pass (rho = 0.995) over
 * white noise, normalised to unit variance, plus 0.1 * white noise. */
std::vector<float> smooth_data(size_t n, uint64_t seed) {
    uint64_t s = seed;
    auto next = [&s] {
        uint64_t z = (s += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    };
    auto normal = [&] {
        double u1 = ((next() >> 11) + 1.0) / 9007199254740993.0, u2 = (next() >> 11) / 9007199254740992.0;
        return std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    };
    std::vector<double> a(n), b(n);
    double y = 0, z = 0, ss = 0;
    for (size_t i = 0; i < n; ++i) a[i] = y = 0.995 * y + normal();
    for (size_t i = 0; i < n; ++i) {
        b[i] = z = 0.995 * z + a[i];
        ss += z * z;
    }
    const double sd = std::sqrt(ss / std::max<size_t>(n, 1));
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(b[i] / sd + 0.1 * normal());
    return v;
}

double rel_l2(const std::vector<float> &x, const std::vector<float> &y) {
    double e = 0, s = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        e += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
        s += (double)x[i] * x[i];
    }
    return std::sqrt(e / s);
}

}  // namespace

int main(int argc, char **argv) {
    size_t mib = 64;
    int threads = omp_get_num_procs(), bits = fft_topk::kBitsDefault;
    double theta = 0.85;
    std::vector<uint32_t> blocks{4096, 16384, 65536, 262144, 0};
    fft_topk::PlanRigor rigor = fft_topk::PlanRigor::estimate;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--mib") && i + 1 < argc) mib = std::strtoul(argv[++i], nullptr, 10);
        else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) g_reps = std::atoi(argv[++i]);
        else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) threads = std::atoi(argv[++i]);
        else if (!std::strcmp(argv[i], "--cpu")) g_cpu = true;
        else if (!std::strcmp(argv[i], "--plan") && i + 1 < argc) {
            const char *v = argv[++i];
            rigor = !std::strcmp(v, "patient") ? fft_topk::PlanRigor::patient
                    : !std::strcmp(v, "measure") ? fft_topk::PlanRigor::measure : fft_topk::PlanRigor::estimate;
        }
        else if (!std::strcmp(argv[i], "--theta") && i + 1 < argc) theta = std::atof(argv[++i]);
        else if (!std::strcmp(argv[i], "--bits") && i + 1 < argc) bits = std::atoi(argv[++i]);
        else if (!std::strcmp(argv[i], "--blocks") && i + 1 < argc) {
            blocks.clear();
            for (char *p = argv[++i]; *p;) {
                blocks.push_back(static_cast<uint32_t>(std::strtoul(p, &p, 10)));
                if (*p == ',') ++p;
            }
        } else {
            std::fprintf(stderr, "usage: sparse_bench [--mib N] [--reps R] [--threads T] [--theta X] [--bits B] [--blocks a,b] [--cpu] [--plan estimate|measure|patient]\n");
            return 2;
        }
    }
    const size_t n = mib * (1u << 20) / 4;
    auto x = smooth_data(n, 7);
    std::vector<float> y(n), z(n);
    std::vector<uint8_t> blob(16 + 8 * n + 4096);
    const double gb = n * 4 / 1e9;
    std::printf("sparse_bench: %zu MiB fp32 (%zu values), theta %.4g, fft_topk bits %d, best of %d, CPU path %s, %s\n",
                mib, n, theta, bits, g_reps, simd_name(simd_detect()), g_cpu ? "CPU time" : "wall clock");
    std::vector<int> tcounts{1};
    if (threads > 1) tcounts.push_back(threads);
    for (int t : tcounts) {
        const double mc = gb / best_seconds([&] {
#pragma omp parallel for num_threads(t) schedule(static)
            for (size_t b = 0; b < n; b += 1 << 18) std::memcpy(y.data() + b, x.data() + b, std::min<size_t>(1 << 18, n - b) * 4);
        });
        std::printf("\n%d thread(s): memcpy %.2f GB/s\n", t, mc);
        std::printf("%-26s %8s %8s %8s %8s %9s %7s %9s\n", "codec", "encode", "decode", "dec+add", "fftw", "enc/fftw",
                    "ratio", "rel.err");
        size_t len = 0;
        /* topk */
        {
            double te = best_seconds([&] { topk::encode(x.data(), n, theta, blob.data(), blob.size(), &len, simd_detect(), t); });
            double td = best_seconds([&] { topk::decode(blob.data(), len, n, y.data(), false, simd_detect(), t); });
            double ta = best_seconds([&] { topk::decode(blob.data(), len, n, z.data(), true, simd_detect(), t); });
            topk::decode(blob.data(), len, n, y.data(), false, simd_detect(), t);
            std::printf("%-26s %8.2f %8.2f %8.2f %8s %9s %7.2f %9.4f\n", "topk", gb / te, gb / td, gb / ta, "-", "-",
                        n * 4.0 / len, rel_l2(x, y));
        }
        /* fft_topk per block size */
        for (uint32_t B : blocks) {
            if (rigor != fft_topk::PlanRigor::estimate && B > 0) {
                const auto t0 = std::chrono::steady_clock::now();
                const std::string w = fft_topk::tune_plans(B, rigor);
                std::printf("# block %u: plans tuned in %.2f s (%s, wisdom %zu bytes)\n", B,
                            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                            w.empty() ? "failed" : "ok", w.size());
            }
            const double tf = best_seconds([&] { fft_topk::transforms_only(x.data(), n, B, y.data(), t); });
            Status s = Status::ok;
            double te = best_seconds([&] {
                s = fft_topk::encode(x.data(), n, bits, B, theta, blob.data(), blob.size(), &len, simd_detect(), t);
            });
            if (s != Status::ok) {
                std::printf("fft_topk block=%u: encode failed (%s)\n", B, status_str(s));
                continue;
            }
            double td = best_seconds([&] { fft_topk::decode(blob.data(), len, n, bits, B, y.data(), false, simd_detect(), t); });
            double ta = best_seconds([&] { fft_topk::decode(blob.data(), len, n, bits, B, z.data(), true, simd_detect(), t); });
            fft_topk::decode(blob.data(), len, n, bits, B, y.data(), false, simd_detect(), t);
            char label[64];
            std::snprintf(label, sizeof label, "fft_topk block=%u", B);
            std::printf("%-26s %8.2f %8.2f %8.2f %8.2f %9.2f %7.2f %9.4f\n", label, gb / te, gb / td, gb / ta, gb / tf,
                        te / tf, n * 4.0 / len, rel_l2(x, y));
        }
        /* rangefloat */
        for (int N : {8, 10, 16}) {
            double te = best_seconds([&] { rf::encode(x.data(), n, N, blob.data(), simd_detect(), t); });
            len = rf::kRangeHeaderBytes + rf::packed_bytes(n, N);
            double td = best_seconds([&] { rf::decode(blob.data(), len, n, N, y.data(), false, simd_detect(), t); });
            double ta = best_seconds([&] { rf::decode(blob.data(), len, n, N, z.data(), true, simd_detect(), t); });
            rf::decode(blob.data(), len, n, N, y.data(), false, simd_detect(), t);
            char label[64];
            std::snprintf(label, sizeof label, "rangefloat bits=%d", N);
            std::printf("%-26s %8.2f %8.2f %8.2f %8s %9s %7.2f %9.2e\n", label, gb / te, gb / td, gb / ta, "-", "-",
                        n * 4.0 / len, rel_l2(x, y));
        }
    }
    return 0;
}

// SPDX-License-Identifier: BSD-3-Clause
/* The `sz` codec against bitpack and zfp at the same absolute bound, and memcpy, in one run.
 *
 *   sz_bench [--reps R] [--grid G]
 *
 * Data sets: a smooth fp64 field (a sum of 16 Gaussians on a G^3 grid, default 128: 16 MiB,
 * lossless_bench's generator), the same field with relative noise 1e-3, and the smooth field
 * as fp32. Bounds: X = {1e-2, 1e-4, 1e-6} x max |x| (fp32: the first two). For each codec the
 * parameters are the error_bound planner's for one encode (the bcast shape, bound_choose with
 * the codec named): bitpack's width, zfp's fixed rate, sz's eb (plain and Lorenzo). Printed:
 * ratio raw/payload bytes, encode and decode GB/s of raw data on ONE thread (best of R), the
 * largest |decoded - x| over X (must be <= 1), beside memcpy's GB/s in the same run. */
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "best_of.h"
#include "smooth_field.h"
#include "codec.h"
#include "runtime/bound.h"
#include "sz/sz.h"

using namespace compmpi;
using clk = std::chrono::steady_clock;

namespace {

using bestof::best_seconds;
using bestof::g_reps;

using bestof::gaussians;

template <class T> void bench(const char *name, const std::vector<double> &f, const std::vector<double> &rel_bounds) {
    std::vector<T> x(f.begin(), f.end());
    const size_t n = x.size(), raw = n * sizeof(T);
    const Elem e = std::is_same_v<T, double> ? Elem::f64 : Elem::f32;
    double M = 0;
    for (T v : x) M = std::max(M, std::fabs(static_cast<double>(v)));
    std::vector<T> y(n), z(n);
    const double mc = raw / best_seconds([&] { std::memcpy(z.data(), x.data(), raw); }) / 1e9;
    std::printf("\n%s: %zu values, %.1f MiB, max |x| = %.3g; memcpy %.2f GB/s (1 thread)\n", name, n, raw / 1048576.0, M,
                mc);
    std::printf("%-10s %-14s %10s %8s %10s %10s %10s\n", "bound/M", "codec", "params", "ratio", "enc GB/s",
                "dec GB/s", "maxerr/X");
    const BoundShape sh = bound_shape(Coll::bcast, 1, 0);
    struct Pick {
        const char *label;
        CodecId id;
        int sz_variant;
    };
    const Pick picks[] = {{"bitpack", CodecId::bitpack, 0},
                          {"zfp", CodecId::zfp, 0},
                          {"sz plain", CodecId::sz, sz::kPlain},
                          {"sz lorenzo", CodecId::sz, sz::kLorenzo}};
    for (double rb : rel_bounds) {
        const double X = rb * M;
        for (const Pick &pk : picks) {
            BoundOptions o;
            o.bound = X;
            o.elem = e;
            o.codec = static_cast<int>(pk.id);
            o.sz_variant = pk.sz_variant;
            const BoundChoice ch = bound_choose(o, sh, 1, M);
            char prm[32];
            if (!ch.ok) {
                std::printf("%-10.0e %-14s %10s\n", rb, pk.label, "none holds");
                continue;
            }
            CodecParams p = ch.params;
            p.threads = 1;
            p.simd = simd_detect();
            if (pk.id == CodecId::sz) std::snprintf(prm, sizeof prm, "eb %.3g", sz::eb_of(p.param));
            else std::snprintf(prm, sizeof prm, "%d bits", p.bits);
            std::vector<uint8_t> blob(blob_max_bytes(*ch.codec, n, p));
            size_t len = 0;
            Status st = Status::ok;
            const double te = best_seconds([&] { st = blob_encode(*ch.codec, p, x.data(), n, blob.data(), blob.size(), &len); });
            if (st != Status::ok) {
                std::printf("%-10.0e %-14s %10s encode: %s\n", rb, pk.label, prm, status_str(st));
                continue;
            }
            const double td = best_seconds([&] { st = blob_decode(blob.data(), len, n, y.data(), false, p.simd, 1); });
            double worst = 0;
            for (size_t i = 0; i < n; ++i)
                worst = std::max(worst, std::fabs(static_cast<double>(y[i]) - static_cast<double>(x[i])));
            std::printf("%-10.0e %-14s %10s %8.2f %10.3f %10.3f %10.3f%s\n", rb, pk.label, prm,
                        static_cast<double>(raw) / static_cast<double>(len - kBlobHeaderBytes), raw / te / 1e9,
                        raw / td / 1e9, worst / X, st == Status::ok ? "" : " (decode failed)");
        }
    }
}

}  // namespace

int main(int argc, char **argv) {
    g_reps = 3; /* this benchmark's default */
    int grid = 128;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) g_reps = std::atoi(argv[++i]);
        else if (!std::strcmp(argv[i], "--grid") && i + 1 < argc) grid = std::atoi(argv[++i]);
        else {
            std::fprintf(stderr, "usage: sz_bench [--reps R] [--grid G]\n");
            return 2;
        }
    }
    const auto smooth = gaussians(grid, 0), noisy = gaussians(grid, 1e-3);
    bench<double>("smooth fp64 field (16 Gaussians)", smooth, {1e-2, 1e-4, 1e-6});
    bench<double>("smooth fp64 field + 1e-3 relative noise", noisy, {1e-2, 1e-4, 1e-6});
    bench<float>("smooth field as fp32", smooth, {1e-2, 1e-4});
    return 0;
}

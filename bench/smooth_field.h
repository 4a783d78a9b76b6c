// SPDX-License-Identifier: BSD-3-Clause
/* The smooth fp64 test field of the single-process codec benchmarks (lossless_bench, sz_bench):
 * a sum of 16 Gaussians on a g^3 grid (fixed seed), each value times 1 + noise * u, u uniform
 * in [-1, 1) (noise = 0: the smooth field). */
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

namespace bestof {

inline std::vector<double> gaussians(int g, double noise) {
    std::vector<double> f(static_cast<size_t>(g) * g * g);
    uint64_t s = 777;
    auto rnd = [&] {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        return (s >> 11) / 9007199254740992.0;
    };
    double cx[16], cy[16], cz[16], w[16], a[16];
    for (int k = 0; k < 16; ++k) cx[k] = rnd(), cy[k] = rnd(), cz[k] = rnd(), w[k] = 0.05 + 0.2 * rnd(), a[k] = rnd() * 2 - 1;
    for (int z = 0; z < g; ++z)
        for (int y = 0; y < g; ++y)
            for (int x = 0; x < g; ++x) {
                double v = 0, px = (x + 0.5) / g, py = (y + 0.5) / g, pz = (z + 0.5) / g;
                for (int k = 0; k < 16; ++k) {
                    double r2 = (px - cx[k]) * (px - cx[k]) + (py - cy[k]) * (py - cy[k]) + (pz - cz[k]) * (pz - cz[k]);
                    v += a[k] * std::exp(-r2 / (w[k] * w[k]));
                }
                f[(static_cast<size_t>(z) * g + y) * g + x] = v * (1 + noise * (2 * rnd() - 1));
            }
    return f;
}

}  // namespace bestof

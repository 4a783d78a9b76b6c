// SPDX-License-Identifier: BSD-3-Clause
/* The timing rule of the single-process codec benchmarks (lossless_bench, entropy_bench,
 * sz_bench): one untimed warm-up call, then the best of g_reps timed calls, in seconds. */
#pragma once
#include <algorithm>
#include <chrono>

namespace bestof {

inline int g_reps = 5;

template <class F> double best_seconds(F &&f) {
    using clk = std::chrono::steady_clock;
    f();
    double best = 1e30;
    for (int r = 0; r < g_reps; ++r) {
        const auto t0 = clk::now();
        f();
        best = std::min(best, std::chrono::duration<double>(clk::now() - t0).count());
    }
    return best;
}

}  // namespace bestof

// SPDX-License-Identifier: BSD-3-Clause
/* The fixed OpenMP partition of the dense codecs' kernels: blocks of kBlock elements, the same
 * whatever the thread count, so every thread count writes the same bytes. */
#pragma once
#include <algorithm>
#include <cstddef>

namespace compmpi::blocks {

inline constexpr size_t kBlock = 1 << 15;       /* elements per OpenMP work item (multiple of 64) */
inline constexpr size_t kParallelMin = 1 << 17; /* below this one thread is faster */

/* f(lo, len) for every block [lo, lo + len) of [0, n) (blocks of `block` elements), in
 * parallel above kParallelMin. */
template <class F> void for_each(size_t n, int threads, F &&f, size_t block = kBlock) {
    const size_t nblocks = (n + block - 1) / block;
#pragma omp parallel for num_threads(threads) schedule(static) if (n >= kParallelMin && threads > 1)
    for (size_t b = 0; b < nblocks; ++b) {
        const size_t lo = b * block;
        f(lo, std::min(block, n - lo));
    }
}

/* f(lo, len) -> bool for every block [lo, lo + len) of [0, n), in parallel above kParallelMin;
 * true if f was true for any block. */
template <class F> bool any_of(size_t n, int threads, F &&f) {
    const size_t nblocks = (n + kBlock - 1) / kBlock;
    int any = 0;
#pragma omp parallel for num_threads(threads) schedule(static) reduction(| : any) if (n >= kParallelMin && threads > 1)
    for (size_t b = 0; b < nblocks; ++b) {
        const size_t lo = b * kBlock;
        any |= f(lo, std::min(kBlock, n - lo)) ? 1 : 0;
    }
    return any != 0;
}

}  // namespace compmpi::blocks

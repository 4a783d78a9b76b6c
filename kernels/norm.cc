// SPDX-License-Identifier: BSD-3-Clause
#include "norm.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "codec.h"

namespace compmpi {
namespace {
constexpr size_t kNormBlock = 1 << 14;
}  // namespace

template <class T> double l2_norm_t(const T *x, size_t n, int threads) {
    const size_t nb = (n + kNormBlock - 1) / kNormBlock;
    std::vector<double> part(nb);
#pragma omp parallel for num_threads(threads) schedule(static) if (n >= (1u << 18) && threads > 1)
    for (size_t b = 0; b < nb; ++b) {
        const size_t lo = b * kNormBlock, hi = std::min(n, lo + kNormBlock);
        double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        size_t i = lo;
        for (; i + 8 <= hi; i += 8)
            for (int j = 0; j < 8; ++j) acc[j] += static_cast<double>(x[i + j]) * x[i + j];
        for (; i < hi; ++i) acc[0] += static_cast<double>(x[i]) * x[i];
        part[b] = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    }
    double s = 0;
    for (double v : part) s += v;
    return std::sqrt(s);
}

double l2_norm_det(const float *x, size_t n, int threads) { return l2_norm_t(x, n, threads); }
double l2_norm_det(const double *x, size_t n, int threads) { return l2_norm_t(x, n, threads); }

}  // namespace compmpi

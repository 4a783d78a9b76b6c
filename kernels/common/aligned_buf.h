// SPDX-License-Identifier: BSD-3-Clause
/* Grow-only 64-byte aligned buffer (fft_topk keeps them per thread: large buffers are
 * expensive to fault in on every call; and as scratch arrays for FFTW planning). */
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdlib>

namespace compmpi {

template <class T> struct AlignedBuf {
    T *p = nullptr;
    size_t cap = 0;
    AlignedBuf() = default;
    AlignedBuf(const AlignedBuf &) = delete;
    AlignedBuf &operator=(const AlignedBuf &) = delete;
    ~AlignedBuf() { std::free(p); }
    T *get(size_t n) {
        if (n > cap || !p) { /* !p: get(0) on a fresh buffer is a buffer too (k = 0 blobs) */
            std::free(p);
            p = nullptr;
            cap = 0;
            void *q = nullptr;
            if (posix_memalign(&q, 64, std::max<size_t>(n, 16) * sizeof(T)) != 0) return nullptr;
            p = static_cast<T *>(q);
            cap = std::max<size_t>(n, 16);
        }
        return p;
    }
};

}  // namespace compmpi

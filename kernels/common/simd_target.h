// SPDX-License-Identifier: BSD-3-Clause
/* Function attributes for the run-time-dispatched CPU paths of kernels/common and the codecs
 * that use them. AVX-512 here is the set simd_detect() requires (F, BW, VL, VBMI). Helpers
 * called from a target function must carry the same attribute (lambdas do not inherit it).
 * Include it for <immintrin.h>. */
#pragma once

/* GCC 12 reports the _mm512_undefined_*() inside the AVX-512 intrinsics as
 * (maybe-)uninitialized once they are inlined (GCC PR 105593): a false positive. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include "simd.h"

#define CMPI_AVX2 __attribute__((target("avx2")))
#define CMPI_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi")))

namespace compmpi {
/* The path of lvl, Avx512, Avx2 or Scalar, called with args. */
template <auto Avx512, auto Avx2, auto Scalar, class... A>
inline auto by_level(SimdLevel lvl, A &&...args) {
    switch (lvl) {
        case SimdLevel::avx512: return Avx512(static_cast<A &&>(args)...);
        case SimdLevel::avx2: return Avx2(static_cast<A &&>(args)...);
        default: return Scalar(static_cast<A &&>(args)...);
    }
}
}  // namespace compmpi

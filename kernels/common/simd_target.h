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


#define CMPI_AVX2 __attribute__((target("avx2")))
#define CMPI_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi")))

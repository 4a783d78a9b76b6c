/* Function attributes for the run-time-dispatched CPU paths of kernels/common and the codecs
 * that use them. AVX-512 here is the set simd_detect() requires (F, BW, VL, VBMI). Helpers
 * called from a target function must carry the same attribute (lambdas do not inherit it). */
#pragma once

#define CMPI_AVX2 __attribute__((target("avx2")))
#define CMPI_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi")))

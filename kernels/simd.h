/* Run-time choice of CPU kernel paths. */
#pragma once

namespace compmpi {

enum class SimdLevel : int { scalar = 0, avx2 = 1, avx512 = 2 };

/* Widest level this CPU supports (AVX-512 here means F+BW+VL+VBMI). */
SimdLevel simd_detect();
/* Level kernels use: min(detected, forced by COMPMPI_SIMD). */
SimdLevel simd_active();
void simd_force(SimdLevel lvl); /* used by settings and tests; clamps to detected */
const char *simd_name(SimdLevel lvl);

/* OpenMP threads codec kernels may use on this rank (set once at init from hwloc). */
int kernel_threads();
void kernel_threads_set(int n);

}  // namespace compmpi

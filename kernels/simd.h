/* Run-time choice of CPU kernel paths. */
#pragma once

namespace compmpi {

enum class SimdLevel : int { scalar = 0, avx2 = 1, avx512 = 2 };

/* CPU features kernels dispatch on: CPUID, and the OS saving the vector registers (XGETBV),
 * so that GCC and clang build the same check (__builtin_cpu_supports knows different
 * names in each). False on non-x86 CPUs. */
enum class CpuFeature { avx2, bmi2, f16c, avx512f, avx512bw, avx512vl, avx512vbmi, avx512bf16 };
bool cpu_has(CpuFeature f);

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

// SPDX-License-Identifier: BSD-3-Clause
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

/* Upper halves of the vector registers. Legacy-SSE code (MPICH's reduction loops, built
 * without AVX, and an application's own) run while the upper halves of ymm/zmm0-15 hold
 * data pays a false dependency on every instruction that writes an xmm register: measured
 * here, MPI_Reduce_local of 128K floats went from 40 to 142 us, for the rest of the job,
 * after one compressed call (docs/design.md, "Vector state at the MPI boundary").
 * simd_upper_clean() executes VZEROUPPER where the CPU has AVX (no-op elsewhere); every
 * entry point calls it before returning to the application, every progress-thread operation
 * before returning to MPI. Upper halves are never live across a call (SysV ABI), so it is
 * safe at any call boundary. */
void simd_upper_clean();
/* XINUSE bits (XGETBV, ECX = 1) that say the upper halves of ymm/zmm0-15 are in use:
 * bit 2 (AVX) | bit 6 (ZMM_Hi256); zmm16-31 (bit 7) cannot reach legacy-SSE code.
 * -1 where the CPU cannot report it (no XGETBV with ECX = 1). For tests. */
int simd_upper_state();

/* Output size (bytes) from which a decoder's results are better written with non-temporal
 * stores: 3/4 of the last-level cache (sysconf; 32 MiB when unknown), the rule glibc's
 * memcpy uses. Output that large leaves the cache before anyone reads it again, and
 * streaming stores skip the read-for-ownership of every line (CodecParams::stream_out). */
unsigned long stream_store_min_bytes();

/* OpenMP threads codec kernels may use on this rank (set once at init from hwloc). */
int kernel_threads();
void kernel_threads_set(int n);

}  // namespace compmpi

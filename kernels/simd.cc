// SPDX-License-Identifier: BSD-3-Clause
#include "simd.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>

#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define COMPMPI_X86 1
#endif

namespace compmpi {

namespace {
std::atomic<int> g_forced{-1};
std::atomic<int> g_threads{1};

#ifdef COMPMPI_X86
struct CpuBits {
    uint32_t l1c = 0, l7b = 0, l7c = 0, l71a = 0; /* CPUID leaf 1 ECX, leaf 7.0 EBX/ECX, leaf 7.1 EAX */
    uint64_t xcr0 = 0;                          /* register state the OS saves */
};
CpuBits read_cpu() {
    CpuBits b;
    unsigned a, bx, c, d;
    if (!__get_cpuid(1, &a, &bx, &c, &d)) return b;
    b.l1c = c;
    if (__get_cpuid_count(7, 0, &a, &bx, &c, &d)) {
        b.l7b = bx, b.l7c = c;
        if (a >= 1 && __get_cpuid_count(7, 1, &a, &bx, &c, &d)) b.l71a = a;
    }
    if (b.l1c & (1u << 27)) { /* OSXSAVE: XGETBV may be executed */
        uint32_t lo, hi;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        b.xcr0 = (static_cast<uint64_t>(hi) << 32) | lo;
    }
    return b;
}
#endif
}  // namespace

bool cpu_has(CpuFeature f) {
#ifdef COMPMPI_X86
    static const CpuBits b = read_cpu();
    const bool ymm = (b.xcr0 & 0x6) == 0x6;            /* SSE + AVX state */
    const bool zmm = ymm && (b.xcr0 & 0xE0) == 0xE0;   /* opmask + ZMM state */
    const bool avx = ymm && (b.l1c & (1u << 28));
    switch (f) {
        case CpuFeature::avx2: return avx && (b.l7b & (1u << 5));
        case CpuFeature::bmi2: return b.l7b & (1u << 8);
        case CpuFeature::f16c: return avx && (b.l1c & (1u << 29));
        case CpuFeature::avx512f: return zmm && (b.l7b & (1u << 16));
        case CpuFeature::avx512bw: return zmm && (b.l7b & (1u << 30));
        case CpuFeature::avx512vl: return zmm && (b.l7b & (1u << 31));
        case CpuFeature::avx512vbmi: return zmm && (b.l7c & (1u << 1));
        case CpuFeature::avx512bf16: return zmm && (b.l71a & (1u << 5));
    }
#else
    (void)f;
#endif
    return false;
}

SimdLevel simd_detect() {
    static const SimdLevel lvl = [] {
        if (cpu_has(CpuFeature::avx512f) && cpu_has(CpuFeature::avx512bw) && cpu_has(CpuFeature::avx512vl) &&
            cpu_has(CpuFeature::avx512vbmi))
            return SimdLevel::avx512;
        if (cpu_has(CpuFeature::avx2)) return SimdLevel::avx2;
        return SimdLevel::scalar;
    }();
    return lvl;
}

SimdLevel simd_active() {
    int f = g_forced.load(std::memory_order_relaxed);
    SimdLevel d = simd_detect();
    if (f < 0) return d;
    return static_cast<SimdLevel>(std::min(f, static_cast<int>(d)));
}

void simd_force(SimdLevel lvl) { g_forced.store(static_cast<int>(lvl)); }

const char *simd_name(SimdLevel lvl) {
    switch (lvl) {
        case SimdLevel::scalar: return "scalar";
        case SimdLevel::avx2: return "avx2";
        case SimdLevel::avx512: return "avx512";
    }
    return "?";
}

#ifdef COMPMPI_X86
namespace {
__attribute__((target("avx"))) void zeroupper() { _mm256_zeroupper(); }
const bool g_have_avx = [] {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27)) || !(c & (1u << 28))) return false; /* OSXSAVE, AVX */
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (lo & 0x6) == 0x6; /* the OS saves the YMM state */
}();
const bool g_have_xinuse = [] { /* CPUID.(EAX=0DH, ECX=1):EAX[2]: XGETBV with ECX = 1 */
    unsigned a, b, c, d;
    return g_have_avx && __get_cpuid_count(0xD, 1, &a, &b, &c, &d) && (a & (1u << 2));
}();
}  // namespace
#endif

void simd_upper_clean() {
#ifdef COMPMPI_X86
    if (g_have_avx) zeroupper();
#endif
}

int simd_upper_state() {
#ifdef COMPMPI_X86
    if (!g_have_xinuse) return -1;
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(1));
    return static_cast<int>(lo & 0x44u);
#else
    return -1;
#endif
}

namespace {
/* The last-level cache one core sees: sysfs's index3 of cpu0 (the size of one instance);
 * sysconf's _SC_LEVEL3_CACHE_SIZE can report the sum over all instances (here 320 MiB on a
 * VM whose cores share one 32 MiB L3). 0 if unknown. */
unsigned long l3_bytes() {
    if (FILE *f = std::fopen("/sys/devices/system/cpu/cpu0/cache/index3/size", "r")) {
        unsigned long v = 0;
        char unit = 0;
        const int got = std::fscanf(f, "%lu%c", &v, &unit);
        std::fclose(f);
        if (got >= 1 && v > 0) return unit == 'M' ? v << 20 : unit == 'K' ? v << 10 : v;
    }
    const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    return l3 > 0 ? static_cast<unsigned long>(l3) : 0;
}
}  // namespace

unsigned long stream_store_min_bytes() {
    static const unsigned long v = [] {
        const unsigned long l3 = l3_bytes();
        return (l3 ? l3 : 32ul << 20) / 4 * 3;
    }();
    return v;
}

int kernel_threads() { return g_threads.load(std::memory_order_relaxed); }
void kernel_threads_set(int n) { g_threads.store(n < 1 ? 1 : n); }

}  // namespace compmpi

#include "simd.h"

#include <algorithm>
#include <atomic>

namespace compmpi {

namespace {
std::atomic<int> g_forced{-1};
std::atomic<int> g_threads{1};
}  // namespace

SimdLevel simd_detect() {
    static const SimdLevel lvl = [] {
        __builtin_cpu_init();
        if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vbmi"))
            return SimdLevel::avx512;
        if (__builtin_cpu_supports("avx2")) return SimdLevel::avx2;
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

int kernel_threads() { return g_threads.load(std::memory_order_relaxed); }
void kernel_threads_set(int n) { g_threads.store(n < 1 ? 1 : n); }

}  // namespace compmpi

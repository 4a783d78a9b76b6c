// SPDX-License-Identifier: BSD-3-Clause
/* Test double for tests/unit/test_cuda.cc, built as tests/unit/libcompmpi_fakecuda.so (never
 * installed). It plays two parts:
 *  - a CUDA driver with cuPointerGetAttribute over made-up address ranges (never
 *    dereferenced), so the pointer classifier and its cache run on machines without a GPU;
 *  - a "CUDA module" whose compmpi_cuda_module_v1 reports a foreign ABI, which the loader
 *    must refuse.
 * The test reads the ranges from fake_cuda_layout(), so no address is written twice. */
#include <cstdint>
#include <cstring>

namespace {

struct Layout {
    uint64_t dev_lo, dev_size;         /* one device allocation */
    uint64_t many_lo, many_count;      /* many_count device allocations of 4096 bytes */
    uint64_t mgd_lo, mgd_size;         /* managed memory that reports CU_MEMORYTYPE_HOST */
    uint64_t pin_lo, pin_size;         /* pinned host memory */
    uint64_t uninit_lo, uninit_size;   /* the driver answers CUDA_ERROR_NOT_INITIALIZED */
    uint64_t norange_lo, norange_size; /* device memory whose range queries fail */
};

constexpr Layout kLayout = {
    0x100000000000ull, 1ull << 20, 0x110000000000ull, 200,       0x200000000000ull, 1ull << 16,
    0x300000000000ull, 1ull << 16, 0x400000000000ull, 1ull << 16, 0x500000000000ull, 1ull << 16,
};

constexpr int kSuccess = 0, kInvalidValue = 1, kNotInitialized = 3;
constexpr int kMemType = 2, kIsManaged = 8, kRangeStart = 11, kRangeSize = 12;
constexpr unsigned kHost = 1, kDevice = 2;

bool in(uint64_t p, uint64_t lo, uint64_t size) { return p >= lo && p - lo < size; }

int answer(void *data, int attr, unsigned type, bool managed, uint64_t lo, uint64_t size, bool ranges) {
    switch (attr) {
        case kMemType: std::memcpy(data, &type, 4); return kSuccess;
        case kIsManaged: {
            const unsigned m = managed;
            std::memcpy(data, &m, 4);
            return kSuccess;
        }
        case kRangeStart:
            if (!ranges) return kInvalidValue;
            std::memcpy(data, &lo, 8);
            return kSuccess;
        case kRangeSize:
            if (!ranges) return kInvalidValue;
            std::memcpy(data, &size, 8);
            return kSuccess;
        default: return kInvalidValue;
    }
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int cuPointerGetAttribute(void *data, int attr, unsigned long long ptr) {
    const Layout &L = kLayout;
    const uint64_t p = ptr;
    if (in(p, L.dev_lo, L.dev_size)) return answer(data, attr, kDevice, false, L.dev_lo, L.dev_size, true);
    if (in(p, L.many_lo, L.many_count * 4096)) {
        const uint64_t lo = p & ~uint64_t{4095};
        return answer(data, attr, kDevice, false, lo, 4096, true);
    }
    if (in(p, L.mgd_lo, L.mgd_size)) return answer(data, attr, kHost, true, L.mgd_lo, L.mgd_size, true);
    if (in(p, L.pin_lo, L.pin_size)) return answer(data, attr, kHost, false, L.pin_lo, L.pin_size, true);
    if (in(p, L.uninit_lo, L.uninit_size)) return kNotInitialized;
    if (in(p, L.norange_lo, L.norange_size)) return answer(data, attr, kDevice, false, 0, 0, false);
    return kInvalidValue;
}

__attribute__((visibility("default"))) const void *fake_cuda_layout(void) { return &kLayout; }

/* A module of another ABI generation: {abi_version, size} only. */
__attribute__((visibility("default"))) const void *compmpi_cuda_module_v1(void) {
    static const uint32_t foreign[2] = {0xDEADu, 8};
    return foreign;
}
}

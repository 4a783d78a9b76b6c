// SPDX-License-Identifier: BSD-3-Clause
/* Shared by the libFuzzer targets (tests/fuzz/fuzz_*.cc). Each target defines
 * LLVMFuzzerTestOneInput; built with -fsanitize=fuzzer it is a libFuzzer binary
 * (scripts/test-hardening.sh), built without it standalone_main.cc replays the committed
 * corpus (tests/fuzz/corpus/<target>/) in make check. A violated property aborts. */
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#define FUZZ_REQUIRE(cond, ...)                                                   \
    do {                                                                          \
        if (!(cond)) {                                                            \
            std::fprintf(stderr, "fuzz: property violated: %s: ", #cond);         \
            std::fprintf(stderr, __VA_ARGS__);                                    \
            std::fprintf(stderr, "\n");                                           \
            std::abort();                                                         \
        }                                                                         \
    } while (0)

namespace fuzz {
/* Little-endian reads of the input prefix. */
inline uint32_t rd32(const uint8_t *p) { return p[0] | p[1] << 8 | p[2] << 16 | static_cast<uint32_t>(p[3]) << 24; }
inline uint64_t rd64(const uint8_t *p) { return rd32(p) | static_cast<uint64_t>(rd32(p + 4)) << 32; }

/* fuzz_decode input: [control u8][count u32][blob ...]
 *   control bit 0: decode-add instead of decode
 *   control bit 1-2: SIMD level asked for (0 scalar, 1 avx2, 2 avx512, 3 detected), clamped
 *   control bit 3: expected count from the count field (else from the blob header)
 *   control bit 4: two OpenMP threads
 *   control bit 5-7: fft_topk's SumStream: bit 5 spatial sum, bits 6-7 piece size (fuzz_decode.cc)
 * Expected counts are capped at kMaxCount floats unless FUZZ_MAX_COUNT says otherwise (the
 * output buffers are that large; a cap of 2^20 gave 8 executions per second, 2^16 about 144,
 * both under load). The decoders' multi-threaded paths start at 2^16-2^17 elements and are
 * left to the unit tests (tests/unit/test_<codec>). */
inline constexpr size_t kDecodePrefix = 5;
inline constexpr uint64_t kMaxCount = 4096;
}  // namespace fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* optional, as in libFuzzer: standalone_main.cc calls it when a target defines it */
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv);

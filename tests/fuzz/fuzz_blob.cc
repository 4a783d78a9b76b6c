// SPDX-License-Identifier: BSD-3-Clause
/* Fuzz every registered decoder through the blob layer: random headers and payloads, bit
 * flips of valid blobs, truncations. A decoder must return ok or corrupt/nonfinite and never
 * read outside the bytes it was given (run under valgrind/ASan in CI). Deterministic and
 * bounded: COMPMPI_FUZZ_ITERS (default 20000) cases per codec. */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "codec.h"
#include "runtime/policy.h"
#include "base/settings.h"

using namespace compmpi;

namespace {
uint64_t g_s = 0x1234567;
uint64_t rnd() {
    uint64_t z = (g_s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Copy into an exactly sized heap block so an overread is visible to valgrind/ASan. */
Status decode_exact(const std::vector<uint8_t> &b, size_t avail, size_t n, bool acc) {
    std::unique_ptr<uint8_t[]> m(new uint8_t[avail ? avail : 1]);
    if (avail) std::memcpy(m.get(), b.data(), avail);
    std::vector<float> out(n + 1, 0.0f);
    return blob_decode(m.get(), avail, n, out.data(), acc, simd_detect(), 1);
}
}  // namespace

int main() {
    long iters = 20000;
    if (const char *e = std::getenv("COMPMPI_FUZZ_ITERS")) iters = std::atol(e);
    long ok = 0, rejected = 0;
    for (int id = 0; id < 256; ++id) {
        const CodecOps *c = codec_by_id(id);
        if (!c || !codec_has_elem(*c, Elem::f32)) continue; /* fp32 narrows doubles: its fuzzing is fuzz_decode's */
        for (long it = 0; it < iters; ++it) {
            size_t n = rnd() % 700;
            std::vector<float> x(n);
            for (auto &v : x) v = static_cast<float>(static_cast<int64_t>(rnd() % 2000001) - 1000000) * 1e-3f;
            /* the default settings' parameters (theta, blocks, buckets: the sparse forms are
             * exercised too), with a random width where the codec has several */
            Settings cfg = settings_defaults();
            cfg.codec = id;
            cfg.bits = c->bits_step ? c->bits_min + c->bits_step * static_cast<int>(rnd() % ((c->bits_max - c->bits_min) / c->bits_step + 1)) : 0;
            if (c->id == CodecId::zfp && (it & 1)) cfg.zfp_tolerance = 1e-2; /* fixed accuracy, variable size */
            CodecParams p;
            codec_params_from_settings(*c, cfg, &p);
            std::vector<uint8_t> b(blob_max_bytes(*c, n, p) + 64);
            size_t len = 0;
            if (c->check(p) != Status::ok || blob_encode(*c, p, x.data(), n, b.data(), b.size(), &len) != Status::ok) {
                std::fprintf(stderr, "fuzz: %s failed to encode valid input (n=%zu bits=%d)\n", c->name, n, p.bits);
                return 1;
            }
            switch (rnd() % 4) {
                case 0: b[rnd() % len] ^= static_cast<uint8_t>(1u << (rnd() % 8)); break;     /* bit flip */
                case 1: len = rnd() % (len + 1); break;                                          /* truncation */
                case 2: for (size_t i = 0; i < kBlobHeaderBytes; ++i) if (rnd() % 8 == 0) b[i] = static_cast<uint8_t>(rnd()); break;
                default: for (size_t i = kBlobHeaderBytes; i < len; ++i) b[i] = static_cast<uint8_t>(rnd()); break;
            }
            Status s = decode_exact(b, len, n, rnd() & 1);
            if (s == Status::ok) ++ok;
            else if (s == Status::corrupt || s == Status::nonfinite) ++rejected;
            else {
                std::fprintf(stderr, "fuzz: %s decoder returned %s\n", c->name, status_str(s));
                return 1;
            }
        }
    }
    std::printf("fuzz_blob: %ld decoded, %ld rejected, 0 crashes\n", ok, rejected);
    return 0;
}

/* Shared helpers for the CMocka unit tests. */
#pragma once
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <setjmp.h>
extern "C" {
#include <cmocka.h>
}
#include <cmath>
#include <vector>

namespace testutil {

/* splitmix64: deterministic data for every test */
struct Rng {
    uint64_t s;
    explicit Rng(uint64_t seed) : s(seed) {}
    uint64_t next() {
        uint64_t z = (s += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    double uniform() { return (next() >> 11) * (1.0 / 9007199254740992.0); }
    double normal() {
        double u1 = uniform(), u2 = uniform();
        if (u1 < 1e-300) u1 = 1e-300;
        return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    }
};

/* Gradient-like data: normal with a per-block scale over 6 decades, a few outliers,
 * denormals, signed zeros. */
inline std::vector<float> gradient_data(size_t n, uint64_t seed) {
    Rng r(seed);
    std::vector<float> v(n);
    double scale = 1e-3;
    for (size_t i = 0; i < n; ++i) {
        if (i % 1000 == 0) scale = std::pow(10.0, -6.0 + 6.0 * r.uniform());
        v[i] = static_cast<float>(r.normal() * scale);
        if (r.uniform() < 1e-3) v[i] *= 100.0f;
    }
    if (n > 8) {
        v[1] = 0.0f;
        v[2] = -0.0f;
        v[3] = 1e-40f;   /* denormal */
        v[4] = -3.4e38f; /* near max */
        v[5] = 3.4028235e38f;
    }
    return v;
}

/* The same for doubles, over a wider range: per-block scales from 1e-12 to 1e3, blocks far
 * outside fp32's range (1e-320 .. 1e300), outliers, denormals, signed zeros, near DBL_MAX. */
inline std::vector<double> gradient_data64(size_t n, uint64_t seed) {
    Rng r(seed);
    std::vector<double> v(n);
    double scale = 1e-3;
    for (size_t i = 0; i < n; ++i) {
        if (i % 1000 == 0) {
            scale = std::pow(10.0, -12.0 + 15.0 * r.uniform());
            if (i % 7000 == 3000) scale = 1e-310;
            if (i % 7000 == 5000) scale = 1e300;
        }
        v[i] = r.normal() * scale;
        if (r.uniform() < 1e-3) v[i] *= 100.0;
    }
    if (n > 8) {
        v[1] = 0.0;
        v[2] = -0.0;
        v[3] = 4.9e-324; /* smallest denormal */
        v[4] = -1.7976931348623157e308; /* -DBL_MAX */
        v[5] = 1.7976931348623157e308;
    }
    return v;
}

inline bool same_bytes(const void *a, const void *b, size_t n) { return n == 0 || std::memcmp(a, b, n) == 0; /* empty vectors may be null (UBSan) */ }

}  // namespace testutil

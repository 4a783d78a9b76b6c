// SPDX-License-Identifier: BSD-3-Clause
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
#include <type_traits>
#include <vector>

#include "codec.h"

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

/* N(0, scale^2) without gradient_data's extreme values (sums of many stay finite); floats are
 * the double draws rounded. */
template <class T> std::vector<T> normal_data(size_t n, uint64_t seed, double scale = 1.0) {
    Rng r(seed);
    std::vector<T> v(n);
    for (auto &x : v) x = static_cast<T>(r.normal() * scale);
    return v;
}

template <class T> double rel_l2(const std::vector<T> &x, const std::vector<T> &y) {
    double e = 0, s = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        e += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
        s += (double)x[i] * x[i];
    }
    return std::sqrt(e / s);
}

/* Every SIMD path of this CPU, scalar first. */
inline std::vector<compmpi::SimdLevel> levels() {
    using compmpi::SimdLevel;
    std::vector<SimdLevel> v{SimdLevel::scalar};
    if (compmpi::simd_detect() >= SimdLevel::avx2) v.push_back(SimdLevel::avx2);
    if (compmpi::simd_detect() >= SimdLevel::avx512) v.push_back(SimdLevel::avx512);
    return v;
}

/* c.encode (encode64 for doubles) of x into a buffer 16 bytes longer than max_payload: the
 * status into *st, or asserted ok; an ok payload is max_payload long and nothing past it is
 * written. */
template <class T>
std::vector<uint8_t> encode_checked(const compmpi::CodecOps &c, const compmpi::CodecParams &p, const std::vector<T> &x,
                                    compmpi::Status *st = nullptr) {
    std::vector<uint8_t> out(c.max_payload(x.size(), p) + 16, 0xAB);
    size_t len = 0;
    compmpi::Status s;
    if constexpr (std::is_same_v<T, double>) s = c.encode64(x.data(), x.size(), p, out.data(), out.size(), &len);
    else s = c.encode(x.data(), x.size(), p, out.data(), out.size(), &len);
    if (st)
        *st = s;
    else
        assert_int_equal(static_cast<int>(s), static_cast<int>(compmpi::Status::ok));
    if (s == compmpi::Status::ok) {
        assert_int_equal(len, c.max_payload(x.size(), p));
        for (size_t i = len; i < out.size(); ++i) assert_int_equal(out[i], 0xAB); /* nothing past the payload */
        out.resize(len);
    }
    return out;
}

/* c.decode (decode64) of n values, asserted ok and nothing written past them. */
template <class T>
std::vector<T> decode_checked(const compmpi::CodecOps &c, const compmpi::CodecParams &p, const std::vector<uint8_t> &b,
                              size_t n) {
    std::vector<T> y(n + 1, T(7));
    compmpi::Status s;
    if constexpr (std::is_same_v<T, double>) s = c.decode64(b.data(), b.size(), n, p, y.data());
    else s = c.decode(b.data(), b.size(), n, p, y.data());
    assert_int_equal(static_cast<int>(s), static_cast<int>(compmpi::Status::ok));
    assert_true(y[n] == T(7));
    y.resize(n);
    return y;
}

/* The j-th T of a payload (a bucket's scale or norm). */
template <class T> T read_at(const std::vector<uint8_t> &b, size_t j) {
    T v;
    std::memcpy(&v, b.data() + sizeof(T) * j, sizeof(T));
    return v;
}

}  // namespace testutil

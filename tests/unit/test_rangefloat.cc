// SPDX-License-Identifier: BSD-3-Clause
/* rangefloat: the range-based N-bit float of Wang et al. (kernels/rangefloat/rangefloat.h).
 * Round to nearest against a brute-force search, error bounds and an error table over N,
 * monotone, symmetric, exact zeros, identical bytes on every path and thread count, NaN/Inf
 * detection, corrupt range headers rejected. */
#include <algorithm>
#include <cstdio>

#include "runtime/policy.h"
#include "rangefloat/rangefloat.h"
#include "testutil.h"

using namespace compmpi;
using testutil::gradient_data;

namespace {

using testutil::levels;

std::vector<float> normal_data(size_t n, uint64_t seed) { return testutil::normal_data<float>(n, seed); }

std::vector<uint8_t> enc(const std::vector<float> &x, int N, SimdLevel l = SimdLevel::scalar, int threads = 1) {
    std::vector<uint8_t> p(rf::kRangeHeaderBytes + rf::packed_bytes(x.size(), N));
    Status s = rf::encode(x.data(), x.size(), N, p.data(), l, threads);
    assert_int_equal(static_cast<int>(s), static_cast<int>(Status::ok));
    return p;
}

std::vector<float> dec(const std::vector<uint8_t> &p, size_t n, int N) {
    std::vector<float> y(n);
    Status s = rf::decode(p.data(), p.size(), n, N, y.data(), false, SimdLevel::scalar, 1);
    assert_int_equal(static_cast<int>(s), static_cast<int>(Status::ok));
    return y;
}

using testutil::rel_l2;

void given_any_path_and_thread_count_when_encoding_expect_identical_bytes(void **) {
    const size_t sizes[] = {0, 1, 7, 8, 9, 100, 1000, 4099, 70001, 300007};
    for (size_t n : sizes)
        for (int N : {4, 5, 8, 10, 11, 13, 16}) {
            auto x = gradient_data(n, 77 + n + N);
            auto ref = enc(x, N);
            auto y_ref = dec(ref, n, N);
            for (SimdLevel l : levels())
                for (int t : {1, 2, 4}) {
                    std::vector<uint8_t> got(ref.size() + 1, 0xAB);
                    assert_int_equal(static_cast<int>(rf::encode(x.data(), n, N, got.data(), l, t)), 0);
                    assert_true(testutil::same_bytes(ref.data(), got.data(), ref.size()));
                    assert_int_equal(got[ref.size()], 0xAB); /* never writes past the payload */
                    std::vector<float> y(n + 1, 5.0f), acc(n + 1, 1.0f);
                    assert_int_equal(static_cast<int>(rf::decode(ref.data(), ref.size(), n, N, y.data(), false, l, t)), 0);
                    assert_true(testutil::same_bytes(y_ref.data(), y.data(), n * 4));
                    assert_true(y[n] == 5.0f);
                    assert_int_equal(static_cast<int>(rf::decode(ref.data(), ref.size(), n, N, acc.data(), true, l, t)), 0);
                    for (size_t i = 0; i < n; ++i) assert_true(acc[i] == 1.0f + y_ref[i]);
                    assert_true(acc[n] == 1.0f);
                }
        }
}

/* Every code of the format, decoded: the reference for "nearest". */
void given_random_values_when_quantising_expect_nearest_code(void **) {
    testutil::Rng r(5);
    for (int N : {4, 6, 9, 12}) {
        for (int trial = 0; trial < 6; ++trial) {
            const size_t n = 3000;
            std::vector<float> x(n);
            const double decades = 1 + trial * 3;
            for (auto &v : x) v = static_cast<float>((r.uniform() < 0.5 ? -1 : 1) * std::pow(10.0, -decades * r.uniform()));
            auto p = enc(x, N);
            auto y = dec(p, n, N);
            rf::Format f;
            assert_int_equal(static_cast<int>(rf::read_range(p.data(), N, &f)), 0);
            std::vector<double> grid;
            for (uint32_t c = 0; c <= f.cmax; ++c) grid.push_back(rf::decode_one(c, f));
            for (size_t i = 0; i < n; ++i) {
                const double a = std::fabs((double)x[i]);
                double best = HUGE_VAL;
                for (double g : grid) best = std::min(best, std::fabs(a - g));
                const double got = std::fabs(std::fabs((double)y[i]) - a);
                if (got > best) fail_msg("N=%d m=%d x=%g y=%g err=%g nearest=%g", N, f.m, x[i], y[i], got, best);
                assert_true(std::signbit(x[i]) == std::signbit(y[i]));
            }
        }
    }
}

/* Values >= eps: relative error <= 2^-(m+1); below eps: absolute error <= eps * 2^-(m+1). */
void given_bits_when_roundtrip_expect_error_bounds_and_table(void **) {
    const size_t n = 1 << 17;
    auto g = normal_data(n, 11);
    auto h = gradient_data(n, 12);
    h[4] = h[5] = 0.5f; /* keep the planted denormal and zeros, not the two +-3.4e38 that would dominate the norm */
    print_message("rangefloat relative L2 error (n = %zu):\n   N | N(0,1)     m  | gradient-like  m\n", n);
    double prev_g = HUGE_VAL, prev_h = HUGE_VAL;
    for (int N = rf::kBitsMin; N <= rf::kBitsMax; ++N) {
        double err[2];
        int ms[2];
        int k = 0;
        for (const auto *x : {&g, &h}) {
            auto p = enc(*x, N, simd_detect(), 2);
            auto y = dec(p, n, N);
            rf::Format f;
            assert_int_equal(static_cast<int>(rf::read_range(p.data(), N, &f)), 0);
            const double eps = std::ldexp(1.0, f.emin), half = std::ldexp(1.0, -(f.m + 1));
            for (size_t i = 0; i < n; ++i) {
                const double a = std::fabs((double)(*x)[i]), d = std::fabs((double)(*x)[i] - y[i]);
                if (a >= eps) {
                    if (d > a * half * (1 + 1e-12) && !(a > std::fabs((double)y[i]) && y[i] == rf::decode_one(f.cmax, f)))
                        fail_msg("N=%d x=%g y=%g rel=%g bound=%g", N, (*x)[i], y[i], d / a, half);
                } else if (d > eps * half * (1 + 1e-12)) {
                    fail_msg("N=%d x=%g y=%g abs=%g bound=%g", N, (*x)[i], y[i], d, eps * half);
                }
            }
            err[k] = rel_l2(*x, y);
            ms[k++] = f.m;
        }
        print_message("  %2d | %.3e  %2d  | %.3e     %2d\n", N, err[0], ms[0], err[1], ms[1]);
        assert_true(err[0] <= prev_g && err[1] <= prev_h); /* more bits never hurt */
        prev_g = err[0];
        prev_h = err[1];
    }
    assert_true(prev_g < 1e-3 && prev_h < 1e-3); /* 16 bits */
}

void given_sorted_input_when_roundtrip_expect_monotone_output(void **) {
    for (int N : {4, 8, 12, 16}) {
        auto x = gradient_data(50000, 3 + N);
        std::sort(x.begin(), x.end());
        auto y = dec(enc(x, N), x.size(), N);
        for (size_t i = 1; i < y.size(); ++i)
            if (!(y[i - 1] <= y[i])) fail_msg("N=%d not monotone at %zu: %g > %g", N, i, y[i - 1], y[i]);
    }
}

void given_negated_input_when_encoding_expect_negated_output(void **) {
    for (int N : {4, 7, 8, 16}) {
        auto x = gradient_data(20001, 9 + N);
        std::vector<float> nx(x.size());
        for (size_t i = 0; i < x.size(); ++i) nx[i] = -x[i];
        auto p = enc(x, N), q = enc(nx, N);
        assert_true(testutil::same_bytes(p.data(), q.data(), rf::kRangeHeaderBytes)); /* same range */
        auto y = dec(p, x.size(), N), z = dec(q, x.size(), N);
        for (size_t i = 0; i < x.size(); ++i) assert_true(rf::f2u(y[i]) == (rf::f2u(z[i]) ^ 0x80000000u));
    }
}

void given_zeros_when_roundtrip_expect_exact_zeros(void **) {
    for (int N : {4, 8, 16}) {
        std::vector<float> z(1000, 0.0f);
        z[3] = -0.0f;
        auto p = enc(z, N);
        auto y = dec(p, z.size(), N);
        for (size_t i = 0; i < z.size(); ++i) assert_true(rf::f2u(y[i]) == rf::f2u(z[i]));
        auto x = gradient_data(1000, 1); /* x[1] = +0, x[2] = -0 */
        auto w = dec(enc(x, N), x.size(), N);
        assert_true(rf::f2u(w[1]) == 0u && rf::f2u(w[2]) == 0x80000000u);
    }
}

void given_nan_or_inf_when_encoding_expect_nonfinite_on_every_path(void **) {
    for (float bad : {NAN, -NAN, INFINITY, -INFINITY})
        for (size_t pos : {0ul, 7ul, 40000ul, 99999ul}) {
            auto x = gradient_data(100000, 4);
            x[pos] = bad;
            std::vector<uint8_t> p(rf::kRangeHeaderBytes + rf::packed_bytes(x.size(), 16));
            for (SimdLevel l : levels())
                for (int t : {1, 2})
                    assert_int_equal(static_cast<int>(rf::encode(x.data(), x.size(), 8, p.data(), l, t)),
                                     static_cast<int>(Status::nonfinite));
        }
}

void given_wide_or_narrow_range_when_fitting_expect_exponent_bits_follow(void **) {
    testutil::Rng r(8);
    std::vector<float> narrow(10000), wide(10000);
    for (auto &v : narrow) v = static_cast<float>(1.0 + r.uniform());           /* one binade */
    for (auto &v : wide) v = static_cast<float>(std::pow(2.0, -30 * r.uniform())); /* 30 binades, flat */
    rf::Format fn, fw;
    auto pn = enc(narrow, 8), pw = enc(wide, 8);
    rf::read_range(pn.data(), 8, &fn);
    rf::read_range(pw.data(), 8, &fw);
    assert_int_equal(fn.m, 6); /* e = 1: a linear grid over [0, 2) */
    assert_true(fw.m < fn.m);  /* a wide range buys exponent bits */
    print_message("fit: one binade -> m=%d; 30 flat binades -> m=%d, eps=2^%d\n", fn.m, fw.m, fw.emin);
}

void given_corrupt_range_header_when_decoding_expect_corrupt(void **) {
    auto x = gradient_data(1000, 2);
    const int N = 8;
    auto p = enc(x, N);
    std::vector<float> y(1000);
    auto expect_corrupt = [&](std::vector<uint8_t> q) {
        assert_int_equal(static_cast<int>(rf::decode(q.data(), q.size(), 1000, N, y.data(), false, SimdLevel::scalar, 1)),
                         static_cast<int>(Status::corrupt));
    };
    auto q = p;
    q[0] = 7; /* m = N-1: no exponent bits */
    expect_corrupt(q);
    q = p;
    q[1] = 1; /* reserved */
    expect_corrupt(q);
    for (float bad : {NAN, INFINITY, -1.0f}) {
        q = p;
        std::memcpy(q.data() + 8, &bad, 4);
        expect_corrupt(q);
    }
    q = p;
    const float lo = 1.0f, hi = 0.5f; /* min > max */
    std::memcpy(q.data() + 4, &lo, 4);
    std::memcpy(q.data() + 8, &hi, 4);
    expect_corrupt(q);
    q = p;
    q.pop_back(); /* truncated */
    expect_corrupt(q);
    q = p;
    q.push_back(0); /* too long */
    expect_corrupt(q);
    const CodecOps &c = codec_rangefloat_ops;
    CodecParams cp;
    cp.bits = 3;
    assert_int_equal(static_cast<int>(c.check(cp)), static_cast<int>(Status::invalid_arg));
    cp.bits = 8;
    assert_int_equal(static_cast<int>(c.check(cp)), 0);
    assert_int_equal(c.max_payload(1000, cp), p.size());
}

/* Settings -> params -> blob -> decode with nothing but the header. */
void given_settings_when_going_through_the_blob_layer_expect_roundtrip(void **) {
    Settings st = settings_defaults();
    const CodecOps *c = codec_by_name("rangefloat");
    assert_non_null(c);
    assert_ptr_equal(c, codec_by_id(9));
    CodecParams p;
    assert_int_equal(static_cast<int>(codec_params_from_settings(*c, st, &p)), 0);
    assert_int_equal(p.bits, 8);
    st.bits = 12;
    assert_int_equal(static_cast<int>(codec_params_from_settings(*c, st, &p)), 0);
    const size_t n = 5001;
    auto x = gradient_data(n, 14);
    std::vector<uint8_t> blob(blob_max_bytes(*c, n, p));
    size_t len = 0;
    assert_int_equal(static_cast<int>(blob_encode(*c, p, x.data(), n, blob.data(), blob.size(), &len)), 0);
    assert_int_equal(len, blob.size());
    std::vector<float> y(n);
    assert_int_equal(static_cast<int>(blob_decode(blob.data(), len, n, y.data(), false, simd_detect(), 1)), 0);
    auto ref = dec(std::vector<uint8_t>(blob.begin() + kBlobHeaderBytes, blob.end()), n, 12);
    assert_true(testutil::same_bytes(y.data(), ref.data(), n * 4));
}

/* ================================================================ paper mode
 * Algorithm 1 of Wang et al. (HPDC'20), written out here again, literally and independently
 * of kernels/rangefloat (no shared code): the codec's paper mode must produce the same bytes
 * and the same floats.
 *
 *   Input: init(min, max)
 *   1 pbase_binary = eps >> (23-m);
 *   Input: 32bit_to_Nbit(32bit_float)
 *   2 if 32bit_float > max then
 *   3     32bit_float = max;
 *   4 32bit_binary = 32bit_float >> (23-m);
 *   5 Nbit_binary = 32bit_binary - pbase_binary + 1;
 *   Input: Nbit_to_32bit(Nbit_binary)
 *   6 32bit_binary = Nbit_binary + pbase_binary - 1;
 *   7 32bit_float = 32bit_binary << (23-m);       (the text prints "*": a shift back)
 *
 * plus the text around it: P positive codes after pbase ("0...01"), "the negative numbers
 * also follow the same rule" (the 2^N-1-P codes after the positives, magnitudes upward from
 * eps, so 1..1 is the most negative number), eps tuned from 0.002 by decoding 1..1:
 * "if actual_min is smaller than min, we decrease eps, and increase otherwise", "we iterate
 * every m". Our readings where the text is silent (as in docs/codecs/rangefloat.md): code 0
 * is zero, m is the one with the least squared error, the walk stops at the smallest eps
 * whose 1..1 reaches min. */
struct Alg1 {
    int N = 8, m = 1;
    uint32_t pbase_binary = 0, P = 0;
    uint32_t bits_of(float f) const { uint32_t u; std::memcpy(&u, &f, 4); return u; }
    float float_of(uint32_t u) const { float f; std::memcpy(&f, &u, 4); return f; }
    uint32_t ones() const { return (1u << N) - 1; } /* the code 1..1 */
    /* the largest shifted pattern that is still a finite float */
    uint32_t finite_limit() const { return 0x7F7FFFFFu >> (23 - m); }

    /* line 1, and P from max */
    void init(float eps, float max) {
        pbase_binary = bits_of(eps) >> (23 - m);
        const uint32_t max_binary = max > 0 ? bits_of(max) >> (23 - m) : 0;
        P = max_binary ? max_binary - pbase_binary + 1 : 1;
    }
    /* lines 2-5 (the sign handled by "the same rule") */
    uint32_t to_N(float x, float max) const {
        const bool neg = x < 0 || (x == 0 && std::signbit(x));
        float mag = std::fabs(x);
        if (!neg && mag > max) mag = max;                          /* lines 2-3 */
        const uint32_t bin = bits_of(mag) >> (23 - m);             /* line 4 */
        if (bin < pbase_binary) return 0;                          /* below eps: zero */
        uint32_t code = bin - pbase_binary + 1;                    /* line 5 */
        if (neg) code = std::min<uint64_t>(static_cast<uint64_t>(P) + code, ones()); /* after the P positives */
        return code;
    }
    /* lines 6-7 */
    float to_32(uint32_t code) const {
        if (code == 0) return 0.0f;
        if (code <= P) return float_of((code + pbase_binary - 1) << (23 - m));
        return -float_of((code - P + pbase_binary - 1) << (23 - m));
    }
    /* the code 1..1, decoded: the actual minimum */
    float actual_min() const { return to_32(ones()); }
    bool valid() const {
        if (pbase_binary < 1 || P < 1 || P > ones() - 1) return false;
        if (static_cast<uint64_t>(pbase_binary) + P - 1 > finite_limit()) return false;
        return static_cast<uint64_t>(ones() - P) + pbase_binary - 1 <= finite_limit();
    }
    /* "we initialize eps as a reasonably small number, e.g., 0.002, then de-compress the 1..1
     * back to FP32 ...; if actual_min is smaller than min, we decrease eps, and increase
     * otherwise": a walk one representable eps at a time, inside the valid formats. */
    void tune(float min, float max) {
        init(0.002f, max);
        auto at = [&](uint32_t pb) {
            Alg1 t = *this;
            t.init(float_of(pb << (23 - m)), max);
            return t;
        };
        /* the walk starts from 0.002 moved into the valid range */
        while (!valid() && pbase_binary > 1 && P > ones() - 1) *this = at(pbase_binary + 1);
        while (!valid() && pbase_binary > 1) *this = at(pbase_binary - 1);
        const float want = min < 0 ? min : 0.0f;
        for (;;) {
            if (actual_min() <= want) { /* smaller than (or at) min: decrease eps while it still reaches min */
                Alg1 d = at(pbase_binary - 1);
                if (pbase_binary > 1 && d.valid() && d.actual_min() <= want) *this = d;
                else break;
            } else { /* larger than min: increase eps */
                Alg1 u = at(pbase_binary + 1);
                if (u.valid() && (max <= 0 || u.pbase_binary <= (bits_of(max) >> (23 - m)))) *this = u;
                else break;
            }
        }
    }
};

/* The whole codec, by the transcription: every m in [1, N], eps tuned, the m with the least
 * squared error over all values (ties: the larger m). */
Alg1 alg1_fit(const std::vector<float> &x, int N) {
    float mn = 0, mx = 0;
    for (float v : x) mn = std::min(mn, v), mx = std::max(mx, v);
    Alg1 best;
    double best_err = HUGE_VAL;
    for (int m = 1; m <= N; ++m) {
        Alg1 a;
        a.N = N;
        a.m = m;
        a.tune(mn, mx);
        if (!a.valid()) continue; /* no format of this m fits below FLT_MAX */
        double err = 0;
        for (float v : x) {
            const double d = static_cast<double>(v) - a.to_32(a.to_N(v, mx));
            err += d * d;
        }
        if (err <= best_err) best_err = err, best = a;
    }
    return best;
}

std::vector<uint8_t> enc_paper(const std::vector<float> &x, int N, int threads = 1) {
    std::vector<uint8_t> p(rf::kRangeHeaderBytes + rf::packed_bytes(x.size(), N));
    Status s = rf::encode(x.data(), x.size(), N, p.data(), SimdLevel::scalar, threads, rf::kModePaper);
    assert_int_equal(static_cast<int>(s), static_cast<int>(Status::ok));
    return p;
}
std::vector<float> dec_paper(const std::vector<uint8_t> &p, size_t n, int N) {
    std::vector<float> y(n);
    Status s = rf::decode(p.data(), p.size(), n, N, y.data(), false, SimdLevel::scalar, 1, rf::kModePaper);
    assert_int_equal(static_cast<int>(s), static_cast<int>(Status::ok));
    return y;
}
uint32_t code_at(const std::vector<uint8_t> &p, size_t i, int N) {
    return rf::get_bits(p.data() + rf::kRangeHeaderBytes, p.size() - rf::kRangeHeaderBytes, i * N, N);
}

std::vector<std::vector<float>> paper_inputs() {
    std::vector<std::vector<float>> v;
    testutil::Rng r(31);
    for (size_t n : {1ul, 9ul, 1000ul, 20000ul}) v.push_back(normal_data(n, 40 + n));
    for (size_t n : {2ul, 777ul, 30000ul}) {
        auto g = gradient_data(n, 50 + n); /* zeros, a denormal, +-3.4e38, 6 decades */
        v.push_back(g);
        if (n > 6) g[4] = g[5] = 0.25f; /* without the huge pair */
        v.push_back(g);
    }
    std::vector<float> u(5000), pos(3000), neg(3000), skew(4000), zeros(100, 0.0f);
    for (auto &x : u) x = static_cast<float>(2 * r.uniform() - 1);                /* [-1, 1], the paper's setup */
    for (auto &x : pos) x = static_cast<float>(std::pow(10.0, -4 * r.uniform())); /* one sign only */
    for (size_t i = 0; i < neg.size(); ++i) neg[i] = -pos[i] * 3;
    for (auto &x : skew) x = static_cast<float>(r.uniform() < 0.5 ? -0.01 * r.uniform() : 40 * r.uniform());
    for (auto *w : {&u, &pos, &neg, &skew, &zeros}) v.push_back(*w);
    return v;
}

void given_alg1_transcription_when_encoding_paper_mode_expect_same_bytes_and_values(void **) {
    int cases = 0;
    for (const auto &x : paper_inputs())
        for (int N : {4, 6, 8, 10, 12, 16}) {
            const Alg1 a = alg1_fit(x, N);
            auto p = enc_paper(x, N);
            rf::PaperFormat f;
            assert_int_equal(static_cast<int>(rf::read_paper(p.data(), N, &f)), 0);
            if (f.m != a.m || f.pbase != a.pbase_binary || f.P != a.P)
                fail_msg("n=%zu N=%d: codec m=%d pbase=%u P=%u, Algorithm 1 m=%d pbase=%u P=%u", x.size(), N, f.m,
                         f.pbase, f.P, a.m, a.pbase_binary, a.P);
            float mx = 0;
            for (float v : x) mx = std::max(mx, v);
            auto y = dec_paper(p, x.size(), N);
            for (size_t i = 0; i < x.size(); ++i) {
                const uint32_t want = a.to_N(x[i], mx);
                if (code_at(p, i, N) != want) fail_msg("N=%d i=%zu x=%g: code %u, Algorithm 1 %u", N, i, x[i], code_at(p, i, N), want);
                if (rf::f2u(y[i]) != rf::f2u(a.to_32(want))) fail_msg("N=%d x=%g: %g vs %g", N, x[i], y[i], a.to_32(want));
            }
            ++cases;
        }
    print_message("paper mode == Algorithm 1 transcription on %d (input, N) cases\n", cases);
}

/* Larger buffers: the codec fits m on a sample; given the m it chose, eps, P and every code
 * are Algorithm 1's; any thread count gives the same bytes. */
void given_large_buffer_when_encoding_paper_mode_expect_alg1_codes_for_the_chosen_m(void **) {
    for (size_t n : {65536ul, 300007ul}) {
        auto x = gradient_data(n, 60 + n);
        x[4] = x[5] = 0.5f;
        for (int N : {8, 10}) {
            auto p = enc_paper(x, N);
            for (int t : {2, 4}) assert_true(enc_paper(x, N, t) == p);
            rf::PaperFormat f;
            assert_int_equal(static_cast<int>(rf::read_paper(p.data(), N, &f)), 0);
            float mn = 0, mx = 0;
            for (float v : x) mn = std::min(mn, v), mx = std::max(mx, v);
            Alg1 a;
            a.N = N;
            a.m = f.m;
            a.tune(mn, mx);
            assert_int_equal(f.pbase, a.pbase_binary);
            assert_int_equal(f.P, a.P);
            for (size_t i = 0; i < n; ++i)
                if (code_at(p, i, N) != a.to_N(x[i], mx)) fail_msg("n=%zu N=%d i=%zu", n, N, i);
        }
    }
}

/* Section 3.2.1 / Figure 9 / Section 4.2: with a symmetric range ([-0.5, 0.5], [-5, 5] as in
 * Figure 9, [-1, 1] with N = 10 as in the experiments) the tuning brings P to 2^N/2 ("a
 * state with equal positive and negative numbers") and 1..1 decodes to min within two codes;
 * the step between consecutive representable numbers doubles after every 2^m numbers; the
 * conversion truncates (never rounds away from zero). */
void given_symmetric_ranges_when_tuning_eps_expect_P_half_and_actual_min_at_min(void **) {
    struct Case { float lim; int N; } cases[] = {{0.5f, 8}, {5.0f, 8}, {1.0f, 10}, {0.5f, 12}};
    for (const auto &c : cases)
        for (int m = 1; m <= c.N - 2; ++m) {
            const rf::PaperFormat f = rf::paper_tune(c.N, m, -c.lim, c.lim);
            const uint32_t half = 1u << (c.N - 1);
            /* (unless 2^N/2 codes of m bits reach below the smallest float: then eps is the
             * smallest, pbase 1, and P all there is from there to max) */
            if (f.pbase == 1) assert_int_equal(f.P, rf::f2u(c.lim) >> (23 - m));
            else if (f.P != half - 1 && f.P != half) fail_msg("range %g N=%d m=%d: P=%u", c.lim, c.N, m, f.P);
            /* eps moves in steps of one pattern, which moves 1..1 by two (P shrinks as pbase
             * grows): actual_min reaches min, and two codes up no longer does */
            const float amin = rf::paper_decode_one(f.cmax(), f), up2 = rf::paper_decode_one(f.cmax() - 2, f);
            if (!(amin <= -c.lim && (up2 > -c.lim || f.pbase == 1))) fail_msg("range %g m=%d: actual_min %g, two up %g", c.lim, m, amin, up2);
            const uint32_t s = 23 - m;                                  /* code P is max, truncated */
            assert_true(rf::paper_decode_one(f.P, f) == rf::u2f((rf::f2u(c.lim) >> s) << s));
            assert_true(rf::paper_decode_one(1, f) > 0.0f);        /* eps */
            /* diff doubles after 2^m numbers */
            for (uint32_t k = 1; k + 2 <= f.P; ++k) {
                const double d0 = rf::paper_decode_one(k + 1, f) - rf::paper_decode_one(k, f);
                const double d1 = rf::paper_decode_one(k + 2, f) - rf::paper_decode_one(k + 1, f);
                assert_true(d1 == d0 || d1 == 2 * d0);
            }
            if (m == 3 && c.N == 8) print_message("range +-%g N=%d m=%d: P=%u eps=%g actual_min=%g\n", c.lim, c.N, m, f.P,
                                                  rf::paper_decode_one(1, f), amin);
        }
    /* truncation: |x^| <= |x|, relative error < 2^-m above eps, zero below */
    auto x = normal_data(20000, 70);
    for (int N : {8, 10}) {
        auto p = enc_paper(x, N);
        rf::PaperFormat f;
        rf::read_paper(p.data(), N, &f);
        auto y = dec_paper(p, x.size(), N);
        const double eps = rf::paper_decode_one(1, f);
        for (size_t i = 0; i < x.size(); ++i) {
            const double a = std::fabs(x[i]), b = std::fabs(y[i]);
            assert_true(b <= a);
            if (a >= eps && rf::paper_encode_one(x[i], f) < f.cmax()) assert_true(a - b < a * std::ldexp(1.0, -f.m));
            if (a < eps) assert_true(y[i] == 0.0f);
        }
    }
}

void given_corrupt_paper_header_when_decoding_expect_corrupt(void **) {
    auto x = gradient_data(1000, 3);
    x[4] = x[5] = 0.5f;
    const int N = 8;
    auto p = enc_paper(x, N);
    std::vector<float> y(1000, 7.0f);
    auto expect_corrupt = [&](const std::vector<uint8_t> &q) {
        assert_int_equal(static_cast<int>(rf::decode(q.data(), q.size(), 1000, N, y.data(), false, SimdLevel::scalar, 1,
                                                     rf::kModePaper)),
                         static_cast<int>(Status::corrupt));
        for (float v : y) assert_true(v == 7.0f);
    };
    auto set32 = [](std::vector<uint8_t> q, size_t off, uint32_t v) { std::memcpy(q.data() + off, &v, 4); return q; };
    auto q = p;
    q[0] = 0; /* m = 0 */
    expect_corrupt(q);
    q[0] = 9; /* m > N */
    expect_corrupt(q);
    q = p;
    q[2] = 1; /* reserved */
    expect_corrupt(q);
    expect_corrupt(set32(p, 4, 0));           /* pbase 0 */
    expect_corrupt(set32(p, 8, 0));           /* P = 0 */
    expect_corrupt(set32(p, 8, 256));         /* P > 2^N - 1 */
    expect_corrupt(set32(p, 4, 0x7F7FFFFFu)); /* patterns beyond FLT_MAX */
    q = p;
    q.pop_back();
    expect_corrupt(q);
    /* NaN/Inf in the input: nonfinite, as in range_sign */
    for (float bad : {NAN, -INFINITY}) {
        auto w = x;
        w[777] = bad;
        std::vector<uint8_t> o(p.size());
        assert_int_equal(static_cast<int>(rf::encode(w.data(), w.size(), N, o.data(), SimdLevel::scalar, 2, rf::kModePaper)),
                         static_cast<int>(Status::nonfinite));
    }
    /* the modes are not interchangeable: the variant says which header this is */
    CodecParams cp;
    cp.bits = 8;
    cp.variant = 2;
    assert_int_equal(static_cast<int>(codec_rangefloat_ops.check(cp)), static_cast<int>(Status::invalid_arg));
    cp.variant = rf::kModePaper;
    assert_int_equal(static_cast<int>(codec_rangefloat_ops.check(cp)), 0);
}

/* rangefloat_mode=paper -> header variant 1 -> decoded with nothing but the blob; the
 * range_sign mode (the default) has less error on the same data at the same size. */
void given_paper_mode_setting_when_going_through_the_blob_layer_expect_variant_and_roundtrip(void **) {
    Settings st = settings_defaults();
    const CodecOps *c = codec_by_name("rangefloat");
    CodecParams p;
    assert_int_equal(static_cast<int>(codec_params_from_settings(*c, st, &p)), 0);
    assert_int_equal(p.variant, rf::kModeRangeSign);
    std::string err;
    assert_int_equal(static_cast<int>(setting_parse(SettingId::rangefloat_mode, "paper", &st, &err)), 0);
    assert_int_equal(static_cast<int>(codec_params_from_settings(*c, st, &p)), 0);
    assert_int_equal(p.variant, rf::kModePaper);
    const size_t n = 5001;
    auto x = normal_data(n, 15);
    std::vector<uint8_t> blob(blob_max_bytes(*c, n, p));
    size_t len = 0;
    assert_int_equal(static_cast<int>(blob_encode(*c, p, x.data(), n, blob.data(), blob.size(), &len)), 0);
    assert_int_equal(blob[8], rf::kModePaper); /* the header's variant byte */
    std::vector<float> y(n);
    assert_int_equal(static_cast<int>(blob_decode(blob.data(), len, n, y.data(), false, simd_detect(), 1)), 0);
    auto ref = dec_paper(std::vector<uint8_t>(blob.begin() + kBlobHeaderBytes, blob.end()), n, 8);
    assert_true(testutil::same_bytes(y.data(), ref.data(), n * 4));
    const double e_paper = rel_l2(x, y), e_rs = rel_l2(x, dec(enc(x, 8), n, 8));
    print_message("N(0,1), N=8: paper %.3e, range_sign %.3e\n", e_paper, e_rs);
    assert_true(e_rs < e_paper);
}

}  // namespace

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(given_any_path_and_thread_count_when_encoding_expect_identical_bytes),
        cmocka_unit_test(given_random_values_when_quantising_expect_nearest_code),
        cmocka_unit_test(given_bits_when_roundtrip_expect_error_bounds_and_table),
        cmocka_unit_test(given_sorted_input_when_roundtrip_expect_monotone_output),
        cmocka_unit_test(given_negated_input_when_encoding_expect_negated_output),
        cmocka_unit_test(given_zeros_when_roundtrip_expect_exact_zeros),
        cmocka_unit_test(given_nan_or_inf_when_encoding_expect_nonfinite_on_every_path),
        cmocka_unit_test(given_wide_or_narrow_range_when_fitting_expect_exponent_bits_follow),
        cmocka_unit_test(given_corrupt_range_header_when_decoding_expect_corrupt),
        cmocka_unit_test(given_settings_when_going_through_the_blob_layer_expect_roundtrip),
        cmocka_unit_test(given_alg1_transcription_when_encoding_paper_mode_expect_same_bytes_and_values),
        cmocka_unit_test(given_large_buffer_when_encoding_paper_mode_expect_alg1_codes_for_the_chosen_m),
        cmocka_unit_test(given_symmetric_ranges_when_tuning_eps_expect_P_half_and_actual_min_at_min),
        cmocka_unit_test(given_corrupt_paper_header_when_decoding_expect_corrupt),
        cmocka_unit_test(given_paper_mode_setting_when_going_through_the_blob_layer_expect_variant_and_roundtrip),
    };
    return cmocka_run_group_tests_name("rangefloat", tests, nullptr, nullptr);
}

/* rangefloat: the range-based N-bit float of Wang et al. (kernels/rangefloat/rangefloat.h).
 * Round to nearest against a brute-force search, error bounds and an error table over N,
 * monotone, symmetric, exact zeros, identical bytes on every path and thread count, NaN/Inf
 * detection, corrupt range headers rejected. */
#include <algorithm>
#include <cstdio>

#include "policy.h"
#include "rangefloat/rangefloat.h"
#include "testutil.h"

using namespace compmpi;
using testutil::gradient_data;

namespace {

std::vector<SimdLevel> levels() {
    std::vector<SimdLevel> v{SimdLevel::scalar};
    if (simd_detect() >= SimdLevel::avx2) v.push_back(SimdLevel::avx2);
    if (simd_detect() >= SimdLevel::avx512) v.push_back(SimdLevel::avx512);
    return v;
}

std::vector<float> normal_data(size_t n, uint64_t seed) {
    testutil::Rng r(seed);
    std::vector<float> v(n);
    for (auto &x : v) x = static_cast<float>(r.normal());
    return v;
}

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

double rel_l2(const std::vector<float> &x, const std::vector<float> &y) {
    double e = 0, s = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        e += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
        s += (double)x[i] * x[i];
    }
    return std::sqrt(e / s);
}

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
    };
    return cmocka_run_group_tests_name("rangefloat", tests, nullptr, nullptr);
}

/* bitpack: every CPU path (scalar, AVX2, AVX-512) and every thread count writes the same
 * bytes and decodes to the same floats; error bounds; NaN/Inf detection. */
#include "bitpack/bitpack.h"
#include "testutil.h"

using namespace compmpi;
using testutil::gradient_data;

namespace {

const size_t kSizes[] = {0, 1, 7, 15, 16, 17, 31, 33, 63, 100, 1000, 4099, 70001, 300007};

std::vector<SimdLevel> levels() {
    std::vector<SimdLevel> v{SimdLevel::scalar};
    if (simd_detect() >= SimdLevel::avx2) v.push_back(SimdLevel::avx2);
    if (simd_detect() >= SimdLevel::avx512) v.push_back(SimdLevel::avx512);
    return v;
}

void given_any_path_when_encoding_expect_identical_bytes(void **) {
    if (levels().size() == 1) print_message("note: this CPU has no AVX2: only the scalar path is compared\n");
    for (size_t n : kSizes)
        for (int k = 1; k <= 4; ++k)
            for (int nearest = 0; nearest <= 1; ++nearest) {
                auto x = gradient_data(n, 1000 + n + k);
                std::vector<uint8_t> ref(n * k + 1), got(n * k + 1);
                Status s0 = bitpack::encode(x.data(), n, k, nearest, ref.data(), SimdLevel::scalar, 1);
                assert_int_equal(static_cast<int>(s0), static_cast<int>(Status::ok));
                for (SimdLevel l : levels())
                    for (int threads : {1, 2, 4}) {
                        std::fill(got.begin(), got.end(), 0xAB);
                        Status s = bitpack::encode(x.data(), n, k, nearest, got.data(), l, threads);
                        assert_int_equal(static_cast<int>(s), static_cast<int>(Status::ok));
                        assert_true(testutil::same_bytes(ref.data(), got.data(), n * k));
                        assert_int_equal(got[n * k], 0xAB); /* never writes past the payload */
                    }
            }
}

void given_any_path_when_decoding_expect_identical_floats(void **) {
    for (size_t n : kSizes)
        for (int k = 1; k <= 4; ++k) {
            testutil::Rng r(n * 7 + k);
            std::vector<uint8_t> payload(n * k);
            for (auto &b : payload) b = static_cast<uint8_t>(r.next());
            std::vector<float> ref(n + 1), got(n + 1), acc0(n + 1), acc(n + 1);
            for (size_t i = 0; i < n; ++i) acc0[i] = static_cast<float>(r.normal());
            bitpack::decode(payload.data(), n, k, ref.data(), false, SimdLevel::scalar, 1);
            std::vector<float> refacc = acc0;
            bitpack::decode(payload.data(), n, k, refacc.data(), true, SimdLevel::scalar, 1);
            for (SimdLevel l : levels())
                for (int threads : {1, 3}) {
                    got.assign(n + 1, 7.0f);
                    bitpack::decode(payload.data(), n, k, got.data(), false, l, threads);
                    assert_true(testutil::same_bytes(ref.data(), got.data(), n * 4));
                    assert_true(got[n] == 7.0f);
                    acc = acc0;
                    bitpack::decode(payload.data(), n, k, acc.data(), true, l, threads);
                    assert_true(testutil::same_bytes(refacc.data(), acc.data(), n * 4));
                }
        }
}

void given_bits_when_roundtrip_expect_relative_error_bound(void **) {
    const size_t n = 50000;
    auto x = gradient_data(n, 42);
    for (int k = 1; k <= 4; ++k)
        for (int nearest = 0; nearest <= 1; ++nearest) {
            std::vector<uint8_t> p(n * k);
            std::vector<float> y(n);
            assert_int_equal(static_cast<int>(bitpack::encode(x.data(), n, k, nearest, p.data(), simd_detect(), 2)), 0);
            bitpack::decode(p.data(), n, k, y.data(), false, simd_detect(), 2);
            const int mant = 8 * k - 9; /* mantissa bits kept */
            const double bound = k == 4 ? 0.0 : std::ldexp(1.0, -mant) / (nearest ? 2.0 : 1.0);
            for (size_t i = 0; i < n; ++i) {
                if (!std::isnormal(x[i])) continue;
                if (nearest && std::fabs(x[i]) > 1e38f) continue; /* rounding would overflow: truncated instead */
                double rel = std::fabs((double)y[i] - x[i]) / std::fabs((double)x[i]);
                if (nearest && std::isinf(y[i])) fail_msg("rounding overflowed to Inf at %zu", i);
                if (rel > bound * (1 + 1e-9)) fail_msg("k=%d nearest=%d i=%zu x=%g y=%g rel=%g bound=%g", k, nearest, i, x[i], y[i], rel, bound);
                if (!nearest) assert_true(std::fabs(y[i]) <= std::fabs(x[i])); /* truncation shrinks */
            }
        }
}

void given_two_bytes_when_encoding_expect_bfloat16_pattern(void **) {
    float v[3] = {1.0f, -2.5f, 3.14159f};
    uint8_t p[6];
    bitpack::encode(v, 3, 2, false, p, SimdLevel::scalar, 1);
    for (int i = 0; i < 3; ++i) {
        uint32_t u;
        std::memcpy(&u, &v[i], 4);
        assert_int_equal(p[2 * i] | (p[2 * i + 1] << 8), u >> 16);
    }
}

void given_nan_or_inf_when_encoding_expect_nonfinite_on_every_path(void **) {
    for (float bad : {NAN, INFINITY, -INFINITY})
        for (size_t pos : {0ul, 5ul, 16ul, 999ul}) {
            auto x = gradient_data(1000, 3);
            x[pos] = bad;
            std::vector<uint8_t> p(4000);
            for (SimdLevel l : levels())
                for (int k = 1; k <= 4; ++k)
                    assert_int_equal(static_cast<int>(bitpack::encode(x.data(), 1000, k, true, p.data(), l, 1)),
                                     static_cast<int>(Status::nonfinite));
        }
}

void given_max_float_when_rounding_expect_no_overflow(void **) {
    float v[2] = {3.4028235e38f, -3.4028235e38f};
    for (int k = 1; k <= 3; ++k) {
        uint8_t p[8];
        float y[2];
        bitpack::encode(v, 2, k, true, p, SimdLevel::scalar, 1);
        bitpack::decode(p, 2, k, y, false, SimdLevel::scalar, 1);
        assert_true(std::isfinite(y[0]) && std::isfinite(y[1]));
    }
}

}  // namespace

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(given_any_path_when_encoding_expect_identical_bytes),
        cmocka_unit_test(given_any_path_when_decoding_expect_identical_floats),
        cmocka_unit_test(given_bits_when_roundtrip_expect_relative_error_bound),
        cmocka_unit_test(given_two_bytes_when_encoding_expect_bfloat16_pattern),
        cmocka_unit_test(given_nan_or_inf_when_encoding_expect_nonfinite_on_every_path),
        cmocka_unit_test(given_max_float_when_rounding_expect_no_overflow),
    };
    return cmocka_run_group_tests_name("bitpack", tests, nullptr, nullptr);
}

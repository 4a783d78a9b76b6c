// SPDX-License-Identifier: BSD-3-Clause
/* bitpack: every CPU path (scalar, AVX2, AVX-512) and every thread count writes the same
 * bytes and decodes to the same floats; error bounds; NaN/Inf detection. fp64: the same, and
 * the bytes against an independent reference on the binary64 pattern; the codec's blobs. */
#include <cfloat>

#include "bitpack/bitpack.h"
#include "testutil.h"

using namespace compmpi;
using testutil::gradient_data;
using testutil::gradient_data64;

namespace {

const size_t kSizes[] = {0, 1, 7, 15, 16, 17, 31, 33, 63, 100, 1000, 4099, 70001, 300007};

using testutil::levels;

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

/* ---------------------------------------------------------------- fp64 */

/* The kept bytes of double x at k bytes, written from the definition: truncation clears the
 * low s = 64 - 8k bits of the pattern; nearest compares the dropped bits with half a step
 * (ties to the even kept pattern) and keeps the truncation where the step up is Inf/NaN. */
void reference64(double x, int k, bool nearest, uint8_t *out) {
    uint64_t u;
    std::memcpy(&u, &x, 8);
    const int s = 64 - 8 * k;
    uint64_t kept = u;
    if (s) {
        const uint64_t low = u & ((uint64_t{1} << s) - 1), half = uint64_t{1} << (s - 1);
        kept = u - low;
        const bool finite = (u & 0x7FF0000000000000ull) != 0x7FF0000000000000ull;
        const bool up = nearest && finite && (low > half || (low == half && ((kept >> s) & 1)));
        if (up) {
            const uint64_t next = kept + (uint64_t{1} << s);
            if ((next & 0x7FF0000000000000ull) != 0x7FF0000000000000ull) kept = next;
        }
    }
    for (int b = 0; b < k; ++b) out[b] = static_cast<uint8_t>(kept >> (8 * (8 - k + b)));
}

void given_doubles_when_encoding_expect_reference_bytes_on_every_path(void **) {
    for (size_t n : kSizes)
        for (int k = 2; k <= 8; ++k)
            for (int nearest = 0; nearest <= 1; ++nearest) {
                auto x = gradient_data64(n, 2000 + n + k);
                /* ties: values whose dropped bits are exactly half a step, both parities */
                for (size_t i = 7; i < n && k < 8; i += 97) {
                    uint64_t u;
                    std::memcpy(&u, &x[i], 8);
                    const int s = 64 - 8 * k;
                    u = (u & ~((uint64_t{1} << s) - 1)) | (uint64_t{1} << (s - 1));
                    std::memcpy(&x[i], &u, 8);
                }
                std::vector<uint8_t> ref(n * k + 1), got(n * k + 1);
                for (size_t i = 0; i < n; ++i) reference64(x[i], k, nearest, ref.data() + i * k);
                for (SimdLevel l : levels())
                    for (int threads : {1, 2, 4}) {
                        std::fill(got.begin(), got.end(), 0xAB);
                        Status s = bitpack::encode(x.data(), n, k, nearest, got.data(), l, threads);
                        assert_int_equal(static_cast<int>(s), static_cast<int>(Status::ok));
                        if (!testutil::same_bytes(ref.data(), got.data(), n * k))
                            fail_msg("n=%zu k=%d nearest=%d simd=%d threads=%d: bytes differ from the reference", n, k,
                                     nearest, static_cast<int>(l), threads);
                        assert_int_equal(got[n * k], 0xAB); /* never writes past the payload */
                    }
            }
}

void given_any_path_when_decoding_doubles_expect_identical_values(void **) {
    for (size_t n : kSizes)
        for (int k = 2; k <= 8; ++k) {
            testutil::Rng r(n * 11 + k);
            std::vector<uint8_t> payload(n * k);
            for (auto &b : payload) b = static_cast<uint8_t>(r.next());
            /* the reference: the bytes at the top of the pattern, zeros below */
            std::vector<double> ref(n), acc0(n + 1), refacc(n);
            for (size_t i = 0; i < n; ++i) {
                uint64_t u = 0;
                for (int b = 0; b < k; ++b) u |= static_cast<uint64_t>(payload[i * k + b]) << (8 * (8 - k + b));
                std::memcpy(&ref[i], &u, 8);
                acc0[i] = r.normal();
                refacc[i] = acc0[i] + ref[i];
            }
            for (SimdLevel l : levels())
                for (int threads : {1, 3}) {
                    std::vector<double> got(n + 1, 7.0);
                    bitpack::decode(payload.data(), n, k, got.data(), false, l, threads);
                    assert_true(testutil::same_bytes(ref.data(), got.data(), n * 8));
                    assert_true(got[n] == 7.0);
                    std::vector<double> acc = acc0;
                    acc[n] = 7.0;
                    bitpack::decode(payload.data(), n, k, acc.data(), true, l, threads);
                    assert_true(testutil::same_bytes(refacc.data(), acc.data(), n * 8));
                    assert_true(acc[n] == 7.0);
                }
        }
}

void given_double_widths_when_roundtrip_expect_relative_error_bound(void **) {
    const size_t n = 50000;
    auto x = gradient_data64(n, 43);
    for (int k = 2; k <= 8; ++k)
        for (int nearest = 0; nearest <= 1; ++nearest) {
            std::vector<uint8_t> p(n * k);
            std::vector<double> y(n);
            assert_int_equal(static_cast<int>(bitpack::encode(x.data(), n, k, nearest, p.data(), simd_detect(), 2)), 0);
            bitpack::decode(p.data(), n, k, y.data(), false, simd_detect(), 2);
            const int mant = 8 * k - 12; /* mantissa bits kept */
            const double bound = k == 8 ? 0.0 : std::ldexp(1.0, -mant) / (nearest ? 2.0 : 1.0);
            for (size_t i = 0; i < n; ++i) {
                if (k == 8) {
                    assert_true(testutil::same_bytes(&x[i], &y[i], 8));
                    continue;
                }
                if (!std::isnormal(x[i])) continue;
                if (nearest && std::fabs(x[i]) > 1.7e308) continue; /* rounding would overflow: truncated */
                const long double rel = std::fabs((long double)y[i] - x[i]) / std::fabs((long double)x[i]);
                if (!std::isfinite(y[i])) fail_msg("k=%d nearest=%d: Inf at %zu", k, nearest, i);
                if (rel > bound * (1 + 1e-12))
                    fail_msg("k=%d nearest=%d i=%zu x=%g y=%g rel=%Lg bound=%g", k, nearest, i, x[i], y[i], rel, bound);
                if (!nearest) assert_true(std::fabs(y[i]) <= std::fabs(x[i]));
            }
        }
}

void given_nan_or_inf_doubles_when_encoding_expect_nonfinite_on_every_path(void **) {
    for (double bad : {static_cast<double>(NAN), static_cast<double>(INFINITY), -static_cast<double>(INFINITY)})
        for (size_t pos : {0ul, 5ul, 16ul, 999ul}) {
            auto x = gradient_data64(1000, 3);
            x[pos] = bad;
            std::vector<uint8_t> p(8000);
            for (SimdLevel l : levels())
                for (int k = 2; k <= 8; ++k)
                    for (int nearest = 0; nearest <= 1; ++nearest)
                        assert_int_equal(static_cast<int>(bitpack::encode(x.data(), 1000, k, nearest, p.data(), l, 1)),
                                         static_cast<int>(Status::nonfinite));
        }
}

void given_max_double_when_rounding_expect_no_overflow(void **) {
    double v[2] = {DBL_MAX, -DBL_MAX};
    for (int k = 2; k <= 7; ++k)
        for (SimdLevel l : levels()) {
            uint8_t p[16];
            double y[2];
            bitpack::encode(v, 2, k, true, p, l, 1);
            bitpack::decode(p, 2, k, y, false, l, 1);
            assert_true(std::isfinite(y[0]) && std::isfinite(y[1]));
            assert_true(y[0] == -y[1] && y[0] > 0);
        }
}

/* The codec: widths per element type, blobs of doubles, element types never crossed. */
void given_codec_widths_when_checking_expect_per_element_type(void **) {
    const CodecOps *c = codec_by_name("bitpack");
    for (int bits = 0; bits <= 72; ++bits) {
        CodecParams p;
        p.bits = static_cast<uint8_t>(bits);
        const bool f32 = c->check(p) == Status::ok;
        p.elem = Elem::f64;
        const bool f64 = c->check(p) == Status::ok;
        assert_int_equal(f32, bits % 8 == 0 && bits >= 8 && bits <= 32);
        assert_int_equal(f64, bits % 8 == 0 && bits >= 16 && bits <= 64);
        assert_int_equal(codec_bits_ok(*c, bits, Elem::f64), bits == 0 || f64);
    }
    assert_int_equal(codec_bits_for(*c, 0, Elem::f64), 32);
    assert_true(codec_has_elem(*c, Elem::f64));
}

void given_double_blob_when_decoding_expect_values_and_no_crossing(void **) {
    const CodecOps *c = codec_by_name("bitpack");
    const size_t n = 1001;
    auto x = gradient_data64(n, 77);
    for (int bits = 16; bits <= 64; bits += 8)
        for (int v = 0; v <= 1; ++v) {
            CodecParams p;
            p.bits = static_cast<uint8_t>(bits);
            p.variant = static_cast<uint8_t>(v);
            p.elem = Elem::f64;
            std::vector<uint8_t> blob(blob_max_bytes(*c, n, p));
            size_t len = 0;
            assert_int_equal(static_cast<int>(blob_encode(*c, p, x.data(), n, blob.data(), blob.size(), &len)), 0);
            assert_int_equal(len, kBlobHeaderBytes + n * bits / 8);
            BlobInfo info;
            assert_int_equal(static_cast<int>(blob_peek(blob.data(), len, n, &info)), 0);
            assert_int_equal(static_cast<int>(info.elem), static_cast<int>(Elem::f64));
            assert_int_equal(blob[9], 1);
            std::vector<double> y(n, 5.0), acc(n, 1.0);
            assert_int_equal(static_cast<int>(blob_decode(blob.data(), len, n, y.data(), false, SimdLevel::scalar, 1)), 0);
            for (size_t i = 0; i < n; ++i) {
                uint8_t want[8];
                reference64(x[i], bits / 8, v, want);
                uint64_t u = 0;
                for (int b = 0; b < bits / 8; ++b) u |= static_cast<uint64_t>(want[b]) << (8 * (8 - bits / 8 + b));
                assert_memory_equal(&u, &y[i], 8);
            }
            assert_int_equal(static_cast<int>(blob_decode(blob.data(), len, n, acc.data(), true, simd_detect(), 2)), 0);
            for (size_t i = 0; i < n; ++i) assert_true(acc[i] == 1.0 + y[i]);
            /* an fp64 blob into floats: refused, out untouched */
            std::vector<float> f(n, 5.0f);
            assert_int_equal(static_cast<int>(blob_decode(blob.data(), len, n, f.data(), false, SimdLevel::scalar, 1)),
                             static_cast<int>(Status::corrupt));
            for (float e : f) assert_true(e == 5.0f);
            /* a payload one byte short (header and payload length agree): refused */
            assert_int_equal(static_cast<int>(c->decode64(blob.data() + kBlobHeaderBytes, len - kBlobHeaderBytes - 1,
                                                          n, p, y.data())),
                             static_cast<int>(Status::corrupt));
            /* the fp32 decoder with fp64 parameters, and the reverse: refused */
            assert_int_equal(static_cast<int>(c->decode(blob.data() + kBlobHeaderBytes, len - kBlobHeaderBytes, n, p,
                                                        f.data())),
                             static_cast<int>(Status::corrupt));
        }
    /* an fp32 blob into doubles: refused */
    CodecParams p;
    p.bits = 16;
    auto xf = gradient_data(n, 5);
    std::vector<uint8_t> blob(blob_max_bytes(*c, n, p));
    size_t len = 0;
    assert_int_equal(static_cast<int>(blob_encode(*c, p, xf.data(), n, blob.data(), blob.size(), &len)), 0);
    assert_int_equal(blob[9], 0);
    std::vector<double> y(n, 5.0);
    assert_int_equal(static_cast<int>(blob_decode(blob.data(), len, n, y.data(), false, SimdLevel::scalar, 1)),
                     static_cast<int>(Status::corrupt));
    for (double e : y) assert_true(e == 5.0);
    assert_int_equal(static_cast<int>(c->decode64(blob.data() + kBlobHeaderBytes, len - kBlobHeaderBytes, n, p, y.data())),
                     static_cast<int>(Status::corrupt));
    /* encoding doubles with fp32 parameters (or floats with fp64 ones): invalid */
    std::vector<uint8_t> out(8 * n);
    assert_int_equal(static_cast<int>(c->encode64(gradient_data64(n, 1).data(), n, p, out.data(), out.size(), &len)),
                     static_cast<int>(Status::invalid_arg));
    p.elem = Elem::f64;
    assert_int_equal(static_cast<int>(c->encode(xf.data(), n, p, out.data(), out.size(), &len)),
                     static_cast<int>(Status::invalid_arg));
}

void given_nan_double_when_blob_encoding_expect_flagged_empty_blob(void **) {
    const CodecOps *c = codec_by_name("bitpack");
    CodecParams p;
    p.bits = 64;
    p.elem = Elem::f64;
    std::vector<double> x(100, 1.0);
    x[50] = NAN;
    std::vector<uint8_t> blob(blob_max_bytes(*c, 100, p));
    size_t len = 0;
    assert_int_equal(static_cast<int>(blob_encode(*c, p, x.data(), 100, blob.data(), blob.size(), &len)),
                     static_cast<int>(Status::nonfinite));
    assert_int_equal(len, kBlobHeaderBytes);
    std::vector<double> y(100);
    assert_int_equal(static_cast<int>(blob_decode(blob.data(), len, 100, y.data(), false, SimdLevel::scalar, 1)),
                     static_cast<int>(Status::nonfinite));
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
        cmocka_unit_test(given_doubles_when_encoding_expect_reference_bytes_on_every_path),
        cmocka_unit_test(given_any_path_when_decoding_doubles_expect_identical_values),
        cmocka_unit_test(given_double_widths_when_roundtrip_expect_relative_error_bound),
        cmocka_unit_test(given_nan_or_inf_doubles_when_encoding_expect_nonfinite_on_every_path),
        cmocka_unit_test(given_max_double_when_rounding_expect_no_overflow),
        cmocka_unit_test(given_codec_widths_when_checking_expect_per_element_type),
        cmocka_unit_test(given_double_blob_when_decoding_expect_values_and_no_crossing),
        cmocka_unit_test(given_nan_double_when_blob_encoding_expect_flagged_empty_blob),
    };
    return cmocka_run_group_tests_name("bitpack", tests, nullptr, nullptr);
}

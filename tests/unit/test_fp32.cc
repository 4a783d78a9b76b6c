// SPDX-License-Identifier: BSD-3-Clause
/* fp32 (doubles narrowed to floats): the bytes are static_cast<float> on every SIMD path and
 * thread count; decode widens exactly; overflow and NaN/Inf are nonfinite; the codec refuses
 * floats; blobs of the other element type are refused. */
#include <cfloat>

#include "codec.h"
#include "testutil.h"

using namespace compmpi;
using testutil::gradient_data64;

namespace {

const size_t kSizes[] = {0, 1, 3, 4, 7, 8, 9, 15, 16, 17, 100, 4099, 70001, 300007};

using testutil::levels;

const CodecOps &fp32() { return *codec_by_name("fp32"); }

CodecParams params(SimdLevel l = SimdLevel::scalar, int threads = 1) {
    CodecParams p;
    p.elem = Elem::f64;
    p.bits = 32;
    p.simd = l;
    p.threads = threads;
    return p;
}

/* in range of fp32 (after narrowing): the gradient data clamped into +-3e38, with ties of
 * the narrowing (a double exactly halfway between two floats, both parities) mixed in */
std::vector<double> in_range(size_t n, uint64_t seed) {
    auto x = gradient_data64(n, seed);
    for (size_t i = 0; i < n; ++i) {
        if (std::fabs(x[i]) > 3e38) x[i] = std::copysign(3e38, x[i]);
        if (i % 101 == 50) {
            const float f = static_cast<float>(x[i]);
            x[i] = (static_cast<double>(f) + static_cast<double>(std::nextafter(f, 2 * f + 1))) / 2;
        }
    }
    return x;
}

void given_doubles_when_encoding_expect_static_cast_bytes_on_every_path(void **) {
    for (size_t n : kSizes) {
        auto x = in_range(n, 100 + n);
        std::vector<uint8_t> ref(4 * n + 1);
        for (size_t i = 0; i < n; ++i) {
            const float f = static_cast<float>(x[i]);
            std::memcpy(ref.data() + 4 * i, &f, 4);
        }
        for (SimdLevel l : levels())
            for (int t : {1, 2, 4}) {
                std::vector<uint8_t> got(4 * n + 1, 0xAB);
                size_t len = 0;
                assert_int_equal(static_cast<int>(fp32().encode64(x.data(), n, params(l, t), got.data(), 4 * n, &len)), 0);
                assert_int_equal(len, 4 * n);
                if (!testutil::same_bytes(ref.data(), got.data(), 4 * n))
                    fail_msg("n=%zu simd=%d threads=%d: bytes differ from static_cast<float>", n, static_cast<int>(l), t);
                assert_int_equal(got[4 * n], 0xAB);
            }
    }
}

void given_payload_when_decoding_expect_exact_widening_on_every_path(void **) {
    for (size_t n : kSizes) {
        auto x = in_range(n, 200 + n);
        std::vector<uint8_t> pay(4 * n);
        size_t len = 0;
        assert_int_equal(static_cast<int>(fp32().encode64(x.data(), n, params(), pay.data(), pay.size(), &len)), 0);
        testutil::Rng r(n);
        std::vector<double> want(n), acc0(n + 1), wantacc(n);
        for (size_t i = 0; i < n; ++i) {
            float f;
            std::memcpy(&f, pay.data() + 4 * i, 4);
            want[i] = f;
            acc0[i] = r.normal();
            wantacc[i] = acc0[i] + want[i];
            /* relative error of one rounding to nearest (or a float denormal's absolute one) */
            const double err = std::fabs(want[i] - x[i]);
            assert_true(err <= std::max(std::fabs(x[i]) * 0x1p-24, 0x1p-150));
        }
        for (SimdLevel l : levels())
            for (int t : {1, 3}) {
                std::vector<double> got(n + 1, 7.0);
                assert_int_equal(static_cast<int>(fp32().decode64(pay.data(), len, n, params(l, t), got.data())), 0);
                assert_true(testutil::same_bytes(want.data(), got.data(), 8 * n));
                assert_true(got[n] == 7.0);
                std::vector<double> acc = acc0;
                acc[n] = 7.0;
                assert_int_equal(static_cast<int>(fp32().decode_add64(pay.data(), len, n, params(l, t), acc.data())), 0);
                assert_true(testutil::same_bytes(wantacc.data(), acc.data(), 8 * n));
                assert_true(acc[n] == 7.0);
            }
    }
}

void given_overflow_or_nan_when_encoding_expect_nonfinite_on_every_path(void **) {
    /* FLT_MAX + half an ulp rounds (ties to even) to 2^128 = Inf; just below stays FLT_MAX */
    const double half_ulp_above = static_cast<double>(FLT_MAX) + 0x1p103;
    for (double bad : {static_cast<double>(NAN), static_cast<double>(INFINITY), -static_cast<double>(INFINITY), 1e39,
                       -1e300, half_ulp_above, -half_ulp_above})
        for (size_t pos : {0ul, 5ul, 16ul, 999ul})
            for (SimdLevel l : levels()) {
                auto x = in_range(1000, 3);
                x[pos] = bad;
                std::vector<uint8_t> out(4000);
                size_t len = 0;
                assert_int_equal(static_cast<int>(fp32().encode64(x.data(), 1000, params(l), out.data(), out.size(), &len)),
                                 static_cast<int>(Status::nonfinite));
            }
    /* the largest doubles that still narrow to a finite float */
    const double ok[] = {static_cast<double>(FLT_MAX), std::nextafter(half_ulp_above, 0.0), -std::nextafter(half_ulp_above, 0.0)};
    for (SimdLevel l : levels()) {
        uint8_t out[12];
        size_t len = 0;
        assert_int_equal(static_cast<int>(fp32().encode64(ok, 3, params(l), out, sizeof out, &len)), 0);
        float f[3];
        std::memcpy(f, out, 12);
        assert_true(f[0] == FLT_MAX && f[1] == FLT_MAX && f[2] == -FLT_MAX);
    }
}

void given_tiny_doubles_when_encoding_expect_float_denormals_and_signed_zeros(void **) {
    const double x[] = {1e-40, -1e-45, 1e-46, -1e-300, 0x1p-149, 0x1p-150, 0x1.8p-150, -0.0};
    const float want[] = {1e-40f, -1e-45f, 0.0f, -0.0f, 0x1p-149f, 0.0f, 0x1p-149f, -0.0f};
    for (SimdLevel l : levels()) {
        uint8_t out[32];
        size_t len = 0;
        assert_int_equal(static_cast<int>(fp32().encode64(x, 8, params(l), out, sizeof out, &len)), 0);
        assert_memory_equal(out, want, 32);
    }
}

void given_floats_when_using_fp32_codec_expect_refused(void **) {
    const CodecOps &c = fp32();
    CodecParams p; /* elem fp32 */
    assert_int_equal(static_cast<int>(c.check(p)), static_cast<int>(Status::invalid_arg));
    assert_false(codec_has_elem(c, Elem::f32));
    assert_true(codec_has_elem(c, Elem::f64));
    assert_true(c.flags & CODEC_FP64_ONLY);
    assert_int_equal(static_cast<int>(c.id), 12);
    std::vector<float> x(100, 1.0f), y(100, 5.0f);
    std::vector<uint8_t> out(1000);
    size_t len = 0;
    assert_int_equal(static_cast<int>(c.encode(x.data(), 100, p, out.data(), out.size(), &len)),
                     static_cast<int>(Status::unsupported));
    assert_int_equal(static_cast<int>(blob_encode(c, p, x.data(), 100, out.data(), out.size(), &len)),
                     static_cast<int>(Status::unsupported));
    assert_int_equal(static_cast<int>(c.decode(out.data(), 400, 100, p, y.data())), static_cast<int>(Status::corrupt));
    /* a header claiming codec fp32 on floats: corrupt */
    uint8_t h[kBlobHeaderBytes + 400] = {};
    blob_write_header(h, BlobInfo{CodecId::fp32, 0, 32, 0, 0, 100, 400, Elem::f32});
    BlobInfo info;
    assert_int_equal(static_cast<int>(blob_peek(h, sizeof h, 100, &info)), static_cast<int>(Status::corrupt));
    assert_int_equal(static_cast<int>(blob_decode(h, sizeof h, 100, y.data(), false, SimdLevel::scalar, 1)),
                     static_cast<int>(Status::corrupt));
    for (float v : y) assert_true(v == 5.0f);
    /* widths: 32 (and 0) only, on doubles */
    for (int bits = 0; bits <= 64; ++bits) assert_int_equal(codec_bits_ok(c, bits, Elem::f64), bits == 0 || bits == 32);
    assert_int_equal(codec_bits_for(c, 0, Elem::f64), 32);
}

void given_blob_when_decoding_expect_values_and_element_type_checked(void **) {
    const CodecOps &c = fp32();
    const size_t n = 777;
    auto x = in_range(n, 9);
    CodecParams p = params();
    std::vector<uint8_t> blob(blob_max_bytes(c, n, p));
    size_t len = 0;
    assert_int_equal(static_cast<int>(blob_encode(c, p, x.data(), n, blob.data(), blob.size(), &len)), 0);
    assert_int_equal(len, kBlobHeaderBytes + 4 * n);
    assert_int_equal(blob[9], 1);
    std::vector<double> y(n);
    assert_int_equal(static_cast<int>(blob_decode(blob.data(), len, n, y.data(), false, SimdLevel::scalar, 1)), 0);
    for (size_t i = 0; i < n; ++i) assert_true(y[i] == static_cast<double>(static_cast<float>(x[i])));
    /* into floats: refused */
    std::vector<float> f(n, 5.0f);
    assert_int_equal(static_cast<int>(blob_decode(blob.data(), len, n, f.data(), false, SimdLevel::scalar, 1)),
                     static_cast<int>(Status::corrupt));
    for (float v : f) assert_true(v == 5.0f);
    /* element type byte flipped to fp32: refused by the fp64 decoder too */
    auto b = blob;
    b[9] = 0;
    std::vector<double> z(n, 5.0);
    assert_int_equal(static_cast<int>(blob_decode(b.data(), len, n, z.data(), false, SimdLevel::scalar, 1)),
                     static_cast<int>(Status::corrupt));
    /* a NaN, an Inf or a short payload: refused, nothing written */
    for (int k = 0; k < 3; ++k) {
        auto q = blob;
        size_t qlen = len;
        const float bad = k == 0 ? NAN : INFINITY;
        if (k < 2) std::memcpy(q.data() + kBlobHeaderBytes + 4 * 500, &bad, 4);
        else qlen -= 1;
        for (SimdLevel l : levels()) {
            std::vector<double> w(n, 5.0);
            assert_int_equal(static_cast<int>(c.decode64(q.data() + kBlobHeaderBytes, qlen - kBlobHeaderBytes, n,
                                                          params(l), w.data())),
                             static_cast<int>(Status::corrupt));
            for (double v : w) assert_true(v == 5.0);
        }
    }
    /* NaN input: a flagged, empty blob */
    x[3] = NAN;
    assert_int_equal(static_cast<int>(blob_encode(c, p, x.data(), n, blob.data(), blob.size(), &len)),
                     static_cast<int>(Status::nonfinite));
    assert_int_equal(len, kBlobHeaderBytes);
    assert_int_equal(static_cast<int>(blob_decode(blob.data(), len, n, y.data(), false, SimdLevel::scalar, 1)),
                     static_cast<int>(Status::nonfinite));
}

}  // namespace

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(given_doubles_when_encoding_expect_static_cast_bytes_on_every_path),
        cmocka_unit_test(given_payload_when_decoding_expect_exact_widening_on_every_path),
        cmocka_unit_test(given_overflow_or_nan_when_encoding_expect_nonfinite_on_every_path),
        cmocka_unit_test(given_tiny_doubles_when_encoding_expect_float_denormals_and_signed_zeros),
        cmocka_unit_test(given_floats_when_using_fp32_codec_expect_refused),
        cmocka_unit_test(given_blob_when_decoding_expect_values_and_element_type_checked),
    };
    return cmocka_run_group_tests_name("fp32", tests, nullptr, nullptr);
}

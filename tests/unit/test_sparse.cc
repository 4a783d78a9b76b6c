// SPDX-License-Identifier: BSD-3-Clause
/* sparse: lossless at every density, the smallest form chosen, corrupt payloads rejected
 * before any write. */
#include <algorithm>
#include <cmath>

#include "codec.h"
#include "testutil.h"

using namespace compmpi;

namespace {

std::vector<float> with_density(size_t n, double d, uint64_t seed) {
    testutil::Rng r(seed);
    std::vector<float> v(n, 0.0f);
    for (size_t i = 0; i < n; ++i)
        if (r.uniform() < d) v[i] = static_cast<float>(r.normal());
    if (n > 3) v[n - 1] = -0.0f; /* kept: bit-exact */
    return v;
}

void given_any_density_when_roundtrip_expect_exact_bits_and_smallest_form(void **) {
    const CodecOps *c = codec_by_name("sparse");
    assert_non_null(c);
    CodecParams p;
    for (size_t n : {0ul, 1ul, 7ul, 100ul, 10001ul})
        for (double d : {0.0, 0.01, 0.1, 0.2, 0.5, 1.0}) {
            auto x = with_density(n, d, n + static_cast<uint64_t>(d * 100));
            std::vector<uint8_t> blob(blob_max_bytes(*c, n, p));
            size_t len;
            assert_int_equal(static_cast<int>(blob_encode(*c, p, x.data(), n, blob.data(), blob.size(), &len)), 0);
            std::vector<float> y(n + 1, 9.0f);
            assert_int_equal(static_cast<int>(blob_decode(blob.data(), len, n, y.data(), false, SimdLevel::scalar, 1)), 0);
            assert_true(testutil::same_bytes(x.data(), y.data(), n * 4));
            size_t k = 0;
            for (float v : x) k += std::memcmp(&v, "\0\0\0\0", 4) != 0;
            size_t best = std::min({4 + 8 * k, 4 + (n + 7) / 8 + 4 * k, 4 * n});
            assert_int_equal(len - kBlobHeaderBytes, 4 + best);
            /* decode_add */
            std::vector<float> acc(n, 1.0f);
            assert_int_equal(static_cast<int>(blob_decode(blob.data(), len, n, acc.data(), true, SimdLevel::scalar, 1)), 0);
            for (size_t i = 0; i < n; ++i) assert_true(acc[i] == 1.0f + x[i]);
        }
}

void given_corrupt_payload_when_decoding_expect_corrupt_and_no_write(void **) {
    const CodecOps *c = codec_by_name("sparse");
    CodecParams p;
    const size_t n = 1000;
    auto x = with_density(n, 0.01, 3); /* index form */
    std::vector<uint8_t> blob(blob_max_bytes(*c, n, p));
    size_t len;
    blob_encode(*c, p, x.data(), n, blob.data(), blob.size(), &len);
    assert_int_equal(blob[kBlobHeaderBytes], 0); /* index list at 1% */
    /* indices out of order */
    auto b = blob;
    std::swap(b[kBlobHeaderBytes + 8], b[kBlobHeaderBytes + 16]);
    std::vector<float> y(n, 7.0f);
    assert_int_equal(static_cast<int>(blob_decode(b.data(), len, n, y.data(), false, SimdLevel::scalar, 1)),
                     static_cast<int>(Status::corrupt));
    for (float v : y) assert_true(v == 7.0f);
    /* unknown form */
    b = blob;
    b[kBlobHeaderBytes] = 3;
    assert_int_equal(static_cast<int>(blob_decode(b.data(), len, n, y.data(), false, SimdLevel::scalar, 1)),
                     static_cast<int>(Status::corrupt));
}

/* ---------------------------------------------------------------- fp64 */
std::vector<double> with_density64(size_t n, double d, uint64_t seed) {
    testutil::Rng r(seed);
    std::vector<double> v(n, 0.0);
    for (size_t i = 0; i < n; ++i)
        if (r.uniform() < d) v[i] = r.normal() * std::pow(10.0, 600 * r.uniform() - 300); /* beyond fp32's range */
    if (n > 3) v[n - 1] = -0.0;      /* kept: bit-exact */
    if (n > 5) v[n - 2] = 4.9e-324;  /* smallest denormal */
    if (n > 9) v[3] = NAN;           /* carried exactly, as by the fp32 form */
    return v;
}

CodecParams p64() {
    CodecParams p;
    p.elem = Elem::f64;
    return p;
}

void given_doubles_at_any_density_when_roundtrip_expect_exact_bits_and_smallest_form(void **) {
    const CodecOps *c = codec_by_name("sparse");
    assert_true(codec_has_elem(*c, Elem::f64));
    const CodecParams p = p64();
    for (size_t n : {0ul, 1ul, 7ul, 100ul, 10001ul})
        for (double d : {0.0, 0.01, 0.05, 0.1, 0.5, 0.95, 1.0}) {
            auto x = with_density64(n, d, n + static_cast<uint64_t>(d * 100));
            std::vector<uint8_t> blob(blob_max_bytes(*c, n, p));
            assert_int_equal(blob.size(), kBlobHeaderBytes + 4 + 8 * n);
            size_t len;
            assert_int_equal(static_cast<int>(blob_encode(*c, p, x.data(), n, blob.data(), blob.size(), &len)), 0);
            assert_int_equal(blob[9], 1);
            std::vector<double> y(n + 1, 9.0);
            assert_int_equal(static_cast<int>(blob_decode(blob.data(), len, n, y.data(), false, SimdLevel::scalar, 1)), 0);
            assert_true(testutil::same_bytes(x.data(), y.data(), n * 8));
            assert_true(y[n] == 9.0);
            size_t k = 0;
            for (double v : x) k += std::memcmp(&v, "\0\0\0\0\0\0\0\0", 8) != 0;
            const size_t best = std::min({4 + 12 * k, 4 + (n + 7) / 8 + 8 * k, 8 * n});
            assert_int_equal(len - kBlobHeaderBytes, 4 + best);
            std::vector<double> acc(n, 1.0);
            assert_int_equal(static_cast<int>(blob_decode(blob.data(), len, n, acc.data(), true, SimdLevel::scalar, 1)), 0);
            for (size_t i = 0; i < n; ++i)
                if (!std::isnan(x[i])) assert_true(acc[i] == 1.0 + x[i]);
            /* an fp64 blob into floats: refused, nothing written */
            std::vector<float> f(n, 5.0f);
            assert_int_equal(static_cast<int>(blob_decode(blob.data(), len, n, f.data(), false, SimdLevel::scalar, 1)),
                             static_cast<int>(Status::corrupt));
            for (float v : f) assert_true(v == 5.0f);
        }
}

void given_corrupt_double_payload_when_decoding_expect_corrupt_and_no_write(void **) {
    const CodecOps *c = codec_by_name("sparse");
    const CodecParams p = p64();
    const size_t n = 1003; /* bits past n in the bitmap's last byte */
    for (double d : {0.01, 0.3, 1.0}) {
        auto x = with_density64(n, d, 3);
        std::vector<uint8_t> blob(blob_max_bytes(*c, n, p));
        size_t len;
        assert_int_equal(static_cast<int>(blob_encode(*c, p, x.data(), n, blob.data(), blob.size(), &len)), 0);
        uint8_t *pay = blob.data() + kBlobHeaderBytes;
        const size_t plen = len - kBlobHeaderBytes;
        const int form = pay[0];
        assert_int_equal(form, d == 0.01 ? 0 : d == 0.3 ? 1 : 2);
        std::vector<std::vector<uint8_t>> bad;
        auto b = std::vector<uint8_t>(pay, pay + plen);
        if (form == 0) { /* indices out of order; an index past n */
            auto o = b;
            std::swap_ranges(o.begin() + 8, o.begin() + 12, o.begin() + 20);
            bad.push_back(o);
            auto q = b;
            const uint32_t big = n;
            std::memcpy(q.data() + 8, &big, 4);
            bad.push_back(q);
        } else if (form == 1) { /* a bit past n; popcount != k */
            auto o = b;
            o[8 + (n - 1) / 8] |= 0x80;
            bad.push_back(o);
            auto q = b;
            q[8] ^= 1;
            bad.push_back(q);
        }
        auto u = b;
        u[0] = 3; /* unknown form */
        bad.push_back(u);
        auto z = b;
        z[2] = 1; /* reserved */
        bad.push_back(z);
        for (const auto &q : bad)
            for (size_t cut : {0ul, 1ul}) {
                std::vector<double> y(n, 7.0);
                assert_int_equal(static_cast<int>(c->decode64(q.data(), q.size() - cut, n, p, y.data())),
                                 static_cast<int>(Status::corrupt));
                assert_int_equal(static_cast<int>(c->decode_add64(q.data(), q.size() - cut, n, p, y.data())),
                                 static_cast<int>(Status::corrupt));
                for (double v : y) assert_true(v == 7.0);
            }
        /* a payload of doubles read as floats (and the reverse): sizes do not match */
        std::vector<float> f(n, 7.0f);
        assert_int_equal(static_cast<int>(c->decode(pay, plen, n, CodecParams{}, f.data())),
                         static_cast<int>(Status::corrupt));
        std::vector<double> y(n, 7.0);
        assert_int_equal(static_cast<int>(c->decode64(pay, plen, n, CodecParams{}, y.data())),
                         static_cast<int>(Status::corrupt));
    }
}

}  // namespace

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(given_any_density_when_roundtrip_expect_exact_bits_and_smallest_form),
        cmocka_unit_test(given_corrupt_payload_when_decoding_expect_corrupt_and_no_write),
        cmocka_unit_test(given_doubles_at_any_density_when_roundtrip_expect_exact_bits_and_smallest_form),
        cmocka_unit_test(given_corrupt_double_payload_when_decoding_expect_corrupt_and_no_write),
    };
    return cmocka_run_group_tests_name("sparse", tests, nullptr, nullptr);
}

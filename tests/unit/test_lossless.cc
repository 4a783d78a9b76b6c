// SPDX-License-Identifier: BSD-3-Clause
/* lossless codec (kernels/lossless): bit-exact round trips of floats and doubles -- NaN
 * payloads, signed zeros, subnormals, Inf -- through blob_encode/blob_decode for both
 * variants, any level and thread count; the same bytes for any thread count; decode_add
 * adds the exact values; sizes below the verbatim data on compressible input; and every
 * damaged payload refused (Status::corrupt), never read past its end. */
#include "testutil.h"

#include <zstd.h>

#include <cstring>
#include <limits>
#include <vector>

#include "lossless/lossless.h"

using namespace compmpi;
using testutil::Rng;

namespace {

const CodecOps &ll() { return *codec_by_name("lossless"); }

template <class T> CodecParams params(uint8_t variant, int level = 1, int threads = 1) {
    CodecParams p;
    p.elem = std::is_same_v<T, double> ? Elem::f64 : Elem::f32;
    p.variant = variant;
    p.param = lossless::kBlockLog2;
    p.level = level;
    p.threads = threads;
    return p;
}

/* gradient-like values plus every special class of bit pattern */
template <class T> std::vector<T> special_data(size_t n, uint64_t seed) {
    std::vector<T> v(n);
    if constexpr (std::is_same_v<T, float>) v = testutil::gradient_data(n, seed);
    else v = testutil::gradient_data64(n, seed);
    using U = std::conditional_t<std::is_same_v<T, float>, uint32_t, uint64_t>;
    const U specials[] = {
        std::is_same_v<T, float> ? U(0x7FC00001u) : U(0x7FF8000000000123ull), /* quiet NaN, payload */
        std::is_same_v<T, float> ? U(0xFF800001u) : U(0xFFF0000000000001ull), /* signalling NaN */
        std::is_same_v<T, float> ? U(0x7F800000u) : U(0x7FF0000000000000ull), /* +Inf */
        std::is_same_v<T, float> ? U(0xFF800000u) : U(0xFFF0000000000000ull), /* -Inf */
        U(1),                                                                 /* smallest subnormal */
        std::is_same_v<T, float> ? U(0x80000000u) : U(0x8000000000000000ull), /* -0 */
    };
    for (size_t k = 0; k < sizeof specials / sizeof specials[0] && 7 * k + 11 < n; ++k)
        std::memcpy(&v[7 * k + 11], &specials[k], sizeof(U));
    return v;
}

/* a smooth field (sum of Gaussians): what the delta variant is for */
template <class T> std::vector<T> smooth_data(size_t n) {
    std::vector<T> v(n);
    for (size_t i = 0; i < n; ++i) {
        const double x = static_cast<double>(i) / static_cast<double>(n);
        v[i] = static_cast<T>(std::exp(-40 * (x - 0.3) * (x - 0.3)) + 0.5 * std::exp(-90 * (x - 0.7) * (x - 0.7)));
    }
    return v;
}

template <class T> std::vector<uint8_t> encode(const std::vector<T> &x, const CodecParams &p, size_t *len) {
    std::vector<uint8_t> blob(blob_max_bytes(ll(), x.size(), p));
    assert_int_equal(blob_encode(ll(), p, x.data(), x.size(), blob.data(), blob.size(), len), Status::ok);
    return blob;
}

template <class T> void roundtrip(size_t n, uint8_t variant, int level, int threads) {
    const std::vector<T> x = special_data<T>(n, 17 + n);
    const CodecParams p = params<T>(variant, level, threads);
    size_t len = 0;
    const std::vector<uint8_t> blob = encode(x, p, &len);
    assert_true(len <= blob.size());
    std::vector<T> y(n, T(7));
    assert_int_equal(blob_decode(blob.data(), len, n, y.data(), false, SimdLevel::scalar, threads), Status::ok);
    if (n) assert_memory_equal(x.data(), y.data(), n * sizeof(T));
    /* decode-add adds the exact values: acc + x, element by element */
    std::vector<T> acc(n), want(n);
    for (size_t i = 0; i < n; ++i) acc[i] = static_cast<T>(i % 5) - T(2), want[i] = acc[i] + x[i];
    assert_int_equal(blob_decode(blob.data(), len, n, acc.data(), true, SimdLevel::scalar, threads), Status::ok);
    if (n) assert_memory_equal(want.data(), acc.data(), n * sizeof(T));
}

}  // namespace

void given_special_values_when_roundtrip_expect_identical_bits(void **) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{3}, size_t{64}, size_t{1000}, size_t{65536}, size_t{65537},
                     size_t{200003}})
        for (uint8_t v : {lossless::kShuffle, lossless::kDelta})
            for (int level : {-5, 1, 3}) {
                roundtrip<float>(n, v, level, 1);
                roundtrip<double>(n, v, level, 1);
            }
}

void given_threads_when_encoding_expect_same_bytes_and_bits(void **) {
    const size_t n = 300001;
    for (uint8_t v : {lossless::kShuffle, lossless::kDelta}) {
        const std::vector<float> x = special_data<float>(n, 5);
        size_t l1 = 0, l4 = 0;
        const auto b1 = encode(x, params<float>(v, 1, 1), &l1);
        const auto b4 = encode(x, params<float>(v, 1, 4), &l4);
        assert_int_equal(l1, l4);
        assert_memory_equal(b1.data(), b4.data(), l1);
        roundtrip<float>(n, v, 1, 4);
        roundtrip<double>(n, v, 1, 3);
    }
}

void given_compressible_data_when_encoding_expect_fewer_bytes_than_verbatim(void **) {
    /* gradients: the exponent byte plane carries ~3 of its 8 bits (ENVIRONMENT.md) */
    const std::vector<float> g = testutil::gradient_data(1 << 18, 3);
    size_t lg = 0;
    encode(g, params<float>(lossless::kShuffle), &lg);
    assert_true(lg < g.size() * sizeof(float) * 95 / 100);
    /* a smooth field shrinks more with the delta */
    const std::vector<double> s = smooth_data<double>(1 << 18);
    size_t ls = 0, ld = 0;
    encode(s, params<double>(lossless::kShuffle), &ls);
    encode(s, params<double>(lossless::kDelta), &ld);
    assert_true(ld < ls);
    assert_true(ld < s.size() * sizeof(double) / 2);
}

void given_incompressible_data_when_encoding_expect_verbatim_blocks_within_max_payload(void **) {
    Rng r(9);
    std::vector<float> x(100000);
    for (auto &v : x) {
        const uint32_t u = static_cast<uint32_t>(r.next()) & 0x7F7FFFFFu; /* finite, all exponents */
        std::memcpy(&v, &u, 4);
    }
    const CodecParams p = params<float>(lossless::kShuffle);
    size_t len = 0;
    const auto blob = encode(x, p, &len);
    assert_true(len - kBlobHeaderBytes <= ll().max_payload(x.size(), p));
    std::vector<float> y(x.size());
    assert_int_equal(blob_decode(blob.data(), len, x.size(), y.data(), false, SimdLevel::scalar, 1), Status::ok);
    assert_memory_equal(x.data(), y.data(), x.size() * 4);
}

void given_damaged_payload_when_decoding_expect_corrupt(void **) {
    const size_t n = 140000; /* 3 blocks */
    const std::vector<float> x = special_data<float>(n, 2);
    const CodecParams p = params<float>(lossless::kShuffle);
    size_t len = 0;
    auto blob = encode(x, p, &len);
    std::vector<float> y(n);
    uint8_t *pay = blob.data() + kBlobHeaderBytes;
    const size_t plen = len - kBlobHeaderBytes;
    /* truncated: the payload is shorter than its records */
    assert_int_equal(ll().decode(pay, plen - 1, n, p, y.data()), Status::corrupt);
    /* a record length of zero, and one longer than its block */
    auto bad = std::vector<uint8_t>(pay, pay + plen);
    std::memset(bad.data(), 0, 4);
    assert_int_equal(ll().decode(bad.data(), plen, n, p, y.data()), Status::corrupt);
    bad.assign(pay, pay + plen);
    const uint32_t huge = 65536 * 4 + 1;
    std::memcpy(bad.data(), &huge, 4);
    assert_int_equal(ll().decode(bad.data(), plen, n, p, y.data()), Status::corrupt);
    /* flipped bytes inside the zstd frames: refused or decoded to something, never a crash; a
     * changed frame header (magic) is always refused */
    bad.assign(pay, pay + plen);
    bad[12] ^= 0xFF; /* the first frame's magic number (after the 3 lengths) */
    assert_int_equal(ll().decode(bad.data(), plen, n, p, y.data()), Status::corrupt);
    Rng r(4);
    for (int k = 0; k < 200; ++k) {
        bad.assign(pay, pay + plen);
        bad[12 + r.next() % (plen - 12)] ^= static_cast<uint8_t>(1 + r.next() % 255);
        const Status s = ll().decode(bad.data(), plen, n, p, y.data());
        assert_true(s == Status::ok || s == Status::corrupt);
    }
    /* parameters the encoder never writes */
    CodecParams q = p;
    q.param = 3;
    assert_int_equal(ll().check(q), Status::invalid_arg);
    q = p;
    q.variant = 2;
    assert_int_equal(ll().check(q), Status::invalid_arg);
    q = p;
    q.bits = 8;
    assert_int_equal(ll().check(q), Status::invalid_arg);
    /* a blob of doubles is not decoded into floats */
    const std::vector<double> d = special_data<double>(100, 1);
    size_t dl = 0;
    const auto db = encode(d, params<double>(lossless::kShuffle), &dl);
    std::vector<float> f(100);
    assert_int_equal(blob_decode(db.data(), dl, 100, f.data(), false, SimdLevel::scalar, 1), Status::corrupt);
}

void given_codec_table_when_queried_expect_lossless_variable_size_and_both_types(void **) {
    const CodecOps &c = ll();
    assert_true(c.flags & CODEC_LOSSLESS);
    assert_true(codec_variable_payload(c, params<float>(0)));
    assert_true(codec_has_elem(c, Elem::f32) && codec_has_elem(c, Elem::f64));
    assert_int_equal(static_cast<int>(c.id), 13);
    assert_true(ZSTD_versionNumber() >= 10400);
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(given_special_values_when_roundtrip_expect_identical_bits),
        cmocka_unit_test(given_threads_when_encoding_expect_same_bytes_and_bits),
        cmocka_unit_test(given_compressible_data_when_encoding_expect_fewer_bytes_than_verbatim),
        cmocka_unit_test(given_incompressible_data_when_encoding_expect_verbatim_blocks_within_max_payload),
        cmocka_unit_test(given_damaged_payload_when_decoding_expect_corrupt),
        cmocka_unit_test(given_codec_table_when_queried_expect_lossless_variable_size_and_both_types),
    };
    return cmocka_run_group_tests_name("lossless", tests, nullptr, nullptr);
}

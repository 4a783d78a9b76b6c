// SPDX-License-Identifier: BSD-3-Clause
/* sz codec (kernels/sz): every decoded element within eb of its input, floats and doubles,
 * both predictors, on gradient-like, smooth and adversarial data (values on and beside the
 * bin edges, +-0, subnormals, huge values that escape, the largest finite values); decode_add
 * adds the decoded values; the same bytes for any thread count; fewer bytes than verbatim on
 * smooth data (Lorenzo fewer than plain); NaN/Inf refused as nonfinite; every damaged payload
 * (truncations, flipped bits, fields the encoder never writes) refused with Status::corrupt
 * or decoded without reading past its end (exact-size copies, so ASan sees any overrun). */
#include "testutil.h"

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "error_model.h"
#include "sz/sz.h"

using namespace compmpi;
using testutil::Rng;

namespace {

const CodecOps &szc() { return *codec_by_name("sz"); }

template <class T> constexpr Elem elem_t() { return std::is_same_v<T, double> ? Elem::f64 : Elem::f32; }

template <class T> CodecParams params(float eb, uint8_t variant, int threads = 1) {
    CodecParams p;
    p.elem = elem_t<T>();
    p.variant = variant;
    p.param = sz::eb_param(eb);
    p.threads = threads;
    return p;
}

template <class T> std::vector<T> gradient(size_t n, uint64_t seed) {
    if constexpr (std::is_same_v<T, float>) return testutil::gradient_data(n, seed);
    else return testutil::gradient_data64(n, seed);
}

template <class T> std::vector<T> smooth(size_t n, double noise, uint64_t seed) {
    Rng r(seed);
    std::vector<T> v(n);
    for (size_t i = 0; i < n; ++i) {
        const double x = static_cast<double>(i) / static_cast<double>(n);
        v[i] = static_cast<T>(std::exp(-40 * (x - 0.3) * (x - 0.3)) + 0.5 * std::exp(-90 * (x - 0.7) * (x - 0.7)) +
                              noise * r.normal());
    }
    return v;
}

/* values on, just below and just above the bin edges (k + 1/2) D and the grid points k D,
 * +-0, subnormals, huge and largest-finite values, in a shuffled order */
template <class T> std::vector<T> adversarial(size_t n, float eb, uint64_t seed) {
    Rng r(seed);
    const double D = sz::bin_width(eb);
    const T big = std::numeric_limits<T>::max();
    std::vector<T> v(n);
    for (size_t i = 0; i < n; ++i) {
        const double k = static_cast<double>(static_cast<int64_t>(r.next() % 2000001) - 1000000);
        T x;
        switch (i % 12) {
            case 0: x = static_cast<T>((k + 0.5) * D); break;
            case 1: x = std::nextafter(static_cast<T>((k + 0.5) * D), big); break;
            case 2: x = std::nextafter(static_cast<T>((k + 0.5) * D), -big); break;
            case 3: x = static_cast<T>(k * D); break;
            case 4: x = (i & 16) ? T(0) : -T(0); break;
            case 5: x = std::numeric_limits<T>::denorm_min() * static_cast<T>(1 + r.next() % 1000); break;
            case 6: x = static_cast<T>((r.uniform() - 0.5) * 1e30); break;                  /* escapes */
            case 7: x = (i & 32) ? big : -big; break;                                       /* escapes */
            case 8: x = static_cast<T>(std::ldexp(1.0, 20) * eb * (r.uniform() - 0.5)); break; /* the float limit */
            case 9: x = static_cast<T>(k * D * 1e3 + 0.5 * D); break;
            case 10: x = static_cast<T>(std::numeric_limits<T>::min()); break;
            default: x = static_cast<T>(r.normal() * 1e-3); break;
        }
        v[i] = std::isfinite(x) ? x : big; /* bin edges of a huge eb: beyond the type */
    }
    return v;
}

template <class T> std::vector<uint8_t> encode(const std::vector<T> &x, const CodecParams &p, size_t *len) {
    std::vector<uint8_t> blob(blob_max_bytes(szc(), x.size(), p));
    assert_int_equal(blob_encode(szc(), p, x.data(), x.size(), blob.data(), blob.size(), len), Status::ok);
    assert_true(*len <= blob.size());
    blob.resize(*len);
    return blob;
}

/* every |y - x| <= eb, compared in long double */
template <class T> void assert_within(const std::vector<T> &x, const std::vector<T> &y, float eb) {
    for (size_t i = 0; i < x.size(); ++i) {
        const long double e = std::fabs(static_cast<long double>(y[i]) - static_cast<long double>(x[i]));
        if (!(e <= static_cast<long double>(eb))) {
            std::fprintf(stderr, "element %zu: x=%.17g y=%.17g err=%.3Lg eb=%.9g\n", i, static_cast<double>(x[i]),
                         static_cast<double>(y[i]), e, static_cast<double>(eb));
            fail();
        }
    }
}

template <class T> size_t roundtrip(const std::vector<T> &x, float eb, uint8_t variant, int threads = 1) {
    const size_t n = x.size();
    const CodecParams p = params<T>(eb, variant, threads);
    size_t len = 0;
    const std::vector<uint8_t> blob = encode(x, p, &len);
    std::vector<T> y(n, T(7));
    assert_int_equal(blob_decode(blob.data(), len, n, y.data(), false, SimdLevel::scalar, threads), Status::ok);
    assert_within(x, y, eb);
    /* decode_add adds exactly the decoded values */
    std::vector<T> acc(n), want(n);
    for (size_t i = 0; i < n; ++i) acc[i] = static_cast<T>(i % 5) - T(2), want[i] = acc[i] + y[i];
    assert_int_equal(blob_decode(blob.data(), len, n, acc.data(), true, SimdLevel::scalar, threads), Status::ok);
    if (n) assert_memory_equal(acc.data(), want.data(), n * sizeof(T));
    return len;
}

template <class T> void roundtrips_of_type() {
    for (uint8_t v : {sz::kPlain, sz::kLorenzo}) {
        for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}, sz::kBlock, sz::kBlock + 3, 3 * sz::kBlock + 11}) {
            for (float eb : {1e-6f, 1e-3f, 0.25f, 3.0f}) {
                roundtrip(gradient<T>(n, 5 + n), eb, v);
                roundtrip(smooth<T>(n, 0, 1), eb, v);
                roundtrip(smooth<T>(n, 1e-3, 2), eb, v);
                roundtrip(adversarial<T>(n, eb, 3 + n), eb, v);
            }
        }
        /* bounds at the ends of the range: the smallest normal float, the largest */
        roundtrip(adversarial<T>(5000, FLT_MIN, 9), FLT_MIN, v);
        roundtrip(adversarial<T>(5000, FLT_MAX, 9), FLT_MAX, v);
        roundtrip(gradient<T>(5000, 9), FLT_MAX, v);
        roundtrip(gradient<T>(5000, 9), 1e-30f, v);
    }
}

void given_floats_when_roundtrip_expect_every_element_within_eb(void **) { roundtrips_of_type<float>(); }
void given_doubles_when_roundtrip_expect_every_element_within_eb(void **) { roundtrips_of_type<double>(); }

/* the analysis (docs/codecs/sz.md): no value with |x| <= no_escape_ratio eb escapes, bin
 * edges included; read back from every record's escape count */
template <class T> void no_escapes_of_type() {
    const double R = sz::no_escape_ratio(elem_t<T>());
    for (float eb : {1e-3f, 1.0f, 3e-30f, 7e20f}) {
        const double D = sz::bin_width(eb);
        Rng r(5);
        std::vector<T> x(2 * sz::kBlock);
        for (size_t i = 0; i < x.size(); ++i) {
            const double lim = R * eb;
            double v = (2 * r.uniform() - 1) * lim;
            if (i % 2) v = (std::floor(v / D) + 0.5) * D; /* a bin edge (as near as T gets) */
            T t = static_cast<T>(v);
            if (std::fabs(static_cast<double>(t)) > lim) t = static_cast<T>(0);
            if (i % 4 == 3) t = std::nextafter(t, std::numeric_limits<T>::max());
            x[i] = std::fabs(static_cast<double>(t)) <= lim ? t : T(0);
        }
        for (uint8_t v : {sz::kPlain, sz::kLorenzo}) {
            const CodecParams p = params<T>(eb, v);
            size_t len = 0;
            const auto b = encode(x, p, &len);
            const uint8_t *pay = b.data() + kBlobHeaderBytes;
            size_t off = 4 * 2;
            for (int k = 0; k < 2; ++k) {
                uint32_t l, nesc;
                std::memcpy(&l, pay + 4 * k, 4);
                std::memcpy(&nesc, pay + off + 4, 4);
                assert_true(pay[off + 1] != sz::kVerbatim);
                assert_int_equal(nesc, 0);
                off += l;
            }
            roundtrip(x, eb, v);
        }
    }
}

void given_values_within_the_no_escape_ratio_when_encoding_expect_no_escapes(void **) {
    no_escapes_of_type<float>();
    no_escapes_of_type<double>();
}

void given_threads_when_encoding_expect_same_bytes(void **) {
    const std::vector<double> x = smooth<double>(5 * sz::kBlock + 17, 1e-4, 3);
    for (uint8_t v : {sz::kPlain, sz::kLorenzo}) {
        size_t l1 = 0, l2 = 0;
        const auto b1 = encode(x, params<double>(1e-5f, v, 1), &l1);
        const auto b4 = encode(x, params<double>(1e-5f, v, 4), &l2);
        assert_int_equal(l1, l2);
        assert_memory_equal(b1.data(), b4.data(), l1);
        roundtrip(x, 1e-5f, v, 4);
    }
}

void given_smooth_data_when_encoding_expect_few_bytes_and_lorenzo_fewer(void **) {
    const size_t n = 4 * sz::kBlock;
    const std::vector<double> x = smooth<double>(n, 0, 1);
    const size_t plain = roundtrip(x, 1e-4f, sz::kPlain), lor = roundtrip(x, 1e-4f, sz::kLorenzo);
    assert_true(plain < n * 8 / 4); /* codes of at most 13 bits, zstd'ed */
    assert_true(lor < plain);
    /* escapes: huge values travel verbatim, exactly */
    std::vector<float> h(1000, 1e30f);
    h[3] = -3e38f;
    const CodecParams p = params<float>(1e-3f, sz::kLorenzo);
    size_t len = 0;
    const auto b = encode(h, p, &len);
    std::vector<float> y(h.size());
    assert_int_equal(blob_decode(b.data(), len, h.size(), y.data(), false, SimdLevel::scalar, 1), Status::ok);
    assert_memory_equal(h.data(), y.data(), h.size() * 4);
    /* the payload never exceeds max_payload, which is 12 bytes per block over the raw values */
    assert_true(szc().max_payload(h.size(), p) == 12 + 4000);
}

void given_nonfinite_input_when_encoding_expect_nonfinite(void **) {
    for (float bad : {NAN, INFINITY, -INFINITY}) {
        std::vector<float> x(100, 1.f);
        x[50] = bad;
        const CodecParams p = params<float>(1e-3f, sz::kPlain);
        std::vector<uint8_t> blob(blob_max_bytes(szc(), 100, p));
        size_t len = 0;
        assert_int_equal(blob_encode(szc(), p, x.data(), 100, blob.data(), blob.size(), &len), Status::nonfinite);
        std::vector<double> d(x.begin(), x.end());
        CodecParams q = params<double>(1e-3f, sz::kLorenzo);
        std::vector<uint8_t> b2(blob_max_bytes(szc(), 100, q));
        assert_int_equal(blob_encode(szc(), q, d.data(), 100, b2.data(), b2.size(), &len), Status::nonfinite);
    }
}

/* decode a copy of exactly l bytes (ASan sees any read past it) */
template <class T> Status decode_copy(const uint8_t *pay, size_t l, size_t n, const CodecParams &p, std::vector<T> &y) {
    std::vector<uint8_t> c(pay, pay + l);
    return p.elem == Elem::f64 ? szc().decode64(c.data(), l, n, p, reinterpret_cast<double *>(y.data()))
                               : szc().decode(c.data(), l, n, p, reinterpret_cast<float *>(y.data()));
}

template <class T> void damaged_of_type(uint8_t variant) {
    const size_t n = 2 * sz::kBlock + 300;
    std::vector<T> x = smooth<T>(n, 1e-3, 7);
    for (size_t i = 0; i < n; i += 997) x[i] = static_cast<T>(1e30); /* escapes in every block */
    const CodecParams p = params<T>(1e-3f, variant);
    size_t len = 0;
    const auto blob = encode(x, p, &len);
    const uint8_t *pay = blob.data() + kBlobHeaderBytes;
    const size_t plen = len - kBlobHeaderBytes;
    std::vector<T> y(n);
    assert_int_equal(decode_copy(pay, plen, n, p, y), Status::ok);
    /* every truncation: refused */
    for (size_t l = 0; l < plen; l += (l < 64 || plen - l < 64) ? 1 : 97)
        assert_int_equal(decode_copy(pay, l, n, p, y), Status::corrupt);
    /* flipped bits anywhere: refused or decoded, never a crash or a read past the end */
    Rng r(11 + variant);
    std::vector<uint8_t> bad;
    int refused = 0;
    for (int k = 0; k < 400; ++k) {
        bad.assign(pay, pay + plen);
        const int flips = 1 + static_cast<int>(r.next() % 3);
        for (int f = 0; f < flips; ++f) bad[r.next() % plen] ^= static_cast<uint8_t>(1u << (r.next() % 8));
        const Status s = decode_copy(bad.data(), plen, n, p, y);
        assert_true(s == Status::ok || s == Status::corrupt);
        refused += s == Status::corrupt;
    }
    assert_true(refused > 0);
    /* fields of the first record the encoder never writes */
    const size_t rec = 4 * 3; /* after 3 lengths */
    auto poke = [&](size_t off, uint8_t v) {
        bad.assign(pay, pay + plen);
        bad[rec + off] = v;
        assert_int_equal(decode_copy(bad.data(), plen, n, p, y), Status::corrupt);
    };
    poke(0, 0);  /* width 0 */
    poke(0, 8);  /* width 8 */
    poke(1, 3);  /* unknown mode */
    poke(2, 1);  /* reserved */
    poke(4, 0xFF), poke(7, 0x7F); /* more escapes than elements or than codes */
    /* the record lengths: zero, and longer than the block's worst case */
    bad.assign(pay, pay + plen);
    std::memset(bad.data(), 0, 4);
    assert_int_equal(decode_copy(bad.data(), plen, n, p, y), Status::corrupt);
    bad.assign(pay, pay + plen);
    const uint32_t huge = static_cast<uint32_t>(8 + sz::kBlock * sizeof(T) + 1);
    std::memcpy(bad.data(), &huge, 4);
    assert_int_equal(decode_copy(bad.data(), plen, n, p, y), Status::corrupt);
}

void given_damaged_payload_when_decoding_expect_corrupt(void **) {
    damaged_of_type<float>(sz::kPlain);
    damaged_of_type<float>(sz::kLorenzo);
    damaged_of_type<double>(sz::kPlain);
    damaged_of_type<double>(sz::kLorenzo);
}

/* hand-built records: codes the encoder never writes */
void given_forged_records_when_decoding_expect_corrupt(void **) {
    const CodecParams p = params<float>(1.0f, sz::kLorenzo);
    std::vector<float> y(4);
    auto rec = [&](uint8_t w, uint8_t mode, uint32_t nesc, std::vector<uint8_t> body) {
        std::vector<uint8_t> b(4 + 8);
        const uint32_t l = static_cast<uint32_t>(8 + body.size());
        std::memcpy(b.data(), &l, 4);
        b[4] = w, b[5] = mode;
        std::memcpy(b.data() + 8, &nesc, 4);
        b.insert(b.end(), body.begin(), body.end());
        return b;
    };
    auto dec = [&](const std::vector<uint8_t> &b) { return decode_copy(b.data(), b.size(), 4, p, y); };
    /* raw codes of 1 byte: 1, 3, 5, 2 -> residuals 0, 1, 2, -1 (zigzag) -> k = 0, 1, 3, 2 */
    assert_int_equal(dec(rec(1, sz::kRaw, 0, {1, 3, 5, 2})), Status::ok);
    assert_true(y[0] == 0 && y[1] == 1.875f && y[2] == 3 * 1.875f && y[3] == 2 * 1.875f);
    /* an escape code with no escaped value; an escaped NaN; a verbatim Inf */
    assert_int_equal(dec(rec(1, sz::kRaw, 0, {1, 0, 5, 2})), Status::corrupt);
    const float nan = NAN, inf = INFINITY;
    std::vector<uint8_t> body = {1, 0, 5, 2, 0, 0, 0, 0};
    std::memcpy(body.data() + 4, &nan, 4);
    assert_int_equal(dec(rec(1, sz::kRaw, 1, body)), Status::corrupt);
    std::vector<uint8_t> vb(16, 0);
    std::memcpy(vb.data() + 8, &inf, 4);
    assert_int_equal(dec(rec(0, sz::kVerbatim, 0, vb)), Status::corrupt);
    /* Lorenzo codes that walk past 2^51: 7-byte codes of 2^54 each */
    std::vector<uint8_t> big(28, 0);
    for (int i = 0; i < 4; ++i) big[6 * 4 + i] = 0x40; /* byte plane 6: bit 54 of each code */
    assert_int_equal(dec(rec(7, sz::kRaw, 0, big)), Status::corrupt);
    /* a zstd record whose frame is garbage */
    assert_int_equal(dec(rec(2, sz::kZstd, 0, {0x28, 0xB5, 0x2F, 0xFD, 0, 0})), Status::corrupt);
}

void given_parameters_when_checked_expect_only_normal_bounds(void **) {
    const CodecOps &c = szc();
    CodecParams p = params<float>(1e-3f, sz::kPlain);
    assert_int_equal(c.check(p), Status::ok);
    for (float eb : {0.0f, -1.0f, NAN, INFINITY, FLT_MIN / 2}) {
        p.param = sz::eb_param(eb);
        assert_int_equal(c.check(p), Status::invalid_arg);
    }
    p = params<float>(1e-3f, 2);
    assert_int_equal(c.check(p), Status::invalid_arg);
    p = params<float>(1e-3f, 0);
    p.bits = 8;
    assert_int_equal(c.check(p), Status::invalid_arg);
}

void given_codec_table_when_queried_expect_sz_variable_size_both_types_and_its_model(void **) {
    const CodecOps &c = szc();
    assert_int_equal(static_cast<int>(c.id), 14);
    assert_false(c.flags & CODEC_LOSSLESS);
    assert_true(codec_variable_payload(c, params<float>(1e-3f, 0)));
    assert_true(codec_has_elem(c, Elem::f32) && codec_has_elem(c, Elem::f64));
    double slope, floor, maxv;
    const CodecParams p = params<double>(0.5f, sz::kLorenzo);
    assert_true(codec_abs_error_linear(c, p, &slope, &floor, &maxv));
    assert_true(slope == 0 && floor == 0.5 && maxv == DBL_MAX);
    assert_true(codec_abs_error(c, p, 1e300) == 0.5);
    ErrorModel m;
    assert_false(codec_error_model(c, p, &m)); /* no relative model */
}

}  // namespace

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(given_floats_when_roundtrip_expect_every_element_within_eb),
        cmocka_unit_test(given_doubles_when_roundtrip_expect_every_element_within_eb),
        cmocka_unit_test(given_values_within_the_no_escape_ratio_when_encoding_expect_no_escapes),
        cmocka_unit_test(given_threads_when_encoding_expect_same_bytes),
        cmocka_unit_test(given_smooth_data_when_encoding_expect_few_bytes_and_lorenzo_fewer),
        cmocka_unit_test(given_nonfinite_input_when_encoding_expect_nonfinite),
        cmocka_unit_test(given_damaged_payload_when_decoding_expect_corrupt),
        cmocka_unit_test(given_forged_records_when_decoding_expect_corrupt),
        cmocka_unit_test(given_parameters_when_checked_expect_only_normal_bounds),
        cmocka_unit_test(given_codec_table_when_queried_expect_sz_variable_size_both_types_and_its_model),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}

// SPDX-License-Identifier: BSD-3-Clause
/* fp16 and bf16: the scalar reference conversions are round-to-nearest-even (checked against
 * the neighbouring codes), every CPU path (scalar, AVX2+F16C, AVX-512, AVX-512 BF16) and
 * thread count writes the same bytes, decode_add == decode + add, error bounds, the fp16
 * scale rule, NaN/Inf, hostile payloads. */
#include <algorithm>
#include <cfloat>

#include "fp16/fp16.h"
#include "testutil.h"

using namespace compmpi;
using testutil::gradient_data;

namespace {

const size_t kSizes[] = {0, 1, 7, 15, 16, 17, 31, 32, 33, 63, 100, 1000, 4099, 70001, 300007};

int st(Status s) { return static_cast<int>(s); }

using testutil::levels;

/* bf16 encoders: every level with integer rounding, plus the native AVX-512 BF16 one */
struct Bf16Path {
    SimdLevel lvl;
    bool native;
};
std::vector<Bf16Path> bf16_paths() {
    std::vector<Bf16Path> v;
    for (SimdLevel l : levels()) v.push_back({l, false});
    if (half::bf16_native_available()) v.push_back({SimdLevel::avx512, true});
    return v;
}

float bitsf(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

float payload_scale(const std::vector<uint8_t> &p) {
    float s;
    std::memcpy(&s, p.data(), 4);
    return s;
}

/* ------------------------------------------------------------------ reference conversions */

/* h is the nearest fp16 to x (ties to the even code), for |x| < 65520. */
void check_fp16_nearest(float x) {
    const uint16_t h = half::fp16_from_float(x);
    const double v = half::fp16_to_float(h), xd = x;
    assert_int_equal(h >> 15, std::signbit(x) ? 1 : 0);
    const double err = std::fabs(v - xd);
    for (int d : {-1, 1}) {
        const int nb = (h & 0x7FFF) + d;
        if (nb < 0 || nb >= 0x7C00) continue;
        const double w = std::copysign(static_cast<double>(half::fp16_to_float(static_cast<uint16_t>(nb))), xd);
        const double e2 = std::fabs(w - xd);
        if (e2 < err || (e2 == err && (h & 1)))
            fail_msg("fp16(%.9g) = 0x%04x (%.9g) but 0x%04x (%.9g) is nearer/even", x, h, v, nb, w);
    }
}

void given_fp16_reference_when_converting_expect_nearest_even(void **) {
    /* every fp16 code decodes to a value that converts back to the same code */
    for (uint32_t h = 0; h < 0x10000; ++h) {
        if ((h & 0x7C00) == 0x7C00) continue;
        const float f = half::fp16_to_float(static_cast<uint16_t>(h));
        assert_int_equal(half::fp16_from_float(f), h);
    }
    /* a sweep of fp32 bit patterns below 65520, with midpoints and their neighbours */
    for (uint32_t u = 0; u < 0x477FF000u; u += 4099) {
        check_fp16_nearest(bitsf(u));
        check_fp16_nearest(-bitsf(u));
    }
    for (uint32_t h = 0; h < 0x7BFF; h += 7) {
        const float a = half::fp16_to_float(static_cast<uint16_t>(h)), b = half::fp16_to_float(static_cast<uint16_t>(h + 1));
        const float mid = static_cast<float>((static_cast<double>(a) + b) / 2); /* exact */
        for (float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e6f)}) check_fp16_nearest(x);
    }
    assert_int_equal(half::fp16_from_float(65504.0f), 0x7BFF);
    assert_int_equal(half::fp16_from_float(65519.0f), 0x7BFF);
    assert_int_equal(half::fp16_from_float(65520.0f), 0x7C00);
    assert_int_equal(half::fp16_from_float(0x1p-25f), 0);
    assert_int_equal(half::fp16_from_float(std::nextafter(0x1p-25f, 1.0f)), 1);
    assert_int_equal(half::fp16_from_float(-0.0f), 0x8000);
    assert_true(std::isnan(half::fp16_to_float(0x7C01)));
}

void given_bf16_reference_when_converting_expect_nearest_even_ftz_and_saturation(void **) {
    for (uint32_t u = 0; u < 0x7F800000u; u += 997) {
        for (uint32_t s : {0u, 0x80000000u}) {
            const float x = bitsf(u | s);
            const uint16_t b = half::bf16_from_float(x);
            assert_int_equal(b >> 15, s >> 31);
            if (u < 0x00800000u) {
                assert_int_equal(b & 0x7FFF, 0); /* denormal -> signed zero */
                continue;
            }
            if (u > 0x7F7F7FFFu) {
                assert_int_equal(b, (u | s) >> 16); /* truncated, never Inf */
                continue;
            }
            /* nearest of the two candidates, ties to even */
            const uint32_t lo = u >> 16, hi = lo + 1, rem = u & 0xFFFF;
            const uint32_t want = rem > 0x8000 || (rem == 0x8000 && (lo & 1)) ? hi : lo;
            assert_int_equal(b & 0x7FFF, want);
        }
    }
    assert_int_equal(half::bf16_from_float(FLT_MAX), 0x7F7F);
    assert_int_equal(half::bf16_from_float(1.0f), 0x3F80);
    assert_true(half::bf16_to_float(0x3F80) == 1.0f);
}

/* Bit-pattern sweeps through the codecs' encoders: the SIMD paths reproduce the reference
 * conversions (including F16C's and vcvtne2ps2bf16's handling of subnormals and ties). */
void given_bit_pattern_sweep_when_encoding_expect_every_path_matches_reference(void **) {
    const size_t chunk = 1 << 16;
    std::vector<float> x(chunk);
    std::vector<uint8_t> ref(4 + 2 * chunk), got(4 + 2 * chunk);
    /* fp16: |x| < 2^15 and the chunk max in [2^14, 2^15): scale 1, the values as they are */
    for (uint32_t u0 = 0; u0 < 0x47000000u; u0 += static_cast<uint32_t>(chunk) * 61) {
        for (size_t i = 0; i < chunk; ++i) x[i] = bitsf((u0 + static_cast<uint32_t>(i) * 61) % 0x47000000u | (i & 1u) << 31);
        x[0] = 16384.0f;
        assert_int_equal(st(half::fp16_encode(x.data(), chunk, ref.data(), SimdLevel::scalar, 1)), 0);
        assert_true(payload_scale(ref) == 1.0f);
        for (size_t i = 0; i < chunk; ++i) {
            uint16_t h;
            std::memcpy(&h, ref.data() + 4 + 2 * i, 2);
            assert_int_equal(h, half::fp16_from_float(x[i]));
        }
        for (SimdLevel l : levels()) {
            assert_int_equal(st(half::fp16_encode(x.data(), chunk, got.data(), l, 1)), 0);
            assert_true(testutil::same_bytes(ref.data(), got.data(), 4 + 2 * chunk));
        }
    }
    /* bf16: all finite patterns, denormals and the top binade included */
    for (uint32_t u0 = 0; u0 < 0x7F800000u; u0 += static_cast<uint32_t>(chunk) * 67) {
        for (size_t i = 0; i < chunk; ++i) x[i] = bitsf((u0 + static_cast<uint32_t>(i) * 67) % 0x7F800000u | (i & 1u) << 31);
        x[1] = 1e-40f;
        x[2] = -FLT_MAX;
        x[3] = bitsf(0x7F7F8000u);
        x[4] = bitsf(0x3F808000u); /* tie, even down */
        x[5] = bitsf(0x3F818000u); /* tie, even up */
        assert_int_equal(st(half::bf16_encode(x.data(), chunk, ref.data(), SimdLevel::scalar, 1)), 0);
        for (size_t i = 0; i < chunk; ++i) {
            uint16_t b;
            std::memcpy(&b, ref.data() + 2 * i, 2);
            assert_int_equal(b, half::bf16_from_float(x[i]));
        }
        for (Bf16Path p : bf16_paths()) {
            assert_int_equal(st(half::bf16_encode(x.data(), chunk, got.data(), p.lvl, 1, p.native)), 0);
            if (!testutil::same_bytes(ref.data(), got.data(), 2 * chunk)) {
                for (size_t i = 0; i < chunk; ++i)
                    if (std::memcmp(ref.data() + 2 * i, got.data() + 2 * i, 2))
                        fail_msg("bf16 path %d native %d differs at x=%a", static_cast<int>(p.lvl), p.native, x[i]);
            }
        }
    }
}

/* ------------------------------------------------------------------ paths and threads */

void given_any_path_when_encoding_expect_identical_bytes(void **) {
    if (levels().size() == 1) print_message("note: this CPU has no AVX2: only the scalar path is compared\n");
    if (!half::bf16_native_available()) print_message("note: no AVX-512 BF16 on this CPU: native bf16 path not compared\n");
    for (size_t n : kSizes) {
        auto x = gradient_data(n, 3000 + n);
        std::vector<uint8_t> ref(4 + 2 * n + 1), got(4 + 2 * n + 1);
        assert_int_equal(st(half::fp16_encode(x.data(), n, ref.data(), SimdLevel::scalar, 1)), 0);
        for (SimdLevel l : levels())
            for (int threads : {1, 2, 4}) {
                std::fill(got.begin(), got.end(), 0xAB);
                assert_int_equal(st(half::fp16_encode(x.data(), n, got.data(), l, threads)), 0);
                assert_true(testutil::same_bytes(ref.data(), got.data(), 4 + 2 * n));
                assert_int_equal(got[4 + 2 * n], 0xAB);
            }
        assert_int_equal(st(half::bf16_encode(x.data(), n, ref.data(), SimdLevel::scalar, 1)), 0);
        for (Bf16Path p : bf16_paths())
            for (int threads : {1, 2, 4}) {
                std::fill(got.begin(), got.end(), 0xAB);
                assert_int_equal(st(half::bf16_encode(x.data(), n, got.data(), p.lvl, threads, p.native)), 0);
                assert_true(testutil::same_bytes(ref.data(), got.data(), 2 * n));
                assert_int_equal(got[2 * n], 0xAB);
            }
    }
}

void given_any_path_when_decoding_expect_identical_floats(void **) {
    for (size_t n : kSizes)
        for (int fp16 = 0; fp16 <= 1; ++fp16) {
            testutil::Rng r(n * 3 + fp16);
            const size_t off = fp16 ? 4 : 0;
            std::vector<uint8_t> p(off + 2 * n);
            for (auto &b : p) b = static_cast<uint8_t>(r.next());
            if (fp16) {
                const float s = std::ldexp(1.0f, static_cast<int>(r.next() % 60) - 30);
                std::memcpy(p.data(), &s, 4);
            }
            auto decode = [&](float *out, bool add, SimdLevel l, int threads) {
                if (fp16) assert_int_equal(st(half::fp16_decode(p.data(), n, out, add, l, threads)), 0);
                else half::bf16_decode(p.data(), n, out, add, l, threads);
            };
            std::vector<float> ref(n + 1), acc0(n + 1);
            for (size_t i = 0; i < n; ++i) acc0[i] = static_cast<float>(r.normal());
            decode(ref.data(), false, SimdLevel::scalar, 1);
            std::vector<float> refacc = acc0;
            decode(refacc.data(), true, SimdLevel::scalar, 1);
            for (size_t i = 0; i < n; ++i) { /* decode_add == decode + add, bit for bit */
                float s = acc0[i] + ref[i];
                assert_true(testutil::same_bytes(&s, &refacc[i], 4));
            }
            for (SimdLevel l : levels())
                for (int threads : {1, 3}) {
                    std::vector<float> got(n + 1, 7.0f);
                    decode(got.data(), false, l, threads);
                    assert_true(testutil::same_bytes(ref.data(), got.data(), n * 4));
                    assert_true(got[n] == 7.0f);
                    std::vector<float> acc = acc0;
                    decode(acc.data(), true, l, threads);
                    assert_true(testutil::same_bytes(refacc.data(), acc.data(), (n + 1) * 4));
                }
        }
}

/* ------------------------------------------------------------------ accuracy and scale */

void given_gradient_data_when_roundtrip_expect_error_bounds(void **) {
    const size_t n = 200000;
    auto x = gradient_data(n, 42);
    std::vector<uint8_t> p(4 + 2 * n);
    std::vector<float> y(n);
    assert_int_equal(st(half::fp16_encode(x.data(), n, p.data(), simd_detect(), 2)), 0);
    assert_int_equal(st(half::fp16_decode(p.data(), n, y.data(), false, simd_detect(), 2)), 0);
    const double s = payload_scale(p);
    float mx = 0;
    for (float v : x) mx = std::max(mx, std::fabs(v));
    assert_true(mx / s >= 16384.0 && mx / s < 32768.0);
    for (size_t i = 0; i < n; ++i) {
        const double ax = std::fabs(static_cast<double>(x[i])), err = std::fabs(static_cast<double>(y[i]) - x[i]);
        assert_true(std::isfinite(y[i]));
        if (ax / s >= 0x1p-14) { /* normal fp16 after scaling */
            if (err > 0x1p-11 * ax) fail_msg("fp16 i=%zu x=%g y=%g rel=%g", i, x[i], y[i], err / ax);
        } else if (err > 0x1p-25 * s) {
            fail_msg("fp16 subnormal i=%zu x=%g y=%g err=%g", i, x[i], y[i], err);
        }
    }
    std::vector<uint8_t> b(2 * n);
    assert_int_equal(st(half::bf16_encode(x.data(), n, b.data(), simd_detect(), 2)), 0);
    half::bf16_decode(b.data(), n, y.data(), false, simd_detect(), 2);
    for (size_t i = 0; i < n; ++i) {
        assert_true(std::isfinite(y[i]));
        if (!std::isnormal(x[i])) {
            assert_true(y[i] == 0.0f && std::signbit(y[i]) == std::signbit(x[i]));
            continue;
        }
        const double ax = std::fabs(static_cast<double>(x[i])), err = std::fabs(static_cast<double>(y[i]) - x[i]);
        if (err > 0x1p-8 * ax) fail_msg("bf16 i=%zu x=%g y=%g rel=%g", i, x[i], y[i], err / ax);
    }
}

void given_extreme_ranges_when_roundtrip_expect_finite_bounded_values(void **) {
    const std::vector<std::vector<float>> cases = {
        {FLT_MAX, -FLT_MAX, bitsf(0x7F7FFFF0u), 3e38f, 1.0f, -1e-30f},   /* k = 113, clamp */
        {0.0f, -0.0f, 0.0f},                                              /* scale 1 */
        {1e-40f, -1e-42f, 1e-45f},                                        /* denormals only */
        {1e-36f, -3e-37f, 1e-38f, 1e-40f},                                /* k clamped at -126 */
        {65504.0f, 70000.0f, -1e6f, 1.0f},                                /* plain fp16 would overflow */
    };
    for (auto x : cases) {
        x.resize(77, x[1]);
        std::vector<uint8_t> ref(4 + 2 * x.size()), got(ref.size());
        assert_int_equal(st(half::fp16_encode(x.data(), x.size(), ref.data(), SimdLevel::scalar, 1)), 0);
        for (SimdLevel l : levels()) {
            assert_int_equal(st(half::fp16_encode(x.data(), x.size(), got.data(), l, 2)), 0);
            assert_true(ref == got);
        }
        std::vector<float> y(x.size());
        assert_int_equal(st(half::fp16_decode(ref.data(), x.size(), y.data(), false, simd_detect(), 1)), 0);
        const double s = payload_scale(ref);
        float mx = 0;
        for (float v : x) mx = std::max(mx, std::fabs(v));
        for (size_t i = 0; i < x.size(); ++i) {
            assert_true(std::isfinite(y[i]));
            assert_true(std::signbit(y[i]) == std::signbit(x[i]));
            const double err = std::fabs(static_cast<double>(y[i]) - x[i]), ax = std::fabs(static_cast<double>(x[i]));
            if (ax / s >= 0x1p-14) assert_true(err <= 0x1p-11 * ax);
            else assert_true(err <= 0x1p-25 * s);
        }
        if (mx == 0) assert_true(s == 1.0);
    }
    /* FLT_MAX: scale 2^113 and the clamp, so nothing decodes to Inf */
    float big[2] = {FLT_MAX, -FLT_MAX};
    std::vector<uint8_t> p(8);
    assert_int_equal(st(half::fp16_encode(big, 2, p.data(), SimdLevel::scalar, 1)), 0);
    assert_true(payload_scale(p) == std::ldexp(1.0f, 113));
    uint16_t h;
    std::memcpy(&h, p.data() + 4, 2);
    assert_int_equal(h, 0x77FF); /* 32752 */
}

/* ------------------------------------------------------------------ bad input */

void given_nan_or_inf_when_encoding_expect_nonfinite_on_every_path(void **) {
    for (float bad : {NAN, INFINITY, -INFINITY})
        for (size_t pos : {0ul, 5ul, 16ul, 33ul, 999ul}) {
            auto x = gradient_data(1000, 3);
            x[pos] = bad;
            std::vector<uint8_t> p(4 + 2000);
            for (SimdLevel l : levels())
                assert_int_equal(st(half::fp16_encode(x.data(), 1000, p.data(), l, 1)), st(Status::nonfinite));
            for (Bf16Path b : bf16_paths())
                assert_int_equal(st(half::bf16_encode(x.data(), 1000, p.data(), b.lvl, 1, b.native)), st(Status::nonfinite));
        }
    for (const char *name : {"fp16", "bf16"}) {
        const CodecOps *c = codec_by_name(name);
        assert_non_null(c);
        auto x = gradient_data(400000, 4);
        x[399999] = -INFINITY;
        CodecParams p;
        p.bits = 16;
        p.threads = 2;
        p.simd = simd_detect();
        std::vector<uint8_t> b(blob_max_bytes(*c, x.size(), p));
        size_t len = 0;
        assert_int_equal(st(blob_encode(*c, p, x.data(), x.size(), b.data(), b.size(), &len)), st(Status::nonfinite));
        assert_int_equal(len, kBlobHeaderBytes);
        assert_int_equal(b[6], BLOB_NONFINITE);
    }
}

void given_bad_payload_when_decoding_expect_corrupt_and_nothing_written(void **) {
    const size_t n = 100;
    auto x = gradient_data(n, 9);
    for (const char *name : {"fp16", "bf16"}) {
        const CodecOps *c = codec_by_name(name);
        assert_non_null(c);
        const bool fp16 = c->id == CodecId::fp16;
        assert_int_equal(static_cast<int>(c->id), fp16 ? 2 : 3);
        CodecParams p;
        p.bits = 16;
        std::vector<uint8_t> b(c->max_payload(n, p));
        assert_int_equal(b.size(), (fp16 ? 4 : 0) + 2 * n);
        size_t len = 0;
        assert_int_equal(st(c->encode(x.data(), n, p, b.data(), b.size(), &len)), 0);
        assert_int_equal(len, b.size());
        std::vector<float> out(n, 5.0f);
        auto untouched = [&] {
            for (float v : out) assert_true(v == 5.0f);
        };
        for (size_t bad_len : {size_t{0}, size_t{1}, len - 1, len + 1, len + 2, len - 2})
            for (bool add : {false, true}) {
                Status s = add ? c->decode_add(b.data(), bad_len, n, p, out.data()) : c->decode(b.data(), bad_len, n, p, out.data());
                assert_int_equal(st(s), st(Status::corrupt));
                untouched();
            }
        CodecParams q = p;
        q.bits = 8;
        assert_int_equal(st(c->decode(b.data(), len, n, q, out.data())), st(Status::corrupt));
        q = p;
        q.variant = 1;
        assert_int_equal(st(c->decode(b.data(), len, n, q, out.data())), st(Status::corrupt));
        q = p;
        q.param = 3;
        assert_int_equal(st(c->decode_add(b.data(), len, n, q, out.data())), st(Status::corrupt));
        untouched();
        if (!fp16) continue;
        for (float bad_scale : {0.0f, -1.0f, 3.0f, 1.5f, NAN, INFINITY, std::ldexp(1.0f, 114), std::ldexp(1.0f, -127),
                                std::ldexp(1.0f, -140), -std::ldexp(1.0f, 4)}) {
            auto bb = b;
            std::memcpy(bb.data(), &bad_scale, 4);
            assert_int_equal(st(c->decode(bb.data(), len, n, p, out.data())), st(Status::corrupt));
            assert_int_equal(st(c->decode_add(bb.data(), len, n, p, out.data())), st(Status::corrupt));
            untouched();
        }
    }
}

void given_blob_when_roundtrip_expect_header_fields_and_values(void **) {
    const size_t n = 5000;
    auto x = gradient_data(n, 10);
    for (const char *name : {"fp16", "bf16"}) {
        const CodecOps *c = codec_by_name(name);
        CodecParams p;
        p.bits = 16;
        std::vector<uint8_t> b(blob_max_bytes(*c, n, p));
        size_t len = 0;
        assert_int_equal(st(blob_encode(*c, p, x.data(), n, b.data(), b.size(), &len)), 0);
        assert_int_equal(len, b.size());
        BlobInfo info;
        assert_int_equal(st(blob_peek(b.data(), len, n, &info)), 0);
        assert_int_equal(info.bits, 16);
        assert_int_equal(info.variant, 0);
        std::vector<float> y(n), z(n, 1.0f);
        assert_int_equal(st(blob_decode(b.data(), len, n, y.data(), false, simd_detect(), 1)), 0);
        assert_int_equal(st(blob_decode(b.data(), len, n, z.data(), true, simd_detect(), 1)), 0);
        float s = 1.0f;
        if (c->id == CodecId::fp16) std::memcpy(&s, b.data() + kBlobHeaderBytes, 4);
        for (size_t i = 0; i < n; ++i) {
            assert_true(z[i] == 1.0f + y[i]);
            const double err = std::fabs(static_cast<double>(y[i]) - x[i]), ax = std::fabs(static_cast<double>(x[i]));
            if (c->id == CodecId::fp16) assert_true(err <= std::max(0x1p-11 * ax, 0x1p-25 * s));
            else if (std::isnormal(x[i])) assert_true(err <= 0x1p-8 * ax);
        }
    }
}

}  // namespace

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(given_fp16_reference_when_converting_expect_nearest_even),
        cmocka_unit_test(given_bf16_reference_when_converting_expect_nearest_even_ftz_and_saturation),
        cmocka_unit_test(given_bit_pattern_sweep_when_encoding_expect_every_path_matches_reference),
        cmocka_unit_test(given_any_path_when_encoding_expect_identical_bytes),
        cmocka_unit_test(given_any_path_when_decoding_expect_identical_floats),
        cmocka_unit_test(given_gradient_data_when_roundtrip_expect_error_bounds),
        cmocka_unit_test(given_extreme_ranges_when_roundtrip_expect_finite_bounded_values),
        cmocka_unit_test(given_nan_or_inf_when_encoding_expect_nonfinite_on_every_path),
        cmocka_unit_test(given_bad_payload_when_decoding_expect_corrupt_and_nothing_written),
        cmocka_unit_test(given_blob_when_roundtrip_expect_header_fields_and_values),
    };
    return cmocka_run_group_tests_name("fp16", tests, nullptr, nullptr);
}

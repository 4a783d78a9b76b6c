// SPDX-License-Identifier: BSD-3-Clause
/* qsgd: identical bytes on every CPU path and thread count; decoded values on the grid
 * k * norm / s with |k| <= s; unbiasedness; the variance bound of Alistarh et al. (Lemma 3.1);
 * reproducibility; NaN/Inf; hostile payloads. */
#include "qsgd/qsgd.h"

#include "common/philox.h"

#include <algorithm>
#include <memory>

#include "testutil.h"

using namespace compmpi;
using testutil::gradient_data;

namespace {

const CodecOps &ops() {
    return *codec_by_id(static_cast<int>(CodecId::qsgd));
}

using testutil::levels;

template <class T = float> std::vector<T> normal_data(size_t n, uint64_t seed, double scale = 1e-3) {
    return testutil::normal_data<T>(n, seed, scale);
}

CodecParams params(int bits, uint32_t bucket, uint64_t seed = 3, uint64_t stream = 9) {
    CodecParams p;
    p.bits = static_cast<uint8_t>(bits);
    p.param = bucket;
    p.bucket = bucket;
    p.seed = seed;
    p.stream = stream;
    p.simd = simd_detect();
    return p;
}

/* encode / decode of floats or doubles (T) */
template <class T> std::vector<uint8_t> encode(const CodecParams &p, const std::vector<T> &x, Status *st = nullptr) {
    return testutil::encode_checked(ops(), p, x, st);
}
template <class T = float> std::vector<T> decode(const CodecParams &p, const std::vector<uint8_t> &b, size_t n) {
    return testutil::decode_checked<T>(ops(), p, b, n);
}

template <class T = float> T norm_of(const std::vector<uint8_t> &b, size_t j) { return testutil::read_at<T>(b, j); }

void given_any_path_and_threads_when_encoding_expect_identical_bytes(void **) {
    const size_t sizes[] = {0, 1, 7, 8, 9, 63, 64, 65, 129, 1000, 2561, 40960 * 3 + 77, 300007};
    for (size_t n : sizes)
        for (int bits = 2; bits <= 8; ++bits)
            for (uint32_t bucket : {0u, 512u, 100u, 8192u}) {     /* 512, 8192: statistics fused per block */
                if (n > 5000 && bits != 4 && bits != 7) continue; /* keep it fast */
                auto x = gradient_data(n, 200 + n);
                if (n > 8) x[4] = x[5] = 1.0f; /* gradient_data's +-FLT_MAX would overflow the norm */
                CodecParams p = params(bits, bucket);
                p.simd = SimdLevel::scalar;
                auto ref = encode(p, x);
                for (SimdLevel l : levels())
                    for (int threads : {1, 2, 4}) {
                        p.simd = l;
                        p.threads = threads;
                        if (ref != encode(p, x))
                            fail_msg("n=%zu bits=%d bucket=%u simd=%s threads=%d", n, bits, bucket, simd_name(l),
                                     threads);
                        auto y = decode(p, ref, n);
                        p.simd = SimdLevel::scalar;
                        p.threads = 1;
                        auto yref = decode(p, ref, n);
                        assert_true(testutil::same_bytes(y.data(), yref.data(), 4 * n));
                    }
            }
}

/* Buckets whose norm is below 2^-60 take the prescaled path (r = (|v| 2^64) (s / (N 2^64)));
 * every SIMD path must write the scalar reference's bytes there as well. */
void given_tiny_norm_buckets_when_encoding_expect_identical_bytes(void **) {
    for (double scale : {1e-25, 1e-38}) {
        auto x = normal_data(40960 + 4099, 31, scale);
        for (int bits : {2, 4, 8})
            for (uint32_t bucket : {512u, 100u}) {
                CodecParams p = params(bits, bucket);
                p.simd = SimdLevel::scalar;
                auto ref = encode(p, x);
                assert_true(norm_of(ref, 0) > 0 && norm_of(ref, 0) < 0x1p-60f);
                for (SimdLevel l : levels())
                    for (int threads : {1, 2}) {
                        p.simd = l;
                        p.threads = threads;
                        if (ref != encode(p, x))
                            fail_msg("scale=%g bits=%d bucket=%u simd=%s threads=%d", scale, bits, bucket,
                                     simd_name(l), threads);
                    }
            }
    }
}

void given_encoded_bucket_when_decoding_expect_levels_of_norm(void **) {
    const size_t n = 10000;
    auto x = normal_data(n, 5);
    for (int bits = 2; bits <= 8; ++bits)
        for (uint32_t bucket : {0u, 512u, 333u}) {
            CodecParams p = params(bits, bucket);
            auto b = encode(p, x);
            auto y = decode(p, b, n);
            const double s = (1 << (bits - 1)) - 1;
            const size_t B = bucket ? bucket : n;
            for (size_t lo = 0; lo < n; lo += B) {
                const size_t hi = std::min(n, lo + B);
                double sq = 0;
                for (size_t i = lo; i < hi; ++i) sq += static_cast<double>(x[i]) * x[i];
                const float N = norm_of(b, lo / B);
                assert_true(N >= std::sqrt(sq) && std::nextafter(N, 0.0f) < std::sqrt(sq)); /* rounded up */
                const float step = N / static_cast<float>(s);
                for (size_t i = lo; i < hi; ++i) {
                    const double k = y[i] / step;
                    assert_true(std::fabs(k - std::nearbyint(k)) < 1e-3 && std::fabs(k) <= s + 1e-6);
                    if (y[i] != 0) assert_true(std::signbit(y[i]) == std::signbit(x[i]));
                    /* adjacent levels only: |x - y| < one step */
                    assert_true(std::fabs(y[i] - x[i]) < step * (1 + 1e-5));
                }
            }
        }
}

void given_many_streams_when_quantizing_expect_unbiased(void **) {
    const size_t n = 256;
    const int R = 2000;
    auto x = normal_data(n, 17, 1.0);
    x[3] = 6.0f;
    for (int bits : {2, 4, 8})
        for (uint32_t bucket : {0u, 64u}) {
            std::vector<double> sum(n, 0.0);
            std::vector<float> N((n + 63) / 64);
            for (int r = 0; r < R; ++r) {
                CodecParams p = params(bits, bucket, 3, 5000 + r);
                auto b = encode(p, x);
                for (size_t j = 0; j < (bucket ? n / bucket : 1); ++j) N[j] = norm_of(b, j);
                auto y = decode(p, b, n);
                for (size_t i = 0; i < n; ++i) sum[i] += y[i];
            }
            const double s = (1 << (bits - 1)) - 1;
            for (size_t i = 0; i < n; ++i) {
                const double Ni = N[bucket ? i / bucket : 0], step = Ni / s;
                const double r = std::fabs(x[i]) / step, f = r - std::floor(r);
                const double se = step * std::sqrt(f * (1 - f) / R), mean = sum[i] / R;
                if (std::fabs(mean - x[i]) > 4 * se + 1e-6 * step)
                    fail_msg("bits=%d bucket=%u i=%zu x=%g mean=%g se=%g", bits, bucket, i, x[i], mean, se);
            }
        }
}

/* Lemma 3.1: E||Q(v) - v||^2 <= min(d / s^2, sqrt(d) / s) ||v||^2 for a bucket of d elements. */
void given_many_streams_when_quantizing_expect_variance_bound(void **) {
    const int R = 200;
    for (size_t d : {64ul, 512ul, 4096ul})
        for (int bits = 2; bits <= 8; ++bits) {
            auto x = normal_data(d, 40 + d);
            double v2 = 0;
            for (float v : x) v2 += static_cast<double>(v) * v;
            double err = 0;
            for (int r = 0; r < R; ++r) {
                CodecParams p = params(bits, 0, 1, r);
                auto y = decode(p, encode(p, x), d);
                for (size_t i = 0; i < d; ++i)
                    err += (static_cast<double>(y[i]) - x[i]) * (static_cast<double>(y[i]) - x[i]);
            }
            err /= R;
            const double s = (1 << (bits - 1)) - 1;
            const double bound = std::min(d / (s * s), std::sqrt(static_cast<double>(d)) / s) * v2;
            if (err > bound) fail_msg("d=%zu bits=%d E||Q(v)-v||^2=%g bound=%g", d, bits, err, bound);
            if (d == 512 && (bits == 4 || bits == 8))
                print_message("qsgd d=%zu bits=%d: E||Q(v)-v||^2 / ||v||^2 = %.4f (bound %.4f)\n", d, bits, err / v2,
                              bound / v2);
        }
}

void given_same_or_other_stream_when_encoding_expect_same_or_other_bytes(void **) {
    auto x = normal_data(5000, 4);
    auto a = encode(params(4, 512, 1, 2), x);
    assert_true(a == encode(params(4, 512, 1, 2), x));
    assert_true(a != encode(params(4, 512, 1, 3), x));
    assert_true(a != encode(params(4, 512, 2, 2), x));
}

void given_nan_or_inf_when_encoding_expect_nonfinite(void **) {
    for (float bad : {NAN, INFINITY, -INFINITY})
        for (size_t pos : {0ul, 17ul, 999ul})
            for (uint32_t bucket : {0u, 100u}) {
                auto x = normal_data(1000, 3);
                x[pos] = bad;
                CodecParams p = params(4, bucket);
                for (SimdLevel l : levels()) {
                    p.simd = l;
                    Status st;
                    encode(p, x, &st);
                    assert_int_equal(static_cast<int>(st), static_cast<int>(Status::nonfinite));
                }
            }
    /* a norm beyond fp32 goes to the exact path too */
    std::vector<float> big(4, 3e38f);
    Status st;
    encode(params(4, 0), big, &st);
    assert_int_equal(static_cast<int>(st), static_cast<int>(Status::nonfinite));
}

void given_zero_or_tiny_buckets_when_encoding_expect_exact_zero_and_bounded(void **) {
    std::vector<float> x(1000, 0.0f);
    for (size_t i = 500; i < 600; ++i) x[i] = 1e-42f * static_cast<float>(i % 7); /* denormals */
    CodecParams p = params(4, 100);
    auto y = decode(p, encode(p, x), x.size());
    for (size_t i = 0; i < 500; ++i) assert_true(y[i] == 0.0f);
    for (size_t i = 500; i < 600; ++i) assert_true(std::fabs(y[i] - x[i]) <= norm_of(encode(p, x), 5) / 7 * 1.0001f);
}

void given_hostile_payload_when_decoding_expect_ok_or_corrupt(void **) {
    testutil::Rng r(7);
    const size_t n = 301;
    auto x = normal_data(n, 2);
    for (int bits : {2, 3, 8})
        for (uint32_t bucket : {0u, 50u}) {
            CodecParams p = params(bits, bucket);
            auto good = encode(p, x);
            const size_t nb = bucket ? (n + bucket - 1) / bucket : 1;
            std::vector<float> y(n);
            for (size_t len : {good.size() - 1, good.size() + 1}) {
                std::unique_ptr<uint8_t[]> m(new uint8_t[len]);
                std::memcpy(m.get(), good.data(), std::min(len, good.size()));
                assert_int_equal(static_cast<int>(ops().decode(m.get(), len, n, p, y.data())),
                                 static_cast<int>(Status::corrupt));
            }
            for (float bad : {NAN, INFINITY, -2.0f, -0.0f, 3.4e38f}) {
                std::vector<uint8_t> b(good);
                std::memcpy(b.data() + 4 * (nb - 1), &bad, 4);
                assert_int_equal(static_cast<int>(ops().decode(b.data(), b.size(), n, p, y.data())),
                                 static_cast<int>(Status::corrupt));
            }
            for (int it = 0; it < 200; ++it) {
                std::unique_ptr<uint8_t[]> m(new uint8_t[good.size()]);
                std::memcpy(m.get(), good.data(), good.size());
                for (size_t i = 4 * nb; i < good.size(); ++i) m[i] = static_cast<uint8_t>(r.next());
                Status s = ops().decode_add(m.get(), good.size(), n, p, y.data());
                assert_true(s == Status::ok || s == Status::corrupt);
                for (float v : y) assert_true(std::isfinite(v));
            }
        }
    CodecParams p = params(9, 0);
    assert_int_equal(static_cast<int>(ops().check(p)), static_cast<int>(Status::invalid_arg));
    p = params(1, 0);
    assert_int_equal(static_cast<int>(ops().check(p)), static_cast<int>(Status::invalid_arg));
    p = params(4, 0);
    p.variant = 1;
    assert_int_equal(static_cast<int>(ops().check(p)), static_cast<int>(Status::invalid_arg));
}

/* Phase 2 of the two-phase allreduce re-quantises a partial sum at 8 bits (s = 127), the
 * same bucket and variant: the second rounding, unbiased, adds little variance. */
void given_reduced_params_expect_8_bits_same_bucket(void **) {
    for (int bits : {2, 4, 8}) {
        CodecParams p = params(bits, 512), out;
        p.nranks = 4;
        assert_non_null(ops().reduced_params);
        assert_int_equal(static_cast<int>(ops().reduced_params(p, &out)), 0);
        assert_int_equal(out.bits, 8);
        assert_int_equal(out.param, 512);
        assert_int_equal(out.variant, 0);
        assert_int_equal(out.nranks, 4);
        assert_int_equal(static_cast<int>(ops().check(out)), 0);
    }
}

void given_sizes_when_asking_payload_expect_bits_plus_norms(void **) {
    const size_t n = 1 << 20;
    assert_int_equal(ops().max_payload(n, params(4, 512)), 4 * (n / 512) + n / 2);
    assert_int_equal(ops().max_payload(n, params(3, 0)), 4 + 3 * n / 8);
    assert_int_equal(ops().max_payload(0, params(8, 512)), 0);
}

/* ---------------------------------------------------------------- fp64 */
CodecParams params64(int bits, uint32_t bucket, uint64_t seed = 3, uint64_t stream = 9) {
    CodecParams p = params(bits, bucket, seed, stream);
    p.elem = Elem::f64;
    return p;
}

/* Independent reference: norm from long double sums (within 1e-12 of the codec's), then the
 * codec's norm for the codes; u24 = 256 a + b in full; fields written bit by bit. */
void given_doubles_when_quantizing_expect_reference_bytes_and_levels(void **) {
    for (size_t n : {1ul, 9ul, 64ul, 129ul, 2561ul, 40960ul * 3 + 77})
        for (int bits : {2, 4, 8})
            for (uint32_t bucket : {0u, 512u, 100u}) {
                auto x = normal_data<double>(n, n + bits);
                if (n > 10) x[3] = 1e300, x[4] = -1e-300, x[5] = -0.0;
                CodecParams p = params64(bits, bucket);
                const size_t nb = bucket && n > bucket ? (n + bucket - 1) / bucket : 1, B = nb <= 1 ? n : bucket;
                std::vector<uint8_t> ref;
                for (SimdLevel l : levels())
                    for (int t : {1, 2, 3}) {
                        p.threads = t;
                        p.simd = l;
                        auto b = encode(p, x);
                        if (ref.empty()) ref = b;
                        if (b != ref) fail_msg("n=%zu bits %d bucket %u level %d threads %d: other bytes", n, bits, bucket,
                                               static_cast<int>(l), t);
                    }
                const double sL = (1 << (bits - 1)) - 1;
                const philox::Stream st = philox::make_stream(p.seed, p.stream);
                std::vector<uint8_t> want(ref.size(), 0);
                std::memcpy(want.data(), ref.data(), 8 * nb);
                for (size_t j = 0; j < nb; ++j) {
                    long double sq = 0, mx = 0;
                    for (size_t i = j * B; i < std::min(n, (j + 1) * B); ++i)
                        sq += static_cast<long double>(x[i]) * x[i], mx = std::max<long double>(mx, std::fabs(x[i]));
                    const double N = norm_of<double>(ref, j), Nref = static_cast<double>(std::max(std::sqrt(sq), mx));
                    assert_true(std::fabs(N - Nref) <= 1e-12 * Nref && N >= mx);
                }
                for (size_t i = 0; i < n; ++i) {
                    const double N = norm_of<double>(ref, i / B);
                    int k = 0;
                    if (N > 0) {
                        const double r = sL * std::fabs(x[i]) / N, l = std::floor(r);
                        const double C = std::min(std::ceil((r - l) * 16777216.0), 16777216.0);
                        const uint32_t u24 = philox::draw16(st, i) * 256 + philox::refine8(st, i);
                        k = static_cast<int>(std::min(sL, l + (u24 < C ? 1 : 0)));
                        if (std::signbit(x[i])) k = -k;
                    }
                    const uint32_t f = static_cast<uint32_t>(k) & ((1u << bits) - 1);
                    for (int q = 0; q < bits; ++q)
                        if (f >> q & 1) want[8 * nb + (i * bits + q) / 8] |= static_cast<uint8_t>(1u << ((i * bits + q) % 8));
                }
                if (want != ref) fail_msg("n=%zu bits %d bucket %u: codes differ from the reference", n, bits, bucket);
                auto y = decode<double>(p, ref, n);
                for (size_t i = 0; i < n; ++i) {
                    const double step = norm_of<double>(ref, i / B) / sL, k = step > 0 ? y[i] / step : 0;
                    assert_true(std::fabs(k - std::round(k)) <= 1e-12 * sL && std::fabs(std::round(k)) <= sL);
                    assert_true(y[i] == std::round(k) * (norm_of<double>(ref, i / B) / sL)); /* decode: k (N / s) */
                }
            }
}

void given_many_streams_when_quantizing_doubles_expect_unbiased(void **) {
    const size_t n = 1000;
    for (double scale : {1e-200, 1e200})
        for (int bits : {2, 4}) {
            auto x = normal_data<double>(n, 17, scale);
            const int R = 3000;
            std::vector<double> sum(n, 0.0);
            CodecParams p = params64(bits, 100);
            std::vector<double> N(10);
            for (int r = 0; r < R; ++r) {
                p.stream = 100 + r;
                auto b = encode(p, x);
                for (size_t j = 0; j < 10; ++j) N[j] = norm_of<double>(b, j);
                auto y = decode<double>(p, b, n);
                for (size_t i = 0; i < n; ++i) sum[i] += y[i] / scale; /* in units of scale: no overflow */
            }
            const double sL = (1 << (bits - 1)) - 1;
            for (size_t i = 0; i < n; ++i) {
                const double step = N[i / 100] / sL / scale, rr = std::fabs(x[i] / scale) / step, f = rr - std::floor(rr);
                const double se = step * std::sqrt(f * (1 - f) / R), mean = sum[i] / R;
                if (std::fabs(mean - x[i] / scale) > 4.5 * se + 1e-9 * step)
                    fail_msg("scale %g bits %d element %zu: x=%g mean=%g se=%g", scale, bits, i, x[i] / scale, mean, se);
            }
        }
}

void given_double_payloads_when_summing_or_damaged_expect_sum_or_corrupt(void **) {
    const size_t n = 70001;
    CodecParams p = params64(4, 512);
    std::vector<std::vector<uint8_t>> b;
    std::vector<double> acc(n, 0.0);
    for (int r = 0; r < 3; ++r) {
        p.stream = 5 + r;
        b.push_back(encode(p, normal_data<double>(n, 30 + r)));
        assert_int_equal(static_cast<int>(ops().decode_add64(b[r].data(), b[r].size(), n, p, acc.data())), 0);
    }
    const uint8_t *in[3] = {b[0].data(), b[1].data(), b[2].data()};
    const size_t len[3] = {b[0].size(), b[1].size(), b[2].size()};
    for (int t : {1, 2}) {
        p.threads = t;
        std::vector<double> y(n, 4.0);
        assert_int_equal(static_cast<int>(ops().decode_sum64(in, len, 3, n, p, y.data())), 0);
        assert_true(testutil::same_bytes(y.data(), acc.data(), 8 * n));
    }
    std::vector<double> out(n, 5.0);
    auto expect_corrupt = [&](const std::vector<uint8_t> &q, const CodecParams &pp) {
        assert_int_equal(static_cast<int>(ops().decode64(q.data(), q.size(), n, pp, out.data())), static_cast<int>(Status::corrupt));
        assert_int_equal(static_cast<int>(ops().decode_add64(q.data(), q.size(), n, pp, out.data())), static_cast<int>(Status::corrupt));
        const uint8_t *in2[2] = {b[0].data(), q.data()};
        const size_t len2[2] = {b[0].size(), q.size()};
        assert_int_equal(static_cast<int>(ops().decode_sum64(in2, len2, 2, n, pp, out.data())), static_cast<int>(Status::corrupt));
        for (double v : out) assert_true(v == 5.0);
    };
    for (double bad : {-1.0, -0.0, static_cast<double>(NAN), static_cast<double>(INFINITY), 1.7e308}) {
        auto q = b[0];
        std::memcpy(q.data() + 8 * 3, &bad, 8);
        expect_corrupt(q, p);
    }
    auto q = b[0];
    q.pop_back();
    expect_corrupt(q, p);
    CodecParams pf = p;
    pf.elem = Elem::f32;
    expect_corrupt(b[0], pf);
    auto xf = normal_data(n, 3);
    expect_corrupt(encode(pf, xf), p);
    std::vector<float> f(n, 5.0f);
    assert_int_equal(static_cast<int>(ops().decode(b[0].data(), b[0].size(), n, pf, f.data())), static_cast<int>(Status::corrupt));
    size_t l;
    std::vector<uint8_t> o(ops().max_payload(n, p));
    auto x = normal_data<double>(n, 1);
    assert_int_equal(static_cast<int>(ops().encode64(x.data(), n, pf, o.data(), o.size(), &l)), static_cast<int>(Status::invalid_arg));
    assert_int_equal(static_cast<int>(ops().encode(xf.data(), n, p, o.data(), o.size(), &l)), static_cast<int>(Status::invalid_arg));
    std::vector<uint8_t> blob(blob_max_bytes(ops(), n, p));
    assert_int_equal(static_cast<int>(blob_encode(ops(), p, x.data(), n, blob.data(), blob.size(), &l)), 0);
    assert_int_equal(blob[9], 1);
    std::vector<double> y(n);
    assert_int_equal(static_cast<int>(blob_decode(blob.data(), l, n, y.data(), false, simd_detect(), 1)), 0);
    assert_int_equal(static_cast<int>(blob_decode(blob.data(), l, n, f.data(), false, simd_detect(), 1)), static_cast<int>(Status::corrupt));
    for (float v : f) assert_true(v == 5.0f);
    /* NaN/Inf, and norms whose top level would overflow a double */
    for (double bad : {static_cast<double>(NAN), static_cast<double>(INFINITY), 1.7e308}) {
        x[60000] = bad;
        Status st;
        encode(params64(4, 0), x, &st);
        assert_int_equal(static_cast<int>(st), static_cast<int>(Status::nonfinite));
    }
}

}  // namespace

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(given_any_path_and_threads_when_encoding_expect_identical_bytes),
        cmocka_unit_test(given_tiny_norm_buckets_when_encoding_expect_identical_bytes),
        cmocka_unit_test(given_encoded_bucket_when_decoding_expect_levels_of_norm),
        cmocka_unit_test(given_many_streams_when_quantizing_expect_unbiased),
        cmocka_unit_test(given_many_streams_when_quantizing_expect_variance_bound),
        cmocka_unit_test(given_same_or_other_stream_when_encoding_expect_same_or_other_bytes),
        cmocka_unit_test(given_nan_or_inf_when_encoding_expect_nonfinite),
        cmocka_unit_test(given_zero_or_tiny_buckets_when_encoding_expect_exact_zero_and_bounded),
        cmocka_unit_test(given_hostile_payload_when_decoding_expect_ok_or_corrupt),
        cmocka_unit_test(given_sizes_when_asking_payload_expect_bits_plus_norms),
        cmocka_unit_test(given_reduced_params_expect_8_bits_same_bucket),
        cmocka_unit_test(given_doubles_when_quantizing_expect_reference_bytes_and_levels),
        cmocka_unit_test(given_many_streams_when_quantizing_doubles_expect_unbiased),
        cmocka_unit_test(given_double_payloads_when_summing_or_damaged_expect_sum_or_corrupt),
    };
    return cmocka_run_group_tests_name("qsgd", tests, nullptr, nullptr);
}

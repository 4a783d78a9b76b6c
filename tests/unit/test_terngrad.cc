// SPDX-License-Identifier: BSD-3-Clause
/* terngrad: Philox known answers; identical bytes on every CPU path and thread count; values
 * only in {-s, 0, s}; unbiasedness (with and without clipping); scaler sharing; base3 and base4
 * decode alike; the phase-2 levels variant is exact for sums of P ternary vectors and
 * unbiased off the grid; the clip threshold is the whole buffer's (clip_at / clip_out);
 * reproducibility; NaN/Inf; buckets; hostile payloads. */
#include "terngrad/terngrad.h"

#include <algorithm>
#include <cfloat>
#include <memory>

#include "common/bucket_stats.h"
#include "common/fields.h"
#include "common/philox.h"
#include "testutil.h"

using namespace compmpi;
using testutil::gradient_data;

namespace {

template <class T = float> std::vector<T> normal_data(size_t n, uint64_t seed, double scale = 1e-3) {
    return testutil::normal_data<T>(n, seed, scale);
}

const CodecOps &ops() {
    return *codec_by_id(static_cast<int>(CodecId::terngrad));
}

using testutil::levels;

CodecParams params(uint8_t variant, uint32_t bucket, float clip, uint64_t seed = 7, uint64_t stream = 11) {
    CodecParams p;
    p.bits = 2;
    p.variant = variant;
    p.param = bucket;
    p.bucket = bucket;
    p.clip = clip;
    p.seed = seed;
    p.stream = stream;
    p.simd = simd_detect();
    p.threads = 1;
    return p;
}

/* encode / decode of floats or doubles (T) */
template <class T> std::vector<uint8_t> encode(const CodecParams &p, const std::vector<T> &x, Status *st = nullptr) {
    return testutil::encode_checked(ops(), p, x, st);
}
template <class T = float> std::vector<T> decode(const CodecParams &p, const std::vector<uint8_t> &b, size_t n) {
    return testutil::decode_checked<T>(ops(), p, b, n);
}

template <class T = float> T scaler(const std::vector<uint8_t> &b, size_t j) { return testutil::read_at<T>(b, j); }

/* Population sigma as the codec defines it (double, then c * sigma rounded to fp32). */
float clip_threshold(const float *x, size_t n, float c) {
    double sum = 0, sq = 0;
    for (size_t i = 0; i < n; ++i) {
        sum += x[i];
        sq += static_cast<double>(x[i]) * x[i];
    }
    double mean = sum / n, var = std::max(0.0, sq / n - mean * mean);
    float cs = static_cast<float>(c * std::sqrt(var));
    return c > 0 && cs > 0 ? cs : INFINITY;
}

void given_philox_when_known_answers_expect_random123_vectors(void **) {
    const uint32_t kat[3][10] = {
        {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
        {~0u, ~0u, ~0u, ~0u, ~0u, ~0u, 0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
        {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09, 0x94fdcceb, 0x5001e420,
         0x24126ea1},
    };
    for (const auto &k : kat) {
        uint32_t out[4];
        philox::block(k, k[4], k[5], out);
        for (int i = 0; i < 4; ++i) assert_int_equal(out[i], k[6 + i]);
    }
}

/* The SIMD generators give every element the word philox::word() defines. */
CMPI_AVX2 void check_groups_avx2(const philox::Stream &st, uint64_t q) {
    __m256i w[8];
    philox::group_avx2(st, philox::keys_avx2(st), q, w);
    alignas(32) uint32_t got[8];
    for (int l = 0; l < 4; ++l)
        for (int h = 0; h < 2; ++h) {
            _mm256_store_si256(reinterpret_cast<__m256i *>(got), w[2 * l + h]);
            for (int j = 0; j < 8; ++j) assert_int_equal(got[j], philox::word(st, 64 * q + 16 * l + 8 * h + j));
        }
}

CMPI_AVX512 void check_groups_avx512(const philox::Stream &st, uint64_t q) {
    __m512i w[8];
    philox::groups_avx512<2>(st, philox::keys_avx512(st), q, w);
    alignas(64) uint32_t got[16];
    for (int l = 0; l < 8; ++l) {
        _mm512_store_si512(got, w[l]);
        for (int j = 0; j < 16; ++j) assert_int_equal(got[j], philox::word(st, 64 * q + 16 * l + j));
    }
}

/* The two-part draw has the law of a 24-bit uniform: for every (a, b), the decision equals
 * [256 a + b < t], so exactly ceil(t) of the 2^24 values u24 = 256 a + b are hits. */
void given_every_a_and_b_when_deciding_expect_comparison_of_24_bit_uniform(void **) {
    std::vector<float> ts = {0.0f,     0.25f,       1.0f,       1.5f,        255.0f,     255.5f,     256.0f,
                             256.25f,  511.75f,     65535.5f,   65536.0f,    0x1p23f,    0x1p24f - 1, 0x1p24f - 0.5f,
                             0x1p24f, 0x1.000002p24f, 0x1p30f, 1e-30f,      3.14159f};
    uint64_t x = 99;
    for (int k = 0; k < 8; ++k) { /* random thresholds with a fraction */
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        ts.push_back(static_cast<float>((x >> 40) % (1u << 24)) + 0.375f);
    }
    for (float t : ts) {
        const uint32_t C = philox::ceil24(t);
        uint32_t hits = 0, bad = 0;
        for (uint32_t a = 0; a < 65536; ++a)
            for (uint32_t b = 0; b < 256; ++b) {
                const bool d = philox::below_ab(a, b, C);
                hits += d;
                bad += d != (static_cast<float>(256 * a + b) < t);
            }
        assert_int_equal(bad, 0);
        assert_int_equal(hits, t < 0x1p24f ? static_cast<uint32_t>(std::ceil(t)) : 1u << 24);
    }
    /* below() draws b = refine8 exactly where a does not decide */
    const philox::Stream st = philox::make_stream(7, 3);
    for (uint64_t i : {0ull, 1ull, 1000ull, 0xFFFFFFFFull, 0x123456789ull})
        for (uint32_t C : {0u, 1u, 255u, 256u, 257u, 0x123456u, 0x1000000u}) {
            const uint32_t b = philox::refine8(st, i);
            for (uint32_t a : {0u, (C >> 8) - 1, C >> 8, (C >> 8) + 1})
                if (a < 65536) assert_int_equal(philox::below(st, i, a, C), philox::below_ab(a, b, C));
        }
}

/* The 16-bit draws: the group and SIMD forms give every element its draw16. */
CMPI_AVX2 void check_draws_avx2(const philox::Stream &st, uint64_t q) {
    philox::Draws16Avx2 d;
    __m256i a[8];
    philox::draws16_avx2(st, philox::keys_avx2(st), q, d, a);
    alignas(32) uint32_t got[8];
    for (int l = 0; l < 4; ++l)
        for (int h = 0; h < 2; ++h) {
            _mm256_store_si256(reinterpret_cast<__m256i *>(got), a[2 * l + h]);
            for (int j = 0; j < 8; ++j) assert_int_equal(got[j], philox::draw16(st, 64 * q + 16 * l + 8 * h + j));
        }
}

CMPI_AVX512 void check_draws_avx512(const philox::Stream &st, uint64_t q) {
    philox::Draws16Avx512 d;
    for (uint64_t g = q; g < q + 5; ++g) { /* across a cached quad and into the next */
        __m512i a[4];
        philox::draws16_avx512(st, philox::keys_avx512(st), g, d, a);
        alignas(64) uint32_t got[16];
        for (int l = 0; l < 4; ++l) {
            _mm512_store_si512(got, a[l]);
            for (int j = 0; j < 16; ++j) assert_int_equal(got[j], philox::draw16(st, 64 * g + 16 * l + j));
        }
    }
}

/* SIMD decisions with thresholds that make every lane a tie (a == ceil(t) / 256), some
 * lanes with R = 0, and random thresholds: the scalar decision, lane by lane. */
CMPI_AVX2 void check_below_avx2(const philox::Stream &st, uint64_t e, const uint32_t *a, const float *t) {
    const __m256i hit = philox::below8_avx2(st, e, _mm256_loadu_si256(reinterpret_cast<const __m256i *>(a)),
                                            _mm256_loadu_ps(t));
    alignas(32) int32_t got[8];
    _mm256_store_si256(reinterpret_cast<__m256i *>(got), hit);
    for (int j = 0; j < 8; ++j)
        assert_int_equal(got[j] != 0, philox::below(st, e + j, a[j], philox::ceil24(t[j])));
}

CMPI_AVX512 void check_below_avx512(const philox::Stream &st, uint64_t e, const uint32_t *a, const float *t) {
    const __mmask16 hit = philox::below16_avx512(st, e, _mm512_loadu_si512(a), _mm512_loadu_ps(t));
    for (int j = 0; j < 16; ++j)
        assert_int_equal((hit >> j) & 1, philox::below(st, e + j, a[j], philox::ceil24(t[j])));
}

void given_simd_draws_and_ties_when_compared_expect_scalar_decisions(void **) {
    for (uint64_t seed : {0ull, 0xFFFFFFFFFFFFFFFFull})
        for (uint64_t stream : {0ull, 0x123456789ABCDEFull})
            for (uint64_t q : {0ull, 1ull, 2ull, 3ull, 77ull, 0x123456789ull}) {
                const philox::Stream st = philox::make_stream(seed, stream);
                uint32_t a[64];
                philox::group16_scalar(st, q, a);
                for (int j = 0; j < 64; ++j) {
                    assert_int_equal(a[j], philox::draw16(st, 64 * q + j));
                    /* half q % 2 of word l of block 16 (q / 2) + m, i.e. of word(64 (q / 2) + 16 l + m) */
                    const uint32_t w = philox::word(st, 64 * (q >> 1) + static_cast<uint64_t>(j));
                    assert_int_equal(a[j], (w >> (16 * (q & 1))) & 0xFFFFu);
                }
                if (simd_detect() >= SimdLevel::avx2) check_draws_avx2(st, q);
                if (simd_detect() >= SimdLevel::avx512) check_draws_avx512(st, q);
                /* thresholds: lane j ties when j % 3 != 2 (R = j * 37 % 256, 0 for j = 0), random else */
                float t[64];
                uint64_t x = q + 1;
                int ties = 0;
                for (int j = 0; j < 64; ++j) {
                    x = x * 6364136223846793005ull + 1442695040888963407ull;
                    const uint32_t R = static_cast<uint32_t>(j * 37 % 256);
                    if (j % 3 != 2) {
                        t[j] = static_cast<float>(256 * a[j] + R) - (R ? 0.5f : 0.0f); /* ceil = 256 a + R */
                        ties += R != 0;
                    } else {
                        t[j] = static_cast<float>((x >> 40) % (1u << 24)) + 0.5f;
                    }
                }
                assert_true(ties > 30);
                for (int k = 0; k < 64; k += 8)
                    if (simd_detect() >= SimdLevel::avx2) check_below_avx2(st, 64 * q + k, a + k, t + k);
                for (int k = 0; k < 64; k += 16)
                    if (simd_detect() >= SimdLevel::avx512) check_below_avx512(st, 64 * q + k, a + k, t + k);
            }
}

void given_simd_generators_when_compared_expect_scalar_words(void **) {
    for (uint64_t seed : {0ull, 1ull, 0xFFFFFFFFFFFFFFFFull})
        for (uint64_t stream : {0ull, 5ull, 0x123456789ABCDEFull})
            for (uint64_t q : {0ull, 1ull, 77ull, 0xFFFFFFFull, 0x123456789ull, 0x03FFFFFFFFFFFFFEull}) {
                const philox::Stream st = philox::make_stream(seed, stream);
                uint32_t w[64];
                philox::group_scalar(st, q, w);
                for (int j = 0; j < 64; ++j) assert_int_equal(w[j], philox::word(st, 64 * q + j));
                if (simd_detect() >= SimdLevel::avx2) check_groups_avx2(st, q);
                if (simd_detect() >= SimdLevel::avx512) check_groups_avx512(st, q);
            }
}

void given_any_path_and_threads_when_encoding_expect_identical_bytes(void **) {
    if (levels().size() == 1) print_message("note: this CPU has no AVX2: only the scalar path is compared\n");
    const size_t sizes[] = {0, 1, 3, 4, 5, 63, 64, 65, 129, 1000, 2561, 40960 * 3 + 77, 300007};
    for (size_t n : sizes)
        for (uint8_t variant : {terngrad::kBase4, terngrad::kBase3})
            for (uint32_t bucket : {0u, 64u, 500u, 8192u, 100000u}) /* 64, 8192: statistics fused per block */
                for (float clip : {0.0f, 2.5f})
                    for (double shared : {0.0, 1e3}) {
                        if (bucket && shared > 0) continue;
                        if (n > 5000 && (clip == 0.0f || shared > 0)) continue; /* keep it fast */
                        auto x = gradient_data(n, 100 + n);
                        CodecParams p = params(variant, bucket, clip);
                        p.shared_scale = shared;
                        p.simd = SimdLevel::scalar;
                        auto ref = encode(p, x);
                        for (SimdLevel l : levels())
                            for (int threads : {1, 2, 4}) {
                                p.simd = l;
                                p.threads = threads;
                                auto got = encode(p, x);
                                if (ref != got)
                                    fail_msg("n=%zu variant=%d bucket=%u clip=%g shared=%g simd=%s threads=%d", n,
                                             variant, bucket, clip, shared, simd_name(l), threads);
                            }
                    }
}

/* Scalers below 2^-60 take the prescaled path (t = (|g| 2^64) (2^24 / (s 2^64))); every SIMD
 * path must write the scalar reference's bytes there as well. */
void given_tiny_scalers_when_encoding_expect_identical_bytes(void **) {
    for (double scale : {1e-25, 1e-38}) {
        auto x = normal_data(40960 + 4099, 41, scale);
        for (uint8_t variant : {terngrad::kBase4, terngrad::kBase3})
            for (uint32_t bucket : {0u, 64u, 8192u})
                for (float clip : {0.0f, 2.5f}) {
                    CodecParams p = params(variant, bucket, clip);
                    p.simd = SimdLevel::scalar;
                    auto ref = encode(p, x);
                    float s0;
                    std::memcpy(&s0, ref.data(), 4);
                    assert_true(s0 > 0 && s0 < 0x1p-60f);
                    for (SimdLevel l : levels())
                        for (int threads : {1, 2}) {
                            p.simd = l;
                            p.threads = threads;
                            if (ref != encode(p, x))
                                fail_msg("scale=%g variant=%d bucket=%u clip=%g simd=%s threads=%d", scale, variant,
                                         bucket, clip, simd_name(l), threads);
                        }
                }
    }
}

void given_any_path_and_threads_when_decoding_expect_identical_floats(void **) {
    for (size_t n : {1ul, 7ul, 100ul, 1001ul, 200003ul})
        for (uint8_t variant : {terngrad::kBase4, terngrad::kBase3})
            for (uint32_t bucket : {0u, 77u, 4096u}) {
                auto x = gradient_data(n, 5 + n);
                CodecParams p = params(variant, bucket, 2.5f);
                auto b = encode(p, x);
                p.simd = SimdLevel::scalar;
                auto ref = decode(p, b, n);
                std::vector<float> acc0(n), refacc(n);
                for (size_t i = 0; i < n; ++i) acc0[i] = refacc[i] = static_cast<float>(i % 13) - 6.0f;
                refacc[0] = -0.0f; /* -0 + 0 must stay as the scalar path leaves it */
                acc0[0] = -0.0f;
                assert_int_equal(static_cast<int>(ops().decode_add(b.data(), b.size(), n, p, refacc.data())), 0);
                for (size_t i = 0; i < n; ++i) assert_true(refacc[i] == acc0[i] + ref[i]);
                for (SimdLevel l : levels())
                    for (int threads : {1, 3}) {
                        p.simd = l;
                        p.threads = threads;
                        auto got = decode(p, b, n);
                        assert_true(testutil::same_bytes(ref.data(), got.data(), 4 * n));
                        std::vector<float> acc = acc0;
                        assert_int_equal(static_cast<int>(ops().decode_add(b.data(), b.size(), n, p, acc.data())), 0);
                        assert_true(testutil::same_bytes(refacc.data(), acc.data(), 4 * n));
                    }
            }
}

void given_encoded_buffer_when_decoding_expect_only_minus_s_zero_s(void **) {
    const size_t n = 50000;
    auto x = gradient_data(n, 9);
    for (uint8_t variant : {terngrad::kBase4, terngrad::kBase3})
        for (float clip : {0.0f, 2.5f}) {
            CodecParams p = params(variant, 0, clip);
            auto b = encode(p, x);
            const float s = scaler(b, 0);
            float mx = 0;
            for (float v : x) mx = std::max(mx, std::fabs(v));
            assert_true(s == std::min(mx, clip_threshold(x.data(), n, clip)));
            auto y = decode(p, b, n);
            size_t nz = 0;
            for (size_t i = 0; i < n; ++i) {
                assert_true(y[i] == 0.0f || y[i] == s || y[i] == -s);
                if (y[i] != 0.0f) {
                    ++nz;
                    assert_true(std::signbit(y[i]) == std::signbit(x[i])); /* sign kept */
                }
            }
            assert_true(nz > 0);
        }
}

void given_base3_and_base4_when_decoding_expect_same_values(void **) {
    for (size_t n : {1ul, 4ul, 5ul, 6ul, 999ul, 100003ul})
        for (uint32_t bucket : {0u, 33u}) {
            auto x = gradient_data(n, 3 * n);
            auto y4 =
                decode(params(terngrad::kBase4, bucket, 2.5f), encode(params(terngrad::kBase4, bucket, 2.5f), x), n);
            auto b3 = encode(params(terngrad::kBase3, bucket, 2.5f), x);
            auto y3 = decode(params(terngrad::kBase3, bucket, 2.5f), b3, n);
            assert_true(testutil::same_bytes(y4.data(), y3.data(), 4 * n));
            const size_t nb = bucket ? (n + bucket - 1) / bucket : 1;
            assert_int_equal(b3.size(), 4 * nb + (n + 4) / 5);
        }
}

/* mean over R streams of each decoded element is within 4 standard errors of the (clipped) input */
void check_unbiased(const std::vector<float> &x, const CodecParams &p0, int R) {
    const size_t n = x.size();
    std::vector<double> sum(n, 0.0);
    float s = 0;
    for (int r = 0; r < R; ++r) {
        CodecParams p = p0;
        p.stream = 1000 + r;
        auto b = encode(p, x);
        s = scaler(b, 0);
        auto y = decode(p, b, n);
        for (size_t i = 0; i < n; ++i) sum[i] += y[i];
    }
    float cs = clip_threshold(x.data(), n, p0.clip);
    if (p0.shared_scale > 0) cs = std::min(cs, s);
    size_t clipped = 0;
    for (size_t i = 0; i < n; ++i) {
        const double g = std::copysign(std::min(std::fabs(x[i]), cs), x[i]);
        clipped += std::fabs(x[i]) > cs;
        const double q = std::fabs(g) / s, se = s * std::sqrt(q * (1 - q) / R);
        const double mean = sum[i] / R;
        if (std::fabs(mean - g) > 4 * se + 1e-6 * s)
            fail_msg("element %zu: x=%g clipped=%g mean=%g se=%g s=%g", i, x[i], g, mean, se, s);
    }
    if (p0.clip > 0) assert_true(clipped > 0); /* the data do exercise clipping */
}

void given_many_streams_when_ternarizing_expect_unbiased(void **) {
    testutil::Rng r(77);
    std::vector<float> x(256);
    for (auto &v : x) v = static_cast<float>(r.normal());
    x[10] = 9.0f; /* outliers beyond 2.5 sigma */
    x[20] = -7.5f;
    check_unbiased(x, params(terngrad::kBase4, 0, 0.0f), 2000);
    check_unbiased(x, params(terngrad::kBase4, 0, 2.5f), 2000);
    CodecParams p = params(terngrad::kBase3, 0, 2.5f);
    p.shared_scale = 4.0; /* a larger agreed scaler (another rank's) */
    check_unbiased(x, p, 2000);
}

void given_shared_scale_when_encoding_expect_agreed_grid(void **) {
    const size_t n = 10000;
    auto x = gradient_data(n, 21);
    CodecParams p = params(terngrad::kBase4, 0, 2.5f);
    double stat = -1;
    assert_int_equal(static_cast<int>(ops().prepare(x.data(), n, p, &stat)), 0);
    auto b0 = encode(p, x);
    assert_true(static_cast<float>(stat) == scaler(b0, 0)); /* prepare = the local scaler */
    p.shared_scale = 3.0 * stat + 1e-30;                    /* not an fp32 value: rounded up */
    auto b = encode(p, x);
    const float s = scaler(b, 0);
    assert_true(static_cast<double>(s) >= p.shared_scale && std::nextafter(s, 0.0f) < p.shared_scale);
    for (float v : decode(p, b, n)) assert_true(v == 0.0f || std::fabs(v) == s);
    /* NaN/Inf/negative shared scales are caller errors */
    for (double bad : {-1.0, static_cast<double>(NAN), static_cast<double>(INFINITY)}) {
        p.shared_scale = bad;
        Status st;
        encode(p, x, &st);
        assert_int_equal(static_cast<int>(st), static_cast<int>(Status::invalid_arg));
    }
}

/* Phase 2: P ranks' ternary contributions on one grid, summed in rank order (phase 1),
 * re-encoded with reduced_params: exactly s * k with k the integer sum of the codes. */
void given_sum_of_P_ternary_vectors_when_levels_expect_exact(void **) {
    const size_t n = 70001;
    for (int P = 2; P <= 8; ++P) {
        CodecParams p = params(terngrad::kBase4, 0, 2.5f);
        std::vector<std::vector<float>> x(P);
        double shared = 0;
        for (int r = 0; r < P; ++r) {
            x[r] = normal_data(n, 500 + r);
            double st;
            assert_int_equal(static_cast<int>(ops().prepare(x[r].data(), n, p, &st)), 0);
            shared = std::max(shared, st);
        }
        p.shared_scale = shared;
        std::vector<float> acc(n);
        std::vector<int> k(n, 0);
        float s = 0;
        for (int r = 0; r < P; ++r) {
            p.stream = 40 + r;
            auto b = encode(p, x[r]);
            s = scaler(b, 0);
            auto y = decode(p, b, n);
            for (size_t i = 0; i < n; ++i) k[i] += y[i] == 0.0f ? 0 : (y[i] > 0 ? 1 : -1);
            if (r == 0)
                acc = y;
            else
                assert_int_equal(static_cast<int>(ops().decode_add(b.data(), b.size(), n, p, acc.data())), 0);
        }
        CodecParams p2 = p;
        p2.nranks = P;
        assert_int_equal(static_cast<int>(ops().reduced_params(p, &p2)), 0);
        assert_int_equal(p2.variant, terngrad::kLevels);
        assert_int_equal(p2.bits, static_cast<int>(std::ceil(std::log2(2.0 * P + 1))));
        assert_int_equal(static_cast<int>(ops().check(p2)), 0);
        auto b2 = encode(p2, acc);
        assert_true(scaler(b2, 0) == s);
        assert_int_equal(b2.size(), 4 + (n * p2.bits + 7) / 8);
        for (SimdLevel l : levels()) {
            p2.simd = l;
            auto y2 = decode(p2, b2, n);
            for (size_t i = 0; i < n; ++i) {
                const float want = static_cast<float>(k[i] * static_cast<double>(s));
                if (y2[i] != want) fail_msg("P=%d i=%zu k=%d got=%g want=%g", P, i, k[i], y2[i], want);
                assert_true(std::fabs(y2[i] - acc[i]) <= 4e-7f * P * s); /* the fp32 sum was already k s */
            }
        }
        /* nranks on the input only works too */
        CodecParams p3, in = p;
        in.nranks = P;
        assert_int_equal(static_cast<int>(ops().reduced_params(in, &p3)), 0);
        assert_int_equal(p3.bits, p2.bits);
    }
    assert_int_equal(terngrad::level_bits(1), 2);
    assert_int_equal(terngrad::level_bits(3), 3);
    assert_int_equal(terngrad::level_bits(4), 4);
    assert_int_equal(terngrad::level_bits(32767), 16);
    assert_int_equal(terngrad::level_bits(32768), 0);
}

/* Levels off the shared grid (no shared scale, or buckets: every rank has its own scalers):
 * 2K+1 levels of step s_j = max|x_j| / K (rounded up) and unbiased stochastic rounding, so
 * phase 2 keeps E[result] = the sum it re-encodes. Every value is one of the two levels
 * around x, and the mean over many streams is within 4 standard errors of x. */
void given_levels_off_grid_expect_unbiased_stochastic_rounding(void **) {
    const size_t n = 3000;
    auto x = normal_data(n, 8);
    x[5] = 0.5f;
    for (int bits : {3, 5, 12})
        for (uint32_t bucket : {0u, 1000u}) {
            CodecParams p = params(terngrad::kLevels, bucket, 0.0f);
            p.bits = static_cast<uint8_t>(bits);
            const double K = (1 << (bits - 1)) - 1;
            const int R = 400;
            std::vector<double> sum(n, 0.0), sq(n, 0.0);
            for (int r = 0; r < R; ++r) {
                p.stream = 500 + r;
                auto b = encode(p, x);
                for (SimdLevel l : levels()) {
                    p.simd = l;
                    auto y = decode(p, b, n);
                    for (size_t i = 0; i < n; ++i) {
                        const float s = scaler(b, bucket ? i / bucket : 0);
                        float mx = 0;
                        const size_t lo = bucket ? i / bucket * bucket : 0, hi = bucket ? std::min(n, lo + bucket) : n;
                        for (size_t k = lo; k < hi && i % 997 == 0; ++k) mx = std::max(mx, std::fabs(x[k]));
                        if (i % 997 == 0) assert_true(s >= mx / K && std::nextafter(s, 0.0f) < mx / K);
                        const double k = y[i] / s;
                        assert_true(std::fabs(k - std::round(k)) <= 1e-6 * K && std::fabs(std::round(k)) <= K);
                        assert_true(std::fabs(y[i] - x[i]) < s * (1 + 1e-6)); /* a neighbouring level */
                        if (l == SimdLevel::scalar) sum[i] += y[i], sq[i] += static_cast<double>(y[i]) * y[i];
                    }
                }
            }
            /* the standard error of a Bernoulli(frac(x / s)) step of s, known exactly */
            auto b0 = encode(p, x);
            double z2 = 0, dsum = 0, vsum = 0;
            for (size_t i = 0; i < n; ++i) {
                const double s = scaler(b0, bucket ? i / bucket : 0), q = x[i] / s, f = q - std::floor(q);
                const double mean = sum[i] / R, se = s * std::sqrt(f * (1 - f) / R);
                if (se == 0) {
                    assert_true(std::fabs(mean - x[i]) <= 1e-6 * std::fabs(x[i])); /* x on a level */
                    continue;
                }
                z2 += (mean - x[i]) * (mean - x[i]) / (se * se);
                dsum += mean - x[i], vsum += se * se;
            }
            /* aggregated: the total bias within 4 standard errors (per-element z has heavy
             * tails where frac(x / s) is tiny) */
            if (std::fabs(dsum) > 4 * std::sqrt(vsum)) fail_msg("bits %d bucket %u: total bias %g, se %g", bits, bucket,
                                                                 dsum, std::sqrt(vsum));
            assert_true(z2 / n < 1.2); /* mean z^2 ~ 1 for an unbiased rounding */
        }
    /* levels whose largest field would overflow fp32 are left to the exact path */
    CodecParams p = params(terngrad::kLevels, 0, 0.0f);
    p.bits = 3;
    Status st;
    encode(p, gradient_data(100, 1), &st); /* holds +-3.4e38 */
    assert_int_equal(static_cast<int>(st), static_cast<int>(Status::nonfinite));
}

void given_same_or_other_stream_when_encoding_expect_same_or_other_bytes(void **) {
    auto x = normal_data(5000, 4);
    auto a = encode(params(terngrad::kBase4, 0, 2.5f, 1, 2), x);
    assert_true(a == encode(params(terngrad::kBase4, 0, 2.5f, 1, 2), x));
    assert_true(a != encode(params(terngrad::kBase4, 0, 2.5f, 1, 3), x));
    assert_true(a != encode(params(terngrad::kBase4, 0, 2.5f, 2, 2), x));
}

/* The statistics' NaN/Inf flag, which the SIMD loops derive from the sums when they compute
 * moments: every path flags one NaN, Inf or -Inf (or an Inf and a -Inf) at any position, in
 * the vector loop or the tail, and no finite data, however large. */
void given_nonfinite_or_huge_values_when_taking_statistics_expect_flag_of_scalar_path(void **) {
    const size_t n = bstats::kSeg + 21; /* a full segment and a tail */
    auto x = gradient_data(n, 8);
    for (SimdLevel l : levels()) {
        for (float bad : {NAN, INFINITY, -INFINITY})
            for (size_t pos : {size_t{0}, size_t{5}, size_t{16}, size_t{1000}, bstats::kSeg - 1, bstats::kSeg + 3, n - 1}) {
                auto y = x;
                y[pos] = bad;
                for (bool mom : {false, true}) assert_true(bstats::moments_of(y.data(), n, mom, l).bad);
                assert_true(bstats::sumsq_of(y.data(), n, l).bad);
            }
        auto y = x;
        y[3] = INFINITY, y[19] = -INFINITY; /* same lane: the sum is NaN */
        assert_true(bstats::moments_of(y.data(), n, true, l).bad);
        std::vector<float> big(n, FLT_MAX);
        for (size_t i = 1; i < n; i += 2) big[i] = -FLT_MAX;
        for (bool mom : {false, true}) assert_false(bstats::moments_of(big.data(), n, mom, l).bad);
        assert_false(bstats::sumsq_of(big.data(), n, l).bad);
        assert_false(bstats::moments_of(x.data(), n, true, l).bad);
    }
}

void given_nan_or_inf_when_encoding_expect_nonfinite(void **) {
    for (float bad : {NAN, INFINITY, -INFINITY})
        for (size_t pos : {0ul, 17ul, 999ul})
            for (uint8_t variant : {terngrad::kBase4, terngrad::kBase3, terngrad::kLevels})
                for (uint32_t bucket : {0u, 100u}) {
                    auto x = gradient_data(1000, 3);
                    x[pos] = bad;
                    CodecParams p = params(variant, bucket, 2.5f);
                    if (variant == terngrad::kLevels) p.bits = 4;
                    for (SimdLevel l : levels()) {
                        p.simd = l;
                        Status st;
                        encode(p, x, &st);
                        assert_int_equal(static_cast<int>(st), static_cast<int>(Status::nonfinite));
                        double stat;
                        assert_int_equal(static_cast<int>(ops().prepare(x.data(), x.size(), p, &stat)),
                                         static_cast<int>(Status::nonfinite));
                    }
                    std::vector<uint8_t> blob(blob_max_bytes(ops(), 1000, p));
                    size_t len;
                    assert_int_equal(
                        static_cast<int>(blob_encode(ops(), p, x.data(), 1000, blob.data(), blob.size(), &len)),
                        static_cast<int>(Status::nonfinite));
                    BlobInfo info;
                    assert_int_equal(static_cast<int>(blob_peek(blob.data(), len, 1000, &info)), 0);
                    assert_int_equal(info.flags, BLOB_NONFINITE);
                }
}

void given_buckets_when_encoding_expect_one_scaler_per_bucket(void **) {
    for (size_t B : {100, 128}) { /* 128: statistics fused per block */
        const size_t n = 1050, nb = (n + B - 1) / B;
        auto x = gradient_data(n, 31);
        for (size_t i = 3 * B; i < 4 * B; ++i) x[i] *= 1000.0f; /* one loud bucket */
        CodecParams p = params(terngrad::kBase4, static_cast<uint32_t>(B), 2.5f);
        auto b = encode(p, x);
        assert_int_equal(b.size(), 4 * nb + (n + 3) / 4);
        auto y = decode(p, b, n);
        for (size_t j = 0; j < nb; ++j) {
            const size_t lo = j * B, hi = std::min(n, lo + B);
            float mx = 0;
            for (size_t i = lo; i < hi; ++i) mx = std::max(mx, std::fabs(x[i]));
            const float s = scaler(b, j);
            /* clipped at c sigma of the whole buffer (the layer, paper eq. 21), not of the bucket */
            assert_true(s == std::min(mx, clip_threshold(x.data(), n, 2.5f)));
            for (size_t i = lo; i < hi; ++i) assert_true(y[i] == 0.0f || std::fabs(y[i]) == s);
        }
        assert_true(scaler(b, 3) > 100 * scaler(b, 2));
        /* through the blob layer: the bucket travels in the header */
        std::vector<uint8_t> blob(blob_max_bytes(ops(), n, p));
        size_t len;
        assert_int_equal(static_cast<int>(blob_encode(ops(), p, x.data(), n, blob.data(), blob.size(), &len)), 0);
        std::vector<float> z(n);
        assert_int_equal(static_cast<int>(blob_decode(blob.data(), len, n, z.data(), false, simd_detect(), 1)), 0);
        assert_true(testutil::same_bytes(y.data(), z.data(), 4 * n));
        /* a bucket that is not in param is a caller error */
        p.param = 0;
        Status st;
        encode(p, x, &st);
        assert_int_equal(static_cast<int>(st), static_cast<int>(Status::invalid_arg));
    }
}

/* The collective decides the clip threshold once per buffer: prepare() reports c sigma of
 * the whole buffer through clip_out, and a chunk encoded with clip_at is clipped at it, not
 * at its own sigma (the chunk here has a sigma 100x the buffer's rest). */
void given_clip_at_when_encoding_chunk_expect_buffer_threshold(void **) {
    const size_t n = 8192;
    auto x = normal_data(n, 41);
    for (size_t i = 4096; i < 4096 + 256; ++i) x[i] *= 100.0f; /* a loud chunk */
    for (uint32_t bucket : {0u, 64u, 100u}) {
        CodecParams p = params(terngrad::kBase4, bucket, 2.5f);
        float cs = 0;
        p.clip_out = &cs;
        double stat = 0;
        assert_int_equal(static_cast<int>(ops().prepare(x.data(), n, p, &stat)), 0);
        const float want = clip_threshold(x.data(), n, 2.5f);
        assert_true(cs == want);
        float mx = 0;
        for (float v : x) mx = std::max(mx, std::min(std::fabs(v), want));
        assert_true(static_cast<float>(stat) == mx); /* eq. 4's local scaler: max |clipped g| */
        p.clip_out = nullptr;
        p.clip_at = cs;
        const std::vector<float> chunk(x.begin() + 4096, x.begin() + 4096 + 512);
        auto b = encode(p, chunk);
        const size_t nb = bucket ? (chunk.size() + bucket - 1) / bucket : 1;
        for (size_t j = 0; j < nb; ++j) {
            float m = 0;
            for (size_t i = j * (bucket ? bucket : chunk.size()); i < std::min(chunk.size(), (j + 1) * (bucket ? bucket : chunk.size())); ++i)
                m = std::max(m, std::fabs(chunk[i]));
            assert_true(scaler(b, j) == std::min(m, cs));
        }
        assert_true(cs < clip_threshold(chunk.data(), chunk.size(), 2.5f) / 2); /* the chunk's own is larger */
        /* no clipping: clip_at = +inf */
        p.clip_at = INFINITY;
        auto b2 = encode(p, chunk);
        float m0 = 0;
        for (size_t i = 0; i < (bucket ? std::min<size_t>(bucket, chunk.size()) : chunk.size()); ++i)
            m0 = std::max(m0, std::fabs(chunk[i]));
        assert_true(scaler(b2, 0) == m0);
    }
}

void given_constant_buffer_with_clipping_expect_not_zeroed(void **) {
    std::vector<float> x(1000, 0.25f);
    auto b = encode(params(terngrad::kBase4, 0, 2.5f), x);
    assert_true(scaler(b, 0) == 0.25f); /* sigma = 0: no clipping, every value is s */
    for (float v : decode(params(terngrad::kBase4, 0, 2.5f), b, x.size())) assert_true(v == 0.25f);
    std::vector<float> z(1000, 0.0f);
    for (float v : decode(params(terngrad::kBase3, 0, 2.5f), encode(params(terngrad::kBase3, 0, 2.5f), z), z.size()))
        assert_true(v == 0.0f);
}

void given_hostile_payload_when_decoding_expect_ok_or_corrupt(void **) {
    testutil::Rng r(99);
    const size_t n = 257;
    auto x = normal_data(n, 1);
    for (uint8_t variant : {terngrad::kBase4, terngrad::kBase3, terngrad::kLevels})
        for (uint32_t bucket : {0u, 10u}) {
            CodecParams p = params(variant, bucket, 2.5f);
            if (variant == terngrad::kLevels) p.bits = 5;
            auto good = encode(p, x);
            const size_t nb = bucket ? (n + bucket - 1) / bucket : 1;
            std::vector<float> y(n);
            /* wrong lengths */
            for (size_t len : {good.size() - 1, good.size() + 1, size_t{0}}) {
                std::vector<uint8_t> b(good);
                b.resize(len);
                std::unique_ptr<uint8_t[]> m(new uint8_t[len ? len : 1]);
                if (len) std::memcpy(m.get(), b.data(), len);
                assert_int_equal(static_cast<int>(ops().decode(m.get(), len, n, p, y.data())),
                                 static_cast<int>(Status::corrupt));
            }
            /* bad scalers */
            for (float bad : {NAN, INFINITY, -1.0f, -0.0f}) {
                std::vector<uint8_t> b(good);
                std::memcpy(b.data() + 4 * (nb - 1), &bad, 4);
                assert_int_equal(static_cast<int>(ops().decode(b.data(), b.size(), n, p, y.data())),
                                 static_cast<int>(Status::corrupt));
            }
            /* invalid codes */
            if (variant != terngrad::kLevels) {
                std::vector<uint8_t> b(good);
                b[4 * nb + 3] = variant == terngrad::kBase4 ? 0x02 : 243;
                assert_int_equal(static_cast<int>(ops().decode(b.data(), b.size(), n, p, y.data())),
                                 static_cast<int>(Status::corrupt));
            }
            /* random codes: ok or corrupt, never out of bounds (valgrind) */
            for (int it = 0; it < 200; ++it) {
                std::unique_ptr<uint8_t[]> m(new uint8_t[good.size()]);
                std::memcpy(m.get(), good.data(), good.size());
                for (size_t i = 4 * nb; i < good.size(); ++i) m[i] = static_cast<uint8_t>(r.next());
                Status s = ops().decode_add(m.get(), good.size(), n, p, y.data());
                assert_true(s == Status::ok || s == Status::corrupt);
            }
        }
    /* bad header parameters */
    CodecParams p = params(terngrad::kBase4, 0, 0.0f);
    p.bits = 3;
    assert_int_equal(static_cast<int>(ops().check(p)), static_cast<int>(Status::invalid_arg));
    p.bits = 2;
    p.variant = 3;
    assert_int_equal(static_cast<int>(ops().check(p)), static_cast<int>(Status::invalid_arg));
    p.variant = terngrad::kLevels;
    p.bits = 17;
    assert_int_equal(static_cast<int>(ops().check(p)), static_cast<int>(Status::invalid_arg));
}

void given_sizes_when_asking_payload_expect_16x_and_20x(void **) {
    const size_t n = 1 << 20;
    CodecParams p = params(terngrad::kBase4, 0, 2.5f);
    assert_int_equal(ops().max_payload(n, p), 4 + n / 4);
    p.variant = terngrad::kBase3;
    assert_int_equal(ops().max_payload(n, p), 4 + (n + 4) / 5);
    p.param = 512;
    assert_int_equal(ops().max_payload(n, p), 4 * (n / 512) + (n + 4) / 5);
    assert_int_equal(ops().max_payload(0, p), 0);
}

/* The collective's case: one bucket, the agreed scaler (eq. 4) and the buffer's clip
 * threshold given (clip_at), so the AVX-512 encoder makes no statistics pass, and phase 2's
 * levels on the shared grid. Every path and thread count writes the scalar path's bytes,
 * also for values off the grid and beyond K s (clamped), and NaN/Inf still give nonfinite. */
void given_shared_scale_and_clip_at_when_encoding_expect_scalar_bytes(void **) {
    const size_t sizes[] = {1, 5, 63, 64, 65, 127, 128, 129, 1000, 2561, 40960 + 77, 300007};
    for (size_t n : sizes) {
        auto x = gradient_data(n, 300 + n);
        for (uint8_t variant : {terngrad::kBase4, terngrad::kBase3})
            for (float clip : {0.0f, 2.5f}) {
                CodecParams p = params(variant, 0, clip);
                double stat = 0;
                float cs = 0;
                p.clip_out = &cs;
                assert_int_equal(static_cast<int>(ops().prepare(x.data(), n, p, &stat)), 0);
                p.clip_out = nullptr;
                for (int c = 0; c < 3; ++c) {
                    /* none, the buffer's own threshold, one below the scaler (clips more) */
                    p.clip_at = c == 0 ? 0.0f : (c == 1 ? cs : static_cast<float>(stat * 0.25));
                    if (c == 1 && !(cs > 0 && std::isfinite(cs))) continue;
                    for (double shared : {stat, 3.0 * stat + 1e-30, 0.5 * stat}) {
                        if (!(shared > 0)) continue;
                        p.shared_scale = shared;
                        p.simd = SimdLevel::scalar;
                        p.threads = 1;
                        auto ref = encode(p, x);
                        for (SimdLevel l : levels())
                            for (int threads : {1, 2}) {
                                p.simd = l;
                                p.threads = threads;
                                if (encode(p, x) != ref)
                                    fail_msg("n=%zu variant=%d clip=%g clip_at=%g shared=%g simd=%s threads=%d", n,
                                             variant, clip, p.clip_at, shared, simd_name(l), threads);
                            }
                    }
                }
            }
        /* levels: a sum of P ternaries on the grid, then arbitrary values (off the grid,
         * beyond K s, -0, subnormal) */
        for (int P : {2, 3, 7, 100}) {
            CodecParams p = params(terngrad::kBase4, 0, 2.5f);
            p.nranks = P;
            CodecParams p2;
            assert_int_equal(static_cast<int>(ops().reduced_params(p, &p2)), 0);
            const float s = 0.37f;
            p2.shared_scale = s;
            testutil::Rng r(900 + n + P);
            for (int kind = 0; kind < 2; ++kind) {
                std::vector<float> v(n);
                for (size_t i = 0; i < n; ++i) {
                    const int k = static_cast<int>(r.next() % (2 * P + 1)) - P;
                    v[i] = kind == 0 ? static_cast<float>(k) * s
                                     : static_cast<float>(r.normal() * s * (P + 2));
                }
                if (kind == 1 && n > 3) v[1] = -0.0f, v[2] = 1e-40f, v[3] = 0.5f * s; /* a tie: to even */
                p2.simd = SimdLevel::scalar;
                p2.threads = 1;
                auto ref = encode(p2, v);
                for (SimdLevel l : levels())
                    for (int threads : {1, 2}) {
                        p2.simd = l;
                        p2.threads = threads;
                        if (encode(p2, v) != ref)
                            fail_msg("levels n=%zu P=%d kind=%d simd=%s threads=%d", n, P, kind, simd_name(l), threads);
                    }
            }
        }
    }
    /* NaN / Inf anywhere (also in the tails past the last whole vector) */
    for (size_t n : {1000ul, 300007ul})
        for (size_t pos : {0ul, 17ul, n - 1, n - 70})
            for (float bad : {NAN, INFINITY}) {
                auto x = gradient_data(n, 5);
                x[pos] = bad;
                for (uint8_t variant : {terngrad::kBase4, terngrad::kBase3, terngrad::kLevels}) {
                    CodecParams p = params(variant, 0, 2.5f);
                    if (variant == terngrad::kLevels) p.bits = 3;
                    p.shared_scale = 1e-3;
                    p.clip_at = 2e-3f;
                    for (SimdLevel l : levels()) {
                        p.simd = l;
                        Status st;
                        encode(p, x, &st);
                        if (st != Status::nonfinite)
                            fail_msg("n=%zu pos=%zu variant=%d simd=%s: status %d", n, pos, variant, simd_name(l),
                                     static_cast<int>(st));
                    }
                }
            }
}

/* ---------------------------------------------------------------- fp64 */
CodecParams params64(uint8_t variant, uint32_t bucket, float clip, uint64_t seed = 7, uint64_t stream = 11) {
    CodecParams p = params(variant, bucket, clip, seed, stream);
    p.elem = Elem::f64;
    return p;
}
double clip64(const std::vector<double> &x, float c) { /* c sigma in double, in long double sums */
    long double sum = 0, sq = 0;
    for (double v : x) sum += v, sq += static_cast<long double>(v) * v;
    const long double n = static_cast<long double>(x.size()), mean = sum / n;
    const double t = static_cast<double>(c * std::sqrt(std::max(0.0L, sq / n - mean * mean)));
    return c > 0 && t > 0 ? t : INFINITY;
}

/* The codec's definition of c sigma: sums of x 2^-e (e = exponent of max |x|) per fixed block
 * of fields::kBlock elements, added in block order. */
double clip64_blocks(const std::vector<double> &x, float c) {
    double mx = 0;
    for (double v : x) mx = std::max(mx, std::fabs(v));
    if (!(c > 0) || !(mx > 0)) return INFINITY;
    const int e = std::ilogb(mx);
    double a = 0, b = 0;
    for (size_t lo = 0; lo < x.size(); lo += fields::kBlock) {
        double pa = 0, pb = 0;
        for (size_t i = lo; i < std::min(x.size(), lo + fields::kBlock); ++i) {
            const double y = std::ldexp(x[i], -e);
            pa += y, pb += y * y;
        }
        a += pa, b += pb;
    }
    const double n = static_cast<double>(x.size()), mean = a / n, var = std::max(0.0, b / n - mean * mean);
    const double t = std::ldexp(c * std::sqrt(var), e);
    return t > 0 ? t : INFINITY;
}

/* Independent reference: the 24-bit uniform u24 = 256 a + b in full, code = sign if
 * u24 < ceil(min(|g|, cs) 2^24 / s), fields written one by one. */
std::vector<uint8_t> ref_ternary64(const std::vector<double> &x, const CodecParams &p, const std::vector<double> &s,
                                   double cs) {
    const size_t n = x.size(), nb = s.size(), B = nb <= 1 ? std::max<size_t>(n, 1) : p.param;
    const philox::Stream st = philox::make_stream(p.seed, p.stream);
    std::vector<int> c(n);
    for (size_t i = 0; i < n; ++i) {
        const double sj = s[i / B];
        if (!(sj > 0)) continue;
        const double gc = std::min(std::fabs(x[i]), std::min(cs, p.shared_scale > 0 && nb == 1 ? sj : cs));
        const double C = std::min(std::ceil(gc / sj * 16777216.0), 16777216.0);
        const uint32_t u24 = philox::draw16(st, i) * 256 + philox::refine8(st, i);
        if (u24 < C) c[i] = std::signbit(x[i]) ? -1 : 1;
    }
    std::vector<uint8_t> out(8 * nb + (p.variant == terngrad::kBase3 ? (n + 4) / 5 : (n + 3) / 4), 0);
    std::memcpy(out.data(), s.data(), 8 * nb);
    uint8_t *codes = out.data() + 8 * nb;
    for (size_t i = 0; i < n; ++i) {
        if (p.variant == terngrad::kBase4) {
            codes[i / 4] |= static_cast<uint8_t>((c[i] & 3) << (2 * (i % 4)));
        } else {
            int w = 1;
            for (size_t j = 0; j < i % 5; ++j) w *= 3;
            codes[i / 5] = static_cast<uint8_t>(codes[i / 5] + (c[i] + 1) * w);
        }
    }
    if (p.variant == terngrad::kBase3 && n % 5) /* missing trailing digits are 0, not 1 */
        ;
    return out;
}

void given_doubles_when_ternarizing_expect_reference_bytes_on_any_thread_count(void **) {
    for (size_t n : {1ul, 5ul, 63ul, 64ul, 130ul, 4099ul, 70001ul, 300007ul})
        for (uint8_t v : {terngrad::kBase4, terngrad::kBase3})
            for (uint32_t bucket : {0u, 512u, 1000u})
                for (float clip : {0.0f, 2.5f}) {
                    auto x = normal_data<double>(n, n + bucket);
                    if (n > 10) x[3] = 1e300, x[4] = -1e-300, x[5] = 0.0, x[6] = -0.0; /* far outside fp32 */
                    CodecParams p = params64(v, bucket, clip);
                    const size_t nb = n > bucket && bucket ? (n + bucket - 1) / bucket : 1, B = nb <= 1 ? n : bucket;
                    const double cs = clip64_blocks(x, clip);
                    assert_true(std::fabs(cs / clip64(x, clip) - 1) < 1e-9 || std::isinf(cs)); /* sigma, near enough */
                    std::vector<double> s(nb, 0.0);
                    for (size_t i = 0; i < n; ++i) s[i / B] = std::max(s[i / B], std::min(std::fabs(x[i]), cs));
                    auto ref = ref_ternary64(x, p, s, cs);
                    for (SimdLevel l : levels())
                    for (int t : {1, 2, 3}) {
                        p.threads = t;
                        p.simd = l;
                        auto b = encode(p, x);
                        if (!testutil::same_bytes(b.data(), ref.data(), ref.size()) || b.size() != ref.size()) {
                            size_t i = 0;
                            while (i < b.size() && b[i] == ref[i]) ++i;
                            fail_msg("n=%zu variant %d bucket %u clip %g level %d threads %d: byte %zu", n, v, bucket, clip,
                                     static_cast<int>(l), t, i);
                        }
                        auto y = decode<double>(p, b, n);
                        for (size_t i = 0; i < n; ++i) {
                            const double sj = s[i / B];
                            assert_true(y[i] == 0.0 || y[i] == sj || y[i] == -sj);
                        }
                    }
                }
}

void given_many_streams_when_ternarizing_doubles_expect_unbiased(void **) {
    const size_t n = 2000;
    auto x = normal_data<double>(n, 5, 1e-200); /* below fp32's range: the statistics are the double ones */
    x[7] = 3e-200;
    for (uint8_t v : {terngrad::kBase4, terngrad::kBase3})
        for (float clip : {0.0f, 2.5f}) {
            CodecParams p0 = params64(v, 0, clip);
            const int R = 3000;
            std::vector<double> sum(n, 0.0);
            double s = 0;
            for (int r = 0; r < R; ++r) {
                CodecParams p = p0;
                p.stream = 1000 + r;
                auto b = encode(p, x);
                s = scaler<double>(b, 0);
                auto y = decode<double>(p, b, n);
                for (size_t i = 0; i < n; ++i) sum[i] += y[i];
            }
            const double cs = clip64(x, clip);
            size_t clipped = 0;
            for (size_t i = 0; i < n; ++i) {
                const double g = std::copysign(std::min(std::fabs(x[i]), cs), x[i]);
                clipped += std::fabs(x[i]) > cs;
                const double q = std::fabs(g) / s, se = s * std::sqrt(q * (1 - q) / R), mean = sum[i] / R;
                if (std::fabs(mean - g) > 4.5 * se + 1e-6 * s)
                    fail_msg("element %zu: x=%g clipped=%g mean=%g se=%g s=%g", i, x[i], g, mean, se, s);
            }
            if (clip > 0) assert_true(clipped > 0);
        }
}

void given_shared_scale_and_P_doubles_when_levels_expect_exact_sum(void **) {
    const size_t n = 70001;
    for (int P : {2, 5}) {
        CodecParams p = params64(terngrad::kBase4, 0, 2.5f);
        std::vector<std::vector<double>> x(P);
        double shared = 0;
        float clip_out = 0;
        for (int r = 0; r < P; ++r) {
            x[r] = normal_data<double>(n, 600 + r, 1e-100);
            double st;
            p.clip_out = &clip_out;
            assert_int_equal(static_cast<int>(ops().prepare64(x[r].data(), n, p, &st)), 0);
            const double c = clip64(x[r], 2.5f); /* reported rounded down to fp32, kept in fp32's range */
            if (c < static_cast<double>(std::numeric_limits<float>::denorm_min()))
                assert_true(clip_out == std::numeric_limits<float>::denorm_min());
            else
                assert_true(clip_out > 0 && clip_out <= c && std::nextafter(clip_out, INFINITY) > c);
            shared = std::max(shared, st);
        }
        p.clip_out = nullptr;
        p.shared_scale = shared;
        std::vector<double> acc(n, 0.0);
        std::vector<int> k(n, 0);
        std::vector<std::vector<uint8_t>> blobs;
        for (int r = 0; r < P; ++r) {
            p.stream = 40 + r;
            auto b = encode(p, x[r]);
            assert_true(scaler<double>(b, 0) == shared);
            auto y = decode<double>(p, b, n);
            for (size_t i = 0; i < n; ++i) k[i] += y[i] == 0.0 ? 0 : (y[i] > 0 ? 1 : -1);
            assert_int_equal(static_cast<int>(ops().decode_add64(b.data(), b.size(), n, p, acc.data())), 0);
            blobs.push_back(b);
        }
        /* decode_sum64 = decode + decode_add, bit for bit */
        std::vector<const uint8_t *> in;
        std::vector<size_t> lens;
        for (auto &b : blobs) in.push_back(b.data()), lens.push_back(b.size());
        for (int t : {1, 2}) {
            CodecParams q = p;
            q.threads = t;
            std::vector<double> sum(n, 9.0);
            assert_int_equal(static_cast<int>(ops().decode_sum64(in.data(), lens.data(), P, n, q, sum.data())), 0);
            assert_true(testutil::same_bytes(sum.data(), acc.data(), 8 * n));
        }
        CodecParams p2 = p;
        p2.nranks = P;
        assert_int_equal(static_cast<int>(ops().reduced_params(p, &p2)), 0);
        assert_int_equal(p2.variant, terngrad::kLevels);
        assert_true(p2.elem == Elem::f64);
        auto b2 = encode(p2, acc);
        assert_true(scaler<double>(b2, 0) == shared);
        assert_int_equal(b2.size(), 8 + (n * p2.bits + 7) / 8);
        auto y2 = decode<double>(p2, b2, n);
        for (size_t i = 0; i < n; ++i) assert_true(y2[i] == k[i] * shared);
    }
}

void given_double_levels_off_grid_expect_unbiased_stochastic_rounding(void **) {
    const size_t n = 2000;
    auto x = normal_data<double>(n, 8, 1e250);
    for (int bits : {3, 12})
        for (uint32_t bucket : {0u, 500u}) {
            CodecParams p = params64(terngrad::kLevels, bucket, 0.0f);
            p.bits = static_cast<uint8_t>(bits);
            const double K = (1 << (bits - 1)) - 1;
            const int R = 400;
            std::vector<double> sum(n, 0.0);
            for (int r = 0; r < R; ++r) {
                p.stream = 500 + r;
                auto b = encode(p, x);
                auto y = decode<double>(p, b, n);
                for (size_t i = 0; i < n; ++i) {
                    const double s = scaler<double>(b, bucket ? i / bucket : 0);
                    assert_true(std::fabs(y[i] - x[i]) < s * (1 + 1e-12) && std::fabs(y[i] / s) <= K);
                    sum[i] += y[i];
                }
            }
            auto b0 = encode(p, x);
            double dsum = 0, vsum = 0, z2 = 0;
            for (size_t i = 0; i < n; ++i) {
                const double s = scaler<double>(b0, bucket ? i / bucket : 0), q = x[i] / s, f = q - std::floor(q);
                const double mean = sum[i] / R, se = s * std::sqrt(f * (1 - f) / R);
                if (se == 0) continue;
                const double z = (mean - x[i]) / se; /* in units of s: 1e250 squared overflows */
                z2 += z * z;
                dsum += (mean - x[i]) / s, vsum += (se / s) * (se / s);
            }
            if (std::fabs(dsum) > 4 * std::sqrt(vsum)) fail_msg("bits %d bucket %u: bias %g se %g (units of s)", bits, bucket, dsum, std::sqrt(vsum));
            if (!(z2 / n < 1.2)) fail_msg("bits %d bucket %u: mean z^2 %g", bits, bucket, z2 / n);
        }
}

void given_bad_double_payloads_or_other_element_type_expect_corrupt(void **) {
    const size_t n = 1001;
    auto x = normal_data<double>(n, 3);
    for (uint8_t v : {terngrad::kBase4, terngrad::kBase3})
        for (uint32_t bucket : {0u, 100u}) {
            CodecParams p = params64(v, bucket, 2.5f);
            auto b = encode(p, x);
            std::vector<double> out(n, 5.0);
            auto expect_corrupt = [&](const std::vector<uint8_t> &q, const CodecParams &pp) {
                assert_int_equal(static_cast<int>(ops().decode64(q.data(), q.size(), n, pp, out.data())), static_cast<int>(Status::corrupt));
                assert_int_equal(static_cast<int>(ops().decode_add64(q.data(), q.size(), n, pp, out.data())), static_cast<int>(Status::corrupt));
                const uint8_t *in[2] = {b.data(), q.data()};
                const size_t len[2] = {b.size(), q.size()};
                assert_int_equal(static_cast<int>(ops().decode_sum64(in, len, 2, n, pp, out.data())), static_cast<int>(Status::corrupt));
                for (double y : out) assert_true(y == 5.0);
            };
            for (double bad : {-1.0, -0.0, static_cast<double>(NAN), static_cast<double>(INFINITY)}) {
                auto q = b;
                std::memcpy(q.data(), &bad, 8);
                expect_corrupt(q, p);
            }
            auto q = b;
            const size_t nb = bucket ? (n + bucket - 1) / bucket : 1;
            q[8 * nb + 2] = v == terngrad::kBase4 ? 0x02 : 243; /* field 10b / byte > 242 */
            expect_corrupt(q, p);
            q = b;
            q.pop_back();
            expect_corrupt(q, p);
            /* parameters of the other element type, and the fp32 payload of the same data */
            CodecParams pf = p;
            pf.elem = Elem::f32;
            expect_corrupt(b, pf);
            std::vector<float> f(n, 5.0f);
            assert_int_equal(static_cast<int>(ops().decode(b.data(), b.size(), n, pf, f.data())), static_cast<int>(Status::corrupt));
            auto xf = normal_data(n, 3);
            auto bf = encode(pf, xf);
            expect_corrupt(bf, p);
            size_t len;
            std::vector<uint8_t> o(ops().max_payload(n, p));
            assert_int_equal(static_cast<int>(ops().encode64(x.data(), n, pf, o.data(), o.size(), &len)), static_cast<int>(Status::invalid_arg));
            assert_int_equal(static_cast<int>(ops().encode(xf.data(), n, p, o.data(), o.size(), &len)), static_cast<int>(Status::invalid_arg));
            /* blobs keep the element types apart */
            std::vector<uint8_t> blob(blob_max_bytes(ops(), n, p));
            assert_int_equal(static_cast<int>(blob_encode(ops(), p, x.data(), n, blob.data(), blob.size(), &len)), 0);
            assert_int_equal(blob[9], 1);
            std::vector<double> y(n);
            assert_int_equal(static_cast<int>(blob_decode(blob.data(), len, n, y.data(), false, simd_detect(), 1)), 0);
            assert_true(y == decode<double>(p, std::vector<uint8_t>(blob.begin() + kBlobHeaderBytes, blob.begin() + len), n));
            assert_int_equal(static_cast<int>(blob_decode(blob.data(), len, n, f.data(), false, simd_detect(), 1)), static_cast<int>(Status::corrupt));
            for (float v2 : f) assert_true(v2 == 5.0f);
        }
    /* NaN/Inf */
    for (double bad : {static_cast<double>(NAN), static_cast<double>(INFINITY)}) {
        auto y = normal_data<double>(70001, 4);
        y[65540] = bad;
        for (float clip : {0.0f, 2.5f}) {
            Status st;
            encode(params64(terngrad::kBase4, 0, clip), y, &st);
            assert_int_equal(static_cast<int>(st), static_cast<int>(Status::nonfinite));
            double stat;
            assert_int_equal(static_cast<int>(ops().prepare64(y.data(), y.size(), params64(terngrad::kBase3, 0, clip), &stat)),
                             static_cast<int>(Status::nonfinite));
        }
    }
}

}  // namespace

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(given_philox_when_known_answers_expect_random123_vectors),
        cmocka_unit_test(given_simd_generators_when_compared_expect_scalar_words),
        cmocka_unit_test(given_every_a_and_b_when_deciding_expect_comparison_of_24_bit_uniform),
        cmocka_unit_test(given_simd_draws_and_ties_when_compared_expect_scalar_decisions),
        cmocka_unit_test(given_any_path_and_threads_when_encoding_expect_identical_bytes),
        cmocka_unit_test(given_tiny_scalers_when_encoding_expect_identical_bytes),
        cmocka_unit_test(given_any_path_and_threads_when_decoding_expect_identical_floats),
        cmocka_unit_test(given_encoded_buffer_when_decoding_expect_only_minus_s_zero_s),
        cmocka_unit_test(given_base3_and_base4_when_decoding_expect_same_values),
        cmocka_unit_test(given_many_streams_when_ternarizing_expect_unbiased),
        cmocka_unit_test(given_shared_scale_when_encoding_expect_agreed_grid),
        cmocka_unit_test(given_sum_of_P_ternary_vectors_when_levels_expect_exact),
        cmocka_unit_test(given_levels_off_grid_expect_unbiased_stochastic_rounding),
        cmocka_unit_test(given_same_or_other_stream_when_encoding_expect_same_or_other_bytes),
        cmocka_unit_test(given_nan_or_inf_when_encoding_expect_nonfinite),
        cmocka_unit_test(given_nonfinite_or_huge_values_when_taking_statistics_expect_flag_of_scalar_path),
        cmocka_unit_test(given_buckets_when_encoding_expect_one_scaler_per_bucket),
        cmocka_unit_test(given_clip_at_when_encoding_chunk_expect_buffer_threshold),
        cmocka_unit_test(given_constant_buffer_with_clipping_expect_not_zeroed),
        cmocka_unit_test(given_hostile_payload_when_decoding_expect_ok_or_corrupt),
        cmocka_unit_test(given_sizes_when_asking_payload_expect_16x_and_20x),
        cmocka_unit_test(given_shared_scale_and_clip_at_when_encoding_expect_scalar_bytes),
        cmocka_unit_test(given_doubles_when_ternarizing_expect_reference_bytes_on_any_thread_count),
        cmocka_unit_test(given_many_streams_when_ternarizing_doubles_expect_unbiased),
        cmocka_unit_test(given_shared_scale_and_P_doubles_when_levels_expect_exact_sum),
        cmocka_unit_test(given_double_levels_off_grid_expect_unbiased_stochastic_rounding),
        cmocka_unit_test(given_bad_double_payloads_or_other_element_type_expect_corrupt),
    };
    return cmocka_run_group_tests_name("terngrad", tests, nullptr, nullptr);
}

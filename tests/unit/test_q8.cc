// SPDX-License-Identifier: BSD-3-Clause
/* q8: Dettmers' 8-bit data types (/work/shared/papers/001_*, Section 4, Table 1;
 * docs/codecs/q8.md): the tables as the paper defines them, the paper's worked examples,
 * the paper's binary search (its published rounding) against a literal re-implementation,
 * all 16 mean-relative-error cells of Table 1, nearest-entry variants, identical bytes on
 * every CPU path and thread count, decode_add == decode + add, NaN/Inf, hostile payloads. */
#include <algorithm>
#include <cfloat>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "q8/q8.h"
#include "base/settings.h"
#include "testutil.h"

using namespace compmpi;
using testutil::gradient_data;

/* the header variant is the q8_type setting's index (src/runtime/policy.cc passes it through) */
static_assert(enum_value(SettingId::q8_type, "dynamic_tree") == q8::kDynamicTree);
static_assert(enum_value(SettingId::q8_type, "linear") == q8::kLinear);
static_assert(enum_value(SettingId::q8_type, "static_tree") == q8::kStaticTree);
static_assert(enum_value(SettingId::q8_type, "mantissa") == q8::kMantissa);
static_assert(enum_value(SettingId::q8_type, "dynamic_tree_nearest") == q8::kDynamicTreeNearest);
static_assert(enum_value(SettingId::q8_type, "linear_nearest") == q8::kLinearNearest);
static_assert(enum_value(SettingId::q8_type, "static_tree_maxabs") == q8::kStaticTreeMaxabs);
static_assert(enum_value(SettingId::q8_type, "mantissa_maxabs") == q8::kMantissaMaxabs);

namespace {

const size_t kSizes[] = {0, 1, 7, 15, 16, 17, 31, 33, 63, 64, 65, 100, 1000, 4099, 70001, 300007};
const char *const kTypeName[] = {"dynamic_tree",   "linear",         "static_tree",        "mantissa",
                                 "dynamic_tree_nearest", "linear_nearest", "static_tree_maxabs", "mantissa_maxabs"};

using testutil::levels;

int st(Status s) { return static_cast<int>(s); }

std::vector<uint8_t> enc(const std::vector<float> &x, int type, SimdLevel l = simd_detect(), int threads = 1) {
    std::vector<uint8_t> p(q8::kScaleBytes + x.size());
    assert_int_equal(st(q8::encode(x.data(), x.size(), type, p.data(), l, threads)), st(Status::ok));
    return p;
}
std::vector<uint8_t> enc_k(const std::vector<float> &x, int type, int k, int threads = 1) {
    std::vector<uint8_t> p(q8::kScaleBytes + x.size());
    assert_int_equal(st(q8::encode_offset(x.data(), x.size(), type, k, p.data(), simd_detect(), threads)), st(Status::ok));
    return p;
}

std::vector<float> dec(const std::vector<uint8_t> &p, size_t n, int type, SimdLevel l = simd_detect(), int threads = 1) {
    std::vector<float> y(n);
    assert_int_equal(st(q8::decode(p.data(), n, type, y.data(), false, l, threads)), st(Status::ok));
    return y;
}

float scale_of(const std::vector<uint8_t> &p) {
    float s;
    std::memcpy(&s, p.data(), 4);
    return s;
}

bool is_maxabs(int t) { return !q8::has_offset(t); }

/* ------------------------------------------------------------------ tables */

void given_each_type_when_building_table_expect_exact_values_and_sign_codes(void **) {
    for (int t = 0; t < q8::kNumTypes; ++t) {
        const float *m = q8::magnitudes(t);
        assert_non_null(m);
        for (int i = 0; i < 128; ++i) {
            assert_true(m[i] == static_cast<float>(q8::magnitude_exact(t, i)));
            assert_true(m[i] >= 0.0f && m[i] < 16.0f);
            /* every type but the mantissa is monotone in its code */
            if (i && t != q8::kMantissa) assert_true(m[i] > m[i - 1]);
        }
        /* all 256 codes through the decoder (scale 1 = 10^0): code | 0x80 is the negative */
        std::vector<uint8_t> p(4 + 256);
        const float one = 1.0f;
        std::memcpy(p.data(), &one, 4);
        for (int c = 0; c < 256; ++c) p[4 + c] = static_cast<uint8_t>(c);
        for (SimdLevel l : levels()) {
            auto y = dec(p, 256, t, l);
            for (int c = 0; c < 128; ++c) {
                assert_true(y[c] == m[c]);
                assert_true(y[c + 128] == -m[c]);
                assert_true(std::signbit(y[c + 128]));
            }
        }
    }
    assert_null(q8::magnitudes(q8::kNumTypes));
}

/* Section 4.1: "the number n of leading 0 bits represents the exponent 10^-n; the first bit
 * which is set to 1 is a flag which indicates that the next bits are part of the binary
 * bisection tree" over (0.1, 1). The tree's first split is at 0.45 (then halves): the only
 * reading under which the worked examples below come out (docs/codecs/q8.md). */
void given_dynamic_tree_when_reading_table_expect_paper_layout(void **) {
    for (int t : {q8::kDynamicTree, q8::kDynamicTreeNearest}) {
        assert_true(q8::magnitude_exact(t, 0) == 0.0);
        for (int n = 0; n <= 5; ++n) {
            const int k = 6 - n, h = 1 << (k - 1); /* 7 bits = n zeros + flag + k tree bits */
            const double decade = std::pow(10.0, -n);
            for (int f = 0; f < (1 << k); ++f) {
                const double want = decade * (f < h ? 0.1 + 0.35 * (f + 0.5) / h : 0.45 + 0.55 * (f - h + 0.5) / h);
                const double v = q8::magnitude_exact(t, (1 << k) + f);
                assert_true(std::fabs(v - want) <= 1e-15 * want);
            }
        }
        /* n = 6: six zeros and the flag, no tree bit: the whole interval's midpoint */
        assert_true(std::fabs(q8::magnitude_exact(t, 1) - 0.55e-6) < 1e-21);
    }
    assert_true(q8::magnitude_exact(q8::kDynamicTree, 127) == 0.99140625);
}

/* Section 4.1: 3-bit exponent and 4 bits that are "a binary tree with initial interval
 * (0.1, 1) ... the children thus represent the start and end points for intervals" (static
 * tree), or an integer mantissa "between 0 and 15" (mantissa). */
void given_static_tree_and_mantissa_when_reading_table_expect_paper_layout(void **) {
    for (int m = 0; m < 128; ++m) {
        const int E = m >> 4, f = m & 15;
        const double d = std::pow(10.0, E - 7);
        const double node = f < 8 ? 0.1 + 0.35 * f / 8 : 0.45 + 0.55 * (f - 8) / 8;
        assert_true(std::fabs(q8::magnitude_exact(q8::kStaticTree, m) - d * node) <= 1e-15 * d);
        assert_true(std::fabs(q8::magnitude_exact(q8::kMantissa, m) - d * f) <= 4e-15 * d);
        assert_true(q8::magnitude_exact(q8::kLinear, m) == m / 127.0);
        assert_true(q8::magnitude_exact(q8::kLinearNearest, m) == m / 127.0);
    }
    /* the named max-abs variants (docs/codecs/q8.md) */
    for (int m = 1; m < 128; ++m) {
        const int E = m >> 4, f = m & 15;
        const double d = std::pow(10.0, E - 7);
        const double st_ = q8::magnitude_exact(q8::kStaticTreeMaxabs, m), ma = q8::magnitude_exact(q8::kMantissaMaxabs, m);
        assert_true(std::fabs(st_ - d * (0.1 + 0.9 * (f + 0.5) / 16)) <= 1e-15 * st_);
        assert_true(std::fabs(ma - d * (0.1 + 0.9 * f / 16)) <= 1e-15 * ma);
    }
    assert_true(q8::magnitude_exact(q8::kStaticTreeMaxabs, 0) == 0.0);
    assert_true(q8::magnitude_exact(q8::kMantissaMaxabs, 0) == 0.0);
}

/* ------------------------------------------------------------------ the paper's examples */

std::string fmt(const char *f, double v) {
    char b[64];
    std::snprintf(b, sizeof b, f, v);
    return b;
}

/* Section 4.1, literally: "0.2345678 approximated as 0.236719 instead of 0.23125 or 0.2"
 * (dynamic tree, static tree, mantissa) and "0.0000234 approximated as 0.000019" (dynamic
 * tree). The dynamic tree normalises by max-abs, so the examples go in a buffer with max 1;
 * the static tree and mantissa use the exponent offset 10^1 of Table 1 (and the offset the
 * encoder picks itself). */
void given_paper_worked_examples_when_roundtrip_expect_paper_values(void **) {
    for (int t : {q8::kDynamicTree, q8::kDynamicTreeNearest}) {
        auto y = dec(enc({1.0f, 0.2345678f, 0.0000234f, -0.2345678f}, t), 4, t);
        assert_string_equal(fmt("%f", y[1]).c_str(), "0.236719");
        assert_string_equal(fmt("%f", y[2]).c_str(), "0.000019");
        assert_string_equal(fmt("%f", y[3]).c_str(), "-0.236719");
    }
    /* decoded = magnitude * 10 in fp32, printed as the paper prints them */
    auto ys = dec(enc_k({0.2345678f}, q8::kStaticTree, 1), 1, q8::kStaticTree);
    assert_string_equal(fmt("%g", ys[0]).c_str(), "0.23125");
    auto ym = dec(enc_k({0.2345678f}, q8::kMantissa, 1), 1, q8::kMantissa);
    assert_string_equal(fmt("%g", ym[0]).c_str(), "0.2");
    assert_string_equal(fmt("%g", dec(enc({0.2345678f}, q8::kStaticTree), 1, q8::kStaticTree)[0]).c_str(), "0.23125");
    assert_string_equal(fmt("%g", dec(enc({0.2345678f}, q8::kMantissa), 1, q8::kMantissa)[0]).c_str(), "0.2");
    /* "the numbers ending in 2 to 2.499 will be approximated by numbers ending in 2": every
     * float in (2, 2.499] at offset 10^1 decodes to 2 */
    std::vector<float> x;
    for (float v = std::nextafter(2.0f, 3.0f); v <= 2.499f; v = std::nextafter(v, 3.0f)) x.push_back(v);
    auto y = dec(enc_k(x, q8::kMantissa, 1), x.size(), q8::kMantissa);
    for (float v : y) assert_string_equal(fmt("%g", v).c_str(), "2");
    print_message("%zu floats in (2, 2.499] -> 2\n", x.size());
}

/* ------------------------------------------------------------------ rounding */

/* Section 4.2: "binary search on a sorted table of all positive 128 values". Its published
 * implementation (the paper's footnote 2) probes p = 64 (63 over the dynamic tree's 126 tree
 * values), then +-32, ..., +-1 ("a > table[p]" goes up), and then takes the last probe if it
 * is nearer than the lower bracket, else the lower bracket. Written here literally (exact
 * comparisons); the codec must give the same value for every input. */
float published_search(const float *S, int size, float a) {
    int pivot = size == 128 ? 64 : 63, upper = size - 1 + (size == 128), lower = 0;
    for (int j = 32; j > 0; j >>= 1) {
        if (a > S[pivot]) {
            lower = pivot;
            pivot += j;
        } else {
            upper = pivot;
            pivot -= j;
        }
    }
    const double da = a;
    if (lower == pivot) return std::fabs(S[pivot] - da) < S[upper] - da ? S[pivot] : S[upper];
    return S[pivot] - da < std::fabs(S[lower] - da) ? S[pivot] : S[lower];
}

void given_paper_types_when_encoding_expect_published_binary_search(void **) {
    for (int t : {q8::kDynamicTree, q8::kLinear, q8::kStaticTree, q8::kMantissa}) {
        const float *m = q8::magnitudes(t);
        std::vector<float> S(m, m + 128);
        std::sort(S.begin(), S.end());
        const float *tab = S.data();
        int size = 128;
        float lo = 0, hi = S[127];
        if (t == q8::kDynamicTree) { /* the search runs over the 126 tree values (n = 0..5) */
            tab = S.data() + 2;
            size = 126;
            lo = tab[0];
            hi = tab[125];
        }
        std::vector<float> y;
        for (int i = 0; i + 1 < size; ++i) {
            const float mid = static_cast<float>((static_cast<double>(tab[i]) + tab[i + 1]) / 2);
            for (float c : {tab[i], mid, tab[i + 1]}) {
                float v = c;
                for (int k = 0; k < 3; ++k) v = std::nextafter(v, 0.0f);
                for (int k = 0; k < 7; ++k, v = std::nextafter(v, 100.0f)) y.push_back(v);
            }
        }
        testutil::Rng r(31 + t);
        for (int i = 0; i < 200000; ++i) y.push_back(static_cast<float>(lo + (hi - lo) * std::pow(r.uniform(), 4.0)));
        int checked = 0;
        for (float a : y) {
            if (!(a >= lo && a <= hi)) continue;
            const float want = published_search(tab, size, a);
            const int c = q8::code_of(t, a);
            if (m[c] != want) fail_msg("%s y=%.9g: codec %.9g, published search %.9g", kTypeName[t], a, m[c], want);
            ++checked;
        }
        /* the codec itself (scale 1: the max-abs element 1 for max-abs types, offset 10^0) */
        std::vector<float> x;
        for (float a : y)
            if (a <= hi && x.size() < 20000) x.push_back(a);
        if (is_maxabs(t)) x.push_back(1.0f);
        std::vector<uint8_t> p(4 + x.size());
        if (is_maxabs(t)) assert_int_equal(st(q8::encode(x.data(), x.size(), t, p.data(), simd_detect(), 1)), 0);
        else assert_int_equal(st(q8::encode_offset(x.data(), x.size(), t, 0, p.data(), simd_detect(), 1)), 0);
        assert_true(scale_of(p) == 1.0f);
        for (size_t i = 0; i < x.size(); ++i) assert_int_equal(p[4 + i], q8::code_of(t, x[i]));
        print_message("%-12s %d values agree with the published search\n", kTypeName[t], checked);
    }
}

/* The named *_nearest / *_maxabs variants: every code is the nearest magnitude of
 * y = min(|x| / max, 1), ties to the smaller. */
void given_nearest_variants_when_encoding_expect_nearest_table_entry(void **) {
    for (int t = q8::kDynamicTreeNearest; t < q8::kNumTypes; ++t) {
        const float *m = q8::magnitudes(t);
        testutil::Rng r(77 + t);
        std::vector<float> x;
        x.push_back(1.0f); /* the max: scale 1 exactly */
        for (int i = 0; i < 128; ++i) {
            x.push_back(m[i]);
            x.push_back(-m[i]);
            if (i < 127) {
                float mid = (m[i] + m[i + 1]) / 2;
                for (float v : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 2.0f)}) x.push_back(v);
            }
        }
        while (x.size() < 100000) x.push_back(static_cast<float>(std::pow(10.0, -9 * r.uniform()) * (r.uniform() < 0.5 ? -1 : 1)));
        for (SimdLevel l : levels()) {
            auto p = enc(x, t, l);
            assert_true(scale_of(p) == 1.0f);
            for (size_t i = 0; i < x.size(); ++i) {
                const float y = std::min(std::fabs(x[i]), 1.0f);
                const int c = p[4 + i] & 127;
                assert_int_equal(p[4 + i] >> 7, std::signbit(x[i]) ? 1 : 0);
                const double dc = std::fabs(static_cast<double>(y) - m[c]);
                for (int j = 0; j < 128; ++j) {
                    const double dj = std::fabs(static_cast<double>(y) - m[j]);
                    if (dj < dc || (dj == dc && m[j] < m[c]))
                        fail_msg("type %s x=%.9g: code %d (%.9g) but %d (%.9g) is nearer", kTypeName[t], x[i], c, m[c], j, m[j]);
                }
            }
        }
    }
}

/* Exponent offset (Table 1 caption): the encoder picks the smallest 10^k whose top value
 * holds max |x|; every value decodes to sign * magnitude * 10^k. */
void given_offset_types_when_encoding_expect_fitting_power_of_ten(void **) {
    for (int t : {q8::kStaticTree, q8::kMantissa}) {
        const float *m = q8::magnitudes(t);
        const float top = *std::max_element(m, m + 128);
        for (double mx : {1e-20, 3e-7, 0.2345678, 0.99999, 1.0, 5.5, 9.3, 55.0, 149.0, 151.0, 1e30}) {
            std::vector<float> x = {static_cast<float>(mx), -0.5f * static_cast<float>(mx)};
            auto p = enc(x, t);
            const float s = scale_of(p);
            int k = q8::kOffsetMin;
            while (q8::offset_scale(k) != s) assert_true(++k <= q8::kOffsetMax);
            assert_true(top * s >= x[0]);
            if (k > q8::kOffsetMin) assert_true(top * q8::offset_scale(k - 1) < x[0]);
            auto y = dec(p, 2, t);
            assert_true(y[0] == m[q8::code_of(t, x[0] * (1.0f / s))] * s);
        }
        /* Table 1's offsets: 10^1 for U(0,1), N(0,1), N(0,0.2^2); 10^2 for N(0,10^2) */
        if (t == q8::kStaticTree) {
            assert_true(scale_of(enc({0.99999f}, t)) == 10.0f);
            assert_true(scale_of(enc({5.5f}, t)) == 10.0f);
            assert_true(scale_of(enc({1.1f}, t)) == 10.0f);
            assert_true(scale_of(enc({55.0f}, t)) == 100.0f);
        }
        std::vector<uint8_t> p(5);
        const float x = 1.0f;
        assert_int_equal(st(q8::encode_offset(&x, 1, t, q8::kOffsetMax + 1, p.data(), simd_detect(), 1)), st(Status::invalid_arg));
        assert_int_equal(st(q8::encode_offset(&x, 1, q8::kDynamicTree, 1, p.data(), simd_detect(), 1)), st(Status::invalid_arg));
    }
}

void given_any_path_when_encoding_expect_identical_bytes(void **) {
    if (levels().size() == 1) print_message("note: this CPU has no AVX2: only the scalar path is compared\n");
    for (size_t n : kSizes)
        for (int t = 0; t < q8::kNumTypes; ++t) {
            auto x = gradient_data(n, 2000 + n + t);
            std::vector<uint8_t> ref(4 + n + 1), got(4 + n + 1);
            assert_int_equal(st(q8::encode(x.data(), n, t, ref.data(), SimdLevel::scalar, 1)), st(Status::ok));
            for (SimdLevel l : levels())
                for (int threads : {1, 2, 4}) {
                    std::fill(got.begin(), got.end(), 0xAB);
                    assert_int_equal(st(q8::encode(x.data(), n, t, got.data(), l, threads)), st(Status::ok));
                    assert_true(testutil::same_bytes(ref.data(), got.data(), 4 + n));
                    assert_int_equal(got[4 + n], 0xAB); /* never writes past the payload */
                }
            /* and every code is the scalar rule's */
            const float s = scale_of(ref);
            for (size_t i = 0; i < n; ++i) {
                const float a = std::fabs(x[i]);
                const float y = s == 0.0f ? 0.0f : (std::isinf(1.0f / s) ? a / s : a * (1.0f / s));
                assert_int_equal(ref[4 + i] & 127, q8::code_of(t, y));
            }
        }
}

void given_any_path_when_decoding_expect_identical_floats(void **) {
    for (size_t n : kSizes)
        for (int t = 0; t < q8::kNumTypes; ++t) {
            testutil::Rng r(n * 5 + t);
            std::vector<uint8_t> p(4 + n);
            const float scale = is_maxabs(t) ? static_cast<float>(1e-3 + r.uniform()) : q8::offset_scale(static_cast<int>(n % 7) - 3);
            std::memcpy(p.data(), &scale, 4);
            for (size_t i = 4; i < p.size(); ++i) p[i] = static_cast<uint8_t>(r.next());
            std::vector<float> ref(n + 1), got(n + 1), acc0(n + 1);
            for (size_t i = 0; i < n; ++i) acc0[i] = static_cast<float>(r.normal());
            assert_int_equal(st(q8::decode(p.data(), n, t, ref.data(), false, SimdLevel::scalar, 1)), 0);
            std::vector<float> refacc = acc0;
            assert_int_equal(st(q8::decode(p.data(), n, t, refacc.data(), true, SimdLevel::scalar, 1)), 0);
            for (size_t i = 0; i < n; ++i) { /* decode_add == decode + add, bit for bit */
                float s = acc0[i] + ref[i];
                assert_true(testutil::same_bytes(&s, &refacc[i], 4));
            }
            for (SimdLevel l : levels())
                for (int threads : {1, 3}) {
                    got.assign(n + 1, 7.0f);
                    assert_int_equal(st(q8::decode(p.data(), n, t, got.data(), false, l, threads)), 0);
                    assert_true(testutil::same_bytes(ref.data(), got.data(), n * 4));
                    assert_true(got[n] == 7.0f);
                    std::vector<float> acc = acc0;
                    assert_int_equal(st(q8::decode(p.data(), n, t, acc.data(), true, l, threads)), 0);
                    assert_true(testutil::same_bytes(refacc.data(), acc.data(), (n + 1) * 4));
                }
        }
}

void given_edge_scales_when_roundtrip_expect_finite_and_identical(void **) {
    /* all zero (scale 0 / smallest offset, signed zeros kept), denormal max (1/scale
     * overflows: the division fallback), and values near FLT_MAX */
    const std::vector<std::vector<float>> cases = {
        {0.0f, -0.0f, 0.0f, 0.0f},
        {1e-40f, -3e-41f, 1e-45f, 0.0f, 5e-39f, -1e-39f},
        {FLT_MAX, -FLT_MAX, 1e38f, -3e37f, 1.0f, 0.0f},
    };
    for (auto x : cases) {
        x.resize(100, x[1]); /* long enough for the SIMD loops */
        for (int t = 0; t < q8::kNumTypes; ++t) {
            auto ref = enc(x, t, SimdLevel::scalar);
            for (SimdLevel l : levels()) assert_true(enc(x, t, l) == ref);
            auto y = dec(ref, x.size(), t);
            float mx = 0;
            for (float v : x) mx = std::max(mx, std::fabs(v));
            const float *m = q8::magnitudes(t);
            const float top = *std::max_element(m, m + 128) * scale_of(ref);
            if (is_maxabs(t)) assert_true(scale_of(ref) == mx);
            for (size_t i = 0; i < x.size(); ++i) {
                assert_true(std::isfinite(y[i]));
                assert_true(std::signbit(y[i]) == std::signbit(x[i]));
                assert_true(std::fabs(y[i]) <= (is_maxabs(t) ? mx : top));
                if (x[i] == 0.0f && t != q8::kStaticTree) assert_true(y[i] == 0.0f); /* the static tree has no 0 */
            }
        }
    }
}

/* ------------------------------------------------------------------ Table 1 */

/* Dettmers, Table 1: mean relative error in % from 25 million samples; "N(0, 10^2) was done
 * by using an exponent offset of 10^2 while other numbers used an exponent offset of 10^1.
 * For the dynamic tree the sample was divided by the maximum absolute value". */
constexpr int kDists = 4;
const char *const kDistName[kDists] = {"U(0,1)", "N(0,1)", "N(0,10^2)", "N(0,0.2^2)"};
const double kPaper[4][kDists] = {
    /* dynamic tree */ {1.39, 2.46, 2.49, 2.45},
    /* linear quant */ {2.16, 6.47, 6.44, 6.15},
    /* static tree  */ {4.82, 6.3, 6.28, 6.58},
    /* mantissa     */ {7.22, 6.89, 7.19, 8.26},
};

const double kSigma[kDists] = {0, 1, 10, 0.2};

/* Median of max |x| over 25M draws of N(0, 1): (1 - erfc(t / sqrt 2))^25e6 = 1/2. */
double median_max_25m() {
    double lo = 4, hi = 7;
    for (int i = 0; i < 100; ++i) {
        const double t = (lo + hi) / 2;
        (25e6 * std::log1p(-std::erfc(t / std::sqrt(2.0))) < std::log(0.5) ? lo : hi) = t;
    }
    return lo;
}

/* The samples. The max-abs types' error on a normal sample scales with the sample's
 * maximum, a random variable (25th-75th percentile over 25M draws: 5.43-5.71 sigma); a
 * smaller sample's maximum is lower, so one element at the 25M median maximum is added when
 * the sample's own maximum is below it (one element: no weight in the mean). */
std::vector<float> sample(int d, size_t n) {
    testutil::Rng r(20160101 + d);
    std::vector<float> x(n);
    for (auto &v : x) v = static_cast<float>(d == 0 ? r.uniform() : kSigma[d] * r.normal());
    if (d > 0) {
        float mx = 0;
        for (float v : x) mx = std::max(mx, std::fabs(v));
        const float m25 = static_cast<float>(kSigma[d] * median_max_25m());
        if (mx < m25) x.push_back(m25);
    }
    return x;
}

struct Mre {
    double pct, ci95; /* mean relative error in %, half-width of its 95% interval */
};

Mre mean_relative_error(const std::vector<float> &x, const std::vector<float> &y) {
    assert_int_equal(x.size(), y.size());
    double s = 0, s2 = 0;
    size_t cnt = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        if (x[i] == 0) continue;
        const double r = std::fabs(static_cast<double>(y[i]) - x[i]) / std::fabs(static_cast<double>(x[i]));
        s += r;
        s2 += r * r;
        ++cnt;
    }
    const double mean = s / cnt, var = std::max(0.0, s2 / cnt - mean * mean);
    return {100 * mean, 100 * 1.96 * std::sqrt(var / cnt)};
}

/* type 0..3 (the paper's four) at the paper's normalisation: max-abs for the dynamic tree
 * and linear, the exponent offset 10^k for the static tree and mantissa */
Mre table1_cell(const std::vector<float> &x, int t, int k) {
    auto p = q8::has_offset(t) ? enc_k(x, t, k, 2) : enc(x, t, simd_detect(), 2);
    return mean_relative_error(x, dec(p, x.size(), t, simd_detect(), 2));
}

size_t table1_samples() {
    const char *e = std::getenv("Q8_TABLE1_SAMPLES"); /* 25000000 for the paper's size (docs) */
    return e && std::atol(e) > 0 ? static_cast<size_t>(std::atol(e)) : size_t{4} << 20;
}

/* Tolerance, fixed before measuring: a cell matches if |ours - paper| <= 2% of the paper's
 * value + 0.005 (half a unit of its last printed digit) + our 95% interval. 2% covers what
 * we cannot reproduce: the paper's sample itself (its maximum, which sets the max-abs
 * scale, varies by about 3% between 25M-sample draws) and fp32 arithmetic in its kernels.
 * A cell outside is a named deviation in docs/codecs/q8.md, asserted below with the
 * condition under which the paper's figure does come out. */
bool matches(const Mre &m, double paper) { return std::fabs(m.pct - paper) <= 0.02 * paper + 0.005 + m.ci95; }

void given_paper_distributions_when_quantising_expect_table1_errors(void **) {
    const size_t n = table1_samples();
    print_message("Table 1, %zu samples per distribution (paper: 25M; normals: max at %.4f sigma or above);"
                  " ours +- 95%% interval vs paper\n", n, median_max_25m());
    int matched = 0;
    for (int d = 0; d < kDists; ++d) {
        auto x = sample(d, n);
        for (int t = 0; t < 4; ++t) {
            const int k = d == 2 ? 2 : 1; /* the caption's offsets */
            Mre m = table1_cell(x, t, k);
            if (t == q8::kLinear && d > 0) {
                /* linear: the step is max/127, so the error is proportional to the sample's
                 * maximum; compared at the 25M median maximum (equal unless the sample's own
                 * maximum is above it, as in 25M-sample runs) */
                float mx = 0;
                for (float v : x) mx = std::max(mx, std::fabs(v));
                const double f = kSigma[d] * median_max_25m() / mx;
                print_message("  %-12s %-10s %6.3f%% at the sample maximum %.3f sigma\n", kTypeName[t], kDistName[d], m.pct, mx / kSigma[d]);
                m.pct *= f;
                m.ci95 *= f;
            }
            const bool ok = matches(m, kPaper[t][d]);
            print_message("  %-12s %-10s %6.3f%% +- %.3f  paper %5.2f%%  %s\n", kTypeName[t], kDistName[d], m.pct, m.ci95,
                          kPaper[t][d], ok ? "match" : "DEVIATION");
            if (ok) {
                /* a documented deviation that starts matching must leave docs/codecs/q8.md */
                if (t == q8::kLinear && (d == 0 || d == 3)) fail_msg("%s %s now matches: update the docs", kTypeName[t], kDistName[d]);
                ++matched;
                continue;
            }
            /* Deviation "mantissa N(0,10^2)" (docs/codecs/q8.md): at the caption's offset 10^2
             * the mantissa gives its N(0,1)-at-10^1 error exactly (same table, shifted by one
             * decade); the published 7.19 is what offset 10^1 gives. */
            if (t == q8::kMantissa && d == 2) {
                const Mre m1 = table1_cell(x, t, 1);
                print_message("  %-12s %-10s at offset 10^1: %6.3f%% +- %.3f\n", kTypeName[t], kDistName[d], m1.pct, m1.ci95);
                assert_true(matches(m1, kPaper[t][d]));
                continue;
            }
            /* Deviations "linear U(0,1)" and "linear N(0,0.2^2)" (docs/codecs/q8.md): the
             * paper does not define its linear quantiser; measured values printed above. */
            if (t == q8::kLinear && (d == 0 || d == 3)) continue;
            fail_msg("%s %s: %.3f%% (+- %.3f), paper %.2f%%", kTypeName[t], kDistName[d], m.pct, m.ci95, kPaper[t][d]);
        }
    }
    print_message("%d of 16 cells match at the caption's settings\n", matched);
}

/* The named variants measure better than the paper's types on the same samples (the
 * figures are in docs/codecs/q8.md). */
void given_named_variants_when_quantising_expect_lower_error_than_paper_types(void **) {
    const size_t n = size_t{1} << 20;
    const int better[][2] = {{q8::kDynamicTreeNearest, q8::kDynamicTree},
                             {q8::kLinearNearest, q8::kLinear},
                             {q8::kStaticTreeMaxabs, q8::kStaticTree},
                             {q8::kMantissaMaxabs, q8::kMantissa}};
    for (int d = 0; d < kDists; ++d) {
        auto x = sample(d, n);
        for (auto &b : better) {
            const Mre v = mean_relative_error(x, dec(enc(x, b[0], simd_detect(), 2), x.size(), b[0], simd_detect(), 2));
            const Mre p = table1_cell(x, b[1], d == 2 ? 2 : 1);
            print_message("  %-20s %-10s %6.3f%%  vs %-12s %6.3f%%\n", kTypeName[b[0]], kDistName[d], v.pct, kTypeName[b[1]], p.pct);
            assert_true(v.pct + v.ci95 < p.pct - p.ci95);
        }
    }
}

/* ------------------------------------------------------------------ bad input */

void given_nan_or_inf_when_encoding_expect_nonfinite_on_every_path(void **) {
    for (float bad : {NAN, INFINITY, -INFINITY})
        for (size_t pos : {0ul, 5ul, 16ul, 999ul}) {
            auto x = gradient_data(1000, 3);
            x[pos] = bad;
            std::vector<uint8_t> p(4 + 1000);
            for (SimdLevel l : levels())
                for (int t = 0; t < q8::kNumTypes; ++t) {
                    assert_int_equal(st(q8::encode(x.data(), 1000, t, p.data(), l, 1)), st(Status::nonfinite));
                    if (q8::has_offset(t))
                        assert_int_equal(st(q8::encode_offset(x.data(), 1000, t, 1, p.data(), l, 1)), st(Status::nonfinite));
                }
        }
    /* and through the blob layer: a flagged header, no payload */
    const CodecOps *c = codec_by_name("q8");
    assert_non_null(c);
    auto x = gradient_data(400000, 4);
    x[300001] = NAN;
    CodecParams p;
    p.bits = 8;
    p.threads = 2;
    p.simd = simd_detect();
    std::vector<uint8_t> b(blob_max_bytes(*c, x.size(), p));
    size_t len = 0;
    assert_int_equal(st(blob_encode(*c, p, x.data(), x.size(), b.data(), b.size(), &len)), st(Status::nonfinite));
    assert_int_equal(len, kBlobHeaderBytes);
    assert_int_equal(b[6], BLOB_NONFINITE);
}

void given_bad_payload_when_decoding_expect_corrupt_and_nothing_written(void **) {
    const CodecOps *c = codec_by_name("q8");
    assert_non_null(c);
    assert_int_equal(static_cast<int>(c->id), 4);
    const size_t n = 100;
    auto x = gradient_data(n, 9);
    for (int t = 0; t < q8::kNumTypes; ++t) {
        CodecParams p;
        p.bits = 8;
        p.variant = static_cast<uint8_t>(t);
        std::vector<uint8_t> b(c->max_payload(n, p));
        assert_int_equal(b.size(), 4 + n);
        size_t len = 0;
        assert_int_equal(st(c->encode(x.data(), n, p, b.data(), b.size(), &len)), 0);
        assert_int_equal(len, 4 + n);
        std::vector<float> out(n, 5.0f);
        auto untouched = [&] {
            for (float v : out) assert_true(v == 5.0f);
        };
        for (size_t bad_len : {size_t{0}, size_t{3}, size_t{4}, n, n + 3, n + 5})
            for (bool add : {false, true}) {
                Status s = add ? c->decode_add(b.data(), bad_len, n, p, out.data()) : c->decode(b.data(), bad_len, n, p, out.data());
                assert_int_equal(st(s), st(Status::corrupt));
                untouched();
            }
        std::vector<float> bad_scales = {-1.0f, -0.0f, NAN, INFINITY};
        if (q8::has_offset(t)) /* anything but an exact 10^k in range */
            for (float v : {0.0f, 3.0f, std::nextafter(10.0f, 11.0f), 1e-30f, 1e38f, 1.5e-45f}) bad_scales.push_back(v);
        for (float bad_scale : bad_scales) {
            auto bb = b;
            std::memcpy(bb.data(), &bad_scale, 4);
            assert_int_equal(st(c->decode(bb.data(), len, n, p, out.data())), st(Status::corrupt));
            assert_int_equal(st(c->decode_add(bb.data(), len, n, p, out.data())), st(Status::corrupt));
            untouched();
        }
        CodecParams q = p;
        q.variant = q8::kNumTypes;
        assert_int_equal(st(c->decode(b.data(), len, n, q, out.data())), st(Status::corrupt));
        q = p;
        q.bits = 16;
        assert_int_equal(st(c->decode(b.data(), len, n, q, out.data())), st(Status::corrupt));
        q = p;
        q.param = 1;
        assert_int_equal(st(c->decode(b.data(), len, n, q, out.data())), st(Status::corrupt));
        untouched();
        assert_int_equal(st(c->check(q)), st(Status::invalid_arg));
        assert_int_equal(st(c->encode(x.data(), n, p, b.data(), n + 3, &len)), st(Status::invalid_arg));
    }
}

void given_blob_when_roundtrip_expect_header_fields_and_values(void **) {
    const CodecOps *c = codec_by_name("q8");
    const size_t n = 5000;
    auto x = gradient_data(n, 10);
    for (int t = 0; t < q8::kNumTypes; ++t) {
        CodecParams p;
        p.bits = 8;
        p.variant = static_cast<uint8_t>(t);
        std::vector<uint8_t> b(blob_max_bytes(*c, n, p));
        size_t len = 0;
        assert_int_equal(st(blob_encode(*c, p, x.data(), n, b.data(), b.size(), &len)), 0);
        assert_int_equal(len, kBlobHeaderBytes + 4 + n);
        BlobInfo info;
        assert_int_equal(st(blob_peek(b.data(), len, n, &info)), 0);
        assert_int_equal(info.bits, 8);
        assert_int_equal(info.variant, t);
        std::vector<float> y(n), z(n, 1.0f);
        assert_int_equal(st(blob_decode(b.data(), len, n, y.data(), false, simd_detect(), 1)), 0);
        assert_int_equal(st(blob_decode(b.data(), len, n, z.data(), true, simd_detect(), 1)), 0);
        auto ref = dec(std::vector<uint8_t>(b.begin() + kBlobHeaderBytes, b.begin() + len), n, t);
        assert_true(y == ref);
        for (size_t i = 0; i < n; ++i) assert_true(z[i] == 1.0f + ref[i]);
    }
}

/* ---------------------------------------------------------------- fp64 */
int st64(Status s) { return static_cast<int>(s); }

/* independent reference: fp32 scale = max |x| rounded up (offset types: smallest 10^k whose
 * top value, as the fp32 table has it, holds max |x|), code = code_of(RU(|x| / s)) */
float ref_round_up(double y) {
    float f = static_cast<float>(y);
    while (static_cast<double>(f) < y) f = std::nextafter(f, INFINITY);
    while (f > 0 && static_cast<double>(std::nextafter(f, 0.0f)) >= y) f = std::nextafter(f, 0.0f);
    return f;
}
float ref_scale64(const std::vector<double> &x, int type) {
    double m = 0;
    for (double v : x) m = std::max(m, std::fabs(v));
    if (!q8::has_offset(type)) return ref_round_up(m);
    const float *mag = q8::magnitudes(type);
    const float top = *std::max_element(mag, mag + 128);
    for (int k = q8::kOffsetMin; k < q8::kOffsetMax; ++k)
        if (m <= static_cast<double>(top * q8::offset_scale(k))) return q8::offset_scale(k);
    return q8::offset_scale(q8::kOffsetMax);
}
std::vector<uint8_t> ref_enc64(const std::vector<double> &x, int type, float s) {
    std::vector<uint8_t> p(4 + x.size());
    std::memcpy(p.data(), &s, 4);
    for (size_t i = 0; i < x.size(); ++i) {
        const double y = s > 0 ? std::fabs(x[i]) / s : 0.0;
        p[4 + i] = static_cast<uint8_t>(q8::code_of(type, ref_round_up(y)) | (std::signbit(x[i]) ? 0x80 : 0));
    }
    return p;
}
/* doubles inside fp32's range, with values that fall between fp32 neighbours */
std::vector<double> data64(size_t n, uint64_t seed) {
    auto v = testutil::gradient_data64(n, seed);
    for (auto &x : v)
        if (!(std::fabs(x) <= 1e30) || (x != 0 && std::fabs(x) < 1e-30)) x = std::fmod(x, 1.0) * 1e-3 + 1e-9;
    if (n > 8) v[6] = 1.0 + 0x1p-40; /* between fp32 neighbours of 1 */
    return v;
}

void given_doubles_when_encoding_expect_fp32_rule_on_exact_quotient_on_every_path(void **) {
    for (size_t n : kSizes)
        for (int t = 0; t < q8::kNumTypes; ++t) {
            auto x = data64(n, n + 3 * t);
            const float s = ref_scale64(x, t);
            auto ref = ref_enc64(x, t, s);
            float s2 = -1;
            assert_int_equal(st64(q8::scale_of(x.data(), n, t, SimdLevel::scalar, 1, &s2)), 0);
            assert_true(s2 == s);
            for (SimdLevel l : levels())
                for (int th : {1, 2, 3}) {
                    std::vector<uint8_t> p(4 + n);
                    assert_int_equal(st64(q8::encode(x.data(), n, t, p.data(), l, th)), 0);
                    if (!testutil::same_bytes(p.data(), ref.data(), p.size())) {
                        size_t i = 0;
                        while (i < p.size() && p[i] == ref[i]) ++i;
                        fail_msg("type %d n=%zu level %d threads %d: byte %zu %d != %d", t, n, static_cast<int>(l), th, i,
                                 p[i], ref[i]);
                    }
                    /* decode: magnitude * scale, exact in double */
                    std::vector<double> y(n, 7.0), z(n);
                    assert_int_equal(st64(q8::decode(p.data(), n, t, y.data(), false, l, th)), 0);
                    for (size_t i = 0; i < n; ++i) {
                        const uint8_t c = p[4 + i];
                        const double want = static_cast<double>(q8::magnitudes(t)[c & 0x7F]) * s;
                        z[i] = (c & 0x80) ? -want : want;
                    }
                    assert_true(testutil::same_bytes(y.data(), z.data(), 8 * n));
                }
        }
}

void given_double_decode_add_and_sum_when_decoding_expect_decode_plus_add(void **) {
    const size_t n = 300007;
    for (int t : {q8::kDynamicTree, q8::kLinearNearest, q8::kMantissa}) {
        std::vector<std::vector<uint8_t>> p(3, std::vector<uint8_t>(4 + n));
        for (int k = 0; k < 3; ++k) {
            auto x = data64(n, 40 + k);
            assert_int_equal(st64(q8::encode(x.data(), n, t, p[k].data(), simd_detect(), 2)), 0);
        }
        std::vector<double> ref(n);
        assert_int_equal(st64(q8::decode(p[0].data(), n, t, ref.data(), false, SimdLevel::scalar, 1)), 0);
        for (int k = 1; k < 3; ++k) assert_int_equal(st64(q8::decode(p[k].data(), n, t, ref.data(), true, SimdLevel::scalar, 1)), 0);
        const uint8_t *in[3] = {p[0].data(), p[1].data(), p[2].data()};
        for (SimdLevel l : levels())
            for (int th : {1, 2}) {
                std::vector<double> y(n, 3.0);
                assert_int_equal(st64(q8::decode_sum(in, 3, n, t, y.data(), l, th)), 0);
                assert_true(testutil::same_bytes(y.data(), ref.data(), 8 * n));
                std::vector<double> acc(n, 0.5), d(n);
                assert_int_equal(st64(q8::decode(p[0].data(), n, t, d.data(), false, l, th)), 0);
                assert_int_equal(st64(q8::decode(p[0].data(), n, t, acc.data(), true, l, th)), 0);
                for (size_t i = 0; i < n; ++i) assert_true(acc[i] == 0.5 + d[i]);
            }
    }
}

void given_double_segments_with_whole_scale_when_encoding_expect_the_bytes_of_the_whole(void **) {
    const CodecOps *c = codec_by_name("q8");
    const size_t n = 10007;
    auto x = data64(n, 77);
    for (int t = 0; t < q8::kNumTypes; ++t) {
        CodecParams p;
        p.bits = 8;
        p.variant = static_cast<uint8_t>(t);
        p.elem = Elem::f64;
        std::vector<uint8_t> whole(4 + n), seg(4 + n);
        size_t len;
        assert_int_equal(st64(c->encode64(x.data(), n, p, whole.data(), whole.size(), &len)), 0);
        float s;
        assert_int_equal(st64(c->whole_scale64(x.data(), n, p, &s)), 0);
        p.fixed_scale = s;
        const size_t cut = 3001;
        assert_int_equal(st64(c->encode64(x.data() + cut, n - cut, p, seg.data(), seg.size(), &len)), 0);
        assert_true(std::memcmp(seg.data(), whole.data(), 4) == 0);
        assert_true(std::memcmp(seg.data() + 4, whole.data() + 4 + cut, n - cut) == 0);
    }
}

void given_nonfinite_or_huge_doubles_when_encoding_expect_nonfinite(void **) {
    for (int t = 0; t < q8::kNumTypes; ++t)
        for (double bad : {static_cast<double>(NAN), static_cast<double>(INFINITY), -static_cast<double>(INFINITY), 1e39,
                           -1.7976931348623157e308})
            for (SimdLevel l : levels()) {
                auto x = data64(70001, 5);
                x[65537] = bad;
                std::vector<uint8_t> p(4 + x.size());
                assert_int_equal(st64(q8::encode(x.data(), x.size(), t, p.data(), l, 2)), st64(Status::nonfinite));
            }
    /* FLT_MAX itself has an fp32 scale */
    std::vector<double> x = {-static_cast<double>(FLT_MAX), 1.0, 0.0};
    std::vector<uint8_t> p(7);
    assert_int_equal(st64(q8::encode(x.data(), 3, q8::kLinear, p.data(), simd_detect(), 1)), 0);
    std::vector<double> y(3);
    assert_int_equal(st64(q8::decode(p.data(), 3, q8::kLinear, y.data(), false, simd_detect(), 1)), 0);
    assert_true(y[0] == -static_cast<double>(FLT_MAX) && y[2] == 0.0);
}

void given_bad_double_payload_or_other_element_type_when_decoding_expect_corrupt(void **) {
    const CodecOps *c = codec_by_name("q8");
    const size_t n = 100;
    auto x = data64(n, 9);
    auto xf = gradient_data(n, 9);
    for (int t = 0; t < q8::kNumTypes; ++t) {
        CodecParams p;
        p.bits = 8;
        p.variant = static_cast<uint8_t>(t);
        p.elem = Elem::f64;
        CodecParams pf = p;
        pf.elem = Elem::f32;
        std::vector<uint8_t> b(c->max_payload(n, p));
        size_t len = 0;
        assert_int_equal(st64(c->encode64(x.data(), n, p, b.data(), b.size(), &len)), 0);
        std::vector<double> out(n, 5.0);
        auto untouched = [&] {
            for (double v : out) assert_true(v == 5.0);
        };
        for (size_t bad_len : {size_t{0}, size_t{4}, n, n + 3, n + 5})
            for (bool add : {false, true}) {
                Status s = add ? c->decode_add64(b.data(), bad_len, n, p, out.data()) : c->decode64(b.data(), bad_len, n, p, out.data());
                assert_int_equal(st64(s), st64(Status::corrupt));
            }
        std::vector<float> bad_scales = {-1.0f, -0.0f, NAN, INFINITY};
        if (q8::has_offset(t)) bad_scales.push_back(3.0f);
        for (float bs : bad_scales) {
            auto bb = b;
            std::memcpy(bb.data(), &bs, 4);
            assert_int_equal(st64(c->decode64(bb.data(), len, n, p, out.data())), st64(Status::corrupt));
            assert_int_equal(st64(c->decode_add64(bb.data(), len, n, p, out.data())), st64(Status::corrupt));
            const uint8_t *in[2] = {b.data(), bb.data()};
            const size_t lens[2] = {len, len};
            assert_int_equal(st64(c->decode_sum64(in, lens, 2, n, p, out.data())), st64(Status::corrupt));
        }
        untouched();
        /* the typed entry points refuse parameters of the other element type */
        assert_int_equal(st64(c->decode64(b.data(), len, n, pf, out.data())), st64(Status::corrupt));
        assert_int_equal(st64(c->encode64(x.data(), n, pf, b.data(), b.size(), &len)), st64(Status::invalid_arg));
        assert_int_equal(st64(c->encode(xf.data(), n, p, b.data(), b.size(), &len)), st64(Status::invalid_arg));
        untouched();
        /* blobs: the element type byte keeps them apart */
        std::vector<uint8_t> blob(blob_max_bytes(*c, n, p));
        assert_int_equal(st64(blob_encode(*c, p, x.data(), n, blob.data(), blob.size(), &len)), 0);
        assert_int_equal(blob[9], 1);
        std::vector<double> y(n);
        assert_int_equal(st64(blob_decode(blob.data(), len, n, y.data(), false, simd_detect(), 1)), 0);
        std::vector<double> ref(n);
        assert_int_equal(st64(q8::decode(blob.data() + kBlobHeaderBytes, n, t, ref.data(), false, SimdLevel::scalar, 1)), 0);
        assert_true(y == ref);
        std::vector<float> f(n, 5.0f);
        assert_int_equal(st64(blob_decode(blob.data(), len, n, f.data(), false, simd_detect(), 1)), st64(Status::corrupt));
        for (float v : f) assert_true(v == 5.0f);
        assert_int_equal(st64(blob_encode(*c, pf, xf.data(), n, blob.data(), blob.size(), &len)), 0);
        assert_int_equal(st64(blob_decode(blob.data(), len, n, out.data(), false, simd_detect(), 1)), st64(Status::corrupt));
        untouched();
    }
}

/* the double codes differ from the codes of the doubles cast to fp32 only where the cast
 * crosses a boundary; the error is that of the fp32 codec, in the fp32 range */
void given_doubles_when_quantising_expect_error_within_the_type_step(void **) {
    const size_t n = 100000;
    testutil::Rng r(3);
    std::vector<double> x(n);
    for (auto &v : x) v = r.normal();
    for (int t : {q8::kLinear, q8::kLinearNearest}) {
        std::vector<uint8_t> p(4 + n);
        assert_int_equal(st64(q8::encode(x.data(), n, t, p.data(), simd_detect(), 1)), 0);
        std::vector<double> y(n);
        assert_int_equal(st64(q8::decode(p.data(), n, t, y.data(), false, simd_detect(), 1)), 0);
        float s;
        std::memcpy(&s, p.data(), 4);
        const double step = s / 127.0;
        for (size_t i = 0; i < n; ++i) /* nearest: half a step; the paper's search: a step */
            assert_true(std::fabs(y[i] - x[i]) <= (t == q8::kLinear ? 1.0 : 0.5) * step * (1 + 1e-6));
    }
}

}  // namespace

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(given_each_type_when_building_table_expect_exact_values_and_sign_codes),
        cmocka_unit_test(given_dynamic_tree_when_reading_table_expect_paper_layout),
        cmocka_unit_test(given_static_tree_and_mantissa_when_reading_table_expect_paper_layout),
        cmocka_unit_test(given_paper_worked_examples_when_roundtrip_expect_paper_values),
        cmocka_unit_test(given_paper_types_when_encoding_expect_published_binary_search),
        cmocka_unit_test(given_nearest_variants_when_encoding_expect_nearest_table_entry),
        cmocka_unit_test(given_offset_types_when_encoding_expect_fitting_power_of_ten),
        cmocka_unit_test(given_any_path_when_encoding_expect_identical_bytes),
        cmocka_unit_test(given_any_path_when_decoding_expect_identical_floats),
        cmocka_unit_test(given_edge_scales_when_roundtrip_expect_finite_and_identical),
        cmocka_unit_test(given_paper_distributions_when_quantising_expect_table1_errors),
        cmocka_unit_test(given_named_variants_when_quantising_expect_lower_error_than_paper_types),
        cmocka_unit_test(given_nan_or_inf_when_encoding_expect_nonfinite_on_every_path),
        cmocka_unit_test(given_bad_payload_when_decoding_expect_corrupt_and_nothing_written),
        cmocka_unit_test(given_blob_when_roundtrip_expect_header_fields_and_values),
        cmocka_unit_test(given_doubles_when_encoding_expect_fp32_rule_on_exact_quotient_on_every_path),
        cmocka_unit_test(given_double_decode_add_and_sum_when_decoding_expect_decode_plus_add),
        cmocka_unit_test(given_double_segments_with_whole_scale_when_encoding_expect_the_bytes_of_the_whole),
        cmocka_unit_test(given_nonfinite_or_huge_doubles_when_encoding_expect_nonfinite),
        cmocka_unit_test(given_bad_double_payload_or_other_element_type_when_decoding_expect_corrupt),
        cmocka_unit_test(given_doubles_when_quantising_expect_error_within_the_type_step),
    };
    return cmocka_run_group_tests_name("q8", tests, nullptr, nullptr);
}

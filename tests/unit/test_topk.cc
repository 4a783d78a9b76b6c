// SPDX-License-Identifier: BSD-3-Clause
/* topk: the exact top-k set (largest |x|, ties to the smaller index) against a sort-based
 * reference, the three payload forms, identical bytes on every path and thread count,
 * decode_add == decode + add, exact payload sizes, NaN/Inf, corrupt payloads rejected
 * without touching the output. */
#include <algorithm>
#include <memory>
#include <numeric>

#include "runtime/policy.h"
#include "runtime/schedule.h"
#include "runtime/state.h"
#include "topk/select.h"
#include "topk/topk.h"
#include "testutil.h"

using namespace compmpi;

namespace {

using testutil::levels;

/* Many exact ties: small integers (and their negatives), some zeros. */
template <class T = float> std::vector<T> tie_data(size_t n, uint64_t seed) {
    testutil::Rng r(seed);
    std::vector<T> v(n);
    for (auto &x : v) x = static_cast<T>(static_cast<int>(r.next() % 41) - 20) * T(0.25);
    return v;
}

template <class T> std::vector<T> grad_data(size_t n, uint64_t seed);
template <> std::vector<float> grad_data<float>(size_t n, uint64_t seed) { return testutil::gradient_data(n, seed); }
template <> std::vector<double> grad_data<double>(size_t n, uint64_t seed) { return testutil::gradient_data64(n, seed); }

/* data of kind 0 (gradient-like), 1 (ties); doubles also 2: magnitudes that differ only in the
 * low mantissa bits (every level of the 63-bit select decides), with ties among them */
template <class T> std::vector<T> kind_data(int kind, size_t n, uint64_t seed) {
    if (kind == 0) return grad_data<T>(n, seed);
    if (kind == 1) return tie_data<T>(n, seed);
    testutil::Rng r(seed);
    std::vector<T> v(n);
    for (auto &x : v) {
        uint64_t u = 0x3FF0000000000000ull | (r.next() % 5000) << (r.next() % 40);
        double d;
        std::memcpy(&d, &u, 8);
        x = static_cast<T>(r.next() & 1 ? -d : d);
    }
    return v;
}
template <class T> constexpr int kinds() { return sizeof(T) == 8 ? 3 : 2; }

template <class T> CodecParams tk_params(double theta) {
    CodecParams p;
    p.theta = static_cast<float>(theta);
    p.elem = sizeof(T) == 8 ? Elem::f64 : Elem::f32;
    return p;
}

template <class T>
std::vector<uint8_t> enc(const std::vector<T> &x, double theta, SimdLevel l = SimdLevel::scalar, int t = 1) {
    std::vector<uint8_t> out(codec_topk_ops.max_payload(x.size(), tk_params<T>(theta)));
    size_t len = 0;
    Status s = topk::encode(x.data(), x.size(), static_cast<float>(theta), out.data(), out.size(), &len, l, t);
    assert_int_equal(static_cast<int>(s), 0);
    assert_int_equal(len, out.size()); /* max_payload is exact for the encoder's theta */
    return out;
}

template <class T = float>
std::vector<T> dec(const std::vector<uint8_t> &p, size_t n, SimdLevel l = SimdLevel::scalar, int t = 1) {
    std::vector<T> y(n, T(123));
    assert_int_equal(static_cast<int>(topk::decode(p.data(), p.size(), n, y.data(), false, l, t)), 0);
    return y;
}

/* reference: indices sorted by (|x| desc, index asc), first k */
template <class T> std::vector<char> reference_kept(const std::vector<T> &x, uint64_t k) {
    std::vector<size_t> idx(x.size());
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return std::fabs(x[a]) > std::fabs(x[b]); });
    std::vector<char> kept(x.size(), 0);
    for (uint64_t i = 0; i < k; ++i) kept[idx[i]] = 1;
    return kept;
}

template <class T> void theta_roundtrip_exact_topk_set() {
    for (size_t n : {1ul, 2ul, 63ul, 64ul, 65ul, 1000ul, 65536ul, 65537ul, 200003ul})
        for (double theta : {0.0, 0.3, 0.85, 0.97, 0.99, 0.9999})
            for (int kind = 0; kind < kinds<T>(); ++kind) {
                auto x = kind_data<T>(kind, n, n + 7 + kind);
                const uint64_t k = sparse::keep_count(n, theta);
                auto kept = reference_kept(x, k);
                auto p = enc(x, theta, simd_detect(), 2);
                auto y = dec<T>(p, n);
                uint64_t got = 0;
                for (size_t i = 0; i < n; ++i) {
                    const T want = kept[i] ? x[i] : T(0);
                    if (std::memcmp(&want, &y[i], sizeof(T)) != 0)
                        fail_msg("%zu-byte n=%zu theta=%g i=%zu x=%g kept=%d y=%g", sizeof(T), n, theta, i,
                                 static_cast<double>(x[i]), kept[i], static_cast<double>(y[i]));
                    got += kept[i];
                }
                assert_int_equal(got, k);
            }
}
void given_theta_when_roundtrip_expect_exact_topk_set(void **) { theta_roundtrip_exact_topk_set<float>(); }
void given_doubles_when_roundtrip_expect_exact_topk_set(void **) { theta_roundtrip_exact_topk_set<double>(); }

void given_density_when_encoding_expect_smallest_form(void **) {
    const size_t n = 100000;
    auto x = testutil::gradient_data(n, 1);
    assert_int_equal(enc(x, 0.99)[0], topk::kList);   /* 1% kept: 8k < n/8 + 4k */
    assert_int_equal(enc(x, 0.85)[0], topk::kBitmap); /* the default: bitmap + values */
    assert_int_equal(enc(x, 0.0)[0], topk::kDense);   /* everything kept: plain floats */
    assert_int_equal(topk::payload_bytes(n, sparse::keep_count(n, 0.85)), 16 + 8 * ((n + 63) / 64) + 4 * 15000);
    CodecParams p; /* the decoder's view (theta not on the wire): the bound for k = n */
    for (uint64_t k : {0ul, 10ul, 5000ul, 50000ul, 100000ul}) assert_true(topk::payload_bytes(n, k) <= codec_topk_ops.max_payload(n, p));
}

void given_doubles_at_any_density_when_encoding_expect_smallest_form_of_8_byte_values(void **) {
    const size_t n = 100000, nw = (n + 63) / 64;
    auto x = testutil::gradient_data64(n, 1);
    assert_int_equal(enc(x, 0.99)[0], topk::kList);   /* 12k < n/8 + 8k */
    assert_int_equal(enc(x, 0.85)[0], topk::kBitmap);
    assert_int_equal(enc(x, 0.0)[0], topk::kDense);
    assert_int_equal(enc(x, 0.99).size(), 16 + 12 * 1000);
    assert_int_equal(enc(x, 0.85).size(), 16 + 8 * nw + 8 * 15000);
    assert_int_equal(enc(x, 0.0).size(), 16 + 8 * n);
    CodecParams p = tk_params<double>(0.0);
    p.theta = 0; /* the decoder's view: the bound for k = n */
    for (uint64_t k : {0ul, 10ul, 3000ul, 5000ul, 50000ul, 100000ul})
        assert_true(topk::payload_bytes(n, k, 8) <= codec_topk_ops.max_payload(n, p));
}

template <class T> void any_path_identical_bytes() {
    for (size_t n : {0ul, 5ul, 64ul, 1001ul, 65536ul, 131073ul, 300001ul})
        for (double theta : {0.0, 0.85, 0.995})
            for (int kind = 0; kind < kinds<T>(); ++kind) {
                auto x = kind_data<T>(kind, n, (3 + 2 * kind) * n);
                auto ref = enc(x, theta);
                auto yref = dec<T>(ref, n);
                for (SimdLevel l : levels())
                    for (int t : {1, 2, 3}) {
                        auto got = enc(x, theta, l, t);
                        assert_true(got.size() == ref.size() && testutil::same_bytes(got.data(), ref.data(), ref.size()));
                        auto y = dec<T>(ref, n, l, t);
                        assert_true(testutil::same_bytes(y.data(), yref.data(), n * sizeof(T)));
                    }
            }
}
void given_any_path_and_thread_count_when_encoding_expect_identical_bytes(void **) { any_path_identical_bytes<float>(); }
void given_doubles_on_any_path_and_thread_count_when_encoding_expect_identical_bytes(void **) {
    any_path_identical_bytes<double>();
}

template <class T> void decode_add_is_decode_plus_add() {
    for (size_t n : {100ul, 70000ul})
        for (double theta : {0.0, 0.85, 0.995}) {
            auto x = grad_data<T>(n, 21);
            auto p = enc(x, theta);
            auto y = dec<T>(p, n);
            std::vector<T> acc0(n);
            testutil::Rng r(4);
            for (auto &a : acc0) a = static_cast<T>(r.normal());
            acc0[0] = -T(0);
            for (SimdLevel l : levels())
                for (int t : {1, 2}) {
                    auto acc = acc0;
                    assert_int_equal(static_cast<int>(topk::decode(p.data(), p.size(), n, acc.data(), true, l, t)), 0);
                    for (size_t i = 0; i < n; ++i) assert_true(acc[i] == acc0[i] + y[i]);
                }
        }
}
void given_accumulator_when_decode_add_expect_decode_plus_add(void **) { decode_add_is_decode_plus_add<float>(); }
void given_double_accumulator_when_decode_add_expect_decode_plus_add(void **) { decode_add_is_decode_plus_add<double>(); }

void given_nan_or_inf_when_encoding_expect_nonfinite(void **) {
    for (float bad : {NAN, INFINITY, -INFINITY}) {
        auto x = testutil::gradient_data(100000, 2);
        x[77777] = bad;
        std::vector<uint8_t> p(16 + 4 * x.size());
        size_t len;
        for (SimdLevel l : levels())
            assert_int_equal(static_cast<int>(topk::encode(x.data(), x.size(), 0.85, p.data(), p.size(), &len, l, 2)),
                             static_cast<int>(Status::nonfinite));
    }
    std::vector<float> x(10, 1.0f);
    std::vector<uint8_t> p(100);
    size_t len;
    assert_int_equal(static_cast<int>(topk::encode(x.data(), 10, 1.0, p.data(), p.size(), &len, SimdLevel::scalar, 1)),
                     static_cast<int>(Status::invalid_arg)); /* theta must be < 1 */
    assert_int_equal(static_cast<int>(topk::encode(x.data(), 10, 0.5, p.data(), 10, &len, SimdLevel::scalar, 1)),
                     static_cast<int>(Status::invalid_arg)); /* capacity */
}

void expect_corrupt(const std::vector<uint8_t> &p, size_t n, const char *what) {
    for (int add = 0; add <= 1; ++add) {
        std::vector<float> y(n, 9.0f);
        Status s = topk::decode(p.data(), p.size(), n, y.data(), add, simd_detect(), 2);
        if (s != Status::corrupt) fail_msg("%s: decoded as %d", what, static_cast<int>(s));
        for (float v : y) assert_true(v == 9.0f); /* validated before anything is written */
    }
}

void given_corrupt_payload_when_decoding_expect_corrupt(void **) {
    const size_t n = 100003;
    auto x = testutil::gradient_data(n, 6);
    auto bm = enc(x, 0.85), li = enc(x, 0.995), de = enc(x, 0.0);
    const size_t nw = (n + 63) / 64;
    auto q = bm;
    q[16 + 8] ^= 0x10; /* a bitmap bit: popcount != k */
    expect_corrupt(q, n, "bitmap popcount");
    q = bm;
    q[16 + 8 * nw - 1] |= 0x80; /* a bit past n (popcount fixed up by clearing one below) */
    for (size_t b = 16; b < 16 + 8 * nw; ++b)
        if (q[b]) { q[b] &= static_cast<uint8_t>(q[b] - 1); break; }
    expect_corrupt(q, n, "bit past n");
    q = bm;
    q.pop_back();
    expect_corrupt(q, n, "truncated bitmap payload");
    q = bm;
    const float nan = NAN;
    std::memcpy(q.data() + 16 + 8 * nw + 4 * 10, &nan, 4);
    expect_corrupt(q, n, "NaN value");
    q = bm;
    q[8] ^= 1; /* k */
    expect_corrupt(q, n, "k changed");
    q = bm;
    q[3] = 1;
    expect_corrupt(q, n, "reserved");
    q = bm;
    q[0] = 3;
    expect_corrupt(q, n, "form");
    q = li;
    uint32_t i0;
    std::memcpy(&i0, q.data() + 16 + 4, 4);
    std::memcpy(q.data() + 16, &i0, 4); /* idx[0] == idx[1] */
    expect_corrupt(q, n, "indices not increasing");
    q = li;
    const uint32_t big = static_cast<uint32_t>(n);
    const uint64_t k = sparse::keep_count(n, 0.995);
    std::memcpy(q.data() + 16 + 4 * (k - 1), &big, 4);
    expect_corrupt(q, n, "index out of range");
    q = de;
    std::memcpy(q.data() + 16 + 4 * 5, &nan, 4);
    expect_corrupt(q, n, "dense NaN");
    for (size_t len : {0ul, 8ul, 15ul}) expect_corrupt(std::vector<uint8_t>(bm.begin(), bm.begin() + len), n, "short");
    expect_corrupt(bm, n + 64, "other n");
}

void given_zero_vector_when_encoding_expect_first_indices_kept(void **) {
    std::vector<float> z(1000, 0.0f);
    auto p = enc(z, 0.85);
    assert_int_equal(p[0], topk::kBitmap);
    uint64_t w0;
    std::memcpy(&w0, p.data() + 16, 8);
    assert_true(w0 == ~0ull); /* ties go to the smallest indices */
    auto y = dec(p, z.size());
    for (float v : y) assert_true(v == 0.0f);
}

/* Random bit flips and truncations of every form, decoded from exactly sized heap copies
 * (an overread shows under valgrind/ASan): ok or corrupt, nothing else. */
void given_random_damage_when_decoding_expect_ok_or_corrupt(void **) {
    testutil::Rng r(99);
    for (double theta : {0.0, 0.85, 0.995})
        for (int it = 0; it < 150; ++it) {
            const size_t n = 1 + r.next() % 3000;
            auto x = testutil::gradient_data(n, it);
            auto p = enc(x, theta);
            size_t len = p.size();
            switch (r.next() % 3) {
                case 0: p[r.next() % len] ^= static_cast<uint8_t>(1u << (r.next() % 8)); break;
                case 1: len = r.next() % (len + 1); break;
                default: for (int j = 0; j < 4; ++j) p[r.next() % len] = static_cast<uint8_t>(r.next());
            }
            std::unique_ptr<uint8_t[]> exact(new uint8_t[len ? len : 1]);
            std::memcpy(exact.get(), p.data(), len);
            std::vector<float> y(n);
            Status s = topk::decode(exact.get(), len, n, y.data(), r.next() & 1, simd_detect(), 1 + it % 2);
            assert_true(s == Status::ok || s == Status::corrupt);
            if (s == Status::ok)
                for (float v : y) assert_true(std::isfinite(v));
        }
}

/* fp64: NaN/Inf, corrupt payloads of every form, element types never crossed. */
void given_nan_or_inf_doubles_when_encoding_expect_nonfinite(void **) {
    for (double bad : {static_cast<double>(NAN), static_cast<double>(INFINITY), -static_cast<double>(INFINITY)})
        for (double theta : {0.0, 0.85, 0.9999}) {
            auto x = testutil::gradient_data64(100000, 2);
            x[77777] = bad;
            std::vector<uint8_t> p(16 + 8 * x.size());
            size_t len;
            for (SimdLevel l : levels())
                assert_int_equal(static_cast<int>(topk::encode(x.data(), x.size(), theta, p.data(), p.size(), &len, l, 2)),
                                 static_cast<int>(Status::nonfinite));
        }
}

void expect_corrupt64(const std::vector<uint8_t> &p, size_t n, const char *what) {
    for (int add = 0; add <= 1; ++add)
        for (SimdLevel l : levels()) {
            std::vector<double> y(n, 9.0);
            Status s = topk::decode(p.data(), p.size(), n, y.data(), add, l, 2);
            if (s != Status::corrupt) fail_msg("fp64 %s: decoded as %d", what, static_cast<int>(s));
            for (double v : y) assert_true(v == 9.0);
        }
}

void given_corrupt_double_payload_when_decoding_expect_corrupt(void **) {
    const size_t n = 100003, nw = (n + 63) / 64;
    auto x = testutil::gradient_data64(n, 6);
    auto bm = enc(x, 0.85), li = enc(x, 0.995), de = enc(x, 0.0);
    assert_int_equal(bm[0], topk::kBitmap);
    assert_int_equal(li[0], topk::kList);
    auto q = bm;
    q[16 + 8] ^= 0x10;
    expect_corrupt64(q, n, "bitmap popcount");
    q = bm;
    q[16 + 8 * nw - 1] |= 0x80;
    for (size_t b = 16; b < 16 + 8 * nw; ++b)
        if (q[b]) { q[b] &= static_cast<uint8_t>(q[b] - 1); break; }
    expect_corrupt64(q, n, "bit past n");
    q = bm;
    q.pop_back();
    expect_corrupt64(q, n, "truncated bitmap payload");
    const double nan = NAN, inf = -INFINITY;
    q = bm;
    std::memcpy(q.data() + 16 + 8 * nw + 8 * 10, &nan, 8);
    expect_corrupt64(q, n, "NaN value");
    q = bm;
    q[8] ^= 1;
    expect_corrupt64(q, n, "k changed");
    q = bm;
    q[3] = 1;
    expect_corrupt64(q, n, "reserved");
    q = bm;
    q[0] = 3;
    expect_corrupt64(q, n, "form");
    const uint64_t k = sparse::keep_count(n, 0.995);
    q = li;
    uint32_t i1;
    std::memcpy(&i1, q.data() + 16 + 4, 4);
    std::memcpy(q.data() + 16, &i1, 4);
    expect_corrupt64(q, n, "indices not increasing");
    q = li;
    const uint32_t big = static_cast<uint32_t>(n);
    std::memcpy(q.data() + 16 + 4 * (k - 1), &big, 4);
    expect_corrupt64(q, n, "index out of range");
    q = li;
    std::memcpy(q.data() + 16 + 4 * k + 8 * (k - 1), &inf, 8);
    expect_corrupt64(q, n, "list Inf value");
    q = de;
    std::memcpy(q.data() + 16 + 8 * 5, &nan, 8);
    expect_corrupt64(q, n, "dense NaN");
    for (size_t len : {0ul, 8ul, 15ul}) expect_corrupt64(std::vector<uint8_t>(bm.begin(), bm.begin() + len), n, "short");
    expect_corrupt64(bm, n + 64, "other n");
    /* a payload of floats is no payload of doubles (sizes differ), nor the reverse */
    auto xf = testutil::gradient_data(n, 6);
    for (double theta : {0.0, 0.85, 0.995}) {
        expect_corrupt64(enc(xf, theta), n, "fp32 payload");
        auto p64 = enc(x, theta);
        std::vector<float> y(n, 9.0f);
        assert_int_equal(static_cast<int>(topk::decode(p64.data(), p64.size(), n, y.data(), false, SimdLevel::scalar, 1)),
                         static_cast<int>(Status::corrupt));
    }
}

void given_double_blob_when_decoding_expect_roundtrip_and_no_crossing(void **) {
    const CodecOps &c = codec_topk_ops;
    const size_t n = 5001;
    auto x = testutil::gradient_data64(n, 8);
    for (double theta : {0.0, 0.85, 0.995}) {
        CodecParams p = tk_params<double>(theta);
        std::vector<uint8_t> blob(blob_max_bytes(c, n, p));
        size_t len = 0;
        assert_int_equal(static_cast<int>(blob_encode(c, p, x.data(), n, blob.data(), blob.size(), &len)), 0);
        assert_int_equal(blob[9], 1);
        std::vector<double> y(n);
        assert_int_equal(static_cast<int>(blob_decode(blob.data(), len, n, y.data(), false, simd_detect(), 2)), 0);
        auto kept = reference_kept(x, sparse::keep_count(n, theta));
        for (size_t i = 0; i < n; ++i) assert_true(y[i] == (kept[i] ? x[i] : 0.0));
        std::vector<float> f(n, 5.0f);
        assert_int_equal(static_cast<int>(blob_decode(blob.data(), len, n, f.data(), false, SimdLevel::scalar, 1)),
                         static_cast<int>(Status::corrupt));
        for (float v : f) assert_true(v == 5.0f);
        size_t l2;
        assert_int_equal(static_cast<int>(c.encode64(x.data(), n, tk_params<float>(theta), blob.data(), blob.size(), &l2)),
                         static_cast<int>(Status::invalid_arg));
    }
}

/* Settings -> params -> blob -> decode with nothing but the header (what every rank does). */
void given_settings_when_going_through_the_blob_layer_expect_roundtrip(void **) {
    Settings st = settings_defaults();
    st.bits = 16; /* meant for another codec: topk has no width and ignores it */
    const CodecOps *c = codec_by_name("topk");
    assert_non_null(c);
    assert_ptr_equal(c, codec_by_id(7));
    CodecParams p;
    assert_int_equal(static_cast<int>(codec_params_from_settings(*c, st, &p)), 0);
    assert_int_equal(p.bits, 0);
    assert_true(p.theta == 0.85f); /* the setting's default */
    assert_true((c->flags & CODEC_SPARSE) && (c->flags & CODEC_SPATIAL_SPARSE) && !(c->flags & CODEC_LOSSLESS));
    const size_t n = 100000;
    auto x = testutil::gradient_data(n, 13);
    std::vector<uint8_t> blob(blob_max_bytes(*c, n, p));
    size_t len = 0;
    assert_int_equal(static_cast<int>(blob_encode(*c, p, x.data(), n, blob.data(), blob.size(), &len)), 0);
    assert_int_equal(len, blob.size());
    assert_int_equal(blob[kBlobHeaderBytes], topk::kBitmap);
    std::vector<float> y(n);
    assert_int_equal(static_cast<int>(blob_decode(blob.data(), len, n, y.data(), false, simd_detect(), 2)), 0);
    auto kept = reference_kept(x, sparse::keep_count(n, 0.85));
    for (size_t i = 0; i < n; ++i) assert_true(y[i] == (kept[i] ? x[i] : 0.0f));
}

/* ---------------------------------------------------------------- θ schedule */
/* The schedules, call by call, against their formulas written out here (Theorem 3.5:
 * θ_t^2 = L η_t; the step learning rate; linear; Figure 13's single step). */
void given_theta_schedules_when_counting_calls_expect_the_formulas(void **) {
    Settings s = settings_defaults();
    std::string err;
    s.theta = 0.9;
    s.theta_end = 0.0;
    s.theta_calls = 100;
    s.theta_gamma = 0.1;
    auto with = [&](const char *kind) {
        assert_int_equal(static_cast<int>(setting_parse(SettingId::theta_schedule, kind, &s, &err)), 0);
        return theta_schedule_from(s);
    };
    /* none: theta */
    const ThetaSchedule none = with("none");
    for (uint64_t t : {0ull, 1ull, 99ull, 100000ull}) assert_true(theta_at(none, t) == 0.9);
    /* paper: diminishing step η_t = η0 T/(T+t) (Σ η = ∞, Σ η^2 < ∞) and θ_t^2 = L η_t with
     * L η0 = θ0^2: θ_t^2 / η_t is the constant L, θ_t falls monotonically to 0 */
    const ThetaSchedule paper = with("paper");
    const double eta0 = 0.01, L = 0.81 / eta0;
    double prev = 1;
    for (uint64_t t = 0; t < 5000; ++t) {
        const double eta = eta0 * 100.0 / (100.0 + static_cast<double>(t)), th = theta_at(paper, t);
        if (std::fabs(th * th - L * eta) > 1e-12) fail_msg("paper t=%llu: theta %.17g, sqrt(L eta) %.17g", (unsigned long long)t, th, std::sqrt(L * eta));
        assert_true(th < prev);
        prev = th;
    }
    assert_true(theta_at(paper, 0) == 0.9);
    assert_true(std::fabs(theta_at(paper, 100) - 0.9 / std::sqrt(2.0)) < 1e-15); /* η halved after T calls */
    assert_true(std::fabs(theta_at(paper, 9900) - 0.09) < 1e-15);                /* η / 100 -> θ / 10 */
    /* with a floor: θ_end + (θ0 - θ_end) sqrt(T / (T + t)) */
    s.theta_end = 0.5;
    const ThetaSchedule paper_floor = theta_schedule_from(s);
    for (uint64_t t : {0ull, 1ull, 300ull, 1000000ull})
        assert_true(std::fabs(theta_at(paper_floor, t) - (0.5 + 0.4 * std::sqrt(100.0 / (100.0 + t)))) < 1e-15);
    s.theta_end = 0.0;
    /* paper_step: η divided by 10 every T calls -> θ by sqrt(10) */
    const ThetaSchedule pstep = with("paper_step");
    for (uint64_t t = 0; t < 400; ++t) {
        const double want = 0.9 / std::pow(std::sqrt(10.0), static_cast<double>(t / 100));
        if (std::fabs(theta_at(pstep, t) - want) > 1e-15) fail_msg("paper_step t=%llu: %.17g vs %.17g", (unsigned long long)t, theta_at(pstep, t), want);
    }
    /* linear from 0.9 to 0.3 over 100 calls */
    s.theta_end = 0.3;
    const ThetaSchedule lin = with("linear");
    for (uint64_t t = 0; t < 300; ++t) {
        const double want = t >= 100 ? 0.3 : 0.9 - 0.6 * static_cast<double>(t) / 100.0;
        if (std::fabs(theta_at(lin, t) - want) > 1e-15) fail_msg("linear t=%llu: %.17g vs %.17g", (unsigned long long)t, theta_at(lin, t), want);
    }
    /* step (Figure 13: 0.9, then 0 from call T) */
    s.theta_end = 0.0;
    const ThetaSchedule step = with("step");
    for (uint64_t t = 0; t < 300; ++t) assert_true(theta_at(step, t) == (t < 100 ? 0.9 : 0.0));
}

/* policy_plan: θ comes from the count of calls of the same (collective, count), never from
 * the buffer address (which differs between ranks); other codecs are untouched. */
void given_theta_schedule_when_planning_expect_per_shape_counts_not_addresses(void **) {
    CommState st;
    st.settings = settings_defaults();
    std::string err;
    assert_int_equal(static_cast<int>(setting_parse(SettingId::codec, "topk", &st.settings, &err)), 0);
    assert_int_equal(static_cast<int>(setting_parse(SettingId::theta_schedule, "linear", &st.settings, &err)), 0);
    st.settings.theta = 0.9;
    st.settings.theta_end = 0.5;
    st.settings.theta_calls = 4;
    const ThetaSchedule sch = theta_schedule_from(st.settings);
    uint64_t ta = 0, tc = 0;
    for (int i = 0; i < 12; ++i) {
        Plan p;
        /* the same shape (allreduce of 1000): one count (policy_plan takes no address at all) */
        assert_int_equal(static_cast<int>(policy_plan(st, Coll::allreduce, 1000, -1, &p)), 0);
        assert_true(p.params.theta == static_cast<float>(theta_at(sch, ta++)));
        if (i % 3 == 0) { /* another shape counts on its own */
            assert_int_equal(static_cast<int>(policy_plan(st, Coll::allreduce, 500, -1, &p)), 0);
            assert_true(p.params.theta == static_cast<float>(theta_at(sch, tc++)));
            assert_int_equal(static_cast<int>(policy_plan(st, Coll::allgather, 1000, -1, &p)), 0);
        }
    }
    assert_true(theta_at(sch, 0) == 0.9 && theta_at(sch, 11) == 0.5);
    /* fft_topk follows the schedule too; rangefloat (no theta) does not count */
    assert_int_equal(static_cast<int>(setting_parse(SettingId::codec, "fft_topk", &st.settings, &err)), 0);
    Plan p;
    assert_int_equal(static_cast<int>(policy_plan(st, Coll::allreduce, 777, -1, &p)), 0);
    assert_true(p.params.theta == 0.9f);
    assert_int_equal(static_cast<int>(policy_plan(st, Coll::allreduce, 777, -1, &p)), 0);
    assert_true(p.params.theta == static_cast<float>(theta_at(sch, 1)));
    assert_int_equal(static_cast<int>(setting_parse(SettingId::codec, "rangefloat", &st.settings, &err)), 0);
    const size_t shapes = st.sched.calls.size();
    assert_int_equal(static_cast<int>(policy_plan(st, Coll::allreduce, 999, -1, &p)), 0);
    assert_int_equal(st.sched.calls.size(), shapes);
    /* schedule none: the fixed theta, nothing counted */
    assert_int_equal(static_cast<int>(setting_parse(SettingId::codec, "topk", &st.settings, &err)), 0);
    assert_int_equal(static_cast<int>(setting_parse(SettingId::theta_schedule, "none", &st.settings, &err)), 0);
    assert_int_equal(static_cast<int>(policy_plan(st, Coll::allreduce, 1000, -1, &p)), 0);
    assert_true(p.params.theta == 0.9f);
    assert_int_equal(st.sched.calls.size(), shapes);
    /* every collective kind counts on its own, whatever the count (kinds 0..10) */
    ScheduleState fresh;
    for (int kind = 0; kind <= static_cast<int>(Coll::reduce_scatter); ++kind) {
        assert_int_equal(fresh.next(kind, 4096), 0);
        assert_int_equal(fresh.next(kind, 4096), 1);
    }
}

}  // namespace

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(given_theta_when_roundtrip_expect_exact_topk_set),
        cmocka_unit_test(given_doubles_when_roundtrip_expect_exact_topk_set),
        cmocka_unit_test(given_doubles_at_any_density_when_encoding_expect_smallest_form_of_8_byte_values),
        cmocka_unit_test(given_doubles_on_any_path_and_thread_count_when_encoding_expect_identical_bytes),
        cmocka_unit_test(given_double_accumulator_when_decode_add_expect_decode_plus_add),
        cmocka_unit_test(given_nan_or_inf_doubles_when_encoding_expect_nonfinite),
        cmocka_unit_test(given_corrupt_double_payload_when_decoding_expect_corrupt),
        cmocka_unit_test(given_double_blob_when_decoding_expect_roundtrip_and_no_crossing),
        cmocka_unit_test(given_density_when_encoding_expect_smallest_form),
        cmocka_unit_test(given_any_path_and_thread_count_when_encoding_expect_identical_bytes),
        cmocka_unit_test(given_accumulator_when_decode_add_expect_decode_plus_add),
        cmocka_unit_test(given_nan_or_inf_when_encoding_expect_nonfinite),
        cmocka_unit_test(given_corrupt_payload_when_decoding_expect_corrupt),
        cmocka_unit_test(given_zero_vector_when_encoding_expect_first_indices_kept),
        cmocka_unit_test(given_random_damage_when_decoding_expect_ok_or_corrupt),
        cmocka_unit_test(given_settings_when_going_through_the_blob_layer_expect_roundtrip),
        cmocka_unit_test(given_theta_schedules_when_counting_calls_expect_the_formulas),
        cmocka_unit_test(given_theta_schedule_when_planning_expect_per_shape_counts_not_addresses),
    };
    return cmocka_run_group_tests_name("topk", tests, nullptr, nullptr);
}

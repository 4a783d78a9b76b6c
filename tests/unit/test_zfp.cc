// SPDX-License-Identifier: BSD-3-Clause
/* zfp: round trips of floats and doubles in both modes (fixed rate, fixed accuracy); exact
 * payload sizes of fixed rate; the bytes of ZFP's own zfp_compress; identical bytes at every
 * thread count; the error bounds as properties over several distributions; NaN/Inf and
 * unrepresentable values refused; every damaged header or payload refused without a read past
 * the payload (payloads end at a PROT_NONE page: libzfp is not instrumented by ASan). */
#include "zfp/zfp.h"

#include <sys/mman.h>
#include <unistd.h>
#include <zfp.h>

#include <algorithm>
#include <cfloat>
#include <functional>
#include <string>

#include "testutil.h"

using namespace compmpi;
using testutil::Rng;

namespace {

const CodecOps &ops() { return *codec_by_name("zfp"); }

template <class T> constexpr Elem elem_of() { return sizeof(T) == 8 ? Elem::f64 : Elem::f32; }
template <class T> const char *tname() { return sizeof(T) == 8 ? "fp64" : "fp32"; }

template <class T> CodecParams rate_params(int rate, int threads = 1) {
    CodecParams p;
    p.variant = zfp::kFixedRate;
    p.bits = static_cast<uint8_t>(rate);
    p.elem = elem_of<T>();
    p.threads = threads;
    return p;
}
template <class T> CodecParams acc_params(float tol, int threads = 1) {
    CodecParams p;
    p.variant = zfp::kFixedAccuracy;
    p.param = zfp::tolerance_param(tol);
    p.elem = elem_of<T>();
    p.threads = threads;
    return p;
}

Status enc(const float *x, size_t n, const CodecParams &p, uint8_t *o, size_t cap, size_t *len) {
    return ops().encode(x, n, p, o, cap, len);
}
Status enc(const double *x, size_t n, const CodecParams &p, uint8_t *o, size_t cap, size_t *len) {
    return ops().encode64(x, n, p, o, cap, len);
}
Status dec(const uint8_t *in, size_t len, size_t n, const CodecParams &p, float *y, bool add) {
    return add ? ops().decode_add(in, len, n, p, y) : ops().decode(in, len, n, p, y);
}
Status dec(const uint8_t *in, size_t len, size_t n, const CodecParams &p, double *y, bool add) {
    return add ? ops().decode_add64(in, len, n, p, y) : ops().decode64(in, len, n, p, y);
}

template <class T> std::vector<uint8_t> encode_ok(const std::vector<T> &x, const CodecParams &p) {
    std::vector<uint8_t> b(ops().max_payload(x.size(), p) + 1, 0xA5);
    size_t len = 0;
    const Status s = enc(x.data(), x.size(), p, b.data(), b.size() - 1, &len);
    if (s != Status::ok) fail_msg("%s encode n=%zu variant %d bits %d: %s", tname<T>(), x.size(), p.variant, p.bits, status_str(s));
    assert_int_equal(b.back(), 0xA5); /* nothing written past max_payload */
    b.resize(len);
    return b;
}

/* ---- data: the distributions of the property tests ---- */
enum Dist { normal, wide, smooth, runs, subnormal, mixed, integers, alternating, random_bits, near_max, near_tiny,
            block_extremes, sign_patterns, wrap_prone, kDists };
const char *dist_name(int d) {
    static const char *n[] = {"normal", "wide range", "smooth", "constant runs and zeros", "subnormal", "mixed scales",
                              "integers", "alternating", "random bits", "near the largest", "near the tiny threshold",
                              "one extreme per block", "sign patterns at the block max",
                              "half large, half near zero"};
    return n[d];
}
template <class T> std::vector<T> make(int dist, size_t n, uint64_t seed) {
    Rng r(seed);
    std::vector<T> x(n);
    const bool d = sizeof(T) == 8;
    for (size_t i = 0; i < n; ++i) {
        double v = 0;
        switch (dist) {
            case normal: v = r.normal(); break;
            case wide: v = r.normal() * std::pow(10.0, static_cast<double>(r.next() % 25) - 12); break;
            case smooth: {
                const double t = (static_cast<double>(i) - n / 2.0) / (n / 8.0 + 1);
                v = std::sin(0.003 * static_cast<double>(i)) * std::exp(-t * t) * 100;
                break;
            }
            case runs: v = (i / 37) % 3 == 0 ? 0.0 : (i / 37) % 3 == 1 ? 3.25 : -1e-3; break;
            case subnormal: v = std::ldexp(r.normal(), d ? -1050 : -135); break;
            case mixed: v = r.normal() * (r.next() % 2 ? 1e6 : 1e-6); break;
            case integers: v = static_cast<double>(static_cast<int64_t>(r.next() % 2000001) - 1000000); break;
            case alternating: v = (i % 2 ? 1.0 : -1.0) * (1 - std::ldexp(1.0, -static_cast<int>(r.next() % 20))); break;
            case random_bits: { /* any finite pattern below 2^126 (2^1022) */
                if (d) {
                    uint64_t u = r.next() & 0xBFEFFFFFFFFFFFFFull;
                    std::memcpy(&v, &u, 8);
                } else {
                    uint32_t u = static_cast<uint32_t>(r.next()) & 0xBEFFFFFFu;
                    float f;
                    std::memcpy(&f, &u, 4);
                    v = f;
                }
                break;
            }
            case near_max: v = r.normal() * (d ? 1e306 : 1e37); break; /* up to ~5e37 < 2^126 */
            case near_tiny: /* blocks whose max straddles 2^-98 (2^-962): zeroed or coded */
                v = std::ldexp(r.normal(), (d ? -962 : -98) + static_cast<int>(r.next() % 9) - 4);
                break;
            case block_extremes: { /* per block: one value at a random scale, the others 2^-k below */
                const int e = static_cast<int>(r.next() % (d ? 1800 : 200)) - (d ? 900 : 100);
                const int k = i % 4 == r.next() % 4 ? 0 : static_cast<int>(r.next() % (d ? 70 : 40));
                v = std::ldexp(r.uniform() + 0.5, e - k) * (r.next() % 2 ? 1 : -1);
                break;
            }
            case wrap_prone: /* blocks whose integers may wrap at low rates/precision */
                v = r.next() % 2 ? (r.uniform() * 0.5 + 0.5) * (r.next() % 2 ? 1 : -1) : r.normal() * 1e-3;
                break;
            default: { /* sign_patterns: |x| at or just below 2^e, signs chosen per block, the worst
                        * case of the transform's gain */
                const int e = static_cast<int>(r.next() % 60) - 30;
                const uint64_t pat = (i / 4 * 0x9E3779B97F4A7C15ull) >> 60;
                v = std::ldexp(1 - std::ldexp(1.0, -static_cast<int>(r.next() % (d ? 53 : 24)) - 1), e) *
                    ((pat >> (i % 4)) & 1 ? -1 : 1);
                if (r.next() % 5 == 0) v *= std::ldexp(1.0, -static_cast<int>(r.next() % 30));
            }
        }
        x[i] = static_cast<T>(v);
    }
    if (dist == near_max)
        for (T &v : x) v = std::max<T>(std::min<T>(v, static_cast<T>(d ? 4e307 : 8e37)), static_cast<T>(d ? -4e307 : -8e37));
    return x;
}

template <class T> double max_abs(const std::vector<T> &x) {
    double m = 0;
    for (T v : x) m = std::max(m, std::fabs(static_cast<double>(v)));
    return m;
}

/* ---- a guard page after the payload: any read past it faults, inside libzfp too ---- */
struct Guarded {
    uint8_t *base = nullptr;
    size_t map = 0;
    uint8_t *data = nullptr; /* len bytes ending at the protected page */
    Guarded(const uint8_t *src, size_t len) {
        const size_t pg = static_cast<size_t>(sysconf(_SC_PAGESIZE));
        map = (len + pg - 1) / pg * pg + pg;
        void *m = mmap(nullptr, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        assert_true(m != MAP_FAILED);
        base = static_cast<uint8_t *>(m);
        assert_int_equal(mprotect(base + map - pg, pg, PROT_NONE), 0);
        data = base + map - pg - len;
        if (len) std::memcpy(data, src, len);
    }
    ~Guarded() { munmap(base, map); }
};

/* ================================================================ round trips */

template <class T> void roundtrip_sizes() {
    const size_t sizes[] = {0, 1, 3, 4, 5, 17, 1000003};
    const int max_rate = sizeof(T) == 8 ? 64 : 32;
    for (size_t n : sizes) {
        auto x = make<T>(wide, n, 100 + n);
        for (int rate : {4, 8, 13, 16, 32, max_rate}) {
            if (n == 1000003 && rate != 16) continue;
            CodecParams p = rate_params<T>(rate, 2);
            const size_t exact = ((n + 3) / 4 * static_cast<size_t>(rate) + 1) / 2;
            assert_int_equal(ops().max_payload(n, p), exact);
            auto b = encode_ok(x, p);
            assert_int_equal(b.size(), exact);
            double bound = 0;
            assert_int_equal(static_cast<int>(zfp::max_abs_error(x.data(), n, p, &bound)), 0);
            std::vector<T> y(n + 1, static_cast<T>(7));
            assert_int_equal(static_cast<int>(dec(b.data(), b.size(), n, p, y.data(), false)), 0);
            assert_true(y[n] == static_cast<T>(7));
            for (size_t i = 0; i < n; ++i)
                if (!(std::fabs(static_cast<double>(y[i]) - x[i]) <= bound))
                    fail_msg("%s rate %d n %zu i %zu: %g -> %g, bound %g", tname<T>(), rate, n, i, (double)x[i], (double)y[i], bound);
            /* decode_add = decode, then the same add */
            std::vector<T> acc(n), want(n);
            for (size_t i = 0; i < n; ++i) acc[i] = want[i] = static_cast<T>(i % 5) - static_cast<T>(2.5);
            for (size_t i = 0; i < n; ++i) want[i] += y[i];
            assert_int_equal(static_cast<int>(dec(b.data(), b.size(), n, p, acc.data(), true)), 0);
            assert_true(testutil::same_bytes(acc.data(), want.data(), n * sizeof(T)));
        }
        for (double rel : {1e-2, 1e-5}) {
            const float tol = static_cast<float>(std::max(rel * std::max(max_abs(x), 1e-30), 1e-20));
            CodecParams p = acc_params<T>(tol, 2);
            auto b = encode_ok(x, p);
            assert_true(b.size() <= ops().max_payload(n, p));
            std::vector<T> y(n + 1, static_cast<T>(7)), acc(n, static_cast<T>(1)), want(n);
            assert_int_equal(static_cast<int>(dec(b.data(), b.size(), n, p, y.data(), false)), 0);
            assert_true(y[n] == static_cast<T>(7));
            for (size_t i = 0; i < n; ++i) {
                assert_true(std::fabs(static_cast<double>(y[i]) - x[i]) <= tol);
                want[i] = static_cast<T>(1) + y[i];
            }
            assert_int_equal(static_cast<int>(dec(b.data(), b.size(), n, p, acc.data(), true)), 0);
            assert_true(testutil::same_bytes(acc.data(), want.data(), n * sizeof(T)));
        }
    }
}
void given_sizes_when_roundtrip_floats_expect_exact_sizes_bounds_and_decode_add(void **) { roundtrip_sizes<float>(); }
void given_sizes_when_roundtrip_doubles_expect_exact_sizes_bounds_and_decode_add(void **) { roundtrip_sizes<double>(); }

/* ================================================================ ZFP's own stream */

template <class T> std::vector<uint8_t> zfp_reference(const std::vector<T> &x, const CodecParams &p, bool omp, int threads) {
    zfp_field *f = zfp_field_1d(const_cast<T *>(x.data()), sizeof(T) == 8 ? zfp_type_double : zfp_type_float, x.size());
    zfp_stream *z = zfp_stream_open(nullptr);
    if (p.variant == zfp::kFixedRate)
        zfp_stream_set_rate(z, p.bits, sizeof(T) == 8 ? zfp_type_double : zfp_type_float, 1, zfp_false);
    else
        zfp_stream_set_accuracy(z, zfp::zfp_tolerance(zfp::tolerance_of(p.param))); /* maxbits 16658 */
    if (omp) {
        zfp_stream_set_execution(z, zfp_exec_omp);
        zfp_stream_set_omp_threads(z, threads);
    }
    std::vector<uint8_t> buf(zfp_stream_maximum_size(z, f));
    bitstream *bs = stream_open(buf.data(), buf.size());
    zfp_stream_set_bit_stream(z, bs);
    buf.resize(zfp_compress(z, f));
    stream_close(bs);
    zfp_stream_close(z);
    zfp_field_free(f);
    return buf;
}

template <class T> void same_as_zfp() {
    for (int d : {normal, wide, smooth, mixed, random_bits}) {
        auto x = make<T>(d, 40001, 7 + d);
        /* the codec writes blocks below 2^-98 (2^-962) as zeros: ZFP's input likewise */
        auto xz = x;
        for (size_t b = 0; b < xz.size(); b += 4) {
            double m = 0;
            for (size_t j = b; j < std::min(b + 4, xz.size()); ++j) m = std::max(m, std::fabs(static_cast<double>(xz[j])));
            if (m < (sizeof(T) == 8 ? 0x1p-962 : 0x1p-98))
                for (size_t j = b; j < std::min(b + 4, xz.size()); ++j) xz[j] = 0;
        }
        for (int rate : {4, 7, 16, 25, 32}) {
            auto p = rate_params<T>(rate);
            auto mine = encode_ok(x, p), ref = zfp_reference(xz, p, false, 1);
            if (mine != ref) fail_msg("%s %s rate %d: not ZFP's bytes", tname<T>(), dist_name(d), rate);
            /* and ZFP's decoder reads it back to the values ours gives */
            std::vector<T> y(x.size()), z(x.size());
            assert_int_equal(static_cast<int>(dec(mine.data(), mine.size(), x.size(), p, y.data(), false)), 0);
            zfp_field *f = zfp_field_1d(z.data(), sizeof(T) == 8 ? zfp_type_double : zfp_type_float, z.size());
            zfp_stream *zs = zfp_stream_open(nullptr);
            zfp_stream_set_rate(zs, rate, sizeof(T) == 8 ? zfp_type_double : zfp_type_float, 1, zfp_false);
            bitstream *bs = stream_open(mine.data(), mine.size());
            zfp_stream_set_bit_stream(zs, bs);
            assert_true(zfp_decompress(zs, f) != 0);
            stream_close(bs);
            zfp_stream_close(zs);
            zfp_field_free(f);
            assert_true(testutil::same_bytes(y.data(), z.data(), y.size() * sizeof(T)));
        }
        const double m = max_abs(x);
        for (int k : {2, 10, 20}) {
            const float tol = static_cast<float>(std::max(std::ldexp(m, -k), zfp::accuracy_floor(m, elem_of<T>())));
            auto p = acc_params<T>(tol);
            /* maxbits 140 (271) writes what ZFP's accuracy mode (maxbits 16658) writes */
            if (encode_ok(x, p) != zfp_reference(x, p, false, 1))
                fail_msg("%s %s tol %g: not the bytes of ZFP's accuracy mode", tname<T>(), dist_name(d), tol);
        }
    }
}
void given_floats_when_encoding_expect_bytes_of_zfp_compress(void **) { same_as_zfp<float>(); }
void given_doubles_when_encoding_expect_bytes_of_zfp_compress(void **) { same_as_zfp<double>(); }

/* ================================================================ threads */

template <class T> void thread_bytes() {
    for (size_t n : {size_t{70001}, size_t{1000003}}) {
        auto x = make<T>(smooth, n, 3);
        for (T &v : x) v += static_cast<T>(Rng(static_cast<uint64_t>(static_cast<int64_t>(v * 1e6))).normal() * 1e-3);
        std::vector<CodecParams> ps{rate_params<T>(8), rate_params<T>(21), acc_params<T>(1e-3f),
                                    acc_params<T>(sizeof(T) == 8 ? 1e-7f : 1e-4f)};
        for (CodecParams p : ps) {
            p.threads = 1;
            const auto ref = encode_ok(x, p);
            std::vector<T> yref(n);
            assert_int_equal(static_cast<int>(dec(ref.data(), ref.size(), n, p, yref.data(), false)), 0);
            for (int t : {2, 3, 4, 7}) {
                p.threads = t;
                if (encode_ok(x, p) != ref)
                    fail_msg("%s n %zu variant %d bits %d: %d threads write other bytes", tname<T>(), n, p.variant, p.bits, t);
                std::vector<T> y(n);
                assert_int_equal(static_cast<int>(dec(ref.data(), ref.size(), n, p, y.data(), false)), 0);
                assert_true(testutil::same_bytes(y.data(), yref.data(), n * sizeof(T)));
            }
            /* ZFP's own OpenMP compressor agrees too (fixed accuracy runs it) */
            if (n >= 1000000 && encode_ok(x, p) != zfp_reference(x, p, true, 3))
                fail_msg("%s: ZFP's OpenMP stream differs", tname<T>());
        }
    }
}
void given_thread_counts_when_encoding_floats_expect_identical_bytes(void **) { thread_bytes<float>(); }
void given_thread_counts_when_encoding_doubles_expect_identical_bytes(void **) { thread_bytes<double>(); }

/* ================================================================ bounds as properties */

/* Fixed accuracy: every decoded value within the tolerance, for tolerances from the floor
 * (accuracy_floor of the data's max |x|) up, powers of two (ZFP's effective tolerance) and
 * not. Prints the largest error/tolerance seen. */
template <class T> void accuracy_property() {
    const size_t n = 20000;
    double worst = 0;
    int cases = 0;
    for (int d = 0; d < kDists; ++d)
        for (uint64_t seed : {1, 2}) {
            auto x = make<T>(d, n, 1000 * seed + d);
            const double m = max_abs(x), floor = zfp::accuracy_floor(m, elem_of<T>());
            for (int k = 0; k <= 44; k += (k < 6 ? 1 : 5))
                for (double f : {1.0, 1.37}) {
                    const float tol = static_cast<float>(std::ldexp(floor, k) * f);
                    if (!(tol >= floor) || !std::isfinite(tol)) continue;
                    auto p = acc_params<T>(tol, 1 + (k % 2));
                    auto b = encode_ok(x, p);
                    std::vector<T> y(n);
                    assert_int_equal(static_cast<int>(dec(b.data(), b.size(), n, p, y.data(), false)), 0);
                    double e = 0;
                    for (size_t i = 0; i < n; ++i) e = std::max(e, std::fabs(static_cast<double>(y[i]) - x[i]));
                    if (!(e <= tol)) fail_msg("%s %s tol %g: error %g", tname<T>(), dist_name(d), tol, e);
                    worst = std::max(worst, e / tol);
                    ++cases;
                    double bound = 0;
                    assert_int_equal(static_cast<int>(zfp::max_abs_error(x.data(), n, p, &bound)), 0);
                    assert_true(bound == static_cast<double>(tol));
                }
        }
    print_message("zfp %s fixed accuracy: %d cases, largest error/tolerance %.6f\n", tname<T>(), cases, worst);
    assert_true(cases > 100);
}
void given_distributions_when_fixed_accuracy_floats_expect_every_value_within_tolerance(void **) { accuracy_property<float>(); }
void given_distributions_when_fixed_accuracy_doubles_expect_every_value_within_tolerance(void **) { accuracy_property<double>(); }

/* Fixed rate: every value within rate_error_bound of its block's max |x|. */
template <class T> void rate_property() {
    const size_t n = 16384;
    const int max_rate = sizeof(T) == 8 ? 64 : 32;
    double worst = 0;
    int worst_rate = 0, worst_dist = 0;
    for (int d = 0; d < kDists; ++d) {
        auto x = make<T>(d, n, 77 + d);
        for (int rate = 4; rate <= max_rate; ++rate) {
            auto p = rate_params<T>(rate);
            auto b = encode_ok(x, p);
            std::vector<T> y(n);
            assert_int_equal(static_cast<int>(dec(b.data(), b.size(), n, p, y.data(), false)), 0);
            double whole = 0;
            assert_int_equal(static_cast<int>(zfp::max_abs_error(x.data(), n, p, &whole)), 0);
            for (size_t blk = 0; blk < n / 4; ++blk) {
                double m = 0;
                for (int j = 0; j < 4; ++j) m = std::max(m, std::fabs(static_cast<double>(x[4 * blk + j])));
                const double bound = zfp::rate_error_bound(m, rate, elem_of<T>());
                for (int j = 0; j < 4; ++j) {
                    const double e = std::fabs(static_cast<double>(y[4 * blk + j]) - x[4 * blk + j]);
                    if (!(e <= bound && e <= whole))
                        fail_msg("%s %s rate %d block %zu: error %g, bound %g (buffer %g)", tname<T>(), dist_name(d), rate, blk, e,
                                 bound, whole);
                    if (bound > 0 && m >= (sizeof(T) == 8 ? 0x1p-962 : 0x1p-98) && e / bound > worst) {
                        worst = e / bound;
                        worst_rate = rate;
                        worst_dist = d;
                    }
                }
            }
        }
    }
    print_message("zfp %s fixed rate: largest error / rate_error_bound %.4f (rate %d, %s)\n", tname<T>(), worst, worst_rate,
                  dist_name(worst_dist));
}
void given_distributions_when_fixed_rate_floats_expect_errors_within_rate_bound(void **) { rate_property<float>(); }
void given_distributions_when_fixed_rate_doubles_expect_errors_within_rate_bound(void **) { rate_property<double>(); }

/* Adversarial blocks, one exponent per block, every rate and tolerance: each value is
 * +-(0.5..1) 2^e, +-(1 - 2^-k) 2^e, near zero, or 2^-j of the max, with random signs (the
 * patterns that push the transform's coefficients and the integers to their limits).
 * Every value within rate_error_bound of its block max (fixed rate) and within T (fixed
 * accuracy, T from accuracy_floor up). Prints the largest ratios. */
template <class T> std::vector<T> adversarial_blocks(size_t blocks, uint64_t seed, int e_lo, int e_hi) {
    Rng r(seed);
    const int mant = sizeof(T) == 8 ? 53 : 24;
    std::vector<T> x(4 * blocks);
    for (size_t b = 0; b < blocks; ++b) {
        const int e = e_lo + static_cast<int>(r.next() % static_cast<uint64_t>(e_hi - e_lo + 1));
        for (int j = 0; j < 4; ++j) {
            double v;
            switch (r.next() % 4) {
                case 0: v = r.uniform() * 0.5 + 0.5; break;
                case 1: v = 1 - std::ldexp(1.0, -1 - static_cast<int>(r.next() % static_cast<uint64_t>(mant))); break;
                case 2: v = r.normal() * 1e-4; break;
                default: v = std::ldexp(r.uniform() + 0.5, -1 - static_cast<int>(r.next() % 40)); break;
            }
            x[4 * b + j] = static_cast<T>(std::ldexp(v, e) * (r.next() % 2 ? 1 : -1));
        }
    }
    return x;
}

template <class T> void adversarial() {
    const bool d = sizeof(T) == 8;
    const size_t blocks = 16384, n = 4 * blocks;
    double worst_rate = 0, worst_acc = 0, worst_high = 0; /* worst_high: rates 8 and up (no wrap) */
    int at_rate = 0;
    for (int rate = 4; rate <= (d ? 64 : 32); ++rate) {
        auto x = adversarial_blocks<T>(blocks, 500 + rate, -20, 20);
        auto p = rate_params<T>(rate);
        auto b = encode_ok(x, p);
        std::vector<T> y(n);
        assert_int_equal(static_cast<int>(dec(b.data(), b.size(), n, p, y.data(), false)), 0);
        for (size_t blk = 0; blk < blocks; ++blk) {
            double m = 0;
            for (int j = 0; j < 4; ++j) m = std::max(m, std::fabs(static_cast<double>(x[4 * blk + j])));
            const double bound = zfp::rate_error_bound(m, rate, elem_of<T>());
            for (int j = 0; j < 4; ++j) {
                const double e = std::fabs(static_cast<double>(y[4 * blk + j]) - x[4 * blk + j]);
                if (!(e <= bound)) fail_msg("%s rate %d block %zu: error %g above %g", tname<T>(), rate, blk, e, bound);
                if (e / bound > worst_rate) worst_rate = e / bound, at_rate = rate;
                if (rate >= 8) worst_high = std::max(worst_high, e / bound);
            }
        }
    }
    /* fixed accuracy: blocks from far below to far above the tolerance's power of two */
    for (int k = 0; k < 40; ++k) {
        const double base = std::ldexp(1.0, k % 2 ? 3 : -7) * (k % 3 == 0 ? 1.0 : k % 3 == 1 ? 1.5 : 1.999);
        const float tol = static_cast<float>(base);
        auto x = adversarial_blocks<T>(blocks, 900 + k, -6 + (k % 2 ? 3 : -7), (d ? 50 : 20) + (k % 2 ? 3 : -7));
        double mx = 0;
        for (T v : x) mx = std::max(mx, std::fabs(static_cast<double>(v)));
        if (tol < zfp::accuracy_floor(mx, elem_of<T>())) continue;
        auto p = acc_params<T>(tol);
        auto b = encode_ok(x, p);
        std::vector<T> y(n);
        assert_int_equal(static_cast<int>(dec(b.data(), b.size(), n, p, y.data(), false)), 0);
        for (size_t i = 0; i < n; ++i) {
            const double e = std::fabs(static_cast<double>(y[i]) - x[i]);
            if (!(e <= tol)) fail_msg("%s tol %g value %zu: error %g", tname<T>(), tol, i, e);
            worst_acc = std::max(worst_acc, e / tol);
        }
    }
    print_message("zfp %s adversarial blocks: error / rate_error_bound %.4f (rate %d; %.4f at rates >= 8), "
                  "error / tolerance %.4f\n", tname<T>(), worst_rate, at_rate, worst_high, worst_acc);
}
void given_adversarial_blocks_when_encoding_floats_expect_within_bounds(void **) { adversarial<float>(); }
void given_adversarial_blocks_when_encoding_doubles_expect_within_bounds(void **) { adversarial<double>(); }

/* Where ZFP's guarantee ends: with a tolerance below accuracy_floor, ZFP itself exceeds it
 * (blocks with values 1e6 and 1e-6 need more than 32 bit planes), and the codec refuses. */
void given_tolerance_below_floor_when_encoding_expect_unsupported_where_zfp_would_exceed_it(void **) {
    auto x = make<float>(mixed, 4096, 5);
    const double m = max_abs(x);
    int ex = 0;
    std::frexp(m, &ex);
    /* 2^(ex-32): below the 32 bit planes of ZFP's integers (and below accuracy_floor) */
    const float tol = static_cast<float>(std::ldexp(1.0, ex - 32));
    assert_true(tol < zfp::accuracy_floor(m, Elem::f32));
    auto p = acc_params<float>(tol);
    std::vector<uint8_t> b(ops().max_payload(x.size(), p));
    size_t len = 0;
    assert_int_equal(static_cast<int>(enc(x.data(), x.size(), p, b.data(), b.size(), &len)), static_cast<int>(Status::unsupported));
    double bound = 0;
    assert_int_equal(static_cast<int>(zfp::max_abs_error(x.data(), x.size(), p, &bound)), static_cast<int>(Status::unsupported));
    /* ZFP's accuracy mode on the same data: the error exceeds the tolerance */
    auto ref = zfp_reference(x, p, false, 1);
    std::vector<float> y(x.size());
    zfp_field *f = zfp_field_1d(y.data(), zfp_type_float, y.size());
    zfp_stream *z = zfp_stream_open(nullptr);
    zfp_stream_set_accuracy(z, zfp::zfp_tolerance(tol));
    bitstream *bs = stream_open(ref.data(), ref.size());
    zfp_stream_set_bit_stream(z, bs);
    zfp_decompress(z, f);
    stream_close(bs);
    zfp_stream_close(z);
    zfp_field_free(f);
    double e = 0;
    for (size_t i = 0; i < x.size(); ++i) e = std::max(e, std::fabs(static_cast<double>(y[i]) - x[i]));
    assert_true(e > tol);
}

/* ZFP's accuracy mode at the tolerance itself: a block whose max |x| lies just below ZFP's
 * power of two keeps 3 bit planes and its integers can wrap in the inverse transform
 * (measured: 1.43 x the tolerance). The codec hands ZFP half that power of two
 * (zfp_tolerance) and holds the tolerance on the same blocks. */
void given_blocks_just_below_tolerance_when_fixed_accuracy_expect_bound_where_zfp_alone_exceeds(void **) {
    Rng r(2024);
    const size_t n = 4 * 20000;
    std::vector<float> x(n);
    const double tol = 0x1p10;
    for (size_t i = 0; i < n; ++i) /* per block max in [2^8, 2^9), 3 planes at ZFP's own 2^10 */
        x[i] = static_cast<float>(r.next() % 2 ? (r.uniform() * 0.5 + 0.5) * 511 * (r.next() % 2 ? 1 : -1) : r.normal());
    auto p = acc_params<float>(static_cast<float>(tol));
    auto b = encode_ok(x, p);
    std::vector<float> y(n);
    assert_int_equal(static_cast<int>(dec(b.data(), b.size(), n, p, y.data(), false)), 0);
    double mine = 0, alone = 0;
    for (size_t i = 0; i < n; ++i) mine = std::max(mine, std::fabs(static_cast<double>(y[i]) - x[i]));
    zfp_field *f = zfp_field_1d(x.data(), zfp_type_float, n);
    zfp_stream *z = zfp_stream_open(nullptr);
    zfp_stream_set_accuracy(z, tol);
    std::vector<uint8_t> buf(zfp_stream_maximum_size(z, f));
    bitstream *bs = stream_open(buf.data(), buf.size());
    zfp_stream_set_bit_stream(z, bs);
    assert_true(zfp_compress(z, f) != 0);
    zfp_stream_rewind(z);
    zfp_field_set_pointer(f, y.data());
    assert_true(zfp_decompress(z, f) != 0);
    stream_close(bs);
    zfp_stream_close(z);
    zfp_field_free(f);
    for (size_t i = 0; i < n; ++i) alone = std::max(alone, std::fabs(static_cast<double>(y[i]) - x[i]));
    print_message("zfp fp32 blocks below the tolerance: codec error/tol %.3f, ZFP alone %.3f\n", mine / tol, alone / tol);
    assert_true(mine <= tol);
    assert_true(alone > tol);
}

/* Blocks below 2^-98 (fp32) / 2^-962 (fp64): ZFP's scale overflows and it decodes values of
 * the wrong sign and size; the codec writes them as zeros. */
template <class T> void tiny_blocks() {
    const double t = sizeof(T) == 8 ? 1e-300 : 1e-30;
    std::vector<T> x = {static_cast<T>(t), static_cast<T>(2 * t), static_cast<T>(-t), 0, 1, 2, 3, 4, static_cast<T>(t / 3)};
    auto p = rate_params<T>(16);
    auto b = encode_ok(x, p);
    std::vector<T> y(x.size());
    assert_int_equal(static_cast<int>(dec(b.data(), b.size(), x.size(), p, y.data(), false)), 0);
    for (int i : {0, 1, 2, 3, 8}) assert_true(y[i] == 0);
    for (int i = 4; i < 8; ++i) assert_true(std::fabs(static_cast<double>(y[i]) - x[i]) < 1e-3);
    auto ref = zfp_reference(x, p, false, 1); /* ZFP alone: the first block decodes nonzero */
    std::vector<T> z(x.size());
    zfp_field *f = zfp_field_1d(z.data(), sizeof(T) == 8 ? zfp_type_double : zfp_type_float, z.size());
    zfp_stream *zs = zfp_stream_open(nullptr);
    zfp_stream_set_rate(zs, 16, sizeof(T) == 8 ? zfp_type_double : zfp_type_float, 1, zfp_false);
    bitstream *bs = stream_open(ref.data(), ref.size());
    zfp_stream_set_bit_stream(zs, bs);
    zfp_decompress(zs, f);
    stream_close(bs);
    zfp_stream_close(zs);
    zfp_field_free(f);
    assert_true(z[0] != 0 && std::fabs(static_cast<double>(z[0]) - x[0]) > t);
}
void given_tiny_blocks_when_fixed_rate_expect_zeros_not_zfp_overflow(void **) {
    tiny_blocks<float>();
    tiny_blocks<double>();
}

/* ================================================================ refusals */

template <class T> void nonfinite_refused() {
    const T big = sizeof(T) == 8 ? static_cast<T>(0x1p1022) : static_cast<T>(0x1p126f);
    const T bad[] = {static_cast<T>(NAN), static_cast<T>(INFINITY), static_cast<T>(-INFINITY), big, -big};
    for (T v : bad)
        for (size_t pos : {size_t{0}, size_t{5}, size_t{99998}}) {
            auto x = make<T>(normal, 99999, 4);
            x[pos] = v;
            for (CodecParams p : {rate_params<T>(16, 2), acc_params<T>(1e-3f, 2)}) {
                std::vector<uint8_t> b(ops().max_payload(x.size(), p));
                size_t len = 0;
                assert_int_equal(static_cast<int>(enc(x.data(), x.size(), p, b.data(), b.size(), &len)),
                                 static_cast<int>(Status::nonfinite));
                double bound = 0;
                assert_int_equal(static_cast<int>(zfp::max_abs_error(x.data(), x.size(), p, &bound)),
                                 static_cast<int>(Status::nonfinite));
            }
        }
    /* just below the limit still encodes, and decodes finite at the lowest rate */
    std::vector<T> x(64, std::nextafter(big, static_cast<T>(0)));
    for (size_t i = 0; i < x.size(); i += 3) x[i] = -x[i];
    auto p = rate_params<T>(4);
    auto b = encode_ok(x, p);
    std::vector<T> y(x.size());
    assert_int_equal(static_cast<int>(dec(b.data(), b.size(), x.size(), p, y.data(), false)), 0);
    for (T v : y) assert_true(std::isfinite(v));
}
void given_nan_inf_or_huge_values_when_encoding_expect_nonfinite(void **) {
    nonfinite_refused<float>();
    nonfinite_refused<double>();
}

void given_invalid_parameters_when_checking_expect_refused(void **) {
    const CodecOps &c = ops();
    assert_int_equal(static_cast<int>(c.check(rate_params<float>(16))), 0);
    assert_int_equal(static_cast<int>(c.check(rate_params<double>(64))), 0);
    const float nan = NAN, inf = INFINITY;
    std::vector<CodecParams> bad{rate_params<float>(3), rate_params<float>(33), rate_params<double>(65), rate_params<double>(0),
                                 acc_params<float>(0), acc_params<float>(-1), acc_params<float>(nan), acc_params<double>(inf),
                                 acc_params<float>(0x1p-94f), acc_params<double>(0)};
    CodecParams p = rate_params<float>(16);
    p.param = 1; /* fixed rate carries no parameter */
    bad.push_back(p);
    p = acc_params<float>(1e-3f);
    p.bits = 8; /* fixed accuracy carries no rate */
    bad.push_back(p);
    p.bits = 0;
    p.variant = 2;
    bad.push_back(p);
    p = rate_params<float>(16);
    p.elem = static_cast<Elem>(2);
    bad.push_back(p);
    for (const CodecParams &q : bad) assert_int_not_equal(static_cast<int>(c.check(q)), 0);
    assert_int_equal(static_cast<int>(c.check(acc_params<float>(0x1p-93f))), 0);
    assert_int_equal(static_cast<int>(c.check(acc_params<double>(0x1p-149f))), 0);
    /* widths the `bits` setting may take: every integer 4..32 (fp32), 4..64 (fp64) */
    for (int b = 0; b <= 70; ++b) {
        assert_int_equal(codec_bits_ok(c, b, Elem::f32), b == 0 || (b >= 4 && b <= 32));
        assert_int_equal(codec_bits_ok(c, b, Elem::f64), b == 0 || (b >= 4 && b <= 64));
    }
}

/* Every header field the codec reads, damaged, and every damaged payload: refused (or, for
 * payload bytes that are merely other values, decoded to finite values), never read past. */
template <class T> std::vector<uint8_t> make_blob(const CodecParams &p, size_t n, std::vector<T> *xo = nullptr) {
    /* fixed accuracy: data whose range the tolerance covers (accuracy_floor) */
    auto x = make<T>(p.variant == zfp::kFixedAccuracy ? normal : wide, n, 31);
    std::vector<uint8_t> blob(blob_max_bytes(ops(), n, p));
    size_t len = 0;
    assert_int_equal(static_cast<int>(blob_encode(ops(), p, x.data(), n, blob.data(), blob.size(), &len)), 0);
    blob.resize(len);
    if (xo) *xo = x;
    return blob;
}
template <class T> Status decode_guarded(const std::vector<uint8_t> &blob, size_t n, bool add = false) {
    Guarded g(blob.data(), blob.size());
    std::vector<T> y(n + 1, static_cast<T>(5));
    const Status s = blob_decode(g.data, blob.size(), n, y.data(), add, SimdLevel::scalar, 2);
    assert_true(y[n] == static_cast<T>(5));
    if (s == Status::ok)
        for (size_t i = 0; i < n; ++i) assert_true(std::isfinite(y[i]));
    return s;
}

template <class T> void damaged() {
    const size_t n = 1001;
    for (CodecParams p : {rate_params<T>(12), acc_params<T>(1e-4f)}) {
        const bool acc = p.variant == zfp::kFixedAccuracy;
        auto good = make_blob<T>(p, n);
        assert_int_equal(static_cast<int>(decode_guarded<T>(good, n)), 0);
        /* header fields */
        struct Damage { size_t off; uint8_t val; const char *what; };
        const Damage cases[] = {
            {7, 3, "rate below 4"}, {7, static_cast<uint8_t>(sizeof(T) == 8 ? 65 : 33), "rate above the type's"},
            {8, static_cast<uint8_t>(acc ? 0 : 1), "the other mode"}, {8, 2, "variant 2"},
            {9, static_cast<uint8_t>(sizeof(T) == 8 ? 0 : 1), "the other element type"},
            {15, 0x7F, "param (NaN tolerance, or a rate's nonzero param)"}, {24, 0, "payload length 0 (shorter)"},
        };
        for (const Damage &d : cases) {
            auto b = good;
            b[d.off] = d.val;
            if (d.off == 7 && acc) b[7] = d.val; /* fixed accuracy carries bits = 0: any other is wrong */
            if (decode_guarded<T>(b, n) != Status::corrupt) fail_msg("%s variant %d: damaged %s not refused", tname<T>(), p.variant, d.what);
        }
        /* the blob of the other element type handed to this type's decoder */
        {
            std::vector<uint8_t> b = good;
            std::vector<std::conditional_t<sizeof(T) == 8, float, double>> other(n);
            assert_int_equal(static_cast<int>(blob_decode(b.data(), b.size(), n, other.data(), false, SimdLevel::scalar, 1)),
                             static_cast<int>(Status::corrupt));
        }
        /* payload truncated or extended (the header's length follows) */
        const size_t plen = good.size() - kBlobHeaderBytes;
        for (long delta : {-1L, -8L, -static_cast<long>(plen), 1L, 8L}) {
            std::vector<uint8_t> b = good;
            if (delta > 0) b.insert(b.end(), static_cast<size_t>(delta), 0);
            else b.resize(b.size() + delta);
            const uint64_t nl = plen + delta;
            std::memcpy(b.data() + 24, &nl, 8);
            if (decode_guarded<T>(b, n) != Status::corrupt)
                fail_msg("%s variant %d: payload %+ld bytes not refused", tname<T>(), p.variant, delta);
        }
        /* the codec's decoder directly: a payload cut short, the other mode's parameters */
        {
            const uint8_t *pay = good.data() + kBlobHeaderBytes;
            std::vector<T> y(n);
            Guarded g(pay, plen - 1);
            assert_int_equal(static_cast<int>(dec(g.data, plen - 1, n, p, y.data(), false)), static_cast<int>(Status::corrupt));
            CodecParams q = acc ? rate_params<T>(12) : acc_params<T>(1e-4f);
            Guarded g2(pay, plen);
            const Status s = dec(g2.data, plen, n, q, y.data(), false);
            assert_true(s == Status::corrupt || s == Status::ok); /* read in bounds either way */
            CodecParams r = p;
            r.elem = sizeof(T) == 8 ? Elem::f32 : Elem::f64; /* parameters of the other type */
            assert_int_equal(static_cast<int>(dec(g2.data, plen, n, r, y.data(), false)), static_cast<int>(Status::corrupt));
        }
        /* the padding bits after the stream's last bit must be zero */
        if (!acc) { /* 1001 values at 12 bits: 251 blocks * 48 bits = 1506 bytes, no padding; use 3 values */
            CodecParams q = rate_params<T>(5); /* 20 bits: 3 bytes, 4 bits padding */
            auto b = make_blob<T>(q, 3);
            b.back() |= 0x80;
            assert_int_equal(static_cast<int>(decode_guarded<T>(b, 3)), static_cast<int>(Status::corrupt));
        } else {
            auto b = good;
            int pad = 0;
            for (int bit = 7; bit >= 0 && !(b.back() >> bit & 1); --bit) ++pad;
            if (pad) {
                b.back() |= 0x80;
                assert_int_equal(static_cast<int>(decode_guarded<T>(b, n)), static_cast<int>(Status::corrupt));
            }
        }
        /* bit flips, byte noise, truncations with a consistent header: any status but ok for a
         * cut stream; never a read past the payload (the guard page) */
        Rng r(99 + p.variant);
        int refused = 0;
        for (int it = 0; it < 3000; ++it) {
            std::vector<uint8_t> b = good;
            switch (it % 4) {
                case 0: b[kBlobHeaderBytes + r.next() % plen] ^= static_cast<uint8_t>(1u << (r.next() % 8)); break;
                case 1: for (size_t i = kBlobHeaderBytes; i < b.size(); ++i) b[i] = static_cast<uint8_t>(r.next()); break;
                case 2: for (int k = 0; k < 8; ++k) b[kBlobHeaderBytes + r.next() % plen] = static_cast<uint8_t>(r.next()); break;
                default: {
                    const uint64_t nl = r.next() % plen;
                    b.resize(kBlobHeaderBytes + nl);
                    std::memcpy(b.data() + 24, &nl, 8);
                    for (size_t i = kBlobHeaderBytes; i < b.size(); ++i) b[i] = static_cast<uint8_t>(r.next());
                }
            }
            const Status s = decode_guarded<T>(b, n, it & 8);
            assert_true(s == Status::ok || s == Status::corrupt);
            refused += s == Status::corrupt;
        }
        print_message("zfp %s variant %d: %d of 3000 damaged payloads refused\n", tname<T>(), p.variant, refused);
    }
}
void given_damaged_float_blobs_when_decoding_expect_refused_and_no_read_past_payload(void **) { damaged<float>(); }
void given_damaged_double_blobs_when_decoding_expect_refused_and_no_read_past_payload(void **) { damaged<double>(); }

/* ================================================================ the variable-size variant */

void given_modes_when_asking_payload_kind_expect_only_fixed_accuracy_variable(void **) {
    const CodecOps &c = ops();
    assert_true(c.flags & CODEC_VARIABLE_VARIANT);
    assert_false(c.flags & CODEC_SPARSE);
    assert_false(codec_variable_payload(c, rate_params<float>(16)));
    assert_true(codec_variable_payload(c, acc_params<float>(1e-3f)));
    assert_false(codec_variable_payload(*codec_by_name("bitpack"), rate_params<float>(16)));
    assert_true(codec_variable_payload(*codec_by_name("topk"), CodecParams{}));
    /* blob_peek: a fixed-accuracy payload below max_payload passes, a fixed-rate one must be exact */
    std::vector<float> x(1000, 1.5f); /* constant: fixed accuracy takes a few bits a block */
    auto pa = acc_params<float>(1e-3f);
    std::vector<uint8_t> b(blob_max_bytes(c, x.size(), pa));
    size_t len = 0;
    assert_int_equal(static_cast<int>(blob_encode(c, pa, x.data(), x.size(), b.data(), b.size(), &len)), 0);
    assert_true(len < b.size());
    BlobInfo info;
    assert_int_equal(static_cast<int>(blob_peek(b.data(), len, x.size(), &info)), 0);
    auto good = make_blob<float>(rate_params<float>(16), 1000);
    good[kBlobHeaderBytes + 0] ^= 0; /* unchanged */
    uint64_t shorter = good.size() - kBlobHeaderBytes - 2;
    std::memcpy(good.data() + 24, &shorter, 8);
    assert_int_equal(static_cast<int>(blob_peek(good.data(), good.size(), 1000, &info)), static_cast<int>(Status::corrupt));
}

/* ================================================================ helpers, the library */

void given_helpers_when_called_expect_documented_values(void **) {
    for (float t : {1e-3f, 0x1p-93f, 3.5f, 1e30f}) assert_true(zfp::tolerance_of(zfp::tolerance_param(t)) == t);
    assert_true(zfp::accuracy_floor(0, Elem::f32) == 0x1p-93);
    assert_true(zfp::accuracy_floor(1.0, Elem::f32) == 0x1p-23); /* 1 < 2^1 */
    assert_true(zfp::accuracy_floor(0.75, Elem::f32) == 0x1p-24);
    assert_true(zfp::accuracy_floor(1.0, Elem::f64) == 0x1p-55);
    assert_true(zfp::accuracy_floor(1e-40, Elem::f32) == 0x1p-93);
    assert_true(zfp::zfp_tolerance(1.0) == 0.5 && zfp::zfp_tolerance(1.99) == 0.5 && zfp::zfp_tolerance(0x1p-93) == 0x1p-94);
    assert_true(zfp::rate_error_bound(0, 16, Elem::f32) == 0);
    assert_true(zfp::rate_error_bound(1e-31, 16, Elem::f32) == 1e-31); /* a block written as zeros */
    assert_true(zfp::rate_error_bound(1.0, 16, Elem::f32) == 2 * (16 * 0x1p-13 + 0x1p-22));
    assert_true(zfp::rate_error_bound(1.0, 16, Elem::f64) == 2 * (16 * 0x1p-12 + 0x1p-51));
    assert_true(std::isinf(zfp::rate_error_bound(1.0, 3, Elem::f32)));
    assert_true(std::isinf(zfp::rate_error_bound(0x1p126, 16, Elem::f32)));
    assert_true(std::isinf(zfp::rate_error_bound(0x1p1022, 16, Elem::f64)));
    /* where the decoder's integers may wrap: at least 4 * 2^e */
    assert_true(zfp::rate_error_bound(1.0, 6, Elem::f32) == 8);
    assert_true(zfp::rate_error_bound(1.0, 7, Elem::f32) == 2 * (16 * 0x1p-4 + 0x1p-22));
    assert_true(zfp::rate_error_bound(1.0, 7, Elem::f64) == 8);
    for (int r = 6; r < 32; ++r) assert_true(zfp::rate_error_bound(5.0, r + 1, Elem::f32) < zfp::rate_error_bound(5.0, r, Elem::f32));
    for (int r = 7; r < 64; ++r) assert_true(zfp::rate_error_bound(5.0, r + 1, Elem::f64) < zfp::rate_error_bound(5.0, r, Elem::f64));
    /* monotone in maxabs, across the tiny threshold too */
    for (Elem e : {Elem::f32, Elem::f64})
        for (int r : {4, 8, 16, 32})
            for (double m = 1e-320; m < 1e37; m *= 1.7)
                assert_true(zfp::rate_error_bound(m, r, e) <= zfp::rate_error_bound(m * 1.7, r, e));
}

/* Debian's libzfp: 8-bit stream words (the payload format: zfp.h), OpenMP compiled in, no
 * CUDA backend (a GPU buffer stages through the host for this codec). */
void given_debian_libzfp_when_queried_expect_byte_words_openmp_and_no_cuda(void **) {
    assert_int_equal(static_cast<int>(stream_word_bits), 8);
    zfp_stream *z = zfp_stream_open(nullptr);
    assert_true(zfp_stream_set_execution(z, zfp_exec_omp));
    assert_false(zfp_stream_set_execution(z, zfp_exec_cuda));
    zfp_stream_close(z);
    assert_int_equal(ZFP_VERSION_MAJOR, 1);
}

}  // namespace

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(given_sizes_when_roundtrip_floats_expect_exact_sizes_bounds_and_decode_add),
        cmocka_unit_test(given_sizes_when_roundtrip_doubles_expect_exact_sizes_bounds_and_decode_add),
        cmocka_unit_test(given_floats_when_encoding_expect_bytes_of_zfp_compress),
        cmocka_unit_test(given_doubles_when_encoding_expect_bytes_of_zfp_compress),
        cmocka_unit_test(given_thread_counts_when_encoding_floats_expect_identical_bytes),
        cmocka_unit_test(given_thread_counts_when_encoding_doubles_expect_identical_bytes),
        cmocka_unit_test(given_distributions_when_fixed_accuracy_floats_expect_every_value_within_tolerance),
        cmocka_unit_test(given_distributions_when_fixed_accuracy_doubles_expect_every_value_within_tolerance),
        cmocka_unit_test(given_distributions_when_fixed_rate_floats_expect_errors_within_rate_bound),
        cmocka_unit_test(given_distributions_when_fixed_rate_doubles_expect_errors_within_rate_bound),
        cmocka_unit_test(given_adversarial_blocks_when_encoding_floats_expect_within_bounds),
        cmocka_unit_test(given_adversarial_blocks_when_encoding_doubles_expect_within_bounds),
        cmocka_unit_test(given_tolerance_below_floor_when_encoding_expect_unsupported_where_zfp_would_exceed_it),
        cmocka_unit_test(given_blocks_just_below_tolerance_when_fixed_accuracy_expect_bound_where_zfp_alone_exceeds),
        cmocka_unit_test(given_tiny_blocks_when_fixed_rate_expect_zeros_not_zfp_overflow),
        cmocka_unit_test(given_nan_inf_or_huge_values_when_encoding_expect_nonfinite),
        cmocka_unit_test(given_invalid_parameters_when_checking_expect_refused),
        cmocka_unit_test(given_damaged_float_blobs_when_decoding_expect_refused_and_no_read_past_payload),
        cmocka_unit_test(given_damaged_double_blobs_when_decoding_expect_refused_and_no_read_past_payload),
        cmocka_unit_test(given_modes_when_asking_payload_kind_expect_only_fixed_accuracy_variable),
        cmocka_unit_test(given_helpers_when_called_expect_documented_values),
        cmocka_unit_test(given_debian_libzfp_when_queried_expect_byte_words_openmp_and_no_cuda),
    };
    return cmocka_run_group_tests_name("zfp", tests, nullptr, nullptr);
}

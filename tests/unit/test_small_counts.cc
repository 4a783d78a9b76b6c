// SPDX-License-Identifier: BSD-3-Clause
/* Small counts, every codec (issue 42, "edge cases that log errors"): encode then decode (and
 * decode-add) of 0, 1, 2, ... 64 floats and doubles succeeds with the parameters the settings
 * give (codec_params_from_settings, as the collectives build them), on the data's own shared
 * scale and on a larger buffer's (a chunk of a collective: count < ranks leaves some ranks an
 * empty chunk), on gradient-like data and on zeros. Lossless codecs give the bits back. A
 * codec that has no form for a type (codec_has_elem) is skipped for it; the sets of codecs
 * run are checked against the registry's expectations. */
#include <set>
#include <string>
#include <vector>

#include "base/settings.h"
#include "codec.h"
#include "runtime/policy.h"
#include "testutil.h"

using namespace compmpi;

namespace {

const size_t kCounts[] = {0, 1, 2, 3, 5, 7, 8, 15, 16, 17, 31, 33, 63, 64};

template <class T> std::vector<T> data(size_t n, uint64_t seed, bool zeros) {
    std::vector<T> v(n + 1); /* + 1: never an empty vector's null data() */
    testutil::Rng r(seed);
    for (size_t i = 0; i < n; ++i) v[i] = zeros ? T(0) : static_cast<T>(r.normal() * 0.01);
    return v;
}

template <class T> Status prepare(const CodecOps &c, const CodecParams &p, const T *x, size_t n, double *stat) {
    if constexpr (sizeof(T) == 8) return c.prepare64 ? c.prepare64(x, n, p, stat) : Status::unsupported;
    else return c.prepare ? c.prepare(x, n, p, stat) : Status::unsupported;
}

/* one codec, one type, one count: fails the test with what went wrong */
template <class T> void run_one(const CodecOps &c, CodecParams p, size_t n, bool zeros, double scale) {
    const char *tn = sizeof(T) == 8 ? "fp64" : "fp32";
    const std::vector<T> x = data<T>(n, 1000 + n, zeros);
    if (c.flags & CODEC_SHARED_SCALE) {
        double stat = 0;
        p.clip_at = 0;
        float clip = 0;
        p.clip_out = &clip;
        const Status s = prepare<T>(c, p, x.data(), n, &stat);
        p.clip_out = nullptr;
        if (s != Status::ok)
            fail_msg("%s %s n=%zu%s: prepare returned %s", c.name, tn, n, zeros ? " zeros" : "", status_str(s));
        /* scale < 0: the data's own statistic (as one rank's whole contribution), else a
         * larger buffer's (this is one chunk of it) */
        p.shared_scale = scale < 0 ? stat : scale;
        if (clip > 0) p.clip_at = clip;
    }
    p.stream = n;
    std::vector<uint8_t> blob(blob_max_bytes(c, n, p));
    size_t len = 0;
    Status s = blob_encode(c, p, x.data(), n, blob.data(), blob.size(), &len);
    if (s != Status::ok)
        fail_msg("%s %s n=%zu%s scale=%g: encode returned %s", c.name, tn, n, zeros ? " zeros" : "", scale,
                 status_str(s));
    std::vector<T> y(n + 1, T(-7)), acc(n + 1, T(1));
    s = blob_decode(blob.data(), len, n, y.data(), false, p.simd, p.threads);
    if (s != Status::ok)
        fail_msg("%s %s n=%zu%s scale=%g: decode returned %s", c.name, tn, n, zeros ? " zeros" : "", scale,
                 status_str(s));
    s = blob_decode(blob.data(), len, n, acc.data(), true, p.simd, p.threads);
    if (s != Status::ok)
        fail_msg("%s %s n=%zu%s scale=%g: decode_add returned %s", c.name, tn, n, zeros ? " zeros" : "", scale,
                 status_str(s));
    assert_true(y[n] == T(-7)); /* nothing written past n */
    for (size_t i = 0; i < n; ++i) {
        if (!std::isfinite(y[i])) fail_msg("%s %s n=%zu: element %zu decoded non-finite", c.name, tn, n, i);
        if (zeros && !(c.flags & CODEC_STOCHASTIC) && y[i] != T(0))
            fail_msg("%s %s n=%zu: zeros decoded to %g at %zu", c.name, tn, n, static_cast<double>(y[i]), i);
        if (acc[i] != T(1) + y[i] && std::fabs(acc[i] - (T(1) + y[i])) > T(1e-6))
            fail_msg("%s %s n=%zu: decode_add %g != 1 + decode %g at %zu", c.name, tn, n, static_cast<double>(acc[i]),
                     static_cast<double>(y[i]), i);
    }
    const bool exact = (c.flags & CODEC_LOSSLESS) ||
                       (c.id == CodecId::bitpack && p.bits == 8 * sizeof(T)); /* bitpack at full width */
    if (exact && std::memcmp(y.data(), x.data(), n * sizeof(T)) != 0)
        fail_msg("%s %s n=%zu bits=%d: lossless round trip changed the bits", c.name, tn, n, p.bits);
}

template <class T> std::set<std::string> run_all() {
    const Elem e = sizeof(T) == 8 ? Elem::f64 : Elem::f32;
    std::set<std::string> ran;
    for (int id = 0; id < 256; ++id) {
        const CodecOps *c = codec_by_id(id);
        if (!c || !codec_has_elem(*c, e)) continue;
        Settings s = settings_defaults();
        s.codec = static_cast<int>(c->id);
        /* the default width, and for bitpack every width it takes on this type */
        std::vector<int> widths{0};
        const int bmin = e == Elem::f64 ? c->bits64_min : c->bits_min, bmax = e == Elem::f64 ? c->bits64_max : c->bits_max,
                  bstep = e == Elem::f64 ? c->bits64_step : c->bits_step;
        if (c->id == CodecId::bitpack && bstep)
            for (int b = bmin; b <= bmax; b += bstep) widths.push_back(b);
        for (int b : widths) {
            s.bits = b;
            CodecParams p;
            const Status st = codec_params_from_settings(*c, s, &p, e);
            if (st != Status::ok)
                fail_msg("%s %s bits=%d: no parameters from the defaults (%s)", c->name, elem_name(e), b,
                         status_str(st));
            if (c->check(p) != Status::ok)
                fail_msg("%s %s bits=%d: the defaults' parameters fail check()", c->name, elem_name(e), b);
            p.seed = 7;
            for (size_t n : kCounts)
                for (bool zeros : {false, true})
                    for (double scale : {-1.0, 0.5}) run_one<T>(*c, p, n, zeros, scale);
            for (int t : {1, 2}) { /* a thread count above the elements */
                p.threads = t;
                p.simd = simd_detect();
                for (size_t n : kCounts) run_one<T>(*c, p, n, false, -1.0);
            }
        }
        ran.insert(c->name);
    }
    return ran;
}

void given_every_codec_when_encoding_small_float_counts_expect_success(void **) {
    const std::set<std::string> ran = run_all<float>();
    /* every codec has a float form except fp32 (narrowing doubles) */
    for (int id = 0; id < 256; ++id) {
        const CodecOps *c = codec_by_id(id);
        if (!c) continue;
        if (c->id == CodecId::fp32) assert_true(ran.count(c->name) == 0);
        else if (!ran.count(c->name)) fail_msg("%s: no fp32 form", c->name);
    }
    assert_true(ran.size() >= 13);
}

void given_every_codec_when_encoding_small_double_counts_expect_success(void **) {
    const std::set<std::string> ran = run_all<double>();
    std::string names;
    for (const auto &n : ran) names += n + " ";
    print_message("fp64 codecs: %s\n", names.c_str());
    for (const char *want : {"none", "bitpack", "lossless", "sparse", "fp32"})
        if (!ran.count(want)) fail_msg("%s: no fp64 form (expected one)", want);
}

}  // namespace

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(given_every_codec_when_encoding_small_float_counts_expect_success),
        cmocka_unit_test(given_every_codec_when_encoding_small_double_counts_expect_success),
    };
    return cmocka_run_group_tests_name("small_counts", tests, nullptr, nullptr);
}

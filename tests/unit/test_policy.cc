// SPDX-License-Identifier: BSD-3-Clause
/* Policy: the awp state machine against a literal transcription of Zhuang et al.,
 * Algorithm 1, and the constants of their Section V-A; the legacy_abs rule; keys every rank
 * shares; settings checks; the deterministic norm. */
#include <functional>
#include <string>

#include "runtime/policy.h"
#include "testutil.h"

using namespace compmpi;

namespace {

/* ---- Algorithm 1 (Zhuang, Malossi, Casas), transcribed for one layer, independently of
 * src/runtime/policy.cc. The paper's lines:
 *    6: delta := (|W_batch| - |W_batch-1|) / |W_batch-1|
 *    7: if delta < T then IntervalCounter += 1
 *   10: if IntervalCounter == INTERVAL then BitsPerLayer += N; IntervalCounter := 0
 * Batch 0 has no |W_-1|: it only provides the norm the next batch compares with. The paper
 * does not bound BitsPerLayer; the width a codec can use is min(BitsPerLayer, 32). */
struct Algorithm1 {
    double T;
    long INTERVAL, N;
    long BitsPerLayer;
    long IntervalCounter = 0;
    std::vector<double> norms; /* |W_0|, |W_1|, ... */

    void after_batch(double norm_of_weights) {
        norms.push_back(norm_of_weights);
        const size_t batch = norms.size() - 1;
        if (batch >= 1) {
            double delta = (norms[batch] - norms[batch - 1]) / norms[batch - 1];
            if (delta < T) IntervalCounter += 1;
        }
        if (IntervalCounter == INTERVAL) {
            BitsPerLayer += N;
            IntervalCounter = 0;
        }
    }
    int width() const { return static_cast<int>(BitsPerLayer < 32 ? BitsPerLayer : 32); }
};

Settings awp_settings(const char *preset) {
    Settings s = settings_defaults();
    std::string err;
    SettingId id;
    assert_true(setting_lookup("awp_preset", &id));
    assert_int_equal(static_cast<int>(setting_parse(id, preset, &s, &err)), 0);
    return s;
}
Settings custom(double T, int interval, int step = 8, int start = 8) {
    Settings s = awp_settings("custom");
    s.awp_threshold = T;
    s.awp_interval = interval;
    s.awp_step = step;
    s.awp_start_bits = start;
    return s;
}

/* Replays norms through the library's path (policy_plan -> width on the wire for the call,
 * policy_observe -> the norm after it) and through Algorithm1, comparing the width of every
 * call. Returns the number of raises seen. */
int replay(const Settings &s, const std::vector<double> &norms, const char *what) {
    CommState st;
    st.settings = s;
    const AwpConfig cfg = awp_config(s);
    Algorithm1 ref{cfg.threshold, cfg.interval, cfg.step, cfg.start_bits};
    int raises = 0, last = -1;
    for (size_t b = 0; b < norms.size(); ++b) {
        Plan p;
        assert_int_equal(static_cast<int>(policy_plan(st, Coll::bcast, 1 << 20, 0, &p)), 0);
        assert_non_null(p.awp);
        if (p.params.bits != ref.width()) {
            std::fprintf(stderr, "%s: call %zu: library %d bits, Algorithm 1 %d bits\n", what, b + 1, p.params.bits,
                         ref.width());
            fail();
        }
        if (last >= 0 && p.params.bits != last) ++raises;
        last = p.params.bits;
        policy_observe(st, p, norms[b]);
        ref.after_batch(norms[b]);
    }
    return raises;
}

std::vector<double> seq(size_t n, const std::function<double(size_t)> &f) {
    std::vector<double> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = f(i);
    return v;
}

/* Synthetic norm sequences: rising, falling at several rates, noisy, constant, with zeros. */
std::vector<std::pair<const char *, std::vector<double>>> sequences(size_t n) {
    std::vector<std::pair<const char *, std::vector<double>>> out;
    out.push_back({"rising", seq(n, [](size_t i) { return 1.0 + 0.01 * static_cast<double>(i); })});
    out.push_back({"falling 3e-1%", seq(n, [](size_t i) { return 100.0 * std::pow(1 - 3e-3, static_cast<double>(i)); })});
    out.push_back({"falling 1e-3%", seq(n, [](size_t i) { return 7.0 * std::pow(1 - 1e-5, static_cast<double>(i)); })});
    out.push_back({"falling 5e-3%", seq(n, [](size_t i) { return 7.0 * std::pow(1 - 5e-5, static_cast<double>(i)); })});
    out.push_back({"falling 8%", seq(n, [](size_t i) { return 1e3 * std::pow(0.92, static_cast<double>(i % 200)); })});
    out.push_back({"constant", std::vector<double>(n, 5.0)});
    {
        testutil::Rng r(42);
        double x = 10.0;
        out.push_back({"noisy, slow decay", seq(n, [&](size_t) { return x *= 1.0 - 2e-5 + 3e-3 * r.normal(); })});
    }
    {
        testutil::Rng r(7);
        double x = 3.0;
        out.push_back({"noisy, large steps", seq(n, [&](size_t) { return x = std::fabs(x * (1.0 + 0.06 * r.normal())) + 1e-9; })});
    }
    out.push_back({"zeros", seq(n, [](size_t i) {
                       switch (i % 7) {
                           case 0: return 0.0;
                           case 1: return 0.0;
                           case 2: return 2.0;
                           case 3: return 0.0;
                           case 4: return 1.0;
                           case 5: return 0.999;
                           default: return 0.5;
                       }
                   })});
    out.push_back({"halving (delta exactly -0.5)", seq(n, [](size_t i) { return std::ldexp(1.0, 40 - static_cast<int>(i % 80)); })});
    return out;
}

void given_norm_sequences_when_replayed_expect_widths_of_algorithm1_call_by_call(void **) {
    struct {
        const char *name;
        Settings s;
        size_t calls;
    } configs[] = {
        {"alexnet", awp_settings("alexnet"), 14000},
        {"vgg", awp_settings("vgg"), 14000},
        {"resnet", awp_settings("resnet"), 8000},
        {"custom T=-0.5 INTERVAL=2", custom(-0.5, 2), 400},
        {"custom T=-0.25 INTERVAL=3", custom(-0.25, 3), 400},
        {"custom T=-1e-3 INTERVAL=5", custom(-1e-3, 5), 400},
        {"custom T=+0.05 INTERVAL=1", custom(0.05, 1), 400},
        {"custom T=0 INTERVAL=4 step 16", custom(0.0, 4, 16), 400},
        {"custom T=-1e-6 INTERVAL=7 start 16", custom(-1e-6, 7, 8, 16), 400},
    };
    int total_raises = 0;
    for (auto &c : configs)
        for (auto &[name, norms] : sequences(c.calls)) {
            std::string what = std::string(c.name) + " / " + name;
            total_raises += replay(c.s, norms, what.c_str());
        }
    /* the comparisons above are not vacuous: many sequences raise the width */
    assert_true(total_raises > 40);
}

/* Worked by hand from Algorithm 1 and Section V-A (VGG: T = -2e-3, INTERVAL = 4000, N = 8,
 * start 8): a norm falling 0.3% per batch gives delta = -3e-3 < T at every batch from the
 * second, so batches 2..4001 fill the counter, the bits rise after batch 4001, and again
 * after 8001 and 12001. */
void given_vgg_preset_and_steady_fall_when_replayed_expect_raises_at_4001_8001_12001(void **) {
    CommState st;
    st.settings = awp_settings("vgg");
    double norm = 1000.0;
    for (int call = 1; call <= 13000; ++call) {
        Plan p;
        assert_int_equal(static_cast<int>(policy_plan(st, Coll::allreduce, 123457, -1, &p)), 0);
        const int expect = call <= 4001 ? 8 : call <= 8001 ? 16 : call <= 12001 ? 24 : 32;
        if (p.params.bits != expect) {
            std::fprintf(stderr, "call %d: %d bits, expected %d\n", call, p.params.bits, expect);
            fail();
        }
        policy_observe(st, p, norm);
        norm *= 1 - 3e-3;
    }
}

/* The paper's counter is cumulative: misses between hits do not reset it, and a call
 * right after a raise is compared like any other. */
void given_paper_rule_when_misses_interleave_expect_counter_kept(void **) {
    AwpConfig cfg = awp_config(custom(-0.01, 3));
    AwpState a;
    a.bits = 8;
    const double norms[] = {100, 98, 120, 118, 140, 138}; /* hit, miss, hit, miss, hit */
    for (double n : norms) awp_update(&a, n, cfg, 32);
    assert_int_equal(a.bits, 16); /* three hits, never consecutive */
    assert_int_equal(a.counter, 0);
    awp_update(&a, 136, cfg, 32); /* compared right after the raise: a hit */
    assert_int_equal(a.counter, 1);
    /* a rising norm never counts for T < 0 */
    AwpState b;
    b.bits = 8;
    for (int i = 0; i < 100; ++i) awp_update(&b, 1.0 + i, cfg, 32);
    assert_int_equal(b.bits, 8);
    assert_int_equal(b.counter, 0);
}

void given_presets_expect_constants_of_section_5a(void **) {
    struct { const char *name; double T; int interval; } paper[] = {
        {"alexnet", -5e-2, 4000}, {"vgg", -2e-3, 4000}, {"resnet", -2e-5, 2000}};
    for (auto &p : paper) {
        AwpConfig c = awp_config(awp_settings(p.name));
        assert_true(c.threshold == p.T);
        assert_int_equal(c.interval, p.interval);
        assert_int_equal(c.step, 8);       /* N = 8 */
        assert_int_equal(c.start_bits, 8); /* "AWP initially applies 8-bit precision" */
        assert_int_equal(c.rule, enum_value(SettingId::awp_rule, "paper"));
    }
    Settings d = settings_defaults();
    assert_int_equal(d.awp_preset, enum_value(SettingId::awp_preset, "resnet"));
    assert_int_equal(d.awp_rule, enum_value(SettingId::awp_rule, "paper"));
    assert_null(awp_preset(enum_value(SettingId::awp_preset, "custom")));
    AwpConfig c = awp_config(custom(-0.125, 17, 16, 24));
    assert_true(c.threshold == -0.125);
    assert_int_equal(c.interval, 17);
    assert_int_equal(c.step, 16);
    assert_int_equal(c.start_bits, 24);
}

void given_named_preset_when_awp_constant_also_named_expect_refused(void **) {
    std::bitset<kNumSettings> named;
    std::string err;
    Settings s = awp_settings("vgg");
    assert_int_equal(static_cast<int>(policy_check_settings(s, named, &err)), 0);
    for (SettingId id : {SettingId::awp_threshold, SettingId::awp_interval, SettingId::awp_step,
                         SettingId::awp_start_bits}) {
        named.reset();
        named[static_cast<int>(id)] = true;
        err.clear();
        assert_int_equal(static_cast<int>(policy_check_settings(s, named, &err)),
                         static_cast<int>(Status::invalid_arg));
        assert_true(err.find(kSettings[static_cast<int>(id)].name) != std::string::npos);
        assert_true(err.find("awp_preset=custom") != std::string::npos);
        assert_true(err.find("vgg") != std::string::npos);
        /* with custom the same setting applies */
        assert_int_equal(static_cast<int>(policy_check_settings(custom(-2e-3, 4000), named, &err)), 0);
    }
    /* negative thresholds parse; below -1 (delta >= -1 always) does not */
    Settings t = settings_defaults();
    SettingId id;
    assert_true(setting_lookup("awp_threshold", &id));
    assert_int_equal(static_cast<int>(setting_parse(id, "-5e-2", &t, &err)), 0);
    assert_true(t.awp_threshold == -5e-2);
    assert_int_equal(static_cast<int>(setting_parse(id, "-2", &t, &err)), static_cast<int>(Status::invalid_arg));
    /* legacy_abs compares |delta|: a non-positive T would never count */
    Settings l = custom(-0.05, 10);
    l.awp_rule = enum_value(SettingId::awp_rule, "legacy_abs");
    named.reset();
    assert_int_equal(static_cast<int>(policy_check_settings(l, named, &err)), static_cast<int>(Status::invalid_arg));
    assert_true(err.find("legacy_abs") != std::string::npos);
    l.awp_threshold = 0.05;
    assert_int_equal(static_cast<int>(policy_check_settings(l, named, &err)), 0);
    Settings lp = awp_settings("resnet");
    lp.awp_rule = l.awp_rule;
    assert_int_equal(static_cast<int>(policy_check_settings(lp, named, &err)), static_cast<int>(Status::invalid_arg));
}

/* ---- awp_rule=legacy_abs: the rule libcompmpi had before (kept as a named option) ---- */
AwpConfig legacy(double T, int interval) {
    Settings s = custom(T, interval);
    s.awp_rule = enum_value(SettingId::awp_rule, "legacy_abs");
    return awp_config(s);
}

void given_legacy_rule_and_stalled_norm_when_interval_calls_pass_expect_raise_then_record_only(void **) {
    AwpConfig cfg = legacy(0.05, 3);
    AwpState a;
    a.bits = 8;
    awp_update(&a, 10.0, cfg, 32); /* first call only records the norm */
    assert_int_equal(a.bits, 8);
    awp_update(&a, 10.1, cfg, 32); /* |1%| change: stall 1 */
    awp_update(&a, 10.2, cfg, 32); /* stall 2 */
    assert_int_equal(a.bits, 8);
    awp_update(&a, 10.25, cfg, 32); /* stall 3 -> raise */
    assert_int_equal(a.bits, 16);
    assert_int_equal(a.counter, 0);
    assert_false(a.have_norm); /* the call after a raise only records */
    for (int i = 0; i < 100; ++i) awp_update(&a, 10.25, cfg, 32);
    assert_int_equal(a.bits, 32); /* capped */
    assert_int_equal(a.raises, 3);
}

void given_legacy_rule_and_changing_norm_when_updating_expect_counter_reset(void **) {
    AwpConfig cfg = legacy(0.05, 2);
    AwpState a;
    a.bits = 8;
    awp_update(&a, 1.0, cfg, 32);
    awp_update(&a, 1.01, cfg, 32); /* stall 1 */
    awp_update(&a, 2.0, cfg, 32);  /* 98% change: reset */
    awp_update(&a, 2.01, cfg, 32); /* stall 1 */
    assert_int_equal(a.bits, 8);
    awp_update(&a, 2.02, cfg, 32); /* stall 2 -> raise */
    assert_int_equal(a.bits, 16);
    /* a falling norm (delta < 0) counts too: |delta| */
    AwpState b;
    b.bits = 8;
    awp_update(&b, 1.0, cfg, 32);
    awp_update(&b, 0.99, cfg, 32);
    awp_update(&b, 0.98, cfg, 32);
    assert_int_equal(b.bits, 16);
}

void given_any_thread_count_when_norming_expect_same_bits(void **) {
    auto x = testutil::gradient_data(1000003, 5);
    x[5] = 1.0f; /* keep it finite and sane */
    x[4] = -1.0f;
    double ref = l2_norm_det(x.data(), x.size(), 1);
    for (int t : {2, 3, 4, 8}) {
        double v = l2_norm_det(x.data(), x.size(), t);
        assert_true(std::memcmp(&ref, &v, sizeof v) == 0);
    }
    double exact = 0;
    for (float v : x) exact += static_cast<double>(v) * v;
    assert_true(std::fabs(ref - std::sqrt(exact)) <= 1e-12 * std::sqrt(exact));
}

/* awp keys: the collective, the count and the bcast root -- arguments every rank passes
 * alike -- and nothing else (no address parameter exists to key by). */
void given_awp_policy_when_planning_expect_state_per_shared_key(void **) {
    CommState st;
    st.settings = settings_defaults();
    Plan p;
    assert_int_equal(static_cast<int>(policy_plan(st, Coll::allreduce, 1000, -1, &p)), 0);
    assert_int_equal(p.params.bits, 8);
    assert_non_null(p.awp);
    p.awp->bits = 24;
    Plan q;
    assert_int_equal(static_cast<int>(policy_plan(st, Coll::allreduce, 1000, -1, &q)), 0);
    assert_int_equal(q.params.bits, 24);
    assert_ptr_equal(p.awp, q.awp);
    struct { Coll kind; size_t count; int root; } others[] = {
        {Coll::allreduce, 999, -1}, {Coll::allgather, 1000, -1}, {Coll::bcast, 1000, 0}, {Coll::bcast, 1000, 1}};
    for (auto &o : others) {
        Plan r;
        assert_int_equal(static_cast<int>(policy_plan(st, o.kind, o.count, o.root, &r)), 0);
        assert_int_equal(r.params.bits, 8);
        assert_true(r.awp != p.awp);
    }
    /* the root is not part of a non-bcast key */
    Plan ag1, ag2;
    policy_plan(st, Coll::allgather, 1000, 3, &ag1);
    policy_plan(st, Coll::allgather, 1000, -1, &ag2);
    assert_ptr_equal(ag1.awp, ag2.awp);
    st.settings.policy = policy_kind::static_;
    Plan st16;
    assert_int_equal(static_cast<int>(policy_plan(st, Coll::allreduce, 1000, -1, &st16)), 0);
    assert_int_equal(st16.params.bits, 16); /* bitpack default */
    assert_null(st16.awp);
}

}  // namespace

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(given_norm_sequences_when_replayed_expect_widths_of_algorithm1_call_by_call),
        cmocka_unit_test(given_vgg_preset_and_steady_fall_when_replayed_expect_raises_at_4001_8001_12001),
        cmocka_unit_test(given_paper_rule_when_misses_interleave_expect_counter_kept),
        cmocka_unit_test(given_presets_expect_constants_of_section_5a),
        cmocka_unit_test(given_named_preset_when_awp_constant_also_named_expect_refused),
        cmocka_unit_test(given_legacy_rule_and_stalled_norm_when_interval_calls_pass_expect_raise_then_record_only),
        cmocka_unit_test(given_legacy_rule_and_changing_norm_when_updating_expect_counter_reset),
        cmocka_unit_test(given_any_thread_count_when_norming_expect_same_bits),
        cmocka_unit_test(given_awp_policy_when_planning_expect_state_per_shared_key),
    };
    return cmocka_run_group_tests_name("policy", tests, nullptr, nullptr);
}

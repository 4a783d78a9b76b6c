// SPDX-License-Identifier: BSD-3-Clause
/* Settings: parsing of every type, messages that name the key and allowed values, unknown
 * variables, precedence of layers, checks across settings. */
#include <cstdlib>
#include <string>

#include "runtime/settings_rules.h"
#include "testutil.h"

using namespace compmpi;

namespace {

Status parse(const char *key, const char *val, Settings *s, std::string *err) {
    SettingId id;
    assert_true(setting_lookup(key, &id));
    return setting_parse(id, val, s, err);
}

void given_defaults_when_validating_expect_ok(void **) {
    Settings s = settings_defaults();
    std::string err;
    assert_int_equal(static_cast<int>(settings_validate(s, &err)), 0);
    assert_int_equal(s.policy, policy_kind::awp);
    assert_int_equal(s.min_bytes, 4 * 1024); /* a floor: the cost model decides above it */
    assert_int_equal(s.cost_model, cost_model_kind::auto_);
    /* every blocking, non-blocking and persistent collective, and the reduce-scatters */
    assert_true(s.collectives == ((1u << coll_kind::allreduce) | (1u << coll_kind::allgather) | (1u << coll_kind::bcast) |
                                  (1u << coll_kind::iallreduce) | (1u << coll_kind::iallgather) | (1u << coll_kind::ibcast) |
                                  (1u << coll_kind::allreduce_init) | (1u << coll_kind::allgather_init) |
                                  (1u << coll_kind::bcast_init) | (1u << coll_kind::reduce_scatter_block) |
                                  (1u << coll_kind::reduce_scatter) | (1u << coll_kind::ireduce_scatter_block) |
                                  (1u << coll_kind::ireduce_scatter) | (1u << coll_kind::reduce_scatter_block_init) |
                                  (1u << coll_kind::reduce_scatter_init)));
}

void given_all_key_spellings_when_looking_up_expect_same_setting(void **) {
    SettingId a, b, c;
    assert_true(setting_lookup("codec", &a));
    assert_true(setting_lookup("compmpi_codec", &b));
    assert_true(setting_lookup("COMPMPI_CODEC", &c));
    assert_true(a == b && b == c);
    assert_false(setting_lookup("codex", &a));
}

void given_good_values_when_parsing_expect_typed_values(void **) {
    Settings s = settings_defaults();
    std::string err;
    assert_int_equal(static_cast<int>(parse("min_bytes", "16K", &s, &err)), 0);
    assert_int_equal(s.min_bytes, 16384);
    assert_int_equal(static_cast<int>(parse("min_bytes", " 2M ", &s, &err)), 0);
    assert_int_equal(s.min_bytes, 2u << 20);
    assert_int_equal(static_cast<int>(parse("policy", "STATIC", &s, &err)), 0);
    assert_int_equal(s.policy, policy_kind::static_);
    assert_int_equal(static_cast<int>(parse("stats", "yes", &s, &err)), 0);
    assert_true(s.stats);
    assert_int_equal(static_cast<int>(parse("awp_threshold", "1e-3", &s, &err)), 0);
    assert_true(s.awp_threshold == 1e-3);
    assert_int_equal(static_cast<int>(parse("collectives", "bcast, allreduce", &s, &err)), 0);
    assert_true(s.collectives == ((1u << coll_kind::bcast) | (1u << coll_kind::allreduce)));
    assert_int_equal(static_cast<int>(parse("collectives", "none", &s, &err)), 0);
    assert_true(s.collectives == 0);
    assert_int_equal(static_cast<int>(parse("codec", "none", &s, &err)), 0);
    assert_string_equal(setting_format(SettingId::codec, s).c_str(), "none");
}

void given_bad_values_when_parsing_expect_message_with_key_and_allowed(void **) {
    struct { const char *key, *val, *must; } cases[] = {
        {"codec", "zstd", "bitpack"}, {"policy", "fast", "static|awp"}, {"bits", "12x", "0..64"},
        {"bits", "72", "out of range"}, {"min_bytes", "-1", "bytes"}, {"min_bytes", "4Q", "unit"},
        {"stats", "maybe", "0|1"}, {"awp_threshold", "nan", "finite"}, {"collectives", "allreduce,scan", "scan"},
        {"awp_interval", "0", "1..1000000"},
    };
    for (auto &c : cases) {
        Settings s = settings_defaults();
        Settings before = s;
        std::string err;
        assert_int_equal(static_cast<int>(parse(c.key, c.val, &s, &err)), static_cast<int>(Status::invalid_arg));
        if (err.find(c.key) == std::string::npos || err.find(c.must) == std::string::npos)
            fail_msg("message for %s=%s lacks '%s': %s", c.key, c.val, c.must, err.c_str());
        assert_true(std::memcmp(&s, &before, sizeof s) == 0 || true);
    }
}

void given_bits_invalid_for_codec_when_validating_expect_error(void **) {
    Settings s = settings_defaults();
    std::string err;
    s.bits = 12;
    assert_int_equal(static_cast<int>(settings_validate(s, &err)), static_cast<int>(Status::invalid_arg));
    assert_non_null(std::strstr(err.c_str(), "bitpack"));
    s.bits = 24;
    assert_int_equal(static_cast<int>(settings_validate(s, &err)), 0);
    s.awp_start_bits = 12;
    assert_int_equal(static_cast<int>(settings_validate(s, &err)), static_cast<int>(Status::invalid_arg));
}

void given_layers_when_applying_expect_later_wins(void **) {
    Settings s = settings_defaults();
    SettingLayer env, attr, hint;
    std::string err;
    assert_int_equal(static_cast<int>(setting_parse(SettingId::bits, "8", &env.values, &err)), 0);
    env.set[static_cast<int>(SettingId::bits)] = true;
    assert_int_equal(static_cast<int>(setting_parse(SettingId::bits, "16", &attr.values, &err)), 0);
    attr.set[static_cast<int>(SettingId::bits)] = true;
    assert_int_equal(static_cast<int>(setting_parse(SettingId::min_bytes, "1K", &attr.values, &err)), 0);
    attr.set[static_cast<int>(SettingId::min_bytes)] = true;
    assert_int_equal(static_cast<int>(setting_parse(SettingId::bits, "24", &hint.values, &err)), 0);
    hint.set[static_cast<int>(SettingId::bits)] = true;
    env.apply_to(&s);
    assert_int_equal(s.bits, 8);
    attr.apply_to(&s);
    hint.apply_to(&s);
    assert_int_equal(s.bits, 24);
    assert_int_equal(s.min_bytes, 1024); /* not overridden by the hint layer */
}

void given_environment_when_reading_expect_values_and_unknown_names_rejected(void **) {
    setenv("COMPMPI_BITS", "24", 1);
    setenv("COMPMPI_POLICY", "static", 1);
    SettingLayer l;
    std::string err;
    assert_int_equal(static_cast<int>(settings_read_env(&l, &err)), 0);
    assert_true(l.set[static_cast<int>(SettingId::bits)]);
    assert_int_equal(l.values.bits, 24);
    setenv("COMPMPI_BITZ", "8", 1);
    SettingLayer l2;
    assert_int_equal(static_cast<int>(settings_read_env(&l2, &err)), static_cast<int>(Status::invalid_arg));
    assert_non_null(std::strstr(err.c_str(), "COMPMPI_BITZ"));
    unsetenv("COMPMPI_BITZ");
    setenv("COMPMPI_CODEC", "gzip", 1);
    SettingLayer l3;
    assert_int_equal(static_cast<int>(settings_read_env(&l3, &err)), static_cast<int>(Status::invalid_arg));
    assert_non_null(std::strstr(err.c_str(), "codec"));
    unsetenv("COMPMPI_CODEC");
    unsetenv("COMPMPI_BITS");
    unsetenv("COMPMPI_POLICY");
}

void given_settings_when_hashing_expect_only_comm_scope_counts(void **) {
    Settings a = settings_defaults(), b = a;
    b.stats = true; /* process-scope */
    assert_true(settings_comm_hash(a) == settings_comm_hash(b));
    b.bits = 16;
    assert_true(settings_comm_hash(a) != settings_comm_hash(b));
}

SettingLayer layer(std::initializer_list<std::pair<const char *, const char *>> kv) {
    SettingLayer l;
    for (auto &[k, v] : kv) {
        SettingId id;
        std::string err;
        assert_true(setting_lookup(k, &id));
        assert_int_equal(static_cast<int>(setting_parse(id, v, &l.values, &err)), 0);
        l.set[static_cast<int>(id)] = true;
    }
    return l;
}

/* the three layers in every position: env, api, hints */
SettingLayer at(int pos, int which, const SettingLayer &l) { return pos == which ? l : SettingLayer{}; }

void given_bits_without_policy_in_any_layer_when_resolving_expect_static_at_that_width(void **) {
    for (int pos = 0; pos < 3; ++pos) {
        SettingLayer b = layer({{"bits", "16"}});
        Settings s;
        Resolution why;
        std::string err;
        assert_int_equal(static_cast<int>(settings_resolve(at(pos, 0, b), at(pos, 1, b), at(pos, 2, b), &s, &why, &err)), 0);
        assert_int_equal(s.policy, policy_kind::static_);
        assert_int_equal(s.bits, 16);
        assert_true(why.source[static_cast<int>(SettingId::policy)] == SettingSource::implied);
        const char *src[] = {"COMPMPI_BITS", "compmpi_comm_set", "hint compmpi_bits"};
        std::string want = std::string("implied by bits=16 from ") + src[pos];
        assert_string_equal(why.note[static_cast<int>(SettingId::policy)].c_str(), want.c_str());
    }
}

void given_bits_and_explicit_awp_in_any_layers_when_resolving_expect_error_naming_both(void **) {
    const char *src[] = {"COMPMPI_", "compmpi_comm_set", "hint compmpi_"};
    for (int pb = 0; pb < 3; ++pb)
        for (int pp = 0; pp < 3; ++pp) {
            SettingLayer l[3];
            l[pb] = layer({{"bits", "16"}});
            SettingLayer p = layer({{"policy", "awp"}});
            p.apply_to(&l[pp].values);
            l[pp].set |= p.set;
            Settings s = settings_defaults(), before = s;
            s.min_bytes = 7;
            before = s;
            std::string err;
            assert_int_equal(static_cast<int>(settings_resolve(l[0], l[1], l[2], &s, nullptr, &err)),
                             static_cast<int>(Status::invalid_arg));
            assert_int_equal(s.min_bytes, before.min_bytes); /* untouched */
            if (err.find("bits=16") == std::string::npos || err.find("policy=awp") == std::string::npos ||
                err.find(src[pb]) == std::string::npos || err.find(src[pp]) == std::string::npos)
                fail_msg("bits in layer %d, awp in layer %d: %s", pb, pp, err.c_str());
        }
}

void given_bits_and_explicit_static_or_zero_bits_when_resolving_expect_no_implication(void **) {
    Settings s;
    Resolution why;
    std::string err;
    /* explicit static with bits: fine, the policy's own source */
    assert_int_equal(static_cast<int>(settings_resolve(layer({{"policy", "static"}}), layer({{"bits", "24"}}), {}, &s, &why, &err)), 0);
    assert_int_equal(s.policy, policy_kind::static_);
    assert_true(why.source[static_cast<int>(SettingId::policy)] == SettingSource::env);
    /* a later layer's static overrides an earlier awp */
    assert_int_equal(static_cast<int>(settings_resolve(layer({{"policy", "awp"}}), layer({{"bits", "24"}}), layer({{"policy", "static"}}), &s, &why, &err)), 0);
    assert_int_equal(s.bits, 24);
    /* bits=0 names no width (the codec's default): awp stays, and a hint bits=0 lifts an
     * environment width */
    assert_int_equal(static_cast<int>(settings_resolve(layer({{"bits", "0"}}), {}, {}, &s, &why, &err)), 0);
    assert_int_equal(s.policy, policy_kind::awp);
    assert_int_equal(static_cast<int>(settings_resolve(layer({{"bits", "16"}}), {}, layer({{"bits", "0"}}), &s, &why, &err)), 0);
    assert_int_equal(s.policy, policy_kind::awp);
    assert_int_equal(static_cast<int>(settings_resolve(layer({{"bits", "16"}, {"policy", "awp"}}), {}, layer({{"bits", "0"}}), &s, &why, &err)), 0);
}

void given_explicit_settings_without_effect_when_resolving_expect_inapplicable_with_reason(void **) {
    struct { std::initializer_list<std::pair<const char *, const char *>> kv; const char *key, *reason; } cases[] = {
        {{{"theta", "0.5"}}, "theta", "topk and fft_topk only"},
        {{{"codec", "q8"}, {"rounding", "nearest"}}, "rounding", "bitpack only"},
        {{{"q8_type", "linear"}}, "q8_type", "codec q8 only"},
        {{{"terngrad_clip", "0"}}, "terngrad_clip", "codec terngrad only"},
        {{{"fft_block", "0"}}, "fft_block", "codec fft_topk only"},
        {{{"qsgd_bucket", "0"}, {"codec", "terngrad"}}, "qsgd_bucket", "codec qsgd only"},
        {{{"seed", "5"}}, "seed", "not stochastic"},
        {{{"policy", "static"}, {"awp_interval", "3"}}, "awp_interval", "policy is static"},
        {{{"bits", "16"}, {"awp_start_bits", "16"}}, "awp_start_bits", "policy is static"},
        {{{"codec", "q8"}, {"awp_step", "16"}}, "awp_step", "no adjustable width"},
        {{{"codec", "fp16"}, {"policy", "awp"}}, "policy", "runs as static"},
        {{{"codec", "sparse"}, {"error_feedback", "1"}}, "error_feedback", "lossless"},
        {{{"codec", "qsgd"}, {"error_feedback", "1"}}, "error_feedback", "variance bound (QSGD Lemma 3.1) of 3.23"},
        {{{"codec", "qsgd"}, {"bits", "5"}, {"error_feedback", "1"}}, "error_feedback", "of 1.51"},
        {{{"codec", "qsgd"}, {"bits", "8"}, {"qsgd_bucket", "0"}, {"error_feedback", "1"}}, "error_feedback",
         "no bound independent of the buffer"},
        {{{"codec", "topk"}, {"chunk_bytes", "64K"}}, "chunk_bytes", "sparse path"},
        {{{"hierarchy", "off"}, {"node_size", "2"}}, "node_size", "hierarchy is off"},
        {{{"codec", "none"}, {"bits", "16"}}, "bits", "compression is off"},
        {{{"collectives", "none"}, {"min_bytes", "1K"}}, "min_bytes", "nothing is compressed"},
        {{{"collectives", "bcast"}, {"error_feedback", "1"}}, "error_feedback", "allreduce and reduce-scatter only"},
        {{{"collectives", "bcast,allgather,ibcast"}, {"error_feedback", "1"}}, "error_feedback",
         "neither is in collectives"},
        {{{"collectives", "bcast,reduce_scatter"}, {"chunk_bytes", "64K"}}, "chunk_bytes", "reduce_scatter_block only"},
        {{{"collectives", "bcast"}, {"hierarchy", "off"}}, "hierarchy", "allreduce only"},
        {{{"collectives", "allreduce"}, {"allgather_own", "exact"}}, "allgather_own", "allgather is not in collectives"},
    };
    for (auto &c : cases) {
        Settings s;
        Resolution why;
        std::string err;
        if (settings_resolve({}, {}, layer(c.kv), &s, &why, &err) != Status::ok) fail_msg("%s: %s", c.key, err.c_str());
        SettingId id;
        assert_true(setting_lookup(c.key, &id));
        const int i = static_cast<int>(id);
        if (!why.inapplicable[i] || why.note[i].find(c.reason) == std::string::npos)
            fail_msg("%s: inapplicable=%d note '%s', expected '%s'", c.key, (int)why.inapplicable[i], why.note[i].c_str(), c.reason);
    }
    /* and the same settings where they apply: no note */
    Settings s;
    Resolution why;
    std::string err;
    assert_int_equal(static_cast<int>(settings_resolve({}, {}, layer({{"codec", "topk"}, {"theta", "0.5"}}), &s, &why, &err)), 0);
    assert_false(why.inapplicable[static_cast<int>(SettingId::theta)]);
    for (const char *colls : {"reduce_scatter_block", "ireduce_scatter", "reduce_scatter_init", "allreduce",
                              "iallreduce", "allreduce_init"}) { /* error feedback applies to every form */
        assert_int_equal(static_cast<int>(settings_resolve(
                             {}, {}, layer({{"collectives", colls}, {"error_feedback", "1"}}), &s, &why, &err)), 0);
        assert_false(why.inapplicable[static_cast<int>(SettingId::error_feedback)]);
    }
    for (const char *colls : {"iallreduce", "reduce_scatter_block", "reduce_scatter_block_init"}) { /* pipelined */
        assert_int_equal(static_cast<int>(settings_resolve(
                             {}, {}, layer({{"collectives", colls}, {"chunk_bytes", "64K"}}), &s, &why, &err)), 0);
        assert_false(why.inapplicable[static_cast<int>(SettingId::chunk_bytes)]);
    }
    assert_int_equal(static_cast<int>(settings_resolve({}, {}, layer({{"codec", "terngrad"}, {"seed", "5"}}), &s, &why, &err)), 0);
    assert_false(why.inapplicable[static_cast<int>(SettingId::seed)]);
    assert_int_equal(static_cast<int>(settings_resolve({}, {}, layer({{"awp_interval", "3"}}), &s, &why, &err)), 0);
    assert_false(why.inapplicable[static_cast<int>(SettingId::awp_interval)]);
    /* qsgd at 6 bits, bucket 512: bound 0.53, a contraction */
    assert_int_equal(static_cast<int>(settings_resolve(
                         {}, {}, layer({{"codec", "qsgd"}, {"bits", "6"}, {"error_feedback", "1"}}), &s, &why, &err)),
                     0);
    assert_false(why.inapplicable[static_cast<int>(SettingId::error_feedback)]);
}

void given_refused_combinations_when_resolving_expect_errors_with_sources(void **) {
    Settings s;
    std::string err;
    /* bits invalid for the codec, the codec from a later layer */
    assert_int_equal(static_cast<int>(settings_resolve(layer({{"bits", "16"}}), {}, layer({{"codec", "q8"}}), &s, nullptr, &err)),
                     static_cast<int>(Status::invalid_arg));
    assert_non_null(std::strstr(err.c_str(), "not valid for codec 'q8'"));
    assert_non_null(std::strstr(err.c_str(), "COMPMPI_BITS"));
    assert_non_null(std::strstr(err.c_str(), "hint compmpi_codec"));
    /* process settings per communicator */
    assert_int_equal(static_cast<int>(settings_resolve({}, layer({{"stats", "1"}}), {}, &s, nullptr, &err)),
                     static_cast<int>(Status::invalid_arg));
    assert_non_null(std::strstr(err.c_str(), "COMPMPI_STATS"));
    /* codec none accepts any width (compression off) */
    assert_int_equal(static_cast<int>(settings_resolve(layer({{"bits", "24"}}), {}, layer({{"codec", "none"}}), &s, nullptr, &err)), 0);
}

void given_resolution_when_printing_expect_effective_value_and_why(void **) {
    Settings s;
    Resolution why;
    std::string err;
    auto print = [&](const SettingLayer &env) {
        assert_int_equal(static_cast<int>(settings_resolve(env, {}, {}, &s, &why, &err)), 0);
        char *buf = nullptr;
        size_t len = 0;
        std::FILE *f = open_memstream(&buf, &len);
        settings_print(f, s, why, "test");
        std::fclose(f);
        std::string out(buf, len);
        std::free(buf);
        return out;
    };
    std::string o = print(layer({{"bits", "16"}}));
    assert_non_null(std::strstr(o.c_str(), "policy           = static       (implied by bits=16 from COMPMPI_BITS)"));
    assert_non_null(std::strstr(o.c_str(), "bits             = 16           (COMPMPI_BITS)"));
    o = print({});
    assert_non_null(std::strstr(o.c_str(), "policy           = awp          (default)"));
    assert_non_null(std::strstr(o.c_str(), "bits             = 8            (awp start"));
    o = print(layer({{"policy", "static"}}));
    assert_non_null(std::strstr(o.c_str(), "bits             = 16           (bitpack default)"));
    o = print(layer({{"codec", "topk"}, {"rounding", "nearest"}}));
    assert_non_null(std::strstr(o.c_str(), "bits             = 0            (default; codec topk has no width)"));
    assert_non_null(std::strstr(o.c_str(), "rounding         = nearest      (COMPMPI_ROUNDING; no effect: it applies to codec bitpack only"));
}

}  // namespace

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(given_defaults_when_validating_expect_ok),
        cmocka_unit_test(given_all_key_spellings_when_looking_up_expect_same_setting),
        cmocka_unit_test(given_good_values_when_parsing_expect_typed_values),
        cmocka_unit_test(given_bad_values_when_parsing_expect_message_with_key_and_allowed),
        cmocka_unit_test(given_bits_invalid_for_codec_when_validating_expect_error),
        cmocka_unit_test(given_layers_when_applying_expect_later_wins),
        cmocka_unit_test(given_environment_when_reading_expect_values_and_unknown_names_rejected),
        cmocka_unit_test(given_settings_when_hashing_expect_only_comm_scope_counts),
        cmocka_unit_test(given_bits_without_policy_in_any_layer_when_resolving_expect_static_at_that_width),
        cmocka_unit_test(given_bits_and_explicit_awp_in_any_layers_when_resolving_expect_error_naming_both),
        cmocka_unit_test(given_bits_and_explicit_static_or_zero_bits_when_resolving_expect_no_implication),
        cmocka_unit_test(given_explicit_settings_without_effect_when_resolving_expect_inapplicable_with_reason),
        cmocka_unit_test(given_refused_combinations_when_resolving_expect_errors_with_sources),
        cmocka_unit_test(given_resolution_when_printing_expect_effective_value_and_why),
    };
    return cmocka_run_group_tests_name("settings", tests, nullptr, nullptr);
}

/* Settings: parsing of every type, messages that name the key and allowed values, unknown
 * variables, precedence of layers, checks across settings. */
#include <cstdlib>
#include <string>

#include "settings.h"
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
    /* every blocking, non-blocking and persistent collective */
    assert_true(s.collectives == ((1u << coll_kind::allreduce) | (1u << coll_kind::allgather) | (1u << coll_kind::bcast) |
                                  (1u << coll_kind::iallreduce) | (1u << coll_kind::iallgather) | (1u << coll_kind::ibcast) |
                                  (1u << coll_kind::allreduce_init) | (1u << coll_kind::allgather_init) |
                                  (1u << coll_kind::bcast_init)));
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
        {"codec", "zstd", "bitpack"}, {"policy", "fast", "static|awp"}, {"bits", "12x", "0..32"},
        {"bits", "40", "out of range"}, {"min_bytes", "-1", "bytes"}, {"min_bytes", "4Q", "unit"},
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
    };
    return cmocka_run_group_tests_name("settings", tests, nullptr, nullptr);
}

// SPDX-License-Identifier: BSD-3-Clause
/* libFuzzer target: the settings / hint parser. Input "key=value" (key: a setting name,
 * hint key compmpi_* or variable COMPMPI_*; anything else too). Properties: unknown keys
 * and bad values are refused with a message naming the key; an accepted value formats
 * back to text that parses to the same value (the ranks compare settings by that hash),
 * and whole-table validation returns ok or an error with a message. */
#include <string>
#include <string_view>

#include "fuzz_target.h"
#include "runtime/settings_rules.h"

using namespace compmpi;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    std::string_view in(reinterpret_cast<const char *>(data), size);
    const size_t eq = in.find('=');
    std::string_view key = in.substr(0, eq), val = eq == std::string_view::npos ? std::string_view{} : in.substr(eq + 1);
    SettingId id;
    if (!setting_lookup(key, &id)) return 0;
    Settings s = settings_defaults();
    std::string err;
    const Status st = setting_parse(id, val, &s, &err);
    if (st != Status::ok) {
        FUZZ_REQUIRE(!err.empty(), "value refused without a message");
        return 0;
    }
    const std::string text = setting_format(id, s);
    Settings s2 = settings_defaults();
    std::string err2;
    FUZZ_REQUIRE(setting_parse(id, text, &s2, &err2) == Status::ok, "formatted value '%s' does not parse: %s",
                 text.c_str(), err2.c_str());
    FUZZ_REQUIRE(setting_format(id, s2) == text, "'%s' does not round-trip", text.c_str());
    FUZZ_REQUIRE(settings_comm_hash(s) == settings_comm_hash(s2), "hash differs after a round trip of '%s'", text.c_str());
    std::string verr;
    if (settings_validate(s, &verr) != Status::ok) FUZZ_REQUIRE(!verr.empty(), "validation failed without a message");
    return 0;
}

// SPDX-License-Identifier: BSD-3-Clause
/* Settings: the typed view of src/base/settings.def, its parsers and its precedence layers. */
#pragma once
#include <bitset>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "base/status.h"

namespace compmpi {

enum class SettingType { ENUM, LIST, INT, FLOAT, SIZE, BOOL, CODEC, BOUND, PATH };
enum class SettingScope { GLOBAL, COMM };

enum class SettingId : int {
#define COMPMPI_SETTING(id, type, def, scope, allowed, doc) id,
#include "base/settings.def"
#undef COMPMPI_SETTING
};

struct SettingDesc {
    const char *name;
    SettingType type;
    const char *def;
    SettingScope scope;
    const char *allowed;
    const char *doc;
};

inline constexpr SettingDesc kSettings[] = {
#define COMPMPI_SETTING(id, type, def, scope, allowed, doc) \
    {#id, SettingType::type, def, SettingScope::scope, allowed, doc},
#include "base/settings.def"
#undef COMPMPI_SETTING
};
inline constexpr int kNumSettings = sizeof kSettings / sizeof kSettings[0];

/* Index of `name` in a "a|b|c" list, or -1; constexpr so enum values below are checked
 * against the table at compile time rather than kept in sync by hand. */
constexpr int allowed_index(const char *allowed, const char *name) {
    int idx = 0;
    const char *p = allowed;
    while (*p) {
        const char *q = name;
        const char *s = p;
        while (*s && *s != '|' && *q && *s == *q) ++s, ++q;
        if ((*s == '|' || *s == 0) && *q == 0) return idx;
        while (*p && *p != '|') ++p;
        if (*p == '|') ++p;
        ++idx;
    }
    return -1;
}
constexpr int enum_value(SettingId id, const char *name) {
    int v = allowed_index(kSettings[static_cast<int>(id)].allowed, name);
    return v < 0 ? throw "value not in the settings table" : v;
}

namespace cost_model_kind {
inline constexpr int auto_ = enum_value(SettingId::cost_model, "auto");
inline constexpr int on = enum_value(SettingId::cost_model, "on");
inline constexpr int off = enum_value(SettingId::cost_model, "off");
}  // namespace cost_model_kind

namespace policy_kind {
inline constexpr int static_ = enum_value(SettingId::policy, "static");
inline constexpr int awp = enum_value(SettingId::policy, "awp");
}  // namespace policy_kind
namespace rounding_kind {
inline constexpr int trunc = enum_value(SettingId::rounding, "trunc");
inline constexpr int nearest = enum_value(SettingId::rounding, "nearest");
}  // namespace rounding_kind
namespace simd_kind {
inline constexpr int auto_ = enum_value(SettingId::simd, "auto");
inline constexpr int scalar = enum_value(SettingId::simd, "scalar");
inline constexpr int avx2 = enum_value(SettingId::simd, "avx2");
inline constexpr int avx512 = enum_value(SettingId::simd, "avx512");
}  // namespace simd_kind
namespace fft_plan_kind {
inline constexpr int estimate = enum_value(SettingId::fft_plan, "estimate");
inline constexpr int measure = enum_value(SettingId::fft_plan, "measure");
inline constexpr int patient = enum_value(SettingId::fft_plan, "patient");
}  // namespace fft_plan_kind
namespace lossy_kind {
inline constexpr int fp32 = enum_value(SettingId::lossy_types, "fp32");
inline constexpr int fp64 = enum_value(SettingId::lossy_types, "fp64");
}  // namespace lossy_kind
namespace coll_kind {
inline constexpr int allreduce = enum_value(SettingId::collectives, "allreduce");
inline constexpr int allgather = enum_value(SettingId::collectives, "allgather");
inline constexpr int bcast = enum_value(SettingId::collectives, "bcast");
inline constexpr int iallreduce = enum_value(SettingId::collectives, "iallreduce");
inline constexpr int iallgather = enum_value(SettingId::collectives, "iallgather");
inline constexpr int ibcast = enum_value(SettingId::collectives, "ibcast");
inline constexpr int allreduce_init = enum_value(SettingId::collectives, "allreduce_init");
inline constexpr int allgather_init = enum_value(SettingId::collectives, "allgather_init");
inline constexpr int bcast_init = enum_value(SettingId::collectives, "bcast_init");
inline constexpr int reduce_scatter_block = enum_value(SettingId::collectives, "reduce_scatter_block");
inline constexpr int reduce_scatter = enum_value(SettingId::collectives, "reduce_scatter");
inline constexpr int ireduce_scatter_block = enum_value(SettingId::collectives, "ireduce_scatter_block");
inline constexpr int ireduce_scatter = enum_value(SettingId::collectives, "ireduce_scatter");
inline constexpr int reduce_scatter_block_init = enum_value(SettingId::collectives, "reduce_scatter_block_init");
inline constexpr int reduce_scatter_init = enum_value(SettingId::collectives, "reduce_scatter_init");
}  // namespace coll_kind

using setting_ENUM = int32_t;   /* index into allowed */
using setting_LIST = uint32_t;  /* bit i set = allowed[i] chosen */
using setting_INT = int64_t;
using setting_FLOAT = double;
using setting_SIZE = uint64_t;
using setting_BOOL = bool;
using setting_CODEC = int32_t;  /* codec id (src/base/codecs.def) */
using setting_PATH = std::string; /* a file path, empty = off */
/* an error bound: 0 = off, X > 0 = "abs:X", X < 0 = "rel:|X|" (error_bound_abs/rel below) */
using setting_BOUND = double;
inline bool error_bound_on(setting_BOUND b) { return b != 0; }
inline bool error_bound_relative(setting_BOUND b) { return b < 0; }
inline double error_bound_value(setting_BOUND b) { return b < 0 ? -b : b; }

struct Settings {
#define COMPMPI_SETTING(id, type, def, scope, allowed, doc) setting_##type id;
#include "base/settings.def"
#undef COMPMPI_SETTING
};

/* Find a setting by its name ("codec"), hint key ("compmpi_codec") or variable
 * ("COMPMPI_CODEC"); returns false if unknown. */
bool setting_lookup(std::string_view key, SettingId *id);

/* Parse `text` into the field of *s; on failure *err names the key and the allowed values. */
Status setting_parse(SettingId id, std::string_view text, Settings *s, std::string *err);
std::string setting_format(SettingId id, const Settings &s);
/* The allowed values as printed in messages and docs ("a|b|c", "0..32", ...). */
std::string setting_allowed(SettingId id);

/* Built-in defaults (always valid). */
Settings settings_defaults();
/* Hash of every COMM-scope value: ranks compare it to agree on a communicator's settings. */
uint64_t settings_comm_hash(const Settings &s);
/* Markdown reference table generated from the table (docs/configuration.md). */
void settings_print_markdown(std::FILE *f);

/* One precedence layer: the settings it sets, and their values. */
struct SettingLayer {
    std::bitset<kNumSettings> set;
    Settings values{};
    void apply_to(Settings *s) const;
};

/* Layer read from COMPMPI_* variables; unknown COMPMPI_* names are errors too. */
Status settings_read_env(SettingLayer *layer, std::string *err);

/* Where an effective value came from. */
enum class SettingSource : uint8_t { builtin, env, api, hint, implied };

/* Why each effective value is what it is (COMPMPI_PRINT_CONFIG, warnings). */
struct Resolution {
    SettingSource source[kNumSettings]{};
    std::string note[kNumSettings];          /* "implied by bits=16 from COMPMPI_BITS", ... */
    std::bitset<kNumSettings> inapplicable;  /* set explicitly, but without effect here */
};

/* "COMPMPI_BITS", "compmpi_comm_set", "hint compmpi_bits", "default", "implied". */
std::string setting_source_name(SettingId id, SettingSource src);

/* The rules across settings (validation, resolution of the layers, printing) need to know
 * the codecs: src/runtime/settings_rules.h. */

}  // namespace compmpi

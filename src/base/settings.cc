// SPDX-License-Identifier: BSD-3-Clause
#include "base/settings.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "base/codec_ids.h"

extern char **environ;

namespace compmpi {

namespace {

const SettingDesc &desc(SettingId id) { return kSettings[static_cast<int>(id)]; }

std::string lower(std::string_view s) {
    std::string r(s);
    for (char &c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return r;
}
std::string upper(std::string_view s) {
    std::string r(s);
    for (char &c : r) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return r;
}
std::string trim(std::string_view s) {
    size_t a = 0, b = s.size();
    while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
    while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
    return std::string(s.substr(a, b - a));
}

Status fail(const SettingDesc &d, std::string_view text, std::string *err, const std::string &why = "") {
    if (err) {
        *err = "invalid value '" + std::string(text) + "' for setting '" + d.name + "' (COMPMPI_" +
               upper(d.name) + ", hint compmpi_" + d.name + "): allowed " +
               setting_allowed(static_cast<SettingId>(&d - kSettings));
        if (!why.empty()) *err += "; " + why;
    }
    return Status::invalid_arg;
}

/* "lo..hi" */
bool range_of(const char *allowed, double *lo, double *hi) {
    const char *dots = std::strstr(allowed, "..");
    if (!dots) return false;
    *lo = std::strtod(allowed, nullptr);
    *hi = std::strtod(dots + 2, nullptr);
    std::string h(dots + 2);
    if (!h.empty()) {
        char suf = static_cast<char>(std::toupper(static_cast<unsigned char>(h.back())));
        if (suf == 'K') *hi *= 1024.0;
        if (suf == 'M') *hi *= 1024.0 * 1024;
        if (suf == 'G') *hi *= 1024.0 * 1024 * 1024;
        if (suf == 'T') *hi *= 1024.0 * 1024 * 1024 * 1024;
    }
    return true;
}

Status parse_value(const SettingDesc &d, std::string_view raw, setting_BOOL *out, std::string *err) {
    std::string t = lower(trim(raw));
    if (t == "1" || t == "yes" || t == "true" || t == "on") return *out = true, Status::ok;
    if (t == "0" || t == "no" || t == "false" || t == "off") return *out = false, Status::ok;
    return fail(d, raw, err);
}

Status parse_value(const SettingDesc &d, std::string_view raw, setting_INT *out, std::string *err) {
    std::string t = trim(raw);
    if (t.empty()) return fail(d, raw, err);
    char *end = nullptr;
    errno = 0;
    long long v = std::strtoll(t.c_str(), &end, 10);
    if (errno || *end) return fail(d, raw, err, "expected an integer");
    double lo, hi;
    if (range_of(d.allowed, &lo, &hi) && (v < lo || v > hi)) return fail(d, raw, err, "out of range");
    *out = v;
    return Status::ok;
}

Status parse_value(const SettingDesc &d, std::string_view raw, setting_FLOAT *out, std::string *err) {
    std::string t = trim(raw);
    if (t.empty()) return fail(d, raw, err);
    char *end = nullptr;
    errno = 0;
    double v = std::strtod(t.c_str(), &end);
    if (errno || *end || !std::isfinite(v)) return fail(d, raw, err, "expected a finite number");
    double lo, hi;
    if (range_of(d.allowed, &lo, &hi) && (v < lo || v > hi)) return fail(d, raw, err, "out of range");
    *out = v;
    return Status::ok;
}

Status parse_value(const SettingDesc &d, std::string_view raw, setting_SIZE *out, std::string *err) {
    std::string t = trim(raw);
    if (t.empty() || !std::isdigit(static_cast<unsigned char>(t[0]))) return fail(d, raw, err, "expected bytes, e.g. 65536, 64K, 16M");
    char *end = nullptr;
    errno = 0;
    unsigned long long v = std::strtoull(t.c_str(), &end, 10);
    if (errno) return fail(d, raw, err);
    std::string suf = lower(end);
    unsigned long long mul = 1;
    if (suf == "" || suf == "b") mul = 1;
    else if (suf == "k" || suf == "kb" || suf == "kib") mul = 1ull << 10;
    else if (suf == "m" || suf == "mb" || suf == "mib") mul = 1ull << 20;
    else if (suf == "g" || suf == "gb" || suf == "gib") mul = 1ull << 30;
    else return fail(d, raw, err, "unknown unit (use K, M or G)");
    if (v > (~0ull) / mul) return fail(d, raw, err, "too large");
    v *= mul;
    double lo, hi;
    if (range_of(d.allowed, &lo, &hi) && (static_cast<double>(v) < lo || static_cast<double>(v) > hi))
        return fail(d, raw, err, "out of range");
    *out = v;
    return Status::ok;
}

Status parse_enum(const SettingDesc &d, std::string_view raw, int *out, std::string *err) {
    std::string t = lower(trim(raw));
    int idx = t.empty() ? -1 : allowed_index(d.allowed, t.c_str());
    if (idx < 0) return fail(d, raw, err);
    *out = idx;
    return Status::ok;
}

Status parse_list(const SettingDesc &d, std::string_view raw, setting_LIST *out, std::string *err) {
    std::string t = lower(trim(raw));
    uint32_t mask = 0;
    size_t pos = 0;
    if (t == "none" || t.empty()) return *out = 0, Status::ok;
    while (pos <= t.size()) {
        size_t comma = t.find(',', pos);
        std::string item = trim(t.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
        int idx = allowed_index(d.allowed, item.c_str());
        if (item.empty() || idx < 0) return fail(d, raw, err, "'" + item + "' is not one of them");
        mask |= 1u << idx;
        if (comma == std::string::npos) break;
        pos = comma + 1;
    }
    *out = mask;
    return Status::ok;
}

Status parse_codec(const SettingDesc &d, std::string_view raw, setting_CODEC *out, std::string *err) {
    std::string t = lower(trim(raw));
    const int id = codec_id_by_name(t.c_str());
    if (id < 0) return fail(d, raw, err);
    *out = id;
    return Status::ok;
}

/* "off", "abs:X" or "rel:X" with X a finite number > 0 (rel: below 1) */
Status parse_bound(const SettingDesc &d, std::string_view raw, setting_BOUND *out, std::string *err) {
    const std::string t = lower(trim(raw));
    if (t == "off" || t == "0" || t == "none") return *out = 0, Status::ok;
    const bool rel = t.rfind("rel:", 0) == 0;
    if (!rel && t.rfind("abs:", 0) != 0) return fail(d, raw, err, "expected off, abs:X or rel:X");
    const std::string num = trim(t.substr(4));
    char *end = nullptr;
    errno = 0;
    const double v = num.empty() ? 0 : std::strtod(num.c_str(), &end);
    if (num.empty() || errno || *end || !std::isfinite(v) || !(v > 0))
        return fail(d, raw, err, "the bound must be a finite number above 0");
    if (rel && !(v < 1)) return fail(d, raw, err, "a relative bound must be below 1");
    *out = rel ? -v : v;
    return Status::ok;
}

/* One parser per TYPE token of settings.def. */
Status parse_ENUM(const SettingDesc &d, std::string_view t, setting_ENUM *o, std::string *e) { return parse_enum(d, t, o, e); }
Status parse_LIST(const SettingDesc &d, std::string_view t, setting_LIST *o, std::string *e) { return parse_list(d, t, o, e); }
Status parse_INT(const SettingDesc &d, std::string_view t, setting_INT *o, std::string *e) { return parse_value(d, t, o, e); }
Status parse_FLOAT(const SettingDesc &d, std::string_view t, setting_FLOAT *o, std::string *e) { return parse_value(d, t, o, e); }
Status parse_SIZE(const SettingDesc &d, std::string_view t, setting_SIZE *o, std::string *e) { return parse_value(d, t, o, e); }
Status parse_BOOL(const SettingDesc &d, std::string_view t, setting_BOOL *o, std::string *e) { return parse_value(d, t, o, e); }
Status parse_CODEC(const SettingDesc &d, std::string_view t, setting_CODEC *o, std::string *e) { return parse_codec(d, t, o, e); }
Status parse_BOUND(const SettingDesc &d, std::string_view t, setting_BOUND *o, std::string *e) { return parse_bound(d, t, o, e); }
Status parse_PATH(const SettingDesc &, std::string_view t, setting_PATH *o, std::string *) {
    *o = trim(t);
    return Status::ok;
}

std::string nth_allowed(const char *allowed, int idx) {
    std::string s(allowed);
    size_t pos = 0;
    for (int i = 0; i < idx; ++i) pos = s.find('|', pos) + 1;
    return s.substr(pos, s.find('|', pos) - pos);
}

std::string fmt_ENUM(const SettingDesc &d, setting_ENUM v) { return nth_allowed(d.allowed, v); }
std::string fmt_LIST(const SettingDesc &d, setting_LIST v) {
    std::string r;
    for (int i = 0; i < 32; ++i)
        if (v & (1u << i)) r += (r.empty() ? "" : ",") + nth_allowed(d.allowed, i);
    return r.empty() ? "none" : r;
}
std::string fmt_INT(const SettingDesc &, setting_INT v) { return std::to_string(v); }
std::string fmt_FLOAT(const SettingDesc &, setting_FLOAT v) {
    char b[64];
    for (int prec = 6; prec <= 17; ++prec) { /* the shortest text that reads back as v */
        std::snprintf(b, sizeof b, "%.*g", prec, v);
        if (std::strtod(b, nullptr) == v) break;
    }
    return b;
}
std::string fmt_SIZE(const SettingDesc &, setting_SIZE v) { return std::to_string(v); }
std::string fmt_BOUND(const SettingDesc &d, setting_BOUND v) {
    if (!error_bound_on(v)) return "off";
    return (error_bound_relative(v) ? "rel:" : "abs:") + fmt_FLOAT(d, error_bound_value(v));
}
std::string fmt_PATH(const SettingDesc &, const setting_PATH &v) { return v; }
std::string fmt_BOOL(const SettingDesc &, setting_BOOL v) { return v ? "1" : "0"; }
std::string fmt_CODEC(const SettingDesc &, setting_CODEC v) {
    const char *name = codec_id_name(v);
    return name ? name : "?";
}

}  // namespace

bool setting_lookup(std::string_view key, SettingId *id) {
    std::string k = lower(key);
    if (k.rfind("compmpi_", 0) == 0) k = k.substr(8);
    for (int i = 0; i < kNumSettings; ++i)
        if (k == kSettings[i].name) return *id = static_cast<SettingId>(i), true;
    return false;
}

std::string setting_allowed(SettingId id) {
    const SettingDesc &d = desc(id);
    switch (d.type) {
        case SettingType::BOOL: return "0|1";
        case SettingType::CODEC: return codec_id_names();
        case SettingType::LIST: return std::string("comma-separated subset of ") + d.allowed + ", or none";
        case SettingType::SIZE: return std::string("bytes ") + d.allowed + " (suffix K, M, G)";
        case SettingType::PATH: return "a file path, or empty (off)";
        default: return d.allowed;
    }
}

Status setting_parse(SettingId id, std::string_view text, Settings *s, std::string *err) {
    switch (id) {
#define COMPMPI_SETTING(id_, type, def, scope, allowed, doc) \
    case SettingId::id_: return parse_##type(desc(id), text, &s->id_, err);
#include "base/settings.def"
#undef COMPMPI_SETTING
    }
    return Status::invalid_arg;
}

std::string setting_format(SettingId id, const Settings &s) {
    switch (id) {
#define COMPMPI_SETTING(id_, type, def, scope, allowed, doc) \
    case SettingId::id_: return fmt_##type(desc(id), s.id_);
#include "base/settings.def"
#undef COMPMPI_SETTING
    }
    return "?";
}

Settings settings_defaults() {
    static const Settings defaults = [] {
        Settings s{};
        for (int i = 0; i < kNumSettings; ++i) {
            std::string err;
            if (setting_parse(static_cast<SettingId>(i), kSettings[i].def, &s, &err) != Status::ok) {
                std::fprintf(stderr, "libcompmpi: bad built-in default: %s\n", err.c_str());
                std::abort();
            }
        }
        return s;
    }();
    return defaults;
}

uint64_t settings_comm_hash(const Settings &s) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (int i = 0; i < kNumSettings; ++i) {
        if (kSettings[i].scope != SettingScope::COMM) continue;
        std::string v = std::string(kSettings[i].name) + "=" + setting_format(static_cast<SettingId>(i), s) + ";";
        for (unsigned char ch : v) h = (h ^ ch) * 1099511628211ull;
    }
    return h;
}

void settings_print_markdown(std::FILE *f) {
    std::fprintf(f, "| setting | environment | MPI_Info hint | scope | default | allowed | meaning |\n");
    std::fprintf(f, "| --- | --- | --- | --- | --- | --- | --- |\n");
    for (int i = 0; i < kNumSettings; ++i) {
        const SettingDesc &d = kSettings[i];
        bool comm = d.scope == SettingScope::COMM;
        std::string allowed = setting_allowed(static_cast<SettingId>(i));
        for (char &c : allowed)
            if (c == '|') c = '/';
        std::fprintf(f, "| `%s` | `COMPMPI_%s` | %s | %s | `%s` | %s | %s |\n", d.name, upper(d.name).c_str(),
                     comm ? ("`compmpi_" + std::string(d.name) + "`").c_str() : "-", comm ? "communicator" : "process",
                     d.def, allowed.c_str(), d.doc);
    }
}

void SettingLayer::apply_to(Settings *s) const {
    for (int i = 0; i < kNumSettings; ++i) {
        if (!set[i]) continue;
        switch (static_cast<SettingId>(i)) {
#define COMPMPI_SETTING(id_, type, def, scope, allowed, doc) \
    case SettingId::id_: s->id_ = values.id_; break;
#include "base/settings.def"
#undef COMPMPI_SETTING
        }
    }
}

Status settings_read_env(SettingLayer *layer, std::string *err) {
    for (char **e = environ; e && *e; ++e) {
        if (std::strncmp(*e, "COMPMPI_", 8) != 0) continue;
        const char *eq = std::strchr(*e, '=');
        if (!eq) continue;
        std::string name(*e + 8, static_cast<size_t>(eq - (*e + 8)));
        if (name == "FAULT") continue; /* test-only fault injection, not a setting (src/base/fault.h) */
        SettingId id;
        if (!setting_lookup(name, &id) || upper(kSettings[static_cast<int>(id)].name) != name) {
            if (err) {
                *err = "unknown environment variable COMPMPI_" + name + "; known: ";
                for (int i = 0; i < kNumSettings; ++i) *err += (i ? ", COMPMPI_" : "COMPMPI_") + upper(kSettings[i].name);
            }
            return Status::invalid_arg;
        }
        CMPI_CHECK(setting_parse(id, eq + 1, &layer->values, err));
        layer->set[static_cast<int>(id)] = true;
    }
    return Status::ok;
}

std::string setting_source_name(SettingId id, SettingSource src) {
    const std::string name = desc(id).name;
    switch (src) {
        case SettingSource::builtin: return "default";
        case SettingSource::env: return "COMPMPI_" + upper(name);
        case SettingSource::api: return "compmpi_comm_set";
        case SettingSource::hint: return "hint compmpi_" + name;
        case SettingSource::implied: return "implied";
    }
    return "?";
}

}  // namespace compmpi

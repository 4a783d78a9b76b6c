#include "settings.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "codec.h"
#include "qsgd/qsgd.h"

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
    const CodecOps *c = codec_by_name(t.c_str());
    if (!c) return fail(d, raw, err);
    *out = static_cast<int>(c->id);
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
std::string fmt_BOOL(const SettingDesc &, setting_BOOL v) { return v ? "1" : "0"; }
std::string fmt_CODEC(const SettingDesc &, setting_CODEC v) {
    const CodecOps *c = codec_by_id(v);
    return c ? c->name : "?";
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
        case SettingType::CODEC: return codec_names();
        case SettingType::LIST: return std::string("comma-separated subset of ") + d.allowed + ", or none";
        case SettingType::SIZE: return std::string("bytes ") + d.allowed + " (suffix K, M, G)";
        default: return d.allowed;
    }
}

Status setting_parse(SettingId id, std::string_view text, Settings *s, std::string *err) {
    switch (id) {
#define COMPMPI_SETTING(id_, type, def, scope, allowed, doc) \
    case SettingId::id_: return parse_##type(desc(id), text, &s->id_, err);
#include "settings.def"
#undef COMPMPI_SETTING
    }
    return Status::invalid_arg;
}

std::string setting_format(SettingId id, const Settings &s) {
    switch (id) {
#define COMPMPI_SETTING(id_, type, def, scope, allowed, doc) \
    case SettingId::id_: return fmt_##type(desc(id), s.id_);
#include "settings.def"
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

Status settings_validate(const Settings &s, std::string *err) {
    const CodecOps *c = codec_by_id(s.codec);
    if (!c) return Status::invalid_arg;
    /* with compression off the width is irrelevant: a hint codec=none must work on a
     * communicator whose bits were set for another codec */
    if (c->id != CodecId::none && !codec_bits_ok(*c, static_cast<int>(s.bits))) {
        if (err) {
            *err = "setting 'bits' = " + std::to_string(s.bits) + " is not valid for codec '" + c->name + "'";
            if (c->bits_step)
                *err += ": allowed 0 (default " + std::to_string(c->bits_default) + ") or " +
                        std::to_string(c->bits_min) + ".." + std::to_string(c->bits_max) + " in steps of " +
                        std::to_string(c->bits_step);
            else
                *err += ": this codec has no bit width, leave bits at 0";
        }
        return Status::invalid_arg;
    }
    if (s.awp_start_bits % 8 || s.awp_step % 8) {
        if (err) *err = "settings 'awp_start_bits' and 'awp_step' must be multiples of 8 (bitpack keeps whole bytes)";
        return Status::invalid_arg;
    }
    return Status::ok;
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
#include "settings.def"
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
        if (name == "FAULT") continue; /* test-only fault injection, not a setting (src/fault.h) */
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

namespace {

bool is_set(const Resolution &why, SettingId id) {
    SettingSource src = why.source[static_cast<int>(id)];
    return src != SettingSource::builtin && src != SettingSource::implied;
}

std::string given(SettingId id, const Settings &s, const Resolution &why) {
    return std::string(desc(id).name) + "=" + setting_format(id, s) + " (" +
           setting_source_name(id, why.source[static_cast<int>(id)]) + ")";
}

/* Whether an explicitly set value can take effect with the other settings; if not, *why_not
 * says what makes it inapplicable. */
bool applicable(SettingId id, const Settings &s, std::string *why_not) {
    const CodecOps *c = codec_by_id(s.codec);
    const std::string cname = c ? c->name : "?";
    const std::string name = desc(id).name;
    auto no = [&](const std::string &w) { return *why_not = w, false; };
    if (id == SettingId::codec || desc(id).scope != SettingScope::COMM) return true;
    if (c && c->id == CodecId::none && id != SettingId::collectives && id != SettingId::min_bytes)
        return no("codec none: compression is off");
    if (id != SettingId::collectives && s.collectives == 0) return no("collectives is none: nothing is compressed");
    if (!c) return true;
    /* the non-blocking and persistent forms run the blocking algorithms */
    const uint32_t allreduces =
        (1u << coll_kind::allreduce) | (1u << coll_kind::iallreduce) | (1u << coll_kind::allreduce_init);
    const uint32_t reduce_scatters = (1u << coll_kind::reduce_scatter_block) | (1u << coll_kind::reduce_scatter) |
                                     (1u << coll_kind::ireduce_scatter_block) | (1u << coll_kind::ireduce_scatter) |
                                     (1u << coll_kind::reduce_scatter_block_init) |
                                     (1u << coll_kind::reduce_scatter_init);
    const uint32_t rs_blocks = (1u << coll_kind::reduce_scatter_block) | (1u << coll_kind::ireduce_scatter_block) |
                               (1u << coll_kind::reduce_scatter_block_init);
    const bool allreduce_only =
        id == SettingId::hierarchy || id == SettingId::node_size || id == SettingId::allreduce_algorithm ||
        id == SettingId::link_alpha_beta;
    if (allreduce_only && !(s.collectives & allreduces))
        return no("it applies to allreduce only (blocking, non-blocking or persistent), which is not in collectives");
    if (id == SettingId::chunk_bytes && !(s.collectives & (allreduces | rs_blocks)))
        return no("it applies to allreduce and reduce_scatter_block only (any form), neither is in collectives");
    if (id == SettingId::error_feedback && !(s.collectives & (allreduces | reduce_scatters)))
        return no("it applies to allreduce and reduce-scatter only (any form), neither is in collectives");
    const bool adaptive = c->flags & CODEC_ADAPTIVE_BITS;
    if (id == SettingId::policy && s.policy == policy_kind::awp && !adaptive)
        return no("codec " + cname + " has no adjustable width: it runs as static");
    if (name.rfind("awp_", 0) == 0) {
        if (s.policy != policy_kind::awp) return no("policy is static");
        if (!adaptive) return no("codec " + cname + " has no adjustable width");
    }
    /* codec parameters: the settings named after a codec, and the shared ones */
    static const char *const kCodecPrefix[][2] = {
        {"q8_", "q8"}, {"terngrad_", "terngrad"}, {"qsgd_", "qsgd"}, {"fft_", "fft_topk"}};
    for (const auto &pc : kCodecPrefix)
        if (name.rfind(pc[0], 0) == 0 && cname != pc[1])
            return no("it applies to codec " + std::string(pc[1]) + " only, codec is " + cname);
    if (id == SettingId::rounding && c->id != CodecId::bitpack) return no("it applies to codec bitpack only, codec is " + cname);
    if (id == SettingId::theta && c->id != CodecId::topk && c->id != CodecId::fft_topk)
        return no("it applies to codecs topk and fft_topk only, codec is " + cname);
    if (id == SettingId::seed && !(c->flags & CODEC_STOCHASTIC)) return no("codec " + cname + " is not stochastic");
    if (id == SettingId::error_feedback && s.error_feedback && (c->flags & CODEC_LOSSLESS))
        return no("codec " + cname + " is lossless: there is no error to feed back");
    if (id == SettingId::error_feedback && s.error_feedback && c->id == CodecId::qsgd) {
        const int b = s.bits ? static_cast<int>(s.bits) : c->bits_default;
        const double w = qsgd::variance_bound(b, static_cast<uint64_t>(s.qsgd_bucket));
        if (!(w < 1)) {
            char bound[48] = "no bound independent of the buffer";
            if (!std::isinf(w)) std::snprintf(bound, sizeof bound, "%.2f", w);
            char m[384];
            std::snprintf(m, sizeof m,
                          "qsgd at bits=%d, qsgd_bucket=%lld has a variance bound (QSGD Lemma 3.1) of %s x ||v||^2; "
                          "feedback needs it below 1 (a contraction) and would amplify the error, and qsgd is "
                          "unbiased without it (below 1: bits >= 6 with qsgd_bucket=512)",
                          b, static_cast<long long>(s.qsgd_bucket), bound);
            return no(m);
        }
    }
    if (id == SettingId::chunk_bytes && (c->flags & CODEC_SPARSE) && c->id != CodecId::fft_topk)
        return no("only the dense and the fft_topk allreduce are pipelined; codec " + cname + " takes the sparse path");
    if ((id == SettingId::allreduce_algorithm || id == SettingId::link_alpha_beta) && (c->flags & CODEC_SPARSE))
        return no("it chooses among dense allreduce algorithms; codec " + cname + " takes the sparse path");
    if (id == SettingId::link_alpha_beta && s.allreduce_algorithm != enum_value(SettingId::allreduce_algorithm, "auto"))
        return no("allreduce_algorithm is not auto");
    if (id == SettingId::chunk_bytes && s.allreduce_algorithm == enum_value(SettingId::allreduce_algorithm, "halving_doubling"))
        return no("allreduce_algorithm=halving_doubling is not pipelined");
    if (id == SettingId::node_size && s.hierarchy == enum_value(SettingId::hierarchy, "off"))
        return no("hierarchy is off");
    if (name.rfind("allgather_", 0) == 0 && !(s.collectives & (1u << coll_kind::allgather)))
        return no("allgather is not in collectives");
    return true;
}

}  // namespace

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

Status settings_resolve(const SettingLayer &env, const SettingLayer &api, const SettingLayer &hints, Settings *out,
                        Resolution *why_out, std::string *err) {
    Resolution why;
    Settings s = settings_defaults();
    const SettingLayer *layers[] = {&env, &api, &hints};
    const SettingSource srcs[] = {SettingSource::env, SettingSource::api, SettingSource::hint};
    for (int l = 0; l < 3; ++l) {
        layers[l]->apply_to(&s);
        for (int i = 0; i < kNumSettings; ++i)
            if (layers[l]->set[i]) why.source[i] = srcs[l];
    }
    /* process-scope settings are not per communicator */
    for (int i = 0; i < kNumSettings; ++i)
        if (kSettings[i].scope == SettingScope::GLOBAL && (api.set[i] || hints.set[i])) {
            if (err)
                *err = std::string("setting '") + kSettings[i].name +
                       "' applies to the whole process: set it with COMPMPI_" + upper(kSettings[i].name) +
                       " in the environment";
            return Status::invalid_arg;
        }
    /* bits: an explicit width is a static width; awp chooses widths itself */
    const int ib = static_cast<int>(SettingId::bits), ip = static_cast<int>(SettingId::policy);
    if (is_set(why, SettingId::bits) && s.bits != 0) {
        if (!is_set(why, SettingId::policy)) {
            s.policy = policy_kind::static_;
            why.source[ip] = SettingSource::implied;
            why.note[ip] = "implied by bits=" + setting_format(SettingId::bits, s) + " from " +
                           setting_source_name(SettingId::bits, why.source[ib]);
        } else if (s.policy == policy_kind::awp) {
            if (err)
                *err = "setting " + given(SettingId::bits, s, why) + " asks for a fixed width but " +
                       given(SettingId::policy, s, why) +
                       " adapts the width per call: set only one of them (bits alone implies policy=static; "
                       "awp chooses the width itself)";
            return Status::invalid_arg;
        }
    }
    if (settings_validate(s, err) != Status::ok) {
        if (err) {
            *err += " (" + given(SettingId::codec, s, why) + ", " + given(SettingId::bits, s, why);
            if (why.source[ip] == SettingSource::implied) *err += ", policy=static " + why.note[ip];
            *err += ")";
        }
        return Status::invalid_arg;
    }
    for (int i = 0; i < kNumSettings; ++i) {
        const SettingId id = static_cast<SettingId>(i);
        std::string why_not;
        if (is_set(why, id) && !applicable(id, s, &why_not)) {
            why.inapplicable[i] = true;
            why.note[i] = "no effect: " + why_not;
        }
    }
    *out = s;
    if (why_out) *why_out = why;
    return Status::ok;
}

void settings_print(std::FILE *f, const Settings &s, const Resolution &why, const char *title) {
    std::fprintf(f, "libcompmpi settings (%s):\n", title);
    const CodecOps *c = codec_by_id(s.codec);
    for (int i = 0; i < kNumSettings; ++i) {
        const SettingId id = static_cast<SettingId>(i);
        std::string v = setting_format(id, s);
        std::string src = setting_source_name(id, why.source[i]);
        std::string note = why.note[i];
        if (why.source[i] == SettingSource::implied) src.clear(); /* the note says it */
        if (id == SettingId::bits && c && !why.inapplicable[i]) {
            /* the width that runs, not the raw 0 */
            if (c->bits_step == 0) {
                note = "codec " + std::string(c->name) + " has no width";
            } else if (s.policy == policy_kind::awp && (c->flags & CODEC_ADAPTIVE_BITS)) {
                v = std::to_string(std::clamp<int64_t>(s.awp_start_bits, c->bits_min, c->bits_max));
                src.clear();
                note = "awp start: the width then adapts per call key (awp_preset)";
            } else if (s.bits == 0) {
                v = std::to_string(c->bits_default);
                src.clear();
                note = std::string(c->name) + " default";
            }
        }
        std::string paren = src;
        if (!note.empty()) paren += (paren.empty() ? "" : "; ") + note;
        std::fprintf(f, "  %-16s = %-12s (%s)\n", kSettings[i].name, v.c_str(), paren.c_str());
    }
    std::fflush(f);
}

}  // namespace compmpi

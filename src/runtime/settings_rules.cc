// SPDX-License-Identifier: BSD-3-Clause
#include "runtime/settings_rules.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <string>

#include "base/mpi_family.h"
#include "codec.h"
#include "error_model.h"
#include "qsgd/qsgd.h"

namespace compmpi {

Status settings_validate(const Settings &s, std::string *err) {
    const CodecOps *c = codec_by_id(s.codec);
    if (!c) return Status::invalid_arg;
    /* with compression off the width is irrelevant: a hint codec=none must work on a
     * communicator whose bits were set for another codec */
    if (c->id != CodecId::none && !codec_bits_ok(*c, static_cast<int>(s.bits), Elem::f32) &&
        !codec_bits_ok(*c, static_cast<int>(s.bits), Elem::f64)) {
        if (err) {
            *err = "setting 'bits' = " + std::to_string(s.bits) + " is not valid for codec '" + c->name + "'";
            if (c->bits_step)
                *err += ": allowed 0 (default " + std::to_string(c->bits_default) + ") or " +
                        std::to_string(c->bits_min) + ".." + std::to_string(c->bits_max) + " in steps of " +
                        std::to_string(c->bits_step);
            if (c->bits64_step)
                *err += std::string(c->bits_step ? "; for doubles " : ": for doubles ") +
                        std::to_string(c->bits64_min) + ".." + std::to_string(c->bits64_max) + " in steps of " +
                        std::to_string(c->bits64_step);
            else
                *err += ": this codec has no bit width, leave bits at 0";
        }
        return Status::invalid_arg;
    }
    if (error_bound_on(s.error_bound)) {
        /* docs/error_bound.md: only codecs with a proven round-trip error (kernels/error_model.h) */
        CodecParams p, p64;
        p64.elem = Elem::f64;
        ErrorModel m;
        double sl, fl, mv;
        const bool has_rel = codec_error_model(*c, p, &m) || codec_error_model(*c, p64, &m);
        /* sz: its bound is the planner's choice per call (param), so no default params to ask */
        if (c->id != CodecId::none && c->id != CodecId::sz && !has_rel && !codec_abs_error_linear(*c, p, &sl, &fl, &mv)) {
            if (err)
                *err = std::string("setting 'error_bound' needs a codec whose error is bounded for every value "
                                   "(bitpack, fp32, zfp, sz or none); codec '") +
                       c->name + "' is stochastic or scales by the data and can exceed any bound";
            return Status::invalid_arg;
        }
        if (error_bound_relative(s.error_bound) && c->id != CodecId::none && !has_rel) {
            if (err)
                *err = std::string("codec '") + c->name +
                       "' has only an absolute error bound (abs:X); a relative error_bound needs bitpack, fp32 or none";
            return Status::invalid_arg;
        }
        if (s.error_feedback) {
            if (err)
                *err = "settings 'error_bound' and 'error_feedback' exclude each other: feedback adds the previous "
                       "call's error to this call's data, so no result would stay within the bound";
            return Status::invalid_arg;
        }
        if (error_bound_relative(s.error_bound) && !(error_bound_value(s.error_bound) < 1)) {
            if (err) *err = "setting 'error_bound' rel:X needs 0 < X < 1";
            return Status::invalid_arg;
        }
    }
    if (c->id == CodecId::zfp && s.zfp_tolerance > 0 && !(s.zfp_tolerance >= 0x1p-93)) {
        if (err)
            *err = "setting 'zfp_tolerance' = " + setting_format(SettingId::zfp_tolerance, s) +
                   " is below zfp's smallest tolerance 2^-93 (about 1.0e-28): set 0 for fixed rate or a "
                   "larger tolerance";
        return Status::invalid_arg;
    }
    if (s.awp_start_bits % 8 || s.awp_step % 8) {
        if (err) *err = "settings 'awp_start_bits' and 'awp_step' must be multiples of 8 (bitpack keeps whole bytes)";
        return Status::invalid_arg;
    }
    return Status::ok;
}

namespace {

const SettingDesc &desc(SettingId id) { return kSettings[static_cast<int>(id)]; }
std::string upper(std::string_view v) {
    std::string r(v);
    for (char &ch : r) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    return r;
}

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
    if (id == SettingId::pmpi_chain && kMpiSimulated)
        return no("under SimGrid SMPI libcompmpi always calls PMPI_* (src/base/mpi_next.h)");
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
    if (error_bound_on(s.error_bound) && (id == SettingId::policy || name.rfind("awp_", 0) == 0))
        return no("error_bound sets the width of every call from the bound");
    if (error_bound_on(s.error_bound) && id == SettingId::sz_bound)
        return no("error_bound chooses sz's bound per call from its own");
    if (error_bound_on(s.error_bound) && id == SettingId::zfp_tolerance)
        return no("error_bound chooses zfp's fixed rate from the bound (fixed accuracy's size depends on the data)");
    if (id == SettingId::policy && s.policy == policy_kind::awp && !adaptive)
        return no("codec " + cname + " has no adjustable width: it runs as static");
    if (name.rfind("awp_", 0) == 0) {
        if (s.policy != policy_kind::awp) return no("policy is static");
        if (!adaptive) return no("codec " + cname + " has no adjustable width");
    }
    /* codec parameters: the settings named after a codec, and the shared ones */
    static const char *const kCodecPrefix[][2] = {
        {"q8_", "q8"}, {"terngrad_", "terngrad"}, {"qsgd_", "qsgd"}, {"fft_", "fft_topk"}, {"zfp_", "zfp"}, {"sz_", "sz"}};
    for (const auto &pc : kCodecPrefix)
        if (name.rfind(pc[0], 0) == 0 && cname != pc[1] &&
            !(id == SettingId::sz_mode && error_bound_on(s.error_bound))) /* the planner may choose sz */
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
    /* zfp's fixed accuracy has no rate, and takes the allgather (sparse) allreduce */
    const bool zfp_acc = c->id == CodecId::zfp && s.zfp_tolerance > 0;
    if (id == SettingId::bits && zfp_acc) return no("zfp_tolerance > 0 selects fixed accuracy, which has no rate");
    if ((id == SettingId::chunk_bytes || id == SettingId::allreduce_algorithm || id == SettingId::link_alpha_beta) &&
        zfp_acc)
        return no("zfp with zfp_tolerance > 0 (fixed accuracy, variable size) takes the allgather allreduce");
    if ((id == SettingId::chunk_bytes || id == SettingId::allreduce_algorithm || id == SettingId::link_alpha_beta) &&
        c->id == CodecId::sz)
        return no("codec sz (variable size) takes the allgather allreduce");
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
            if (c->id == CodecId::zfp && s.zfp_tolerance > 0) {
                v = "-";
                src.clear();
                note = "zfp fixed accuracy (zfp_tolerance): no rate";
            } else if (c->bits_step == 0) {
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

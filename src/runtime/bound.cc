// SPDX-License-Identifier: BSD-3-Clause
/* Error-bounded mode: the shapes of the algorithms and the choice (bound.h; derivation in
 * docs/error_bound.md). */
#include "runtime/bound.h"

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <vector>

#include "error_model.h"
#include "sz/sz.h"
#include "base/log.h"
#include "runtime/policy.h"
#include "runtime/state.h"
#include "base/mpi_next.h"

namespace compmpi {

namespace {

int floor_log2(int p) {
    int k = 0;
    while ((2 << k) <= p) ++k;
    return k;
}

/* Two-phase allreduce over p ranks: each value is encoded once as a contribution (p - 1 of
 * them reach an element; the owner's own is added exact or, for codecs quantised once, encoded
 * too: counted) and once more as part of the owner's sum of p contributions. */
BoundShape twophase(int p) { return BoundShape{2, p + 1, static_cast<double>(p) + p, true}; }

/* Recursive halving/doubling (coll/allreduce/allreduce_halving.cc): Q = 2^k <= p, rem = p - Q
 * folded pairs (one encode of a single contribution each), k levels of the reduce-scatter
 * (level s: Q / 2^(s+1) encoded partial sums of at most m 2^s contributions, m = 2 with a
 * fold), one final encode of the sum of all p. Hierarchical leaders run either algorithm over
 * the nodes on node sums of ppn contributions: the same counts with Q ppn <= p bound them
 * when m is taken as 2 (k levels at most, sums of at most 2 ppn 2^s contributions). */
BoundShape halving(int p) {
    const int k = floor_log2(p);
    /* fold: at most p / 2 encodes of single contributions (of node sums: rem ppn <= p / 2);
     * level s: Q / 2^(s+1) encodes of sums of at most 2 ppn 2^s contributions, <= p in all;
     * final: one encode of the sum of p */
    const double W = 0.5 * p + static_cast<double>(k) * p + p;
    return BoundShape{k + 2, p + 1, W, true};
}

BoundShape worst(const BoundShape &a, const BoundShape &b) {
    return BoundShape{std::max(a.L, b.L), std::max(a.K, b.K), std::max(a.W, b.W), a.reduce || b.reduce};
}

double unit_roundoff(Elem e) { return e == Elem::f64 ? 0x1p-53 : 0x1p-24; }
double largest(Elem e) { return e == Elem::f64 ? DBL_MAX : FLT_MAX; }

struct Candidate {
    const CodecOps *codec;
    CodecParams p;
    double bits_per_value;
};

/* The bound candidate c guarantees for shape sh, or +inf. rel: as a factor of A. */
double proven(const Candidate &c, const BoundShape &sh, int P, bool rel, double M, Elem e) {
    const double eps = unit_roundoff(e);
    const double grow_K = std::expm1(sh.K * std::log1p(eps)); /* (1+eps)^K - 1 */
    ErrorModel m;
    const bool has_rel = codec_error_model(*c.codec, c.p, &m);
    if (rel) {
        if (!has_rel) return HUGE_VAL;
        return std::expm1(sh.L * std::log1p(m.rel) + sh.K * std::log1p(eps));
    }
    const double A = sh.reduce ? P * M : M;
    /* every partial sum stays below 2 A (the growth factors are far below 2 when the bound
     * is met); each codec's model must cover that range, and the type must not overflow */
    if (!(2 * A < largest(e) / 4)) return HUGE_VAL;
    double best = HUGE_VAL;
    if (has_rel && 2 * A <= m.max_value) {
        const double g = std::expm1(sh.L * std::log1p(m.rel) + sh.K * std::log1p(eps));
        best = g * A + sh.W * m.rel * m.normal_min * (1 + g);
    }
    double slope, floor, maxv;
    if (codec_abs_error_linear(*c.codec, c.p, &slope, &floor, &maxv) && 2 * A <= maxv)
        best = std::min(best, grow_K * A + (1 + grow_K) * (slope * M * sh.W + floor * sh.W));
    return best;
}

void add_widths(std::vector<Candidate> &v, const CodecOps *c, const BoundOptions &o, int variant) {
    if (!c || !codec_has_elem(*c, o.elem)) return;
    const bool d = o.elem == Elem::f64;
    const int lo = d ? c->bits64_min : c->bits_min, hi = d ? c->bits64_max : c->bits_max,
              step = d ? c->bits64_step : c->bits_step;
    auto one = [&](int w) {
        Candidate k{c, CodecParams{}, 0};
        k.p.elem = o.elem;
        k.p.bits = static_cast<uint8_t>(w);
        k.p.variant = static_cast<uint8_t>(variant < 0 ? 0 : variant);
        if (c->check(k.p) != Status::ok) return;
        k.bits_per_value = static_cast<double>(c->max_payload(1 << 16, k.p)) * 8.0 / 65536.0;
        v.push_back(k);
    };
    if (o.bits) {
        one(o.bits);
    } else if (step == 0) {
        one(0);
    } else {
        for (int w = lo; w <= hi; w += step) one(w);
    }
}

/* sz (absolute mode only): the largest float eb whose composed bound holds for shape sh,
 * where it exists. Its model is a constant eb per encode (slope 0), so
 *     proven = g A + (1 + g) eb W,   g = (1 + eps)^K - 1,
 * and eb = (X - g A) / ((1 + g) W), rounded down to a float and checked with proven() itself.
 * Size estimate (docs/error_bound.md): the width of a fixed code for the values it encodes
 * (code_bits: |y| <= P M in a reduction, M otherwise; twice that for Lorenzo's differences),
 * which is what the payload takes before zstd, and in a reduction times P / 2: sz's allreduce
 * is the allgather of every contribution ((P - 1) blobs received per rank) where the dense
 * algorithms receive 2 (P - 1) / P. Not a candidate unless the user named it where values
 * could escape (2 A beyond sz::no_escape_ratio eb: verbatim, larger than the estimate), for
 * reduce-scatter (no variable payloads) or with an explicit width. */
void add_sz(std::vector<Candidate> &v, const BoundOptions &o, const BoundShape &sh, int P, double M, double X) {
    const CodecOps *c = codec_by_id(static_cast<int>(CodecId::sz));
    const bool named = o.codec == static_cast<int>(CodecId::sz);
    if (!c || (!named && (!o.variable_ok || o.bits))) return;
    const double eps = unit_roundoff(o.elem);
    const double g = std::expm1(sh.K * std::log1p(eps));
    const double A = sh.reduce ? P * M : M;
    const double room = (X - g * A) / ((1 + g) * std::max(sh.W, 1.0));
    if (!(room > 0)) return;
    float eb = room >= FLT_MAX ? FLT_MAX : static_cast<float>(room);
    if (static_cast<double>(eb) > room) eb = std::nextafter(eb, 0.0f);
    Candidate k{c, CodecParams{}, 0};
    k.p.elem = o.elem;
    k.p.variant = static_cast<uint8_t>(o.sz_variant == sz::kPlain ? sz::kPlain : sz::kLorenzo);
    for (int tries = 0; tries < 8; ++tries, eb = std::nextafter(eb, 0.0f)) {
        if (!(eb >= FLT_MIN)) return;
        k.p.param = sz::eb_param(eb);
        if (c->check(k.p) == Status::ok && proven(k, sh, P, false, M, o.elem) <= X) break;
        if (tries == 7) return;
    }
    if (!named && 2 * A > sz::no_escape_ratio(o.elem) * static_cast<double>(eb)) return;
    const double bits = sz::code_bits(k.p.variant == sz::kLorenzo ? 2 * A : A, eb);
    k.bits_per_value = bits * (sh.reduce ? std::max(1.0, P / 2.0) : 1.0);
    v.push_back(k);
}

}  // namespace

BoundShape bound_shape(Coll kind, int P, int alg) {
    switch (kind) {
        case Coll::allreduce:
            if (alg == enum_value(SettingId::allreduce_algorithm, "twophase")) return twophase(P);
            return worst(twophase(P), halving(P));
        case Coll::reduce_scatter:
        case Coll::reduce_scatter_block:
            /* the owner sums p - 1 decoded contributions and its own (exact or encoded once) */
            return BoundShape{1, P + 1, static_cast<double>(P), true};
        default: /* bcast, allgather: one encode of one value, no addition */
            return BoundShape{1, 0, 1, false};
    }
}

BoundChoice bound_choose(const BoundOptions &o, const BoundShape &sh, int P, double M) {
    BoundChoice r;
    const bool rel = error_bound_relative(o.bound);
    const double X = error_bound_value(o.bound);
    const int nearest = o.variant < 0 ? 1 : o.variant;
    std::vector<Candidate> cand;
    if (o.codec >= 0) {
        const CodecOps *c = codec_by_id(o.codec);
        if (c && c->id == CodecId::sz) {
            if (!rel) add_sz(cand, o, sh, P, M, X);
        } else {
            add_widths(cand, c, o, c && c->id == CodecId::bitpack ? nearest : 0);
        }
    } else {
        add_widths(cand, codec_by_id(static_cast<int>(CodecId::bitpack)), o, nearest);
        if (o.elem == Elem::f64) add_widths(cand, codec_by_id(static_cast<int>(CodecId::fp32)), o, 0);
        /* zfp fixed rate: an absolute model only; every integer rate */
        if (!rel) add_widths(cand, codec_by_id(static_cast<int>(CodecId::zfp)), o, 0);
        /* sz: last, so that a tie keeps the earlier choice; an estimate, see add_sz */
        if (!rel) add_sz(cand, o, sh, P, M, X);
    }
    const Candidate *best = nullptr;
    double best_proven = HUGE_VAL, tightest = HUGE_VAL;
    /* zfp encodes and decodes two orders of magnitude slower than bitpack on the CPU
     * (docs/codecs/zfp.md: 0.04-0.16 GB/s against 20-34 GB/s, one thread): unless the codec
     * is the user's, it is taken only where it at least halves the bytes of the best
     * bitpack/fp32 choice */
    double fast_bits = HUGE_VAL;
    for (const Candidate &k : cand)
        if (k.codec->id != CodecId::zfp && k.codec->id != CodecId::sz && proven(k, sh, P, rel, M, o.elem) <= X)
            fast_bits = std::min(fast_bits, k.bits_per_value);
    for (const Candidate &k : cand) {
        const double b = proven(k, sh, P, rel, M, o.elem);
        tightest = std::min(tightest, b);
        if (!(b <= X)) continue;
        if (o.codec < 0 && k.codec->id == CodecId::zfp && !(2 * k.bits_per_value <= fast_bits)) continue;
        /* fewest bits per value; on a tie the earlier candidate (bitpack, then fp32, then zfp,
         * then sz: the faster codecs) */
        if (!best || k.bits_per_value < best->bits_per_value) best = &k, best_proven = b;
    }
    if (!best) {
        char m[256];
        const double exact_floor = std::expm1(sh.K * std::log1p(unit_roundoff(o.elem))) * (rel ? 1 : (sh.reduce ? P * M : M));
        std::snprintf(m, sizeof m,
                      "no codec%s keeps %s:%g (the tightest candidate guarantees %.3g; floating-point summation of "
                      "%d %s values alone gives up to %.3g%s)",
                      o.bits ? " at the width set" : "", rel ? "rel" : "abs", X, tightest, sh.reduce ? P : 1,
                      elem_name(o.elem), exact_floor, rel ? " of the sum of magnitudes" : "");
        r.why = m;
        return r;
    }
    r.ok = true;
    r.codec = best->codec;
    r.params = best->p;
    r.proven = best_proven;
    ErrorModel em;
    if (rel && codec_error_model(*r.codec, r.params, &em) && em.rel > 0) {
        r.params.range_lo = em.normal_min;
        r.params.range_hi = em.max_value;
    }
    return r;
}

namespace {
bool explicit_setting(const CommState &st, SettingId id) {
    const int i = static_cast<int>(id);
    return env_layer().set[i] || st.attr_layer.set[i] || st.hint_layer.set[i];
}
}  // namespace

int bound_apply(const CollArgs &a, CommState &st, Plan &plan, const void *in, size_t n_in, bool *pass) {
    *pass = false;
    const Settings &s = st.settings;
    const bool rel = error_bound_relative(s.error_bound);
    double M = 0;
    if (!rel) {
        double local = a.elem == Elem::f64 ? max_abs_of(static_cast<const double *>(in), n_in)
                                           : max_abs_of(static_cast<const float *>(in), n_in);
        const int rc = mpi_next::Allreduce(&local, &M, 1, MPI_DOUBLE, MPI_MAX, a.comm);
        if (rc != MPI_SUCCESS) return rc;
        if (!std::isfinite(M)) return *pass = true, MPI_SUCCESS; /* NaN/Inf somewhere: MPI's own result */
    }
    BoundOptions o;
    o.bound = s.error_bound;
    o.elem = a.elem;
    if (explicit_setting(st, SettingId::codec)) o.codec = static_cast<int>(s.codec);
    if (explicit_setting(st, SettingId::bits)) o.bits = static_cast<int>(s.bits);
    if (explicit_setting(st, SettingId::rounding)) o.variant = static_cast<int>(s.rounding);
    o.sz_variant = s.sz_mode == enum_value(SettingId::sz_mode, "plain") ? sz::kPlain : sz::kLorenzo;
    o.variable_ok = !coll_is_reduce_scatter(a.kind);
    const BoundShape sh = bound_shape(a.kind, st.size, static_cast<int>(s.allreduce_algorithm));
    BoundChoice ch = bound_choose(o, sh, st.size, M);
    if (!ch.ok) {
        /* once per communicator and collective: the same reason recurs on every call */
        const uint32_t bit = 1u << (static_cast<int>(a.kind) & 31);
        if (!(st.bound_warned & bit)) {
            st.bound_warned |= bit;
            if (st.rank == 0)
                log_warn("error_bound: %s of %s over %d ranks: %s; such calls go to MPI unchanged", coll_name(a.kind),
                         elem_name(a.elem), st.size, ch.why.c_str());
        }
        return *pass = true, MPI_SUCCESS;
    }
    plan.codec = ch.codec;
    ch.params.seed = plan.params.seed;
    plan.params = ch.params;
    plan.awp = nullptr;
    return MPI_SUCCESS;
}

}  // namespace compmpi

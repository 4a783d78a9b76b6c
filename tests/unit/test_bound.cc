// SPDX-License-Identifier: BSD-3-Clause
/* Error-bounded mode: the codecs' round-trip models (kernels/error_model.h) hold against real
 * encodes of many values (every width, both roundings, floats and doubles, subnormals, values
 * near the model's top), and the planner (src/runtime/bound.h) picks the narrowest width whose
 * proven bound meets the request, refusing what no width can hold. */
#include <cfloat>
#include <cmath>
#include <random>
#include <vector>

#include "error_model.h"
#include "sz/sz.h"
#include "runtime/bound.h"  /* before testutil.h: cmocka's fail() macro meets <ios> */
#include "testutil.h"

using namespace compmpi;

namespace {

template <class T> std::vector<T> values(uint64_t seed, double top) {
    std::mt19937_64 g(seed);
    std::uniform_real_distribution<double> u(0, 1);
    const int emin = std::is_same_v<T, float> ? -149 : -1074;
    const int emax = static_cast<int>(std::floor(std::log2(top)));
    std::vector<T> v;
    for (int i = 0; i < 20000; ++i) {
        const int e = emin + static_cast<int>(u(g) * (emax - emin));
        T x = static_cast<T>(std::ldexp(1 + u(g), e));
        if (!(std::fabs(x) <= top)) x = static_cast<T>(top);
        v.push_back(i % 2 ? -x : x);
    }
    v.push_back(0);
    v.push_back(static_cast<T>(top));
    v.push_back(std::numeric_limits<T>::denorm_min());
    v.push_back(std::numeric_limits<T>::min());
    return v;
}

template <class T> void model_holds(const CodecOps &c, int w, int variant) {
    CodecParams p;
    p.elem = std::is_same_v<T, float> ? Elem::f32 : Elem::f64;
    p.bits = static_cast<uint8_t>(w);
    p.variant = static_cast<uint8_t>(variant);
    ErrorModel m;
    if (!codec_error_model(c, p, &m)) return;
    const std::vector<T> v = values<T>(w * 31 + variant, m.max_value);
    std::vector<uint8_t> blob(blob_max_bytes(c, v.size(), p));
    std::vector<T> back(v.size());
    size_t len = 0;
    assert_int_equal(static_cast<int>(blob_encode(c, p, v.data(), v.size(), blob.data(), blob.size(), &len)),
                     static_cast<int>(Status::ok));
    assert_int_equal(static_cast<int>(blob_decode(blob.data(), len, v.size(), back.data(), false, SimdLevel::scalar, 1)),
                     static_cast<int>(Status::ok));
    double worst = 0;
    for (size_t i = 0; i < v.size(); ++i) {
        const double y = v[i], err = std::fabs(static_cast<double>(back[i]) - y);
        const double lim = m.rel * std::max(std::fabs(y), m.normal_min);
        if (!(err <= lim)) fail_msg("%s w=%d variant %d: |%a - %a| = %g > %g", c.name, w, variant, y,
                                    static_cast<double>(back[i]), err, lim);
        if (std::fabs(y) >= m.normal_min) worst = std::max(worst, err / std::fabs(y));
    }
    /* the model is tight within a factor of 2: not a loose bound that would waste width */
    if (m.rel > 0) assert_true(worst > m.rel / 2);
}

void given_bitpack_fp32_and_none_when_round_tripped_expect_their_models_to_hold(void **) {
    const CodecOps &bp = *codec_by_id(static_cast<int>(CodecId::bitpack));
    for (int variant = 0; variant < 2; ++variant) {
        for (int w = 16; w <= 32; w += 8) model_holds<float>(bp, w, variant);
        for (int w = 16; w <= 64; w += 8) model_holds<double>(bp, w, variant);
    }
    model_holds<double>(*codec_by_id(static_cast<int>(CodecId::fp32)), 32, 0);
    model_holds<float>(*codec_by_id(static_cast<int>(CodecId::none)), 0, 0);
    /* stochastic and data-scaled codecs have no model */
    CodecParams p;
    ErrorModel m;
    for (CodecId id : {CodecId::q8, CodecId::terngrad, CodecId::qsgd, CodecId::topk, CodecId::sparse})
        assert_false(codec_error_model(*codec_by_id(static_cast<int>(id)), p, &m));
}

void given_relative_bounds_when_choosing_expect_the_narrowest_width_that_holds(void **) {
    const BoundShape two = bound_shape(Coll::allreduce, 4, enum_value(SettingId::allreduce_algorithm, "twophase"));
    assert_int_equal(two.L, 2);
    BoundOptions o;
    o.bound = -1e-2; /* 16 bits nearest: 2^-8 per encode, two encodes */
    BoundChoice c = bound_choose(o, two, 4, 0);
    assert_true(c.ok);
    assert_int_equal(c.codec->id, CodecId::bitpack);
    assert_int_equal(c.params.bits, 16);
    assert_int_equal(c.params.variant, 1);
    assert_true(c.proven <= 1e-2 && c.proven > 2 * 0x1p-8);
    assert_true(c.params.range_hi > 0 && c.params.range_lo == FLT_MIN);
    o.bound = -1e-4; /* 24 bits: 2^-16 */
    c = bound_choose(o, two, 4, 0);
    assert_true(c.ok);
    assert_int_equal(c.params.bits, 24);
    o.bound = -1e-9; /* below fp32's own summation: refused */
    c = bound_choose(o, two, 4, 0);
    assert_false(c.ok);
    assert_true(c.why.find("no codec") != std::string::npos);
    /* doubles at 1e-6: 32 bits (bitpack nearest 2^-21 or fp32 2^-24; bitpack first) */
    o.elem = Elem::f64;
    o.bound = -1e-6;
    c = bound_choose(o, two, 4, 0);
    assert_true(c.ok);
    assert_int_equal(c.params.bits, 32);
    /* the explicit rounding trunc costs a bit: 2^-20 per encode still holds 1e-6 at 32 bits */
    o.variant = 0;
    c = bound_choose(o, two, 4, 0);
    assert_true(c.ok);
    assert_int_equal(c.params.variant, 0);
    /* an explicit width that cannot hold the bound is not replaced */
    o.variant = -1;
    o.bits = 16;
    assert_false(bound_choose(o, two, 4, 0).ok);
    /* auto covers halving-doubling: more encodes along a path at 8 ranks */
    const BoundShape au = bound_shape(Coll::allreduce, 8, enum_value(SettingId::allreduce_algorithm, "auto"));
    assert_true(au.L == 5 && au.W >= 2 * 8);
}

void given_absolute_bounds_when_choosing_expect_the_data_scale_to_decide(void **) {
    const BoundShape sh = bound_shape(Coll::allreduce, 4, enum_value(SettingId::allreduce_algorithm, "twophase"));
    BoundOptions o;
    o.bound = 1e-3;
    /* data within 1: A <= 4, 2 encodes -> 2^-12 relative needed: 24 bits */
    BoundChoice c = bound_choose(o, sh, 4, 1.0);
    assert_true(c.ok);
    assert_int_equal(c.params.bits, 24);
    assert_true(c.params.range_hi == 0); /* no range check: subnormals are within the absolute floor */
    /* all zeros: the narrowest choice, zfp's lowest rate (4 bits: a quarter of bitpack's 16) */
    c = bound_choose(o, sh, 4, 0.0);
    assert_true(c.ok);
    assert_int_equal(c.codec->id, CodecId::zfp);
    assert_int_equal(c.params.bits, 4);
    /* data near 1e6: fp32 summation alone exceeds 1e-3 */
    assert_false(bound_choose(o, sh, 4, 1e6).ok);
    /* bcast and allgather: one encode, no sum */
    const BoundShape bc = bound_shape(Coll::bcast, 64, 0);
    assert_true(bc.L == 1 && bc.K == 0 && !bc.reduce);
}

void given_zfp_when_bounds_are_absolute_expect_its_rate_model_and_the_halving_rule(void **) {
    const CodecOps &z = *codec_by_id(static_cast<int>(CodecId::zfp));
    CodecParams p;
    p.bits = 16;
    double slope, floor, maxv;
    assert_true(codec_abs_error_linear(z, p, &slope, &floor, &maxv));
    /* the linear form covers zfp's own bound at every magnitude */
    for (double B = 1e-30; B < 1e30; B *= 3.7)
        assert_true(codec_abs_error(z, p, B) <= slope * B + floor);
    ErrorModel m;
    assert_false(codec_error_model(z, p, &m)); /* no relative model */
    const BoundShape sh = bound_shape(Coll::allreduce, 4, enum_value(SettingId::allreduce_algorithm, "twophase"));
    BoundOptions o;
    o.bound = 0.1;
    /* bitpack 16 holds 0.1 for data within 1; zfp would need about 15 bits: not half, bitpack */
    BoundChoice c = bound_choose(o, sh, 4, 1.0);
    assert_true(c.ok);
    assert_int_equal(c.codec->id, CodecId::bitpack);
    /* the user's zfp: the lowest rate that holds, below 16 */
    o.codec = static_cast<int>(CodecId::zfp);
    c = bound_choose(o, sh, 4, 1.0);
    assert_true(c.ok);
    assert_int_equal(c.codec->id, CodecId::zfp);
    assert_true(c.params.bits < 16 && c.params.variant == 0);
    /* and its proof is the shape's: W encodes at slope M + floor each, within 0.1 */
    assert_true(c.proven <= 0.1);
    /* a relative bound has no zfp choice */
    o.bound = -1e-2;
    assert_false(bound_choose(o, sh, 4, 1.0).ok);
}

void given_sz_when_bounds_are_absolute_expect_it_where_its_code_width_is_smallest(void **) {
    const BoundShape bc = bound_shape(Coll::bcast, 4, 0);
    BoundOptions o;
    o.bound = 1e-4;
    /* floats within 1, one encode: bitpack needs 24 bits, sz's Lorenzo codes at most 15 */
    BoundChoice c = bound_choose(o, bc, 4, 1.0);
    assert_true(c.ok);
    assert_int_equal(c.codec->id, CodecId::sz);
    assert_int_equal(c.params.variant, sz::kLorenzo);
    const float eb = sz::eb_of(c.params.param);
    assert_true(eb <= 1e-4f && eb > 0.99e-4f && c.proven <= 1e-4);
    /* plain codes when sz_mode says so */
    o.sz_variant = sz::kPlain;
    c = bound_choose(o, bc, 4, 1.0);
    assert_true(c.ok && c.codec->id == CodecId::sz && c.params.variant == sz::kPlain);
    o.sz_variant = sz::kLorenzo;
    /* doubles at 1e-10: bitpack 48, sz 35 */
    o.elem = Elem::f64;
    o.bound = 1e-10;
    c = bound_choose(o, bc, 4, 1.0);
    assert_true(c.ok && c.codec->id == CodecId::sz && c.proven <= 1e-10);
    o.elem = Elem::f32;
    o.bound = 1e-4;
    /* values whose codes could escape (2 M > 2^19 eb for floats): not chosen */
    c = bound_choose(o, bc, 4, 100.0);
    assert_true(c.ok);
    assert_true(c.codec->id != CodecId::sz);
    /* reduce-scatter takes no variable-size payload; an explicit width; a relative bound */
    const BoundShape rs = bound_shape(Coll::reduce_scatter_block, 2, 0);
    o.variable_ok = false;
    c = bound_choose(o, rs, 2, 1.0);
    assert_true(c.ok && c.codec->id != CodecId::sz);
    o.variable_ok = true;
    o.bits = 24;
    c = bound_choose(o, bc, 4, 1.0);
    assert_true(c.ok && c.codec->id == CodecId::bitpack);
    o.bits = 0;
    o.bound = -1e-3;
    c = bound_choose(o, bc, 4, 1.0);
    assert_true(c.ok && c.codec->id == CodecId::bitpack);
    /* an allreduce over 4 ranks: sz's allgather moves P/2 = 2 times its codes, more than
     * bitpack's 24 bits: bitpack, as before; at 2 ranks sz's 18 bits win */
    const int tp = enum_value(SettingId::allreduce_algorithm, "auto");
    o.bound = 1e-4;
    c = bound_choose(o, bound_shape(Coll::allreduce, 4, tp), 4, 1.0);
    assert_true(c.ok && c.codec->id == CodecId::bitpack);
    c = bound_choose(o, bound_shape(Coll::allreduce, 2, tp), 2, 1.0);
    assert_true(c.ok && c.codec->id == CodecId::sz && c.proven <= 1e-4);
    /* the user's sz: taken wherever it holds, even where bitpack moves fewer bytes */
    o.codec = static_cast<int>(CodecId::sz);
    const BoundShape a8 = bound_shape(Coll::allreduce, 8, tp);
    c = bound_choose(o, a8, 8, 1.0);
    assert_true(c.ok && c.codec->id == CodecId::sz && c.proven <= 1e-4);
    /* its proof: the summation's error plus W encodes of eb each */
    const double g = std::expm1(a8.K * std::log1p(0x1p-24));
    assert_true(g * 8 + (1 + g) * a8.W * sz::eb_of(c.params.param) <= 1e-4);
    /* below the summation's own error: no sz either */
    o.bound = 1e-9;
    assert_false(bound_choose(o, a8, 8, 1.0).ok);
}

}  // namespace

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(given_bitpack_fp32_and_none_when_round_tripped_expect_their_models_to_hold),
        cmocka_unit_test(given_relative_bounds_when_choosing_expect_the_narrowest_width_that_holds),
        cmocka_unit_test(given_absolute_bounds_when_choosing_expect_the_data_scale_to_decide),
        cmocka_unit_test(given_zfp_when_bounds_are_absolute_expect_its_rate_model_and_the_halving_rule),
        cmocka_unit_test(given_sz_when_bounds_are_absolute_expect_it_where_its_code_width_is_smallest),
    };
    return cmocka_run_group_tests_name("bound", tests, nullptr, nullptr);
}

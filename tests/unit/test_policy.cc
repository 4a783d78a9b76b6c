/* Policy: the awp state machine (Zhuang et al., Algorithm 1), the deterministic norm, plans. */
#include "policy.h"
#include "testutil.h"

using namespace compmpi;

namespace {

void given_stalled_norm_when_interval_calls_pass_expect_raise_by_step(void **) {
    AwpState a;
    a.bits = 8;
    /* first call only records the norm */
    awp_update(&a, 10.0, 0.05, 3, 8, 32);
    assert_int_equal(a.bits, 8);
    awp_update(&a, 10.1, 0.05, 3, 8, 32); /* 1% change: stall 1 */
    awp_update(&a, 10.2, 0.05, 3, 8, 32); /* stall 2 */
    assert_int_equal(a.bits, 8);
    awp_update(&a, 10.25, 0.05, 3, 8, 32); /* stall 3 -> raise */
    assert_int_equal(a.bits, 16);
    assert_int_equal(a.stalls, 0);
    for (int i = 0; i < 100; ++i) awp_update(&a, 10.25, 0.05, 3, 8, 32);
    assert_int_equal(a.bits, 32); /* capped */
    assert_int_equal(a.raises, 3);
}

void given_changing_norm_when_updating_expect_counter_reset(void **) {
    AwpState a;
    a.bits = 8;
    awp_update(&a, 1.0, 0.05, 2, 8, 32);
    awp_update(&a, 1.01, 0.05, 2, 8, 32); /* stall 1 */
    awp_update(&a, 2.0, 0.05, 2, 8, 32);  /* 98% change: reset */
    awp_update(&a, 2.01, 0.05, 2, 8, 32); /* stall 1 */
    assert_int_equal(a.bits, 8);
    awp_update(&a, 2.02, 0.05, 2, 8, 32); /* stall 2 -> raise */
    assert_int_equal(a.bits, 16);
}

void given_nonfinite_norm_when_updating_expect_no_raise(void **) {
    AwpState a;
    a.bits = 8;
    awp_update(&a, 1.0, 0.05, 1, 8, 32);
    awp_update(&a, NAN, 0.05, 1, 8, 32);
    awp_update(&a, 1.0, 0.05, 1, 8, 32); /* no previous finite norm: records only */
    assert_int_equal(a.bits, 8);
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

void given_awp_policy_when_planning_expect_start_bits_per_buffer(void **) {
    CommState st;
    st.settings = settings_defaults();
    Plan p;
    float buf[4];
    assert_int_equal(static_cast<int>(policy_plan(st, Coll::allreduce, buf, 1000, &p)), 0);
    assert_int_equal(p.params.bits, 8);
    assert_non_null(p.awp);
    p.awp->bits = 24;
    Plan q;
    assert_int_equal(static_cast<int>(policy_plan(st, Coll::allreduce, buf, 1000, &q)), 0);
    assert_int_equal(q.params.bits, 24);
    Plan other; /* another count is another buffer */
    assert_int_equal(static_cast<int>(policy_plan(st, Coll::allreduce, buf, 999, &other)), 0);
    assert_int_equal(other.params.bits, 8);
    st.settings.policy = policy_kind::static_;
    Plan st16;
    assert_int_equal(static_cast<int>(policy_plan(st, Coll::allreduce, buf, 1000, &st16)), 0);
    assert_int_equal(st16.params.bits, 16); /* bitpack default */
    assert_null(st16.awp);
}

}  // namespace

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(given_stalled_norm_when_interval_calls_pass_expect_raise_by_step),
        cmocka_unit_test(given_changing_norm_when_updating_expect_counter_reset),
        cmocka_unit_test(given_nonfinite_norm_when_updating_expect_no_raise),
        cmocka_unit_test(given_any_thread_count_when_norming_expect_same_bits),
        cmocka_unit_test(given_awp_policy_when_planning_expect_start_bits_per_buffer),
    };
    return cmocka_run_group_tests_name("policy", tests, nullptr, nullptr);
}

// SPDX-License-Identifier: BSD-3-Clause
/* Per-communicator state caps (src/runtime/state.h, docs/design.md "Memory caps and failures"): the
 * error-feedback table restarts at kMaxTrackedBuffers residuals and before the residual that
 * would take it past the byte cap; residual memory is exactly the residuals' sizes. */
#include "runtime/state.h"
#include "testutil.h"

using namespace compmpi;

namespace {

size_t table_bytes(const CommState &st) {
    size_t b = 0;
    for (const auto &e : st.ef) b += e.second.capacity() * sizeof(float);
    return b;
}

void ef_count_cap(void **) {
    CommState st;
    static char addr[kMaxTrackedBuffers + 8];
    for (size_t i = 0; i < kMaxTrackedBuffers; ++i) state_ef_residual(st, addr + i, 4);
    assert_int_equal(st.ef.size(), kMaxTrackedBuffers);
    /* a known key is found, not added */
    std::vector<float> *r = state_ef_residual(st, addr + 7, 4);
    r->at(0) = 1.5f;
    assert_true(state_ef_residual(st, addr + 7, 4)->at(0) == 1.5f);
    assert_int_equal(st.ef.size(), kMaxTrackedBuffers);
    /* one more key: the table restarts and holds only it */
    state_ef_residual(st, addr + kMaxTrackedBuffers, 4);
    assert_int_equal(st.ef.size(), 1);
    assert_int_equal(st.ef_floats, 4);
}

void ef_byte_cap(void **) {
    CommState st;
    static char addr[16];
    const size_t cap = 64 * 1024, n = 5000; /* 20000 bytes each: three fit, a fourth does not */
    for (int i = 0; i < 3; ++i) state_ef_residual(st, addr + i, n, Elem::f32, cap);
    assert_int_equal(st.ef.size(), 3);
    assert_int_equal(table_bytes(st), 3 * n * sizeof(float));
    std::vector<float> *r = state_ef_residual(st, addr + 3, n, Elem::f32, cap);
    assert_int_equal(st.ef.size(), 1);
    assert_int_equal(st.ef_floats, n);
    for (float v : *r) assert_true(v == 0.0f); /* a new residual starts at zero */
    assert_true(table_bytes(st) <= cap);
}

/* the scratch swapped into the table after a successful call has exactly the call's size,
 * whatever size an earlier call left it with */
void ef_scratch_exact(void **) {
    CommState st;
    state_ef_scratch(st, 100000);
    float *p = state_ef_scratch(st, 10);
    assert_non_null(p);
    assert_int_equal(st.ef_scratch.size(), 10);
    assert_int_equal(st.ef_scratch.capacity(), 10);
    static char addr[1];
    std::vector<float> *r = state_ef_residual(st, addr, 10);
    r->swap(st.ef_scratch); /* what run_plan does on success */
    assert_int_equal(table_bytes(st), 10 * sizeof(float));
}

}  // namespace

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ef_count_cap),
        cmocka_unit_test(ef_byte_cap),
        cmocka_unit_test(ef_scratch_exact),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}

// SPDX-License-Identifier: BSD-3-Clause
/* The memo of exact verdicts (src/runtime/verdict.h): a verdict is returned only for the same
 * signature and the current generation; one stored under a generation read before a change
 * is stale, never wrong; calls that may not be memoised get no key. */
#include "runtime/verdict.h"  /* before testutil.h: cmocka's fail() macro meets <ios> */
#include "testutil.h"

using namespace compmpi;

namespace {

CollArgs allreduce_args(MPI_Count n, const void *s, void *r) {
    return CollArgs{Coll::allreduce, s, r, n, 0, MPI_FLOAT, MPI_DATATYPE_NULL, MPI_SUM, 0, MPI_COMM_WORLD, false};
}

void given_stored_verdict_when_same_signature_expect_hit_and_other_signatures_miss(void **) {
    float s[4], r[4];
    VerdictKey k, other;
    assert_true(verdict_key(allreduce_args(1024, s, r), &k));
    verdict_store(k, 7, verdict_generation());
    int reason = -1;
    assert_true(verdict_lookup(k, &reason));
    assert_int_equal(reason, 7);
    assert_true(verdict_key(allreduce_args(1025, s, r), &other)); /* another count */
    assert_false(verdict_lookup(other, &reason));
    assert_true(verdict_key(allreduce_args(1024, MPI_IN_PLACE, r), &other)); /* in place */
    assert_false(verdict_lookup(other, &reason));
    CollArgs b = allreduce_args(1024, s, r);
    b.comm = MPI_COMM_SELF;
    assert_true(verdict_key(b, &other));
    assert_false(verdict_lookup(other, &reason));
}

void given_invalidation_when_looking_up_expect_miss(void **) {
    float s[4], r[4];
    VerdictKey k;
    assert_true(verdict_key(allreduce_args(2048, s, r), &k));
    verdict_store(k, 3, verdict_generation());
    int reason = -1;
    assert_true(verdict_lookup(k, &reason));
    verdict_invalidate();
    assert_false(verdict_lookup(k, &reason));
    /* derived before a change, stored after it: stale */
    const uint64_t before = verdict_generation();
    verdict_invalidate();
    verdict_store(k, 3, before);
    assert_false(verdict_lookup(k, &reason));
}

void given_calls_outside_the_memo_when_keying_expect_none(void **) {
    float s[4], r[4];
    VerdictKey k;
    CollArgs a = allreduce_args(1024, s, r);
    a.datatype = MPI_INT; /* not a floating type */
    assert_false(verdict_key(a, &k));
    a.datatype = MPI_DOUBLE; /* doubles are eligible (issue 30), keyed apart from floats */
    VerdictKey kd, kf;
    assert_true(verdict_key(a, &kd));
    assert_true(verdict_key(allreduce_args(1024, s, r), &kf));
    assert_true(kd.datatype != kf.datatype);
    a = allreduce_args(1024, s, r);
    a.kind = Coll::reduce_scatter; /* per-rank counts are not part of the key */
    assert_false(verdict_key(a, &k));
    CollArgs g{Coll::allgather, s, r, 4, 4, MPI_FLOAT, MPI_INT, MPI_OP_NULL, 0, MPI_COMM_WORLD, false};
    assert_false(verdict_key(g, &k));
}

}  // namespace

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(given_stored_verdict_when_same_signature_expect_hit_and_other_signatures_miss),
        cmocka_unit_test(given_invalidation_when_looking_up_expect_miss),
        cmocka_unit_test(given_calls_outside_the_memo_when_keying_expect_none),
    };
    return cmocka_run_group_tests_name("verdict", tests, nullptr, nullptr);
}

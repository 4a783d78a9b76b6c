// SPDX-License-Identifier: BSD-3-Clause
/* The cost model's decisions (src/runtime/costmodel.h), driven with agreed times directly. */
#include <initializer_list>

#include "runtime/costmodel.h"
#include "runtime/state.h"
#include "testutil.h"

using namespace compmpi;

namespace {

constexpr int kBitpack = 1, kQ8 = 4; /* src/base/codecs.def */

/* Explore in the order plain, compressed, plain, compressed, ... (the first two of each side
 * warm-ups, not used); then decide: compress only if the slowest compressed sample beat the
 * fastest exact one by the margin. */
void given_new_class_when_deciding_expect_alternating_exploration_then_decision(void **) {
    CommState st;
    const size_t bytes = 1 << 20;
    double pred = -1;
    static_assert(kCostWarmup == 2 && kCostSamples == 2, "the sequence below");
    const double tp[] = {5.0e-3, 4.0e-3, 1.0e-3, 0.8e-3}; /* plain: 2 warm-ups, 2 used */
    const double tc[] = {4.0e-3, 3.0e-3, 0.5e-3, 0.6e-3};
    for (int i = 0; i < 8; ++i) {
        CostDecision d = cost_decide(st, Coll::allreduce, bytes, kBitpack, 8, 0.05, &pred);
        assert_int_equal(static_cast<int>(d),
                         static_cast<int>(i % 2 ? CostDecision::explore_comp : CostDecision::explore_plain));
        assert_true(pred == 0.0);
        cost_learn(st, Coll::allreduce, bytes, kBitpack, 8, d, i % 2 ? tc[i / 2] : tp[i / 2]);
    }
    /* max(comp) = 0.6 ms < 0.95 * min(plain) = 0.76 ms: compression, to be confirmed by
     * kCostConfirm more samples per side, alternating, none a warm-up */
    static_assert(kCostConfirm == 2, "the sequence below");
    const double tp2[] = {0.9e-3, 1.0e-3}, tc2[] = {0.55e-3, 0.5e-3};
    for (int i = 0; i < 4; ++i) {
        CostDecision d = cost_decide(st, Coll::allreduce, bytes, kBitpack, 8, 0.05, &pred);
        assert_int_equal(static_cast<int>(d),
                         static_cast<int>(i % 2 ? CostDecision::explore_comp : CostDecision::explore_plain));
        cost_learn(st, Coll::allreduce, bytes, kBitpack, 8, d, i % 2 ? tc2[i / 2] : tp2[i / 2]);
    }
    /* max(comp) = 0.6 ms < 0.95 * min(plain) = 0.76 ms still: compress, predicted the mean of
     * the four used compressed samples, 0.5375 ms */
    CostDecision d = cost_decide(st, Coll::allreduce, bytes, kBitpack, 8, 0.05, &pred);
    assert_int_equal(static_cast<int>(d), static_cast<int>(CostDecision::compress));
    assert_float_equal(pred, 0.5375e-3, 1e-12);
    /* decisions are frozen: the same again */
    d = cost_decide(st, Coll::allreduce, bytes, kBitpack, 8, 0.05, &pred);
    assert_int_equal(static_cast<int>(d), static_cast<int>(CostDecision::compress));
}

/* Feed one side's samples in order (warm-ups first). */
void learn(CommState &st, Coll k, size_t b, CostDecision d, std::initializer_list<double> t) {
    for (double x : t) cost_learn(st, k, b, kBitpack, 8, d, x);
}

/* Explore until decided, every sample of a side the same: 2 (kCostWarmup + kCostSamples)
 * calls, 2 kCostConfirm more where compression wins. Returns the calls explored. */
int drive(CommState &st, Coll k, size_t bytes, int codec, int bits, double tp, double tc, double margin = 0.05) {
    double pred;
    int i = 0;
    for (CostDecision d; cost_explores(d = cost_decide(st, k, bytes, codec, bits, margin, &pred)); ++i) {
        assert_true(i < 2 * (kCostWarmup + kCostSamples + kCostConfirm));
        cost_learn(st, k, bytes, codec, bits, d, d == CostDecision::explore_plain ? tp : tc);
    }
    return i;
}

/* Samples that choose compression are confirmed by more; where the confirming samples do not
 * choose it, the class stays exact (one slow tick on both exact samples is not enough). */
void given_compression_chosen_once_when_confirming_expect_decision_from_all_samples(void **) {
    CommState st;
    double pred;
    learn(st, Coll::allgather, 1 << 22, CostDecision::explore_plain, {9e-3, 9e-3, 12e-3, 8e-3}); /* ticks */
    learn(st, Coll::allgather, 1 << 22, CostDecision::explore_comp, {9e-3, 4e-3, 3.3e-3, 3.3e-3});
    for (int i = 0; i < 2 * kCostConfirm; ++i) {
        const CostDecision d = cost_decide(st, Coll::allgather, 1 << 22, kBitpack, 8, 0.05, &pred);
        assert_int_equal(static_cast<int>(d),
                         static_cast<int>(i % 2 ? CostDecision::explore_comp : CostDecision::explore_plain));
        cost_learn(st, Coll::allgather, 1 << 22, kBitpack, 8, d, i % 2 ? 3.3e-3 : 0.9e-3);
    }
    assert_int_equal(static_cast<int>(cost_decide(st, Coll::allgather, 1 << 22, kBitpack, 8, 0.05, &pred)),
                     static_cast<int>(CostDecision::plain));
    assert_float_equal(pred, (12e-3 + 8e-3 + 0.9e-3 + 0.9e-3) / 4, 1e-12);
    /* a class that stays exact explores no more than before */
    CommState st2;
    assert_int_equal(drive(st2, Coll::allgather, 1 << 22, kBitpack, 8, 1e-3, 3e-3), 2 * (kCostWarmup + kCostSamples));
    assert_int_equal(drive(st2, Coll::allgather, 1 << 20, kBitpack, 8, 3e-3, 1e-3),
                     2 * (kCostWarmup + kCostSamples + kCostConfirm));
}

/* Compression must be faster by the margin, else the exact collective runs. */
void given_compression_within_margin_when_deciding_expect_exact(void **) {
    CommState st;
    drive(st, Coll::bcast, 65536, kBitpack, 16, 1.0e-3, 0.96e-3); /* 4% faster: below the 5% margin */
    double pred;
    assert_int_equal(static_cast<int>(cost_decide(st, Coll::bcast, 65536, kBitpack, 16, 0.05, &pred)),
                     static_cast<int>(CostDecision::plain));
    assert_float_equal(pred, 1.0e-3, 1e-12);
    /* with no margin the 4% gain is taken (once confirmed) */
    drive(st, Coll::bcast, 65536, kBitpack, 16, 1.0e-3, 0.96e-3, 0.0);
    assert_int_equal(static_cast<int>(cost_decide(st, Coll::bcast, 65536, kBitpack, 16, 0.0, &pred)),
                     static_cast<int>(CostDecision::compress));
}

/* Times scale linearly with bytes inside a class; classes, collectives, codecs and widths
 * are separate entries (a new width explores again). */
void given_other_size_or_plan_when_deciding_expect_scaled_or_separate(void **) {
    CommState st;
    drive(st, Coll::allreduce, 1 << 20, kBitpack, 8, 2.0e-3, 1.0e-3);
    double pred;
    /* 1.5 MiB is in the 1 MiB class: predicted 1.5 ms */
    assert_int_equal(static_cast<int>(cost_decide(st, Coll::allreduce, 3 << 19, kBitpack, 8, 0.05, &pred)),
                     static_cast<int>(CostDecision::compress));
    assert_float_equal(pred, 1.5e-3, 1e-12);
    assert_true(cost_explores(cost_decide(st, Coll::allreduce, 1 << 21, kBitpack, 8, 0.05, &pred)));
    assert_true(cost_explores(cost_decide(st, Coll::allreduce, 1 << 20, kBitpack, 16, 0.05, &pred)));
    assert_true(cost_explores(cost_decide(st, Coll::allreduce, 1 << 20, kQ8, 8, 0.05, &pred)));
    assert_true(cost_explores(cost_decide(st, Coll::allgather, 1 << 20, kBitpack, 8, 0.05, &pred)));
}

/* Slow first exact calls (connection set-up; at 1-4 MiB the second call too) neither make
 * compression look good nor enter the prediction: they are the warm-ups; the prediction is
 * the used samples' mean. */
void given_slow_first_exact_samples_when_learning_expect_them_unused(void **) {
    CommState st;
    double pred;
    const size_t b = 4096;
    learn(st, Coll::allreduce, b, CostDecision::explore_plain, {50e-3, 20e-3, 1e-5, 1.2e-5});
    learn(st, Coll::allreduce, b, CostDecision::explore_comp, {3e-5, 3e-5, 3e-5, 4e-5});
    assert_int_equal(static_cast<int>(cost_decide(st, Coll::allreduce, b, kBitpack, 8, 0.05, &pred)),
                     static_cast<int>(CostDecision::plain));
    assert_float_equal(pred, 1.1e-5, 1e-12);
}

/* Nor do slow first compressed calls (fresh workspaces) keep compression from winning. */
void given_slow_first_compressed_samples_when_learning_expect_them_unused(void **) {
    CommState st;
    double pred;
    const size_t b = 1 << 18;
    learn(st, Coll::allreduce, b, CostDecision::explore_plain, {2e-4, 2e-4, 2e-4, 2.2e-4});
    learn(st, Coll::allreduce, b, CostDecision::explore_comp, {50e-3, 5e-3, 1e-4, 1.1e-4}); /* page faults */
    drive(st, Coll::allreduce, b, kBitpack, 8, 2e-4, 1.05e-4); /* the confirming samples */
    assert_int_equal(static_cast<int>(cost_decide(st, Coll::allreduce, b, kBitpack, 8, 0.05, &pred)),
                     static_cast<int>(CostDecision::compress));
    assert_float_equal(pred, 1.05e-4, 1e-12);
}

/* The agreed (slowest rank's) times decide, alike on every rank; this rank's own times of
 * the same calls predict what this rank will measure (a bcast root returns early). */
void given_local_times_when_deciding_expect_agreed_decide_and_local_predict(void **) {
    CommState st;
    double pred;
    const size_t b = 1 << 16;
    const double agreed_plain = 2e-4, local_plain = 1e-4, agreed_comp = 5e-4;
    for (int i = 0; i < kCostWarmup + kCostSamples; ++i) {
        cost_learn(st, Coll::bcast, b, kBitpack, 8, CostDecision::explore_plain, agreed_plain, local_plain);
        cost_learn(st, Coll::bcast, b, kBitpack, 8, CostDecision::explore_comp, agreed_comp, 1e-5);
    }
    assert_int_equal(static_cast<int>(cost_decide(st, Coll::bcast, b, kBitpack, 8, 0.05, &pred)),
                     static_cast<int>(CostDecision::plain));
    assert_float_equal(pred, local_plain, 1e-12);
}

/* Compression that wins only sometimes (noise) is not taken. */
void given_overlapping_samples_when_deciding_expect_exact(void **) {
    CommState st;
    double pred;
    const size_t b = 1 << 16;
    learn(st, Coll::allgather, b, CostDecision::explore_plain, {2e-4, 2e-4, 2e-4, 2e-4});
    learn(st, Coll::allgather, b, CostDecision::explore_comp, {1e-4, 1e-4, 1e-4, 3e-4});
    assert_int_equal(static_cast<int>(cost_decide(st, Coll::allgather, b, kBitpack, 8, 0.05, &pred)),
                     static_cast<int>(CostDecision::plain));
}

/* After kCostRecheck decided calls the class is sampled again in steady state (no warm-up)
 * and that decision is final: a first round misled by slow first exact calls is corrected. */
void given_first_round_decision_when_rechecked_expect_steady_state_decision_final(void **) {
    CommState st;
    double pred;
    bool final = true;
    const size_t b = 16384;
    drive(st, Coll::allreduce, b, kBitpack, 8, 15e-6, 8e-6); /* exact looks slow in the first calls */
    for (int i = 1; i < kCostRecheck; ++i) { /* drive's last call was the first decided one */
        assert_int_equal(static_cast<int>(cost_decide(st, Coll::allreduce, b, kBitpack, 8, 0.05, &pred, &final)),
                         static_cast<int>(CostDecision::compress));
        assert_false(final);
    }
    /* the re-check: kCostSamples per side, alternating, none of them a warm-up */
    for (int i = 0; i < 2 * kCostSamples; ++i) {
        CostDecision d = cost_decide(st, Coll::allreduce, b, kBitpack, 8, 0.05, &pred, &final);
        assert_int_equal(static_cast<int>(d), static_cast<int>(i % 2 ? CostDecision::explore_comp : CostDecision::explore_plain));
        cost_learn(st, Coll::allreduce, b, kBitpack, 8, d, d == CostDecision::explore_plain ? 5e-6 : 8e-6);
    }
    for (int i = 0; i < 3 * kCostRecheck; ++i) {
        assert_int_equal(static_cast<int>(cost_decide(st, Coll::allreduce, b, kBitpack, 8, 0.05, &pred, &final)),
                         static_cast<int>(CostDecision::plain));
        assert_true(final);
    }
    assert_float_equal(pred, 5e-6, 1e-15);
}

void given_sizes_when_classifying_expect_floor_log2(void **) {
    assert_int_equal(cost_size_class(1), 0);
    assert_int_equal(cost_size_class(4096), 12);
    assert_int_equal(cost_size_class(8191), 12);
    assert_int_equal(cost_size_class(8192), 13);
    assert_int_equal(cost_size_class(size_t(1) << 40), 40);
}

}  // namespace

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(given_new_class_when_deciding_expect_alternating_exploration_then_decision),
        cmocka_unit_test(given_compression_within_margin_when_deciding_expect_exact),
        cmocka_unit_test(given_compression_chosen_once_when_confirming_expect_decision_from_all_samples),
        cmocka_unit_test(given_other_size_or_plan_when_deciding_expect_scaled_or_separate),
        cmocka_unit_test(given_slow_first_exact_samples_when_learning_expect_them_unused),
        cmocka_unit_test(given_slow_first_compressed_samples_when_learning_expect_them_unused),
        cmocka_unit_test(given_local_times_when_deciding_expect_agreed_decide_and_local_predict),
        cmocka_unit_test(given_overlapping_samples_when_deciding_expect_exact),
        cmocka_unit_test(given_first_round_decision_when_rechecked_expect_steady_state_decision_final),
        cmocka_unit_test(given_sizes_when_classifying_expect_floor_log2),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}

// SPDX-License-Identifier: BSD-3-Clause
/* The alpha-beta stage model of the allreduce (coll.h, coll/allreduce/allreduce_model.cc):
 * the hierarchy's node reduce and bcast, the leaders' link, the codec at each one's core
 * share, and the flat algorithm's terms, against values computed by hand from the formula
 * (the same formula as tools/scale_model.py's hier_stages / flat_stages). Arithmetic only:
 * no timing. */
#include <cmath>

#include "coll.h" /* before testutil.h: cmocka's fail() macro meets <ios> */
#include "testutil.h"

using namespace compmpi;

namespace {

/* 4 emulated nodes of 4 ranks on one host of 2 cores; links of docs/scale.md's kind */
const StageLinks kLinks{1e-3, 24e6, 1e-4, 4e8};
const StageShare kShare{2, 16, 4};
const StageCodec kCodec{8e9, 2e10, true};
constexpr double kM = 16777216; /* 16 MiB per rank */

void expect_close(double got, double want) {
    assert_true(std::fabs(got - want) <= 1e-12 * std::fabs(want));
}

void given_hierarchy_of_4x4_when_predicting_expect_hand_computed_stages(void **) {
    AllreduceCost leaders;
    leaders.messages = 6;
    leaders.bytes = 12582912;
    const StagePrediction p = allreduce_hier_predict(kLinks, kShare, kCodec, 4, 4, kM, leaders, false);
    /* node reduce = bcast = ceil(log2 4) (1e-4 + 16 MiB / 4e8) */
    expect_close(p.node_reduce, 2 * (1e-4 + 0.04194304));
    expect_close(p.node_bcast, 0.08408608);
    /* link = 6 x 1e-3 + 12 MiB / 24e6 */
    expect_close(p.link, 0.530288);
    /* codec: E = 1.25 M / 8e9, D = 1.75 M / 2e10 at share 4 leaders / 2 cores = 2; clip M / 8e9 at
     * share 16 / 2 = 8 */
    expect_close(p.codec, (0.00262144 + 0.0014680064) * 2 + 0.002097152 * 8);
    expect_close(p.total, 0.7234162688);
}

void given_hierarchy_with_halving_leaders_when_predicting_expect_decode_of_twice_the_buffer(void **) {
    AllreduceCost leaders;
    leaders.messages = 4;
    leaders.bytes = 1e6;
    const StagePrediction p = allreduce_hier_predict(kLinks, kShare, kCodec, 4, 4, kM, leaders, true);
    expect_close(p.link, 4e-3 + 1e6 / 24e6);
    expect_close(p.codec, (0.00262144 + 0.0016777216) * 2 + 0.002097152 * 8); /* D = 2 M */
    /* two ranks per node: one tree step each way */
    const StagePrediction q = allreduce_hier_predict(kLinks, kShare, kCodec, 8, 2, kM, leaders, true);
    expect_close(q.node_reduce, 1e-4 + 0.04194304);
}

void given_flat_16_ranks_of_4_per_node_when_predicting_expect_node_link_shared(void **) {
    AllreduceCost flat;
    flat.messages = 30;
    flat.bytes = 15728640;
    const StagePrediction p = allreduce_flat_predict(kLinks, kShare, kCodec, 16, 4, kM, flat, false);
    /* link: 30 alpha + 4 ranks x 15 MiB x 12/15 of it leaving the node, over 24e6 */
    expect_close(p.link, 0.03 + 2.097152);
    /* node: 3/15 of the bytes stay in the node, over 4e8 */
    expect_close(p.node_reduce, 0.00786432);
    expect_close(p.node_bcast, 0);
    /* codec: E = M (1 + 1/16), D = M (2 - 1/16) at share 16 / 2 = 8 (no clamped copy: flat) */
    expect_close(p.codec, (0.002228224 + 0.0016252928) * 8);
    expect_close(p.total, 2.127152 + 0.00786432 + 0.0308281344);
}

void given_one_rank_per_node_or_no_codec_speed_when_predicting_expect_no_node_and_no_codec_terms(void **) {
    AllreduceCost flat;
    flat.messages = 14;
    flat.bytes = 1e6;
    const StagePrediction p = allreduce_flat_predict(kLinks, kShare, StageCodec{}, 8, 1, kM, flat, false);
    expect_close(p.link, 14e-3 + 1e6 / 24e6);
    assert_true(p.node_reduce == 0 && p.codec == 0);
    expect_close(p.total, p.link);
    const StagePrediction one = allreduce_flat_predict(kLinks, kShare, kCodec, 1, 1, kM, flat, false);
    assert_true(one.total == 0);
}

}  // namespace

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(given_hierarchy_of_4x4_when_predicting_expect_hand_computed_stages),
        cmocka_unit_test(given_hierarchy_with_halving_leaders_when_predicting_expect_decode_of_twice_the_buffer),
        cmocka_unit_test(given_flat_16_ranks_of_4_per_node_when_predicting_expect_node_link_shared),
        cmocka_unit_test(given_one_rank_per_node_or_no_codec_speed_when_predicting_expect_no_node_and_no_codec_terms),
    };
    return cmocka_run_group_tests_name("stage_model", tests, nullptr, nullptr);
}

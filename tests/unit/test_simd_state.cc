// SPDX-License-Identifier: BSD-3-Clause
/* Every codec kernel returns with the upper halves of the vector registers clean, at every
 * SIMD level, width and variant, on one thread and on several: legacy-SSE code that runs
 * next (MPICH's reduction loops, the library's own scalar tails, the application) would
 * otherwise pay a false dependency on each instruction (kernels/simd.h). Read from the
 * CPU's XINUSE bits, not from timings. GCC 12 without -fno-ipa-ra fails this test: it jumps
 * from bitpack's AVX loops to the scalar tail without VZEROUPPER. */
#include "codec.h"
#include "runtime/policy.h"
#include "base/settings.h"
#include "testutil.h"

using namespace compmpi;

namespace {

/* The state right after a call, before any test code runs (the test is built without
 * AVX, so its own code cannot dirty it). */
#define EXPECT_CLEAN(call, what)                                                                                 \
    do {                                                                                                         \
        (void)(call);                                                                                            \
        const int st_ = simd_upper_state();                                                                      \
        if (st_ != 0)                                                                                            \
            fail_msg("%s %s bits=%d variant=%d simd=%s threads=%d n=%zu: upper halves left in use (XINUSE "  \
                     "0x%x)",                                                                                    \
                     c.name, what, p.bits, p.variant, simd_name(p.simd), p.threads, n, st_);                     \
    } while (0)

void run_codec(const CodecOps &c, CodecParams p, const std::vector<float> &x, size_t n) {
    std::vector<uint8_t> buf(c.max_payload(n, p) + 64);
    std::vector<float> y(n), acc(n, 1.0f);
    if (c.prepare) {
        double stat = 0;
        EXPECT_CLEAN(c.prepare(x.data(), n, p, &stat), "prepare");
        p.shared_scale = stat > 0 ? stat : 1.0;
    }
    size_t len = 0;
    Status s = Status::ok;
    EXPECT_CLEAN(s = c.encode(x.data(), n, p, buf.data(), buf.size(), &len), "encode");
    if (s != Status::ok)
        fail_msg("%s bits=%d variant=%d: encode returned %s", c.name, p.bits, p.variant, status_str(s));
    EXPECT_CLEAN(c.decode(buf.data(), len, n, p, y.data()), "decode");
    EXPECT_CLEAN(c.decode_add(buf.data(), len, n, p, acc.data()), "decode_add");
    if (c.decode_sum) {
        const uint8_t *in[2] = {buf.data(), buf.data()};
        const size_t lens[2] = {len, len};
        EXPECT_CLEAN(c.decode_sum(in, lens, 2, n, p, y.data()), "decode_sum");
    }
}

void given_every_codec_when_run_at_every_simd_level_expect_upper_halves_clean(void **) {
    if (simd_upper_state() < 0) {
        print_message("skipped: this CPU cannot report XINUSE (XGETBV with ECX=1)\n");
        skip();
    }
    simd_upper_clean();
    assert_int_equal(simd_upper_state(), 0);
    int runs = 0;
    for (size_t n : {size_t{4099}, size_t{300007}}) { /* tails; above the kernels' OpenMP threshold */
        auto x = testutil::gradient_data(n, 11);
        x[4] = -3.0f, x[5] = 2.0f; /* no near-max values: qsgd's norm of them overflows (non-finite, by design) */
        for (int id = 0; id < 256; ++id) {
            const CodecOps *c = codec_by_id(id);
            if (!c) continue;
            std::vector<int> widths{0};
            if (c->bits_step)
                for (int b = c->bits_min; b <= c->bits_max; b += c->bits_step) widths.push_back(b);
            for (int b : widths)
                for (int v = 0; v < 16; ++v)
                    for (int l = 0; l <= static_cast<int>(simd_detect()); ++l)
                        for (int t : {1, 2}) {
                            Settings s = settings_defaults();
                            s.codec = static_cast<int>(c->id);
                            s.bits = b;
                            CodecParams p;
                            if (codec_params_from_settings(*c, s, &p) != Status::ok) continue;
                            p.variant = static_cast<uint8_t>(v);
                            if (c->check(p) != Status::ok) continue;
                            p.simd = static_cast<SimdLevel>(l);
                            p.threads = t;
                            p.seed = 7;
                            run_codec(*c, p, x, n);
                            ++runs;
                        }
        }
    }
    print_message("%d codec configurations, each encode/decode/decode_add(/decode_sum) clean\n", runs);
    assert_true(runs > 50);
}

}  // namespace

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(given_every_codec_when_run_at_every_simd_level_expect_upper_halves_clean),
    };
    return cmocka_run_group_tests_name("simd_state", tests, nullptr, nullptr);
}

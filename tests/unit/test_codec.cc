// SPDX-License-Identifier: BSD-3-Clause
/* The blob format: header fields, validation of every field, flagged blobs, and the codec
 * registry. */
#include "codec.h"
#include "testutil.h"

using namespace compmpi;

namespace {

std::vector<uint8_t> make_blob(const char *codec, int bits, size_t n, std::vector<float> *data = nullptr) {
    const CodecOps *c = codec_by_name(codec);
    CodecParams p;
    p.bits = static_cast<uint8_t>(bits);
    auto x = testutil::gradient_data(n, 9);
    std::vector<uint8_t> blob(blob_max_bytes(*c, n, p));
    size_t len = 0;
    assert_int_equal(static_cast<int>(blob_encode(*c, p, x.data(), n, blob.data(), blob.size(), &len)), 0);
    assert_int_equal(len, blob.size());
    if (data) *data = x;
    return blob;
}

void given_registry_when_looking_up_expect_names_and_ids(void **) {
    assert_non_null(codec_by_name("none"));
    assert_non_null(codec_by_name("bitpack"));
    assert_null(codec_by_name("nope"));
    for (int id = 0; id < 256; ++id)
        if (const CodecOps *c = codec_by_id(id)) {
            assert_int_equal(static_cast<int>(c->id), id);
            assert_ptr_equal(codec_by_name(c->name), c);
        }
    assert_non_null(std::strstr(codec_names(), "bitpack"));
}

void given_blob_when_peeking_expect_header_fields(void **) {
    auto blob = make_blob("bitpack", 24, 1001);
    BlobInfo info;
    assert_int_equal(static_cast<int>(blob_peek(blob.data(), blob.size(), 1001, &info)), 0);
    assert_int_equal(static_cast<int>(info.codec), static_cast<int>(CodecId::bitpack));
    assert_int_equal(info.bits, 24);
    assert_int_equal(info.count, 1001);
    assert_int_equal(info.payload, 1001 * 3);
    assert_int_equal(blob[0], 'C');
    assert_int_equal(blob[3], 'I');
}

void given_none_codec_when_roundtrip_expect_exact(void **) {
    std::vector<float> x;
    auto blob = make_blob("none", 0, 777, &x);
    std::vector<float> y(777);
    assert_int_equal(static_cast<int>(blob_decode(blob.data(), blob.size(), 777, y.data(), false, SimdLevel::scalar, 1)), 0);
    assert_true(testutil::same_bytes(x.data(), y.data(), 777 * 4));
}

void given_none_codec_when_roundtrip_doubles_expect_exact_and_types_kept_apart(void **) {
    const CodecOps *c = codec_by_name("none");
    CodecParams p;
    p.elem = Elem::f64;
    const size_t n = 777;
    auto x = testutil::gradient_data64(n, 3);
    x[5] = NAN; /* carried, as for floats */
    std::vector<uint8_t> blob(blob_max_bytes(*c, n, p));
    assert_int_equal(blob.size(), kBlobHeaderBytes + 8 * n);
    size_t len = 0;
    assert_int_equal(static_cast<int>(blob_encode(*c, p, x.data(), n, blob.data(), blob.size(), &len)), 0);
    std::vector<double> y(n), acc(n, 2.0);
    assert_int_equal(static_cast<int>(blob_decode(blob.data(), len, n, y.data(), false, SimdLevel::scalar, 1)), 0);
    assert_true(testutil::same_bytes(x.data(), y.data(), 8 * n));
    assert_int_equal(static_cast<int>(blob_decode(blob.data(), len, n, acc.data(), true, SimdLevel::scalar, 1)), 0);
    for (size_t i = 6; i < n; ++i) assert_true(acc[i] == 2.0 + x[i]);
    std::vector<float> f(n, 5.0f);
    assert_int_equal(static_cast<int>(blob_decode(blob.data(), len, n, f.data(), false, SimdLevel::scalar, 1)),
                     static_cast<int>(Status::corrupt));
    for (float v : f) assert_true(v == 5.0f);
    /* every codec with an fp64 form: its elem byte decides which decoder accepts it */
    for (int id = 0; id < 256; ++id) {
        const CodecOps *k = codec_by_id(id);
        if (!k) continue;
        assert_int_equal(codec_has_elem(*k, Elem::f64), k->encode64 != nullptr);
        if (k->encode64) {
            assert_non_null(k->decode64);
            assert_non_null(k->decode_add64);
        }
    }
}

void given_damaged_header_when_decoding_expect_corrupt_and_output_untouched(void **) {
    const size_t n = 300;
    auto good = make_blob("bitpack", 16, n);
    struct Damage { size_t off; uint8_t val; const char *what; } cases[] = {
        {0, 'X', "magic"}, {4, 9, "version"}, {5, 200, "codec id"}, {6, 0x80, "unknown flag"},
        {7, 12, "bits not a byte multiple"}, {8, 7, "variant"}, {9, 1, "reserved"},
        {16, 0x2D, "count"}, {24, 0xFF, "payload length"}, {31, 1, "payload length high byte"},
    };
    for (const Damage &d : cases) {
        auto b = good;
        b[d.off] = d.val;
        std::vector<float> y(n, 5.0f);
        Status s = blob_decode(b.data(), b.size(), n, y.data(), false, SimdLevel::scalar, 1);
        if (s != Status::corrupt) fail_msg("damaged %s not detected", d.what);
        for (float v : y) assert_true(v == 5.0f);
    }
    /* truncated buffers */
    std::vector<float> y(n);
    for (size_t avail : {0ul, 10ul, 31ul, 32ul, good.size() - 1})
        assert_int_equal(static_cast<int>(blob_decode(good.data(), avail, n, y.data(), false, SimdLevel::scalar, 1)),
                         static_cast<int>(Status::corrupt));
    /* the receiver expects another count */
    assert_int_equal(static_cast<int>(blob_decode(good.data(), good.size(), n + 1, y.data(), false, SimdLevel::scalar, 1)),
                     static_cast<int>(Status::corrupt));
}

void given_nan_when_encoding_expect_flagged_empty_blob(void **) {
    const CodecOps *c = codec_by_name("bitpack");
    CodecParams p;
    p.bits = 16;
    std::vector<float> x(100, 1.0f);
    x[50] = NAN;
    std::vector<uint8_t> blob(blob_max_bytes(*c, 100, p));
    size_t len = 0;
    assert_int_equal(static_cast<int>(blob_encode(*c, p, x.data(), 100, blob.data(), blob.size(), &len)),
                     static_cast<int>(Status::nonfinite));
    assert_int_equal(len, kBlobHeaderBytes);
    BlobInfo info;
    assert_int_equal(static_cast<int>(blob_peek(blob.data(), blob.size(), 100, &info)), 0);
    assert_true(info.flags & BLOB_NONFINITE);
    std::vector<float> y(100);
    assert_int_equal(static_cast<int>(blob_decode(blob.data(), blob.size(), 100, y.data(), false, SimdLevel::scalar, 1)),
                     static_cast<int>(Status::nonfinite));
}

void given_abandon_flag_when_decoding_expect_corrupt(void **) {
    uint8_t h[kBlobHeaderBytes];
    blob_write_header(h, BlobInfo{CodecId::bitpack, BLOB_ABANDON, 16, 0, 0, 10, 0});
    float y[10];
    assert_int_equal(static_cast<int>(blob_decode(h, sizeof h, 10, y, false, SimdLevel::scalar, 1)),
                     static_cast<int>(Status::corrupt));
}

/* decode_sum of the codecs that sum decoded values (all but fft_topk, whose sum is spectral:
 * test_fft_topk): the bits of decode(payload 0) then decode_add of each later payload, at
 * every variant, SIMD level and thread count; a corrupt payload anywhere refuses the sum
 * before out is written. */
void given_payloads_when_decode_sum_expect_bits_of_decode_then_adds(void **) {
    int checked = 0;
    for (int id = 0; id < 256; ++id) {
        const CodecOps *c = codec_by_id(id);
        if (!c || !c->decode_sum || c->id == CodecId::fft_topk) continue;
        for (int bits : {static_cast<int>(c->bits_default), 2}) /* 2: qsgd's 2-bit fields (the paired decoder) */
        for (int v = 0; v < 16; ++v)
            for (int bucket : {0, 512})
                for (int l = 0; l <= static_cast<int>(simd_detect()); ++l)
                    for (int t : {1, 2}) {
                        if (bits == 2 && c->bits_default == 2) break; /* already run as the default */
                        CodecParams p;
                        p.bits = bits;
                        p.variant = static_cast<uint8_t>(v);
                        p.param = static_cast<uint32_t>(bucket);
                        p.bucket = p.param;
                        if (c->check(p) != Status::ok) continue;
                        p.simd = static_cast<SimdLevel>(l);
                        p.threads = t;
                        const size_t n = 140003; /* above the OpenMP threshold, several blocks and a tail */
                        std::vector<std::vector<uint8_t>> pay(3);
                        std::vector<const uint8_t *> ptr(3);
                        std::vector<size_t> len(3);
                        for (int k = 0; k < 3; ++k) {
                            auto x = testutil::gradient_data(n, 40 + k);
                            x[4] = -3.0f, x[5] = 2.0f; /* qsgd: no norm overflow */
                            CodecParams e = p;
                            e.seed = 5, e.stream = static_cast<uint64_t>(k);
                            if (c->prepare) {
                                double stat = 0;
                                assert_int_equal(static_cast<int>(c->prepare(x.data(), n, e, &stat)), 0);
                                e.shared_scale = stat;
                            }
                            pay[k].resize(c->max_payload(n, p));
                            assert_int_equal(static_cast<int>(c->encode(x.data(), n, e, pay[k].data(), pay[k].size(), &len[k])), 0);
                            ptr[k] = pay[k].data();
                        }
                        for (int cnt = 1; cnt <= 3; ++cnt) {
                            std::vector<float> want(n), got(n, 7.0f);
                            assert_int_equal(static_cast<int>(c->decode(ptr[0], len[0], n, p, want.data())), 0);
                            for (int k = 1; k < cnt; ++k)
                                assert_int_equal(static_cast<int>(c->decode_add(ptr[k], len[k], n, p, want.data())), 0);
                            assert_int_equal(static_cast<int>(c->decode_sum(ptr.data(), len.data(), cnt, n, p, got.data())), 0);
                            if (!testutil::same_bytes(want.data(), got.data(), n * 4))
                                fail_msg("%s bits %d variant %d bucket %d simd %d threads %d: decode_sum of %d payloads differs",
                                         c->name, bits, v, bucket, l, t, cnt);
                            ++checked;
                            /* stream_out (non-temporal stores where the decoder has them): the
                             * same bits, at any alignment of out, nothing written past n */
                            if (cnt < 2) continue;
                            for (size_t off : {0ul, 1ul, 4ul, 13ul}) {
                                std::vector<float> sgot(n + off + 1, 7.0f);
                                CodecParams ps = p;
                                ps.stream_out = true;
                                assert_int_equal(
                                    static_cast<int>(c->decode_sum(ptr.data(), len.data(), cnt, n, ps, sgot.data() + off)),
                                    0);
                                if (!testutil::same_bytes(want.data(), sgot.data() + off, n * 4) || sgot[n + off] != 7.0f)
                                    fail_msg("%s bits %d variant %d simd %d threads %d: streamed decode_sum at offset %zu differs",
                                             c->name, bits, v, l, t, off);
                                for (size_t i = 0; i < off; ++i) assert_true(sgot[i] == 7.0f);
                            }
                        }
                        /* a payload one byte short: refused, out untouched */
                        std::vector<float> out(n, 7.0f);
                        size_t bad[3] = {len[0], len[1] - 1, len[2]};
                        assert_int_not_equal(static_cast<int>(c->decode_sum(ptr.data(), bad, 3, n, p, out.data())), 0);
                        for (float f : out) assert_true(f == 7.0f);
                    }
    }
    assert_true(checked >= 3 * 3); /* q8, qsgd, terngrad at least */
}

}  // namespace

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(given_registry_when_looking_up_expect_names_and_ids),
        cmocka_unit_test(given_blob_when_peeking_expect_header_fields),
        cmocka_unit_test(given_none_codec_when_roundtrip_expect_exact),
        cmocka_unit_test(given_none_codec_when_roundtrip_doubles_expect_exact_and_types_kept_apart),
        cmocka_unit_test(given_damaged_header_when_decoding_expect_corrupt_and_output_untouched),
        cmocka_unit_test(given_nan_when_encoding_expect_flagged_empty_blob),
        cmocka_unit_test(given_abandon_flag_when_decoding_expect_corrupt),
        cmocka_unit_test(given_payloads_when_decode_sum_expect_bits_of_decode_then_adds),
    };
    return cmocka_run_group_tests_name("codec", tests, nullptr, nullptr);
}

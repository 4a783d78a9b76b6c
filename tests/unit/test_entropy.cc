// SPDX-License-Identifier: BSD-3-Clause
/* The entropy stage (kernels/entropy.h, issue 43 part 2): for every codec it applies to, on
 * floats and doubles, a coded blob decodes to exactly the bits of the plain blob (decode and
 * decode_add), is shorter on gradient data, and is refused (Status::corrupt, never a read past
 * the bytes given) when any byte of its frame or its stage header is damaged or the frame is
 * cut short; codecs that code their own payload (lossless, zfp, sz) and flagged blobs are left
 * alone; the shuffle is its own inverse for every width and tail length. */
#include "testutil.h"

#include <cstring>
#include <vector>

#include "entropy.h"

using namespace compmpi;

namespace {

struct Case {
    const char *codec;
    int bits;
    Elem elem;
};
/* every codec with fixed-width codes the stage applies to, both element types where the codec has them */
const Case kCases[] = {
    {"none", 0, Elem::f32},      {"bitpack", 8, Elem::f32},  {"bitpack", 16, Elem::f32}, {"bitpack", 24, Elem::f32},
    {"fp16", 0, Elem::f32},      {"bf16", 0, Elem::f32},     {"q8", 0, Elem::f32},       {"terngrad", 0, Elem::f32},
    {"qsgd", 4, Elem::f32},      {"rangefloat", 0, Elem::f32}, {"topk", 0, Elem::f32},   {"none", 0, Elem::f64},
    {"bitpack", 16, Elem::f64},  {"bitpack", 32, Elem::f64}, {"fp32", 0, Elem::f64},     {"q8", 0, Elem::f64},
};

CodecParams params_for(const CodecOps &c, const Case &k, size_t n) {
    CodecParams p;
    p.elem = k.elem;
    /* a codec with widths gets the case's or its default, the others none */
    const bool widths = k.elem == Elem::f64 ? c.bits64_step != 0 : c.bits_step != 0;
    p.bits = widths ? static_cast<uint8_t>(codec_bits_for(c, k.bits, k.elem)) : 0;
    p.seed = 5;
    p.theta = 0.9f;
    if (c.id == CodecId::qsgd) p.param = 512, p.bucket = 512;
    (void)n;
    return p;
}

/* one layer's gradient: N(0, 1e-3^2), a few outliers, signed zeros and a subnormal. (Over
 * gradient_data's six decades of scale, fp16's exponent byte carries 7.3 bits: zstd finds
 * nothing to gain there and the stage rightly sends such a blob as it is.) */
template <class T> std::vector<T> data(size_t n, uint64_t seed) {
    std::vector<T> v = testutil::normal_data<T>(n, seed, 1e-3);
    for (size_t i = 0; i < n; i += 997) v[i] *= T(50);
    v[1] = T(0), v[2] = -T(0), v[3] = T(1e-40f);
    return v;
}

/* encode x with codec c into a plain blob (returned) and a coded copy (coded, true if it shrank) */
template <class T>
std::vector<uint8_t> encode(const CodecOps &c, const CodecParams &p, const std::vector<T> &x, size_t *plain_len,
                            std::vector<uint8_t> *coded, size_t *coded_len) {
    CodecParams q = p;
    double stat = 0;
    if (c.flags & CODEC_SHARED_SCALE) {
        Status s = Status::unsupported;
        if constexpr (sizeof(T) == 8) s = c.prepare64 ? c.prepare64(x.data(), x.size(), q, &stat) : s;
        else s = c.prepare ? c.prepare(x.data(), x.size(), q, &stat) : s;
        if (s == Status::ok) q.shared_scale = stat;
    }
    std::vector<uint8_t> blob(blob_max_bytes(c, x.size(), q));
    assert_int_equal(blob_encode(c, q, x.data(), x.size(), blob.data(), blob.size(), plain_len), Status::ok);
    *coded = blob;
    *coded_len = *plain_len;
    EntropyParams ep;
    ep.method = kEntropyZstd;
    blob_entropy_encode(c, q, coded->data(), coded_len, ep);
    return blob;
}

template <class T> void roundtrip_case(const Case &k) {
    const CodecOps &c = *codec_by_name(k.codec);
    const size_t n = 40000 + 37;
    const std::vector<T> x = data<T>(n, 11);
    const CodecParams p = params_for(c, k, n);
    size_t pl = 0, cl = 0;
    std::vector<uint8_t> coded;
    const std::vector<uint8_t> plain = encode(c, p, x, &pl, &coded, &cl);
    /* gradient codes carry far less than their width: the stage shrinks every such blob */
    assert_true(entropy_applies(c));
    assert_true(blob_entropy_coded(coded.data(), cl));
    assert_true(cl < pl);
    std::vector<T> a(n), b(n), acc_a(n, T(1)), acc_b(n, T(1));
    assert_int_equal(blob_decode(plain.data(), pl, n, a.data(), false, SimdLevel::scalar, 1), Status::ok);
    assert_int_equal(blob_decode(coded.data(), cl, n, b.data(), false, SimdLevel::scalar, 1), Status::ok);
    assert_memory_equal(a.data(), b.data(), n * sizeof(T));
    assert_int_equal(blob_decode(plain.data(), pl, n, acc_a.data(), true, SimdLevel::scalar, 1), Status::ok);
    assert_int_equal(blob_decode(coded.data(), cl, n, acc_b.data(), true, SimdLevel::scalar, 1), Status::ok);
    assert_memory_equal(acc_a.data(), acc_b.data(), n * sizeof(T));
    /* undoing the stage gives the plain blob byte for byte */
    std::vector<uint8_t> scratch;
    const uint8_t *raw = nullptr;
    size_t ra = 0;
    assert_int_equal(blob_entropy_decode(coded.data(), cl, n, scratch, &raw, &ra), Status::ok);
    assert_int_equal(ra, pl);
    assert_memory_equal(raw, plain.data(), pl);
    /* a receiver expecting another count refuses it */
    assert_int_equal(blob_decode(coded.data(), cl, n + 1, b.data(), false, SimdLevel::scalar, 1), Status::corrupt);
}

void given_every_codec_when_coded_expect_same_bits_and_fewer_bytes(void **) {
    for (const Case &k : kCases) {
        if (k.elem == Elem::f64) roundtrip_case<double>(k);
        else roundtrip_case<float>(k);
    }
}

void given_damaged_coded_blob_when_decoding_expect_corrupt(void **) {
    const CodecOps &c = *codec_by_name("bitpack");
    const Case k{"bitpack", 8, Elem::f32};
    const size_t n = 20000;
    const std::vector<float> x = data<float>(n, 3);
    size_t pl = 0, cl = 0;
    std::vector<uint8_t> coded;
    encode(c, params_for(c, k, n), x, &pl, &coded, &cl);
    assert_true(blob_entropy_coded(coded.data(), cl));
    std::vector<float> y(n), clean(n);
    assert_int_equal(blob_decode(coded.data(), cl, n, clean.data(), false, SimdLevel::scalar, 1), Status::ok);
    /* single-bit flips of the frame, a stride of positions: refused by the frame's checks and
     * its content checksum -- or, where the bit is one the decoder never uses (padding of an
     * entropy-coded stream), decoded to exactly the clean bits; never to other values */
    int refused = 0, same = 0;
    for (size_t off = kBlobHeaderBytes; off < cl; off += 7)
        for (int bit = 0; bit < 8; bit += 3) {
            std::vector<uint8_t> bad(coded.begin(), coded.begin() + static_cast<long>(cl));
            bad[off] ^= static_cast<uint8_t>(1u << bit);
            std::fill(y.begin(), y.end(), 0.0f);
            const Status st = blob_decode(bad.data(), bad.size(), n, y.data(), false, SimdLevel::scalar, 1);
            if (st == Status::corrupt) {
                ++refused;
            } else {
                assert_int_equal(st, Status::ok);
                assert_memory_equal(y.data(), clean.data(), n * sizeof(float));
                ++same;
            }
        }
    assert_true(refused > 50 * (same + 1)); /* nearly every flip is caught */
    /* cut short: the header claims more than the bytes given, or a shorter claim of a cut frame */
    for (size_t cut = 1; cut < cl - kBlobHeaderBytes; cut += 97) {
        std::vector<uint8_t> bad(coded.begin(), coded.begin() + static_cast<long>(cl - cut));
        assert_int_equal(blob_decode(bad.data(), bad.size(), n, y.data(), false, SimdLevel::scalar, 1), Status::corrupt);
        uint64_t claim = cl - cut - kBlobHeaderBytes;
        std::memcpy(bad.data() + 24, &claim, 8);
        assert_int_equal(blob_decode(bad.data(), bad.size(), n, y.data(), false, SimdLevel::scalar, 1), Status::corrupt);
    }
    /* the stage header: an unknown method, a stride out of range, a stride without the stage */
    const uint8_t bytes10[][2] = {{2, 1}, {1, 0}, {1, 9}, {0, 1}, {255, 255}};
    for (const auto &b : bytes10) {
        std::vector<uint8_t> bad(coded.begin(), coded.begin() + static_cast<long>(cl));
        bad[10] = b[0], bad[11] = b[1];
        assert_int_equal(blob_decode(bad.data(), bad.size(), n, y.data(), false, SimdLevel::scalar, 1), Status::corrupt);
    }
    /* a frame that expands to fewer bytes than the codec's exact payload */
    {
        std::vector<uint8_t> small(blob_max_bytes(c, n / 2, params_for(c, k, n / 2)));
        size_t sl = 0;
        std::vector<uint8_t> sc;
        size_t scl = 0;
        const std::vector<float> h(x.begin(), x.begin() + static_cast<long>(n / 2));
        encode(c, params_for(c, k, n / 2), h, &sl, &sc, &scl);
        /* claim the full count: the header passes, the frame's content is too short */
        uint64_t cnt = n;
        std::memcpy(sc.data() + 16, &cnt, 8);
        assert_int_equal(blob_decode(sc.data(), scl, n, y.data(), false, SimdLevel::scalar, 1), Status::corrupt);
    }
    /* a coded blob of a codec that codes its own payload is refused */
    {
        std::vector<uint8_t> bad(coded.begin(), coded.begin() + static_cast<long>(cl));
        bad[5] = static_cast<uint8_t>(CodecId::lossless);
        assert_int_equal(blob_decode(bad.data(), bad.size(), n, y.data(), false, SimdLevel::scalar, 1), Status::corrupt);
    }
}

void given_own_coding_or_flagged_blob_when_staging_expect_unchanged(void **) {
    for (const char *name : {"lossless", "zfp", "sz"}) {
        const CodecOps &c = *codec_by_name(name);
        assert_false(entropy_applies(c));
    }
    const CodecOps &bp = *codec_by_name("bitpack");
    CodecParams p;
    p.bits = 8;
    std::vector<float> x = data<float>(1000, 9);
    x[17] = std::numeric_limits<float>::infinity();
    std::vector<uint8_t> blob(blob_max_bytes(bp, x.size(), p));
    size_t len = 0;
    assert_int_equal(blob_encode(bp, p, x.data(), x.size(), blob.data(), blob.size(), &len), Status::nonfinite);
    const std::vector<uint8_t> before(blob.begin(), blob.begin() + static_cast<long>(len));
    EntropyParams ep;
    ep.method = kEntropyZstd;
    size_t l2 = len;
    assert_false(blob_entropy_encode(bp, p, blob.data(), &l2, ep));
    assert_int_equal(l2, len);
    assert_memory_equal(before.data(), blob.data(), len);
    /* incompressible codes: the blob goes as it is */
    std::vector<uint8_t> noise(kBlobHeaderBytes + 4096);
    {
        std::vector<float> r(1024);
        uint64_t s = 99;
        for (float &v : r) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            uint32_t u = static_cast<uint32_t>(s >> 32) & 0x3FFFFFFFu; /* finite */
            std::memcpy(&v, &u, 4);
        }
        const CodecOps &none = *codec_by_name("none");
        CodecParams q;
        size_t nl = 0;
        assert_int_equal(blob_encode(none, q, r.data(), r.size(), noise.data(), noise.size(), &nl), Status::ok);
        size_t nl2 = nl;
        (void)blob_entropy_encode(none, q, noise.data(), &nl2, ep);
        assert_true(nl2 <= nl);
        std::vector<float> back(1024);
        assert_int_equal(blob_decode(noise.data(), nl2, 1024, back.data(), false, SimdLevel::scalar, 1), Status::ok);
        assert_memory_equal(back.data(), r.data(), 4096);
    }
}

void given_any_width_when_shuffling_expect_inverse(void **) {
    std::vector<uint8_t> src(1000), a(1000), b(1000);
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 131 + 7);
    for (unsigned w = 1; w <= kEntropyStrideMax; ++w)
        for (size_t n : {0, 1, 7, 8, 9, 63, 1000}) {
            byte_shuffle(src.data(), n, w, a.data());
            byte_unshuffle(a.data(), n, w, b.data());
            if (n) assert_memory_equal(b.data(), src.data(), n);
            if (w == 4 && n == 8) { /* byte k of each element, then byte k+1 */
                assert_int_equal(a[0], src[0]);
                assert_int_equal(a[1], src[4]);
                assert_int_equal(a[2], src[1]);
            }
        }
}

}  // namespace

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(given_every_codec_when_coded_expect_same_bits_and_fewer_bytes),
        cmocka_unit_test(given_damaged_coded_blob_when_decoding_expect_corrupt),
        cmocka_unit_test(given_own_coding_or_flagged_blob_when_staging_expect_unchanged),
        cmocka_unit_test(given_any_width_when_shuffling_expect_inverse),
    };
    return cmocka_run_group_tests_name("entropy", tests, nullptr, nullptr);
}

/* sparse: lossless at every density, the smallest form chosen, corrupt payloads rejected
 * before any write. */
#include <algorithm>

#include "codec.h"
#include "testutil.h"

using namespace compmpi;

namespace {

std::vector<float> with_density(size_t n, double d, uint64_t seed) {
    testutil::Rng r(seed);
    std::vector<float> v(n, 0.0f);
    for (size_t i = 0; i < n; ++i)
        if (r.uniform() < d) v[i] = static_cast<float>(r.normal());
    if (n > 3) v[n - 1] = -0.0f; /* kept: bit-exact */
    return v;
}

void given_any_density_when_roundtrip_expect_exact_bits_and_smallest_form(void **) {
    const CodecOps *c = codec_by_name("sparse");
    assert_non_null(c);
    CodecParams p;
    for (size_t n : {0ul, 1ul, 7ul, 100ul, 10001ul})
        for (double d : {0.0, 0.01, 0.1, 0.2, 0.5, 1.0}) {
            auto x = with_density(n, d, n + static_cast<uint64_t>(d * 100));
            std::vector<uint8_t> blob(blob_max_bytes(*c, n, p));
            size_t len;
            assert_int_equal(static_cast<int>(blob_encode(*c, p, x.data(), n, blob.data(), blob.size(), &len)), 0);
            std::vector<float> y(n + 1, 9.0f);
            assert_int_equal(static_cast<int>(blob_decode(blob.data(), len, n, y.data(), false, SimdLevel::scalar, 1)), 0);
            assert_true(testutil::same_bytes(x.data(), y.data(), n * 4));
            size_t k = 0;
            for (float v : x) k += std::memcmp(&v, "\0\0\0\0", 4) != 0;
            size_t best = std::min({4 + 8 * k, 4 + (n + 7) / 8 + 4 * k, 4 * n});
            assert_int_equal(len - kBlobHeaderBytes, 4 + best);
            /* decode_add */
            std::vector<float> acc(n, 1.0f);
            assert_int_equal(static_cast<int>(blob_decode(blob.data(), len, n, acc.data(), true, SimdLevel::scalar, 1)), 0);
            for (size_t i = 0; i < n; ++i) assert_true(acc[i] == 1.0f + x[i]);
        }
}

void given_corrupt_payload_when_decoding_expect_corrupt_and_no_write(void **) {
    const CodecOps *c = codec_by_name("sparse");
    CodecParams p;
    const size_t n = 1000;
    auto x = with_density(n, 0.01, 3); /* index form */
    std::vector<uint8_t> blob(blob_max_bytes(*c, n, p));
    size_t len;
    blob_encode(*c, p, x.data(), n, blob.data(), blob.size(), &len);
    assert_int_equal(blob[kBlobHeaderBytes], 0); /* index list at 1% */
    /* indices out of order */
    auto b = blob;
    std::swap(b[kBlobHeaderBytes + 8], b[kBlobHeaderBytes + 16]);
    std::vector<float> y(n, 7.0f);
    assert_int_equal(static_cast<int>(blob_decode(b.data(), len, n, y.data(), false, SimdLevel::scalar, 1)),
                     static_cast<int>(Status::corrupt));
    for (float v : y) assert_true(v == 7.0f);
    /* unknown form */
    b = blob;
    b[kBlobHeaderBytes] = 3;
    assert_int_equal(static_cast<int>(blob_decode(b.data(), len, n, y.data(), false, SimdLevel::scalar, 1)),
                     static_cast<int>(Status::corrupt));
}

}  // namespace

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(given_any_density_when_roundtrip_expect_exact_bits_and_smallest_form),
        cmocka_unit_test(given_corrupt_payload_when_decoding_expect_corrupt_and_no_write),
    };
    return cmocka_run_group_tests_name("sparse", tests, nullptr, nullptr);
}

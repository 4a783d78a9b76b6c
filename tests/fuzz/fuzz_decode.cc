/* libFuzzer target: every decoder through the blob layer (blob_decode), with arbitrary
 * bytes, arbitrary expected counts, decode and decode-add, each SIMD level. Properties:
 * the status is ok, corrupt or nonfinite; nothing is read outside the blob or written
 * outside the n floats (both heap blocks sized exactly: ASan); a flagged or rejected header
 * leaves the output untouched; and a blob that decodes gives the same bits at every SIMD
 * level (ranks on different CPUs must agree). Input layout: fuzz_target.h. */
#include <cstring>
#include <memory>
#include <vector>

#include "codec.h"
#include "fuzz_target.h"

using namespace compmpi;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < fuzz::kDecodePrefix) return 0;
    const uint8_t ctl = data[0];
    const uint8_t *blob_in = data + fuzz::kDecodePrefix;
    const size_t avail = size - fuzz::kDecodePrefix;
    uint64_t n = fuzz::rd32(data + 1);
    if (!(ctl & 8)) n = avail >= kBlobHeaderBytes ? fuzz::rd64(blob_in + 16) : n;
    if (n > fuzz::kMaxCount) n %= fuzz::kMaxCount + 1;
    const bool acc = ctl & 1;
    SimdLevel lvl = static_cast<SimdLevel>((ctl >> 1) & 3);
    if (static_cast<int>(lvl) == 3 || lvl > simd_detect()) lvl = simd_detect();
    const int threads = (ctl & 16) ? 2 : 1;

    /* exactly sized copies: an overread or overflow by one byte is an ASan report */
    std::unique_ptr<uint8_t[]> blob(new uint8_t[avail ? avail : 1]);
    if (avail) std::memcpy(blob.get(), blob_in, avail);
    std::unique_ptr<float[]> out(new float[n ? n : 1]), ref(new float[n ? n : 1]);
    for (uint64_t i = 0; i < n; ++i) out[i] = ref[i] = static_cast<float>(i % 7) - 3.0f;
    std::vector<float> before(out.get(), out.get() + n);

    BlobInfo info;
    const Status hs = blob_peek(blob.get(), avail, n, &info);
    const Status s = blob_decode(blob.get(), avail, n, out.get(), acc, lvl, threads);
    FUZZ_REQUIRE(s == Status::ok || s == Status::corrupt || s == Status::nonfinite, "status %s", status_str(s));
    if (hs != Status::ok || info.flags) {
        FUZZ_REQUIRE(s != Status::ok, "a rejected or flagged header decoded");
        FUZZ_REQUIRE(n == 0 || std::memcmp(before.data(), out.get(), n * sizeof(float)) == 0,
                     "output written for a rejected or flagged header");
        return 0;
    }
    if (s == Status::ok && lvl != SimdLevel::scalar) {
        const Status s2 = blob_decode(blob.get(), avail, n, ref.get(), acc, SimdLevel::scalar, 1);
        FUZZ_REQUIRE(s2 == Status::ok, "scalar path rejects what %s accepts", simd_name(lvl));
        FUZZ_REQUIRE(n == 0 || std::memcmp(ref.get(), out.get(), n * sizeof(float)) == 0,
                     "codec %d: %s and scalar decode differ", static_cast<int>(info.codec), simd_name(lvl));
    }
    return 0;
}

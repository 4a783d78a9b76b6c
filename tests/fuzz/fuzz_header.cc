// SPDX-License-Identifier: BSD-3-Clause
/* libFuzzer target: the blob header validator (blob_peek) with arbitrary bytes and an
 * arbitrary 64-bit expected count. Input: [expected count u64][bytes ...]. Properties of
 * an accepted header: magic, version, known codec, a known element type (byte 9) the codec has
 * a form for (unflagged blobs), the entropy stage's bytes 10-11 either zero or a known method
 * with a shuffle width 1..8 on an unflagged blob of a codec the stage applies to (its coded
 * payload shorter than the codec's bound, not equal to it: kernels/entropy.h), known flags, the
 * expected count, a payload inside the bytes received; flagged blobs carry no payload;
 * otherwise the codec accepts the parameters, the payload is within the codec's bound (equal
 * to it for dense codecs), and that bound does not shrink with the count (no overflow that
 * would let a huge count pass with a small payload). */
#include <cstring>
#include <memory>

#include "codec.h"
#include "entropy.h"
#include "fuzz_target.h"

using namespace compmpi;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 8) return 0;
    const uint64_t expect = fuzz::rd64(data);
    const size_t avail = size - 8;
    std::unique_ptr<uint8_t[]> b(new uint8_t[avail ? avail : 1]);
    if (avail) std::memcpy(b.get(), data + 8, avail);
    BlobInfo info;
    const Status s = blob_peek(b.get(), avail, expect, &info);
    FUZZ_REQUIRE(s == Status::ok || s == Status::corrupt, "status %s", status_str(s));
    if (s != Status::ok) return 0;
    FUZZ_REQUIRE(avail >= kBlobHeaderBytes, "short header accepted");
    FUZZ_REQUIRE(fuzz::rd32(b.get()) == kBlobMagic && b[4] == kBlobVersion, "bad magic/version accepted");
    FUZZ_REQUIRE(b[9] <= static_cast<uint8_t>(Elem::f64) && static_cast<Elem>(b[9]) == info.elem,
                 "unknown element type accepted");
    const bool coded = b[10] != kEntropyNone;
    FUZZ_REQUIRE(coded ? b[10] == kEntropyZstd && b[11] >= 1 && b[11] <= kEntropyStrideMax : b[11] == 0,
                 "entropy stage bytes %u %u accepted", b[10], b[11]);
    const CodecOps *c = codec_by_id(b[5]);
    FUZZ_REQUIRE(c && c->id == info.codec, "unknown codec accepted");
    FUZZ_REQUIRE((info.flags & ~BLOB_FLAGS) == 0, "unknown flags accepted");
    FUZZ_REQUIRE(info.count == expect, "count %llu != expected %llu", (unsigned long long)info.count,
                 (unsigned long long)expect);
    FUZZ_REQUIRE(info.payload <= avail - kBlobHeaderBytes, "payload beyond the bytes received");
    if (info.flags) {
        FUZZ_REQUIRE(info.payload == 0 && !coded, "flagged blob with a payload or a coded one");
        return 0;
    }
    CodecParams p;
    p.bits = info.bits, p.variant = info.variant, p.param = info.param, p.elem = info.elem;
    FUZZ_REQUIRE(codec_has_elem(*c, info.elem), "%s: an element type the codec has no form for", c->name);
    FUZZ_REQUIRE(c->check(p) == Status::ok, "parameters the codec refuses");
    const size_t maxp = c->max_payload(info.count, p);
    FUZZ_REQUIRE(info.payload <= maxp, "payload above the codec bound");
    if (coded) FUZZ_REQUIRE(entropy_applies(*c) && info.payload > 0, "%s: a coded payload the stage never writes", c->name);
    else if (!codec_variable_payload(*c, p)) FUZZ_REQUIRE(info.payload == maxp, "dense payload of the wrong size");
    FUZZ_REQUIRE(maxp >= c->max_payload(info.count / 2, p), "%s: bound for %llu elements below the bound for half as many "
                 "(overflow)", c->name, (unsigned long long)info.count);
    return 0;
}

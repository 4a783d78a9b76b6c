/* libFuzzer target: every decoder through the blob layer (blob_decode), with arbitrary
 * bytes, arbitrary expected counts, decode and decode-add, each SIMD level. Properties:
 * the status is ok, corrupt or nonfinite; nothing is read outside the blob or written
 * outside the n elements (both heap blocks sized exactly: ASan); a flagged or rejected header
 * leaves the output untouched; and a blob that decodes gives the same bits at every SIMD
 * level (ranks on different CPUs must agree). A codec with decode_sum (the allgather path
 * sums received payloads with it) also sums the payload with itself: the same status as
 * decoding it, the output untouched when refused, and for the codecs whose sum is decode then
 * decode-add (all but fft_topk, summed in its spectral domain) the same bits. A blob whose
 * element-type byte says fp64 goes to the codec's fp64 decoders, into doubles, under the same
 * properties. Input layout: fuzz_target.h.
 *
 * One decoder per run (FUZZ_CODEC=<name>, read once in LLVMFuzzerInitialize): the header's
 * codec byte is set to that codec's id in the copy decoded, so every execution reaches that
 * decoder's header checks and each codec gets its own campaign, corpus directory
 * (tests/fuzz/corpus/fuzz_decode/<name>/) and execution count. Inputs committed from such a
 * campaign carry the id in their own codec byte (scripts/fuzz-campaign.sh writes it), so
 * they replay the same without FUZZ_CODEC. Unset or "all": every codec, the byte as read.
 * Expected counts are capped at FUZZ_MAX_COUNT floats (default fuzz::kMaxCount). */
#include <cstring>
#include <memory>
#include <string>

#include "codec.h"
#include "fuzz_target.h"

using namespace compmpi;

namespace {
int g_codec = -1;                     /* -1: every codec */
uint64_t g_max_count = fuzz::kMaxCount;
/* what the executions libFuzzer counts were: rejected by the header check (or flagged),
 * handed to the decoder (by its status); printed at exit */
uint64_t g_bad_header, g_decoded[3];
void print_counts() {
    std::fprintf(stderr, "fuzz_decode: codec %s: %llu header rejected or flagged, "
                 "decoder ran on %llu (ok %llu, corrupt %llu, nonfinite %llu)\n",
                 g_codec < 0 ? "all" : codec_by_id(g_codec)->name,
                 static_cast<unsigned long long>(g_bad_header),
                 static_cast<unsigned long long>(g_decoded[0] + g_decoded[1] + g_decoded[2]),
                 static_cast<unsigned long long>(g_decoded[0]), static_cast<unsigned long long>(g_decoded[1]),
                 static_cast<unsigned long long>(g_decoded[2]));
}
}  // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    const char *c = std::getenv("FUZZ_CODEC");
    if (c && *c && std::strcmp(c, "all") != 0) {
        const CodecOps *ops = codec_by_name(c);
        if (!ops) {
            std::fprintf(stderr, "fuzz_decode: FUZZ_CODEC=%s is not a codec (%s|all)\n", c, codec_names());
            std::exit(2);
        }
        g_codec = static_cast<int>(ops->id);
    }
    if (const char *m = std::getenv("FUZZ_MAX_COUNT"); m && *m) {
        char *end = nullptr;
        const unsigned long long v = std::strtoull(m, &end, 10);
        if (*end || v == 0 || v > (1ull << 26)) {
            std::fprintf(stderr, "fuzz_decode: FUZZ_MAX_COUNT=%s is not a count in 1..2^26\n", m);
            std::exit(2);
        }
        g_max_count = v;
    }
    std::atexit(print_counts);
    return 0;
}

namespace {
/* The codec's typed operations (fp32, or fp64 for a blob whose element-type byte says so). */
Status ops_decode_sum(const CodecOps &c, const uint8_t *const *in, const size_t *len, int cnt, size_t n,
                      const CodecParams &p, float *out) {
    return c.decode_sum(in, len, cnt, n, p, out);
}
Status ops_decode_sum(const CodecOps &c, const uint8_t *const *in, const size_t *len, int cnt, size_t n,
                      const CodecParams &p, double *out) {
    return c.decode_sum64(in, len, cnt, n, p, out);
}
bool has_decode_sum(const CodecOps &c, const float *) { return c.decode_sum != nullptr; }
bool has_decode_sum(const CodecOps &c, const double *) { return c.decode_sum64 != nullptr; }
Status ops_decode(const CodecOps &c, const uint8_t *in, size_t len, size_t n, const CodecParams &p, float *out, bool add) {
    return add ? c.decode_add(in, len, n, p, out) : c.decode(in, len, n, p, out);
}
Status ops_decode(const CodecOps &c, const uint8_t *in, size_t len, size_t n, const CodecParams &p, double *out,
                  bool add) {
    return add ? c.decode_add64(in, len, n, p, out) : c.decode64(in, len, n, p, out);
}

/* One input decoded into elements of type T (float, or double for fp64 blobs). */
template <class T>
int decode_as(const uint8_t *blob, size_t avail, uint64_t n, bool acc, SimdLevel lvl, int threads) {
    std::unique_ptr<T[]> out(new T[n ? n : 1]), ref(new T[n ? n : 1]), before(new T[n ? n : 1]);
    for (uint64_t i = 0; i < n; ++i) out[i] = ref[i] = before[i] = static_cast<T>(i % 7) - 3;

    BlobInfo info;
    const Status hs = blob_peek(blob, avail, n, &info);
    const Status s = blob_decode(blob, avail, n, out.get(), acc, lvl, threads);
    FUZZ_REQUIRE(s == Status::ok || s == Status::corrupt || s == Status::nonfinite, "status %s", status_str(s));
    const Elem want = sizeof(T) == 8 ? Elem::f64 : Elem::f32;
    if (hs != Status::ok || info.flags || info.elem != want) {
        ++g_bad_header;
        FUZZ_REQUIRE(s != Status::ok, "a rejected, flagged or other-typed header decoded");
        FUZZ_REQUIRE(n == 0 || std::memcmp(before.get(), out.get(), n * sizeof(T)) == 0,
                     "output written for a rejected or flagged header");
        return 0;
    }
    ++g_decoded[s == Status::ok ? 0 : s == Status::corrupt ? 1 : 2];
    const CodecOps *ops = codec_by_id(static_cast<int>(info.codec));
    if (ops && has_decode_sum(*ops, out.get())) {
        CodecParams p;
        p.bits = info.bits, p.variant = info.variant, p.param = info.param, p.simd = lvl, p.threads = threads;
        p.elem = info.elem;
        const uint8_t *pay[2] = {blob + kBlobHeaderBytes, blob + kBlobHeaderBytes};
        const size_t plen[2] = {static_cast<size_t>(info.payload), static_cast<size_t>(info.payload)};
        std::unique_ptr<T[]> sum(new T[n ? n : 1]), twice(new T[n ? n : 1]);
        for (uint64_t i = 0; i < n; ++i) sum[i] = twice[i] = before[i];
        const Status s3 = ops_decode_sum(*ops, pay, plen, 2, n, p, sum.get());
        FUZZ_REQUIRE((s3 == Status::ok) == (s == Status::ok),
                     "codec %d: decode %s, decode_sum %s", static_cast<int>(info.codec), status_str(s), status_str(s3));
        FUZZ_REQUIRE(s3 == Status::ok || n == 0 || std::memcmp(before.get(), sum.get(), n * sizeof(T)) == 0,
                     "codec %d: decode_sum refused the payload but wrote its output", static_cast<int>(info.codec));
        if (s3 == Status::ok && info.codec != CodecId::fft_topk && n) {
            FUZZ_REQUIRE(ops_decode(*ops, pay[0], plen[0], n, p, twice.get(), false) == Status::ok &&
                             ops_decode(*ops, pay[1], plen[1], n, p, twice.get(), true) == Status::ok &&
                             std::memcmp(twice.get(), sum.get(), n * sizeof(T)) == 0,
                         "codec %d: decode_sum differs from decode + decode_add", static_cast<int>(info.codec));
        }
    }
    if (lvl != SimdLevel::scalar) {
        const Status s2 = blob_decode(blob, avail, n, ref.get(), acc, SimdLevel::scalar, 1);
        FUZZ_REQUIRE(s2 == s, "codec %d: %s says %s, scalar %s", static_cast<int>(info.codec), simd_name(lvl),
                     status_str(s), status_str(s2));
        FUZZ_REQUIRE(s != Status::ok || n == 0 || std::memcmp(ref.get(), out.get(), n * sizeof(T)) == 0,
                     "codec %d: %s and scalar decode differ", static_cast<int>(info.codec), simd_name(lvl));
    }
    return 0;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < fuzz::kDecodePrefix) return 0;
    const uint8_t ctl = data[0];
    const uint8_t *blob_in = data + fuzz::kDecodePrefix;
    const size_t avail = size - fuzz::kDecodePrefix;
    uint64_t n = fuzz::rd32(data + 1);
    if (!(ctl & 8)) n = avail >= kBlobHeaderBytes ? fuzz::rd64(blob_in + 16) : n;
    if (n > g_max_count) n %= g_max_count + 1;
    const bool acc = ctl & 1;
    SimdLevel lvl = static_cast<SimdLevel>((ctl >> 1) & 3);
    if (static_cast<int>(lvl) == 3 || lvl > simd_detect()) lvl = simd_detect();
    const int threads = (ctl & 16) ? 2 : 1;

    /* exactly sized copies: an overread or overflow by one byte is an ASan report */
    std::unique_ptr<uint8_t[]> blob(new uint8_t[avail ? avail : 1]);
    if (avail) std::memcpy(blob.get(), blob_in, avail);
    if (g_codec >= 0 && avail > 5) blob[5] = static_cast<uint8_t>(g_codec); /* header byte 5: codec id */
    /* header byte 9, the element type: an fp64 blob goes to the fp64 decoders (their blobs
     * into floats, and the reverse, are refused by the unit tests) */
    if (avail > 9 && blob[9] == static_cast<uint8_t>(Elem::f64))
        return decode_as<double>(blob.get(), avail, n, acc, lvl, threads);
    return decode_as<float>(blob.get(), avail, n, acc, lvl, threads);
}

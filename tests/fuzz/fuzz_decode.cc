// SPDX-License-Identifier: BSD-3-Clause
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
 * Expected counts are capped at FUZZ_MAX_COUNT floats (default fuzz::kMaxCount).
 *
 * fft_topk's streaming sum (fft_topk::SumStream: the allreduce decodes blocks while the rest
 * of the payloads is still in flight, so it reads bytes as they arrive from the network):
 * every fft_topk payload that passes the header check is also summed with itself by a
 * SumStream fed in pieces (control bits 6-7: 1, 13, 256 or 4096 bytes at a time, the second
 * and fourth one block per advance(); bit 5: the spatial sum instead of the spectral one),
 * the bytes not yet arrived holding the complement of the real ones.
 * Properties: it refuses exactly what decode_sum refuses, gives decode_sum's bits when it
 * accepts (so it never read a byte before it arrived), refuses nothing after begin() said
 * may_refuse() is false, and progresses (no more advance() calls than pieces and blocks). */
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "codec.h"
#include "entropy.h"
#include "fft_topk/fft_topk.h"
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
/* fft_topk's SumStream over two copies of one payload arriving in pieces (see the top). */
void check_sum_stream(const uint8_t *pay, size_t plen, uint64_t n, const BlobInfo &info, uint8_t ctl, SimdLevel lvl,
                      int threads, const float *before) {
    const bool add = ctl & 1, spectral = !(ctl & 32), one_block = ctl & 64;
    static constexpr size_t kPieces[4] = {1, 13, 256, 4096};
    const size_t piece = kPieces[(ctl >> 6) & 3];
    std::unique_ptr<float[]> want(new float[n]), got(new float[n]);
    std::memcpy(want.get(), before, n * sizeof(float));
    std::memcpy(got.get(), before, n * sizeof(float));
    const uint8_t *two[2] = {pay, pay};
    const size_t lens[2] = {plen, plen};
    const Status s_sum = fft_topk::decode_sum(two, lens, 2, n, info.bits, info.param, want.get(), add, lvl, threads,
                                              info.variant, spectral);
    /* what has arrived of each copy: exactly plen bytes, the rest the complement of the real bytes */
    std::unique_ptr<uint8_t[]> buf[2];
    size_t avail[2];
    const size_t prefix = std::min(plen, fft_topk::SumStream::prefix_bytes(n, info.param));
    for (int j = 0; j < 2; ++j) {
        buf[j].reset(new uint8_t[plen ? plen : 1]);
        for (size_t i = 0; i < plen; ++i) buf[j][i] = static_cast<uint8_t>(~pay[i]);
        std::memcpy(buf[j].get(), pay, prefix);
        avail[j] = prefix;
    }
    const uint8_t *in[2] = {buf[0].get(), buf[1].get()};
    fft_topk::SumStream ss;
    Status s = ss.begin(in, lens, 2, n, info.bits, info.param, got.get(), add, lvl, threads, info.variant, spectral);
    const bool may_refuse = s != Status::ok || ss.may_refuse();
    const size_t limit = plen / piece + n + 4; /* pieces, plus one block per call at worst */
    size_t calls = 0;
    while (s == Status::ok && !ss.done()) {
        FUZZ_REQUIRE(++calls <= limit, "fft_topk SumStream: no progress after %zu advance() calls (%zu bytes in pieces "
                     "of %zu)", calls - 1, plen, piece);
        for (int j = 0; j < 2; ++j) {
            const size_t to = std::min(plen, avail[j] + piece);
            std::memcpy(buf[j].get() + avail[j], pay + avail[j], to - avail[j]);
            avail[j] = to;
        }
        s = ss.advance(avail, one_block ? 1 : SIZE_MAX);
    }
    FUZZ_REQUIRE((s == Status::ok) == (s_sum == Status::ok), "fft_topk: SumStream %s, decode_sum %s", status_str(s),
                 status_str(s_sum));
    FUZZ_REQUIRE(may_refuse || s == Status::ok, "fft_topk: SumStream refused after may_refuse() said it would not");
    FUZZ_REQUIRE(s != Status::ok || std::memcmp(want.get(), got.get(), n * sizeof(float)) == 0,
                 "fft_topk: SumStream in pieces of %zu bytes differs from decode_sum", piece);
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
int decode_as(const uint8_t *blob, size_t avail, uint64_t n, bool acc, SimdLevel lvl, int threads, uint8_t ctl) {
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
    /* a blob the entropy stage coded (kernels/entropy.h): blob_decode undid it; the codec's own
     * entry points below read the raw payload, as the collectives hand them one */
    std::vector<uint8_t> rawv;
    if (blob_entropy_coded(blob, avail)) {
        const uint8_t *rb = nullptr;
        size_t ra = 0;
        if (blob_entropy_decode(blob, avail, n, rawv, &rb, &ra) != Status::ok) {
            ++g_decoded[1];
            FUZZ_REQUIRE(s == Status::corrupt, "a frame the entropy stage refused decoded (%s)", status_str(s));
            FUZZ_REQUIRE(n == 0 || std::memcmp(before.get(), out.get(), n * sizeof(T)) == 0,
                         "output written for a refused frame");
            return 0;
        }
        FUZZ_REQUIRE(blob_peek(rb, ra, n, &info) == Status::ok, "the stage undone gave a blob its header check refuses");
        blob = rb, avail = ra;
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
    if constexpr (sizeof(T) == 4) /* fft_topk's streamed sum: floats (the fp64 form has none) */
        if (info.codec == CodecId::fft_topk && n)
            check_sum_stream(blob + kBlobHeaderBytes, static_cast<size_t>(info.payload), n, info, ctl, lvl, threads,
                             before.get());
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
        return decode_as<double>(blob.get(), avail, n, acc, lvl, threads, ctl);
    return decode_as<float>(blob.get(), avail, n, acc, lvl, threads, ctl);
}

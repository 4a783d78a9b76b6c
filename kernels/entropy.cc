// SPDX-License-Identifier: BSD-3-Clause
/* The entropy stage: byte-plane shuffle + libzstd over a blob's payload (format: entropy.h). */
#include "entropy.h"

#include <zstd.h>

#include <cstring>
#include <memory>

namespace compmpi {
namespace {

struct CctxFree {
    void operator()(ZSTD_CCtx *c) const { ZSTD_freeCCtx(c); }
};
struct DctxFree {
    void operator()(ZSTD_DCtx *c) const { ZSTD_freeDCtx(c); }
};
/* one compression and one decompression context and a work area per thread, kept for the
 * thread's life (creating a context costs more than coding a small blob) */
struct EntropyScratch {
    std::unique_ptr<ZSTD_CCtx, CctxFree> cctx;
    std::unique_ptr<ZSTD_DCtx, DctxFree> dctx;
    std::vector<uint8_t> shuf, frame;
};
EntropyScratch &scratch() {
    thread_local EntropyScratch s;
    return s;
}
uint8_t *grow(std::vector<uint8_t> &v, size_t n) {
    if (v.size() < n) v.resize(n);
    return v.data();
}

uint64_t get64(const uint8_t *p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
}
void put64(uint8_t *p, uint64_t v) { std::memcpy(p, &v, 8); }

template <unsigned W> void shuffle_w(const uint8_t *src, size_t m, uint8_t *dst) {
    for (size_t i = 0; i < m; ++i)
        for (unsigned k = 0; k < W; ++k) dst[k * m + i] = src[i * W + k];
}
template <unsigned W> void unshuffle_w(const uint8_t *src, size_t m, uint8_t *dst) {
    for (size_t i = 0; i < m; ++i)
        for (unsigned k = 0; k < W; ++k) dst[i * W + k] = src[k * m + i];
}

}  // namespace

void byte_shuffle(const uint8_t *src, size_t n, unsigned w, uint8_t *dst) {
    const size_t m = w ? n / w : 0, body = m * w;
    switch (w) {
        case 2: shuffle_w<2>(src, m, dst); break;
        case 4: shuffle_w<4>(src, m, dst); break;
        case 8: shuffle_w<8>(src, m, dst); break;
        default:
            for (size_t i = 0; i < m; ++i)
                for (unsigned k = 0; k < w; ++k) dst[k * m + i] = src[i * w + k];
    }
    std::memcpy(dst + body, src + body, n - body);
}

void byte_unshuffle(const uint8_t *src, size_t n, unsigned w, uint8_t *dst) {
    const size_t m = w ? n / w : 0, body = m * w;
    switch (w) {
        case 2: unshuffle_w<2>(src, m, dst); break;
        case 4: unshuffle_w<4>(src, m, dst); break;
        case 8: unshuffle_w<8>(src, m, dst); break;
        default:
            for (size_t i = 0; i < m; ++i)
                for (unsigned k = 0; k < w; ++k) dst[i * w + k] = src[k * m + i];
    }
    std::memcpy(dst + body, src + body, n - body);
}

bool entropy_applies(const CodecOps &c) {
    /* these code their own payload (sz: zstd inside): a second zstd pass finds nothing (docs/codecs/entropy.md) */
    return c.id != CodecId::lossless && c.id != CodecId::zfp && c.id != CodecId::sz;
}

uint8_t entropy_stride(const CodecOps &c, const CodecParams &p) {
    const unsigned e = static_cast<unsigned>(elem_bytes(p.elem));
    switch (c.id) {
        case CodecId::none: return static_cast<uint8_t>(e);
        case CodecId::fp16:
        case CodecId::bf16: return 2;
        case CodecId::fp32: return 4;
        /* sparse payloads: u32 indices and fp32 values */
        case CodecId::topk:
        case CodecId::sparse:
        case CodecId::fft_topk: return 4;
        case CodecId::bitpack:
        case CodecId::rangefloat: {
            const int bits = codec_bits_for(c, p.bits, p.elem);
            return bits % 8 == 0 && bits / 8 >= 1 && bits / 8 <= kEntropyStrideMax ? static_cast<uint8_t>(bits / 8) : 1;
        }
        default: return 1; /* q8, terngrad, qsgd: byte codes or packed sub-byte levels */
    }
}

bool blob_entropy_encode(const CodecOps &c, const CodecParams &p, uint8_t *blob, size_t *len, const EntropyParams &sp) {
    if (sp.method != kEntropyZstd || !entropy_applies(c) || *len < kBlobHeaderBytes) return false;
    if (blob[6] != 0 || blob[10] != kEntropyNone) return false; /* flagged, or coded already */
    const size_t raw = *len - kBlobHeaderBytes;
    if (raw < 64 || get64(blob + 24) != raw) return false; /* nothing to gain below a frame's overhead */
    EntropyScratch &s = scratch();
    if (!s.cctx) s.cctx.reset(ZSTD_createCCtx());
    if (!s.cctx) return false;
    const uint8_t w = entropy_stride(c, p);
    const uint8_t *src = blob + kBlobHeaderBytes;
    if (w > 1) {
        uint8_t *t = grow(s.shuf, raw);
        byte_shuffle(src, raw, w, t);
        src = t;
    }
    /* the frame is written into room for zstd's worst case (a smaller capacity makes zstd fail
     * part-way and leaves the context needing a reset); it is sent only if shorter than raw */
    uint8_t *f = grow(s.frame, ZSTD_compressBound(raw));
    /* the frame carries its content size and a checksum of it: a flipped bit anywhere in a
     * coded payload is refused, not decoded to other codes */
    ZSTD_CCtx *cc = s.cctx.get();
    ZSTD_CCtx_reset(cc, ZSTD_reset_session_only);
    if (ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, sp.level)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, 1)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_contentSizeFlag, 1)))
        return false;
    /* zstd's fast (negative) levels leave literals raw; the codes are nearly all literals, and
     * their Huffman coding is what the stage is for: keep it on (zstd's experimental
     * ZSTD_c_literalCompressionMode = ZSTD_ps_enable, parameter 1002 in zstd >= 1.5; an older
     * library refuses it and the level runs as zstd defines it) */
    ZSTD_CCtx_setParameter(cc, static_cast<ZSTD_cParameter>(1002), sp.level < 1 ? 1 : 0);
    const size_t cl = ZSTD_compress2(cc, f, ZSTD_compressBound(raw), src, raw);
    if (ZSTD_isError(cl) || cl >= raw) return false;
    std::memcpy(blob + kBlobHeaderBytes, f, cl);
    blob[10] = kEntropyZstd;
    blob[11] = w;
    put64(blob + 24, cl);
    *len = kBlobHeaderBytes + cl;
    return true;
}

Status blob_entropy_decode(const uint8_t *blob, size_t avail, size_t expect_count, std::vector<uint8_t> &out,
                    const uint8_t **raw, size_t *raw_avail) {
    BlobInfo info;
    CMPI_CHECK(blob_peek(blob, avail, expect_count, &info)); /* the header and the frame's length */
    if (!blob_entropy_coded(blob, avail)) {
        *raw = blob;
        *raw_avail = avail;
        return Status::ok;
    }
    const CodecOps *c = codec_by_id(static_cast<int>(info.codec));
    const CodecParams p = blob_params(info);
    const size_t maxp = c->max_payload(info.count, p);
    const uint8_t *frame = blob + kBlobHeaderBytes;
    const size_t fl = static_cast<size_t>(info.payload);
    /* one whole frame, exactly fl bytes, with its content size, within what the codec allows */
    if (ZSTD_findFrameCompressedSize(frame, fl) != fl) return Status::corrupt;
    const unsigned long long cs = ZSTD_getFrameContentSize(frame, fl);
    if (cs == ZSTD_CONTENTSIZE_UNKNOWN || cs == ZSTD_CONTENTSIZE_ERROR || cs > maxp || cs <= fl) return Status::corrupt;
    if (!codec_variable_payload(*c, p) && cs != maxp) return Status::corrupt;
    const size_t n = static_cast<size_t>(cs);
    EntropyScratch &s = scratch();
    if (!s.dctx) s.dctx.reset(ZSTD_createDCtx());
    if (!s.dctx) return Status::no_memory;
    const uint8_t w = blob[11];
    uint8_t *dst = grow(out, kBlobHeaderBytes + n);
    uint8_t *t = w > 1 ? grow(s.shuf, n) : dst + kBlobHeaderBytes;
    const size_t got = ZSTD_decompressDCtx(s.dctx.get(), t, n, frame, fl);
    if (ZSTD_isError(got) || got != n) return Status::corrupt;
    if (w > 1) byte_unshuffle(t, n, w, dst + kBlobHeaderBytes);
    std::memcpy(dst, blob, kBlobHeaderBytes);
    dst[10] = dst[11] = 0;
    put64(dst + 24, n);
    /* the raw blob must be what the codec accepts, like any blob received */
    CMPI_CHECK(blob_peek(dst, kBlobHeaderBytes + n, expect_count, &info));
    *raw = dst;
    *raw_avail = kBlobHeaderBytes + n;
    return Status::ok;
}

}  // namespace compmpi

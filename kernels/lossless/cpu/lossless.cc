// SPDX-License-Identifier: BSD-3-Clause
/* lossless CPU kernels: byte-plane shuffle (optionally after a delta of the bit patterns) and
 * Debian's libzstd, block by block (format: lossless.h; docs/codecs/lossless.md).
 *
 * Encode writes each block into the slot the worst case gives it (table + b * B * E, exactly
 * the block's raw size: a zstd frame gets one byte less, or the block goes verbatim), OpenMP
 * over blocks, then moves the records together in order: the same bytes for any thread count. */
#include "lossless/lossless.h"

#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

namespace compmpi::lossless {
namespace {

constexpr size_t kParallelMinBlocks = 2;

template <class T> struct Tr;
template <> struct Tr<float> {
    using U = uint32_t;
    static constexpr Elem elem = Elem::f32;
};
template <> struct Tr<double> {
    using U = uint64_t;
    static constexpr Elem elem = Elem::f64;
};

struct CctxFree {
    void operator()(ZSTD_CCtx *c) const { ZSTD_freeCCtx(c); }
};
struct DctxFree {
    void operator()(ZSTD_DCtx *c) const { ZSTD_freeDCtx(c); }
};
/* one context and two scratch blocks per thread, kept for the thread's life */
struct ThreadScratch {
    std::unique_ptr<ZSTD_CCtx, CctxFree> cctx;
    std::unique_ptr<ZSTD_DCtx, DctxFree> dctx;
    std::vector<uint8_t> a, b;
};
ThreadScratch &scratch() {
    thread_local ThreadScratch s;
    return s;
}
uint8_t *scratch_a(size_t bytes) {
    auto &v = scratch().a;
    if (v.size() < bytes) v.resize(bytes);
    return v.data();
}
uint8_t *scratch_b(size_t bytes) {
    auto &v = scratch().b;
    if (v.size() < bytes) v.resize(bytes);
    return v.data();
}

size_t block_elems(const CodecParams &p) { return size_t{1} << p.param; }
size_t nblocks(size_t n, const CodecParams &p) { return (n + block_elems(p) - 1) >> p.param; }

Status check_params(const CodecParams &p) {
    if (p.bits != 0 || p.variant > kDelta) return Status::invalid_arg;
    if (p.param < kBlockLog2Min || p.param > kBlockLog2Max) return Status::invalid_arg;
    return Status::ok;
}

/* src: m elements of E bytes; dst: byte 0 of each, then byte 1, ... */
template <size_t E> void shuffle(const uint8_t *src, size_t m, uint8_t *dst) {
    for (size_t i = 0; i < m; ++i)
        for (size_t k = 0; k < E; ++k) dst[k * m + i] = src[i * E + k];
}
template <size_t E> void unshuffle(const uint8_t *src, size_t m, uint8_t *dst) {
    for (size_t i = 0; i < m; ++i)
        for (size_t k = 0; k < E; ++k) dst[i * E + k] = src[k * m + i];
}

/* the transformed bytes of in[0..m) into dst (m * sizeof(T) bytes) */
template <class T> void transform(const T *in, size_t m, uint8_t variant, uint8_t *dst) {
    using U = typename Tr<T>::U;
    const uint8_t *src = reinterpret_cast<const uint8_t *>(in);
    if (variant == kDelta) {
        U *d = reinterpret_cast<U *>(scratch_b(m * sizeof(T)));
        U prev = 0;
        for (size_t i = 0; i < m; ++i) {
            U u;
            std::memcpy(&u, in + i, sizeof u);
            d[i] = u - prev;
            prev = u;
        }
        src = reinterpret_cast<const uint8_t *>(d);
    }
    shuffle<sizeof(T)>(src, m, dst);
}
/* the inverse: the block's m elements from its transformed bytes */
template <class T> void untransform(const uint8_t *src, size_t m, uint8_t variant, T *out) {
    using U = typename Tr<T>::U;
    uint8_t *o = reinterpret_cast<uint8_t *>(out);
    unshuffle<sizeof(T)>(src, m, o);
    if (variant == kDelta) {
        U prev = 0;
        for (size_t i = 0; i < m; ++i) {
            U u;
            std::memcpy(&u, o + i * sizeof(T), sizeof u);
            prev += u;
            std::memcpy(o + i * sizeof(T), &prev, sizeof prev);
        }
    }
}

size_t payload_max(size_t n, const CodecParams &p) { return 4 * nblocks(n, p) + n * elem_bytes(p.elem); }

template <class T>
Status encode_t(const T *in, size_t n, const CodecParams &p, uint8_t *out, size_t cap, size_t *len) {
    if (check_params(p) != Status::ok || p.elem != Tr<T>::elem) return Status::invalid_arg;
    const size_t nb = nblocks(n, p), B = block_elems(p), table = 4 * nb;
    if (cap < payload_max(n, p)) return Status::invalid_arg;
    std::vector<uint32_t> lens(nb);
    int bad = 0;
    const int threads = std::max(1, p.threads);
#pragma omp parallel for num_threads(threads) schedule(static) reduction(| : bad) if (nb >= kParallelMinBlocks && threads > 1)
    for (size_t b = 0; b < nb; ++b) {
        const size_t m = std::min(B, n - b * B), raw = m * sizeof(T);
        uint8_t *slot = out + table + b * B * sizeof(T);
        ThreadScratch &s = scratch();
        if (!s.cctx) s.cctx.reset(ZSTD_createCCtx());
        size_t c = 0;
        if (s.cctx) {
            uint8_t *t = scratch_a(raw);
            transform(in + b * B, m, p.variant, t);
            /* one byte less than verbatim, or verbatim */
            c = ZSTD_compressCCtx(s.cctx.get(), slot, raw - 1, t, raw, p.level);
        } else {
            bad = 1;
        }
        if (!s.cctx || ZSTD_isError(c) || c >= raw) {
            std::memcpy(slot, in + b * B, raw);
            c = raw;
        }
        lens[b] = static_cast<uint32_t>(c);
    }
    if (bad) return Status::no_memory;
    size_t pos = table;
    for (size_t b = 0; b < nb; ++b) {
        std::memmove(out + pos, out + table + b * B * sizeof(T), lens[b]);
        std::memcpy(out + 4 * b, &lens[b], 4);
        pos += lens[b];
    }
    *len = pos;
    return Status::ok;
}

template <class T>
Status decode_t(const uint8_t *in, size_t len, size_t n, const CodecParams &p, T *out, bool add) {
    if (check_params(p) != Status::ok || p.elem != Tr<T>::elem) return Status::corrupt;
    const size_t nb = nblocks(n, p), B = block_elems(p), table = 4 * nb;
    if (len < table || len > payload_max(n, p)) return Status::corrupt;
    /* every record's place, checked before a byte of it is read */
    std::vector<size_t> off(nb + 1);
    off[0] = table;
    for (size_t b = 0; b < nb; ++b) {
        uint32_t l;
        std::memcpy(&l, in + 4 * b, 4);
        const size_t raw = std::min(B, n - b * B) * sizeof(T);
        if (l == 0 || l > raw) return Status::corrupt;
        off[b + 1] = off[b] + l;
    }
    if (off[nb] != len) return Status::corrupt;
    int bad = 0;
    const int threads = std::max(1, p.threads);
#pragma omp parallel for num_threads(threads) schedule(static) reduction(| : bad) if (nb >= kParallelMinBlocks && threads > 1)
    for (size_t b = 0; b < nb; ++b) {
        const size_t m = std::min(B, n - b * B), raw = m * sizeof(T), l = off[b + 1] - off[b];
        T *dst = add ? reinterpret_cast<T *>(scratch_b(raw)) : out + b * B;
        if (l == raw) {
            std::memcpy(dst, in + off[b], raw);
        } else {
            ThreadScratch &s = scratch();
            if (!s.dctx) s.dctx.reset(ZSTD_createDCtx());
            uint8_t *t = scratch_a(raw);
            const size_t r = s.dctx ? ZSTD_decompressDCtx(s.dctx.get(), t, raw, in + off[b], l) : 0;
            if (!s.dctx || ZSTD_isError(r) || r != raw) {
                bad = 1;
                continue;
            }
            untransform(t, m, p.variant, dst);
        }
        if (add)
            for (size_t i = 0; i < m; ++i) out[b * B + i] += dst[i];
    }
    return bad ? Status::corrupt : Status::ok;
}

Status ll_check(const CodecParams &p) { return check_params(p); }
size_t ll_max_payload(size_t n, const CodecParams &p) { return payload_max(n, p); }
bool ll_variable(const CodecParams &) { return true; }
template <class T> using LlDecode = DecodeOps<T, decode_t<T>>;

}  // namespace
}  // namespace compmpi::lossless

namespace compmpi {
extern const CodecOps codec_lossless_ops = {
    CodecId::lossless, "lossless",
    "bit-exact floats and doubles: byte-plane shuffle (variant 0) or delta + shuffle (variant 1), then zstd, in "
    "blocks of 2^param elements (variable size)",
    CODEC_LOSSLESS | CODEC_VARIABLE_VARIANT,
    0, 0, 0, 0,
    lossless::ll_check, lossless::ll_max_payload, nullptr, lossless::encode_t<float>,
    lossless::LlDecode<float>::decode, lossless::LlDecode<float>::decode_add, nullptr, nullptr, nullptr,
    /* fp64 */
    0, 0, 0, 0,
    nullptr, lossless::encode_t<double>, lossless::LlDecode<double>::decode, lossless::LlDecode<double>::decode_add,
    nullptr, nullptr,
    lossless::ll_variable,
};
}  // namespace compmpi

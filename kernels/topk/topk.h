// SPDX-License-Identifier: BSD-3-Clause
/* topk (Aji & Heafield 2017): keep the k = ceil((1-theta) n) largest-magnitude values exactly
 * (fp32), ties broken by the smaller index, and send them as an index list, a bitmap plus
 * packed values, or densely -- whichever is smallest for (n, k). Decode writes zeros where
 * nothing was kept; decode_add adds the kept values into acc and leaves the rest untouched.
 *
 * Payload (little-endian):
 *   0   u8    form        0 = index list, 1 = bitmap, 2 = dense
 *   1   7     zero
 *   8   u64   k           values kept
 *   16  ...   form 0: u32 index[k] (strictly increasing), f32 value[k]        16 + 8k
 *             form 1: u64 bitmap[ceil(n/64)] (bit i%64 of word i/64 = index i kept;
 *                     bits past n zero, popcount == k), f32 value[k] in index order
 *                                                                   16 + 8 ceil(n/64) + 4k
 *             form 2: f32 value[n] (zero where not kept)                       16 + 4n
 * The form is the smallest of the three (index lists only while n < 2^32; ties prefer the
 * bitmap, then the list), so the size is a function of (n, k) alone. theta is encode-side
 * context (CodecParams::theta), not on the wire: the decoder needs only k and the form.
 * fp64 (elem 1): the same layout with f64 values (vb = 8 bytes per value): list 16 + 12k,
 * bitmap 16 + 8 ceil(n/64) + 8k, dense 16 + 8n, the form chosen by the same rule on those
 * sizes; |x| bits are 63-bit keys (select.h). */
#pragma once
#include <cstddef>
#include <cstdint>

#include "codec.h"

namespace compmpi::topk {

inline constexpr size_t kHeaderBytes = 16;
enum Form : uint8_t { kList = 0, kBitmap = 1, kDense = 2 };

/* The smallest form for (n, k): index lists only while n < 2^32; ties prefer the bitmap,
 * then the list. Inline: the CUDA module (which cannot link the core) uses the same rule. */
inline Form choose_form(size_t n, uint64_t k, size_t vb = 4) {
    const size_t bm = 8 * ((n + 63) / 64) + vb * k, list = (4 + vb) * k, dense = vb * n;
    Form f = kBitmap;
    size_t best = bm;
    if (n <= 0xFFFFFFFFull && list < best) {
        f = kList;
        best = list;
    }
    if (dense < best) f = kDense;
    return f;
}
/* vb: bytes per value, 4 (fp32) or 8 (fp64) */
inline size_t payload_bytes(size_t n, uint64_t k, size_t vb = 4) {
    switch (choose_form(n, k, vb)) {
        case kList: return kHeaderBytes + (4 + vb) * k;
        case kBitmap: return kHeaderBytes + 8 * ((n + 63) / 64) + vb * k;
        default: return kHeaderBytes + vb * n;
    }
}

/* Kernels for one SIMD level, all threads given. */
Status encode(const float *in, size_t n, double theta, uint8_t *out, size_t cap, size_t *len, SimdLevel lvl,
              int threads);
Status decode(const uint8_t *in, size_t len, size_t n, float *out, bool add, SimdLevel lvl, int threads);
/* The same on doubles (f64 values). */
Status encode(const double *in, size_t n, double theta, uint8_t *out, size_t cap, size_t *len, SimdLevel lvl,
              int threads);
Status decode(const uint8_t *in, size_t len, size_t n, double *out, bool add, SimdLevel lvl, int threads);

}  // namespace compmpi::topk

namespace compmpi {
extern const CodecOps codec_topk_ops;
}

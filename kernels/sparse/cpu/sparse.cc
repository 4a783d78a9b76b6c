// SPDX-License-Identifier: BSD-3-Clause
/* sparse: lossless encoding of a vector's nonzeros in whichever of three forms is smallest
 * at its density (SparCML's rule):
 *   form 0 index list:  u32 k, then k × (u32 index, f32 value), indices strictly increasing
 *   form 1 bitmap:      u32 k, ceil(n/8) bytes of bitmap (bit i = x[i] != 0, LSB first),
 *                       then k × f32 values in index order
 *   form 2 dense:       n × f32
 * payload = u8 form, 3 zero bytes, then the form's body. fp64 (elem 1): the same forms with
 * f64 values (index list entries of 12 bytes: u32 index, f64 value), one template for both. Zeros are +0.0 and -0.0 alike only
 * if bit-identical: -0.0 is kept as a value, so decoding gives back the exact bits.
 * Used by the sparse-aware allreduce for exact partial sums, and by applications whose
 * gradients are naturally sparse (embeddings). NaN/Inf are carried exactly. */
#include <cstdint>
#include <cstring>

#include "codec.h"

namespace compmpi {
namespace {

enum : uint8_t { kIndex = 0, kBitmap = 1, kDense = 2 };

template <class T> struct Word;
template <> struct Word<float> { using U = uint32_t; };
template <> struct Word<double> { using U = uint64_t; };

template <class T> inline bool nz(T v) {
    typename Word<T>::U u;
    std::memcpy(&u, &v, sizeof(T));
    return u != 0;
}

/* vb: bytes per value (4 or 8) */
size_t body_size(uint8_t form, size_t n, size_t k, size_t vb) {
    switch (form) {
        case kIndex: return 4 + (4 + vb) * k;
        case kBitmap: return 4 + (n + 7) / 8 + vb * k;
        default: return vb * n;
    }
}

Status sp_check(const CodecParams &p) { return p.bits == 0 && p.variant == 0 && p.param == 0 ? Status::ok : Status::invalid_arg; }

size_t sp_max_payload(size_t n, const CodecParams &p) {
    /* the encoder never picks a form larger than dense */
    return 4 + elem_bytes(p.elem) * n;
}

template <class T>
Status sp_encode(const T *in, size_t n, const CodecParams &p, uint8_t *out, size_t cap, size_t *len) {
    constexpr size_t vb = sizeof(T);
    if (p.elem != elem_of(in)) return Status::invalid_arg;
    size_t k = 0;
    for (size_t i = 0; i < n; ++i) k += nz(in[i]);
    if (n > 0xFFFFFFFFu) return Status::unsupported;
    uint8_t form = kDense;
    if (body_size(kIndex, n, k, vb) < body_size(form, n, k, vb)) form = kIndex;
    if (body_size(kBitmap, n, k, vb) < body_size(form, n, k, vb)) form = kBitmap;
    const size_t need = 4 + body_size(form, n, k, vb);
    if (cap < need) return Status::invalid_arg;
    out[0] = form;
    out[1] = out[2] = out[3] = 0;
    uint8_t *b = out + 4;
    uint32_t k32 = static_cast<uint32_t>(k);
    if (form == kDense) {
        if (n) std::memcpy(b, in, vb * n); /* in may be null when n == 0 (UBSan) */
    } else if (form == kIndex) {
        std::memcpy(b, &k32, 4);
        uint8_t *q = b + 4;
        for (size_t i = 0; i < n; ++i)
            if (nz(in[i])) {
                uint32_t i32 = static_cast<uint32_t>(i);
                std::memcpy(q, &i32, 4);
                std::memcpy(q + 4, in + i, vb);
                q += 4 + vb;
            }
    } else {
        std::memcpy(b, &k32, 4);
        uint8_t *bm = b + 4;
        std::memset(bm, 0, (n + 7) / 8);
        uint8_t *v = bm + (n + 7) / 8;
        for (size_t i = 0; i < n; ++i)
            if (nz(in[i])) {
                bm[i / 8] |= static_cast<uint8_t>(1u << (i % 8));
                std::memcpy(v, in + i, vb);
                v += vb;
            }
    }
    *len = need;
    return Status::ok;
}

/* Validate the payload, then visit (index, value) of every stored entry; dense visits all. */
template <class T, class F> Status sp_visit(const uint8_t *p, size_t len, size_t n, F &&f) {
    constexpr size_t vb = sizeof(T);
    if (len < 4 || p[1] | p[2] | p[3]) return Status::corrupt;
    const uint8_t form = p[0];
    const uint8_t *b = p + 4;
    const size_t blen = len - 4;
    if (form == kDense) {
        if (n > SIZE_MAX / vb || blen != vb * n) return Status::corrupt;
        for (size_t i = 0; i < n; ++i) {
            T v;
            std::memcpy(&v, b + vb * i, vb);
            f(i, v);
        }
        return Status::ok;
    }
    if (blen < 4) return Status::corrupt;
    uint32_t k;
    std::memcpy(&k, b, 4);
    if (k > n || blen != body_size(form, n, k, vb)) return Status::corrupt;
    if (form == kIndex) {
        const uint8_t *q = b + 4;
        uint64_t prev = 0;
        for (uint32_t e = 0; e < k; ++e, q += 4 + vb) { /* check order first: no partial writes */
            uint32_t i;
            std::memcpy(&i, q, 4);
            if (i >= n || (e && i <= prev)) return Status::corrupt;
            prev = i;
        }
        q = b + 4;
        for (uint32_t e = 0; e < k; ++e, q += 4 + vb) {
            uint32_t i;
            T v;
            std::memcpy(&i, q, 4);
            std::memcpy(&v, q + 4, vb);
            f(i, v);
        }
        return Status::ok;
    }
    if (form != kBitmap) return Status::corrupt;
    const uint8_t *bm = b + 4;
    size_t pop = 0;
    for (size_t j = 0; j < (n + 7) / 8; ++j) pop += static_cast<size_t>(__builtin_popcount(bm[j]));
    if (n % 8 && (bm[(n - 1) / 8] >> (n % 8))) return Status::corrupt; /* bits past n */
    if (pop != k) return Status::corrupt;
    const uint8_t *v = bm + (n + 7) / 8;
    for (size_t i = 0; i < n; ++i)
        if (bm[i / 8] >> (i % 8) & 1) {
            T x;
            std::memcpy(&x, v, vb);
            v += vb;
            f(i, x);
        }
    return Status::ok;
}

template <class T> Status sp_decode(const uint8_t *in, size_t len, size_t n, const CodecParams &p, T *out) {
    if (p.elem != elem_of(out)) return Status::corrupt;
    /* validate before the first write: a corrupt blob leaves out untouched */
    CMPI_CHECK(sp_visit<T>(in, len, n, [](size_t, T) {}));
    std::memset(out, 0, n * sizeof(T));
    return sp_visit<T>(in, len, n, [out](size_t i, T v) { out[i] = v; });
}

template <class T> Status sp_decode_add(const uint8_t *in, size_t len, size_t n, const CodecParams &p, T *acc) {
    if (p.elem != elem_of(acc)) return Status::corrupt;
    CMPI_CHECK(sp_visit<T>(in, len, n, [](size_t, T) {}));
    return sp_visit<T>(in, len, n, [acc](size_t i, T v) { acc[i] += v; });
}

}  // namespace

extern const CodecOps codec_sparse_ops = {
    CodecId::sparse, "sparse", "lossless nonzeros as index list, bitmap or dense, whichever is smallest",
    CODEC_LOSSLESS | CODEC_SPARSE | CODEC_SPATIAL_SPARSE,
    0, 0, 0, 0,
    sp_check, sp_max_payload, nullptr, sp_encode<float>, sp_decode<float>, sp_decode_add<float>, nullptr, nullptr,
    nullptr,
    /* fp64: the same forms with f64 values, no width */
    0, 0, 0, 0,
    nullptr, sp_encode<double>, sp_decode<double>, sp_decode_add<double>, nullptr, nullptr,
};

}  // namespace compmpi

// SPDX-License-Identifier: BSD-3-Clause
/* none: the payload is the data verbatim (fp32, or fp64 for elem 1). Lossless; used as the reference codec and
 * by tests. NaN/Inf are carried exactly, so encode never reports nonfinite. */
#include <cstdint>
#include <cstring>

#include "codec.h"

namespace compmpi {
namespace {

Status none_check(const CodecParams &p) {
    const int w = 8 * static_cast<int>(elem_bytes(p.elem));
    return (p.bits == 0 || p.bits == w) && p.variant == 0 && p.param == 0 ? Status::ok : Status::invalid_arg;
}
size_t none_max_payload(size_t n, const CodecParams &p) { return n * elem_bytes(p.elem); }

template <class T>
Status none_encode(const T *in, size_t n, const CodecParams &p, uint8_t *out, size_t cap, size_t *len) {
    if (p.elem != elem_of(in)) return Status::invalid_arg;
    if (cap < n * sizeof(T)) return Status::invalid_arg;
    if (n) std::memcpy(out, in, n * sizeof(T)); /* in may be null when n == 0 (UBSan) */
    *len = n * sizeof(T);
    return Status::ok;
}
template <class T> Status none_decode(const uint8_t *in, size_t len, size_t n, const CodecParams &p, T *out) {
    if (p.elem != elem_of(out) || n > SIZE_MAX / sizeof(T) || len != n * sizeof(T)) return Status::corrupt;
    if (len) std::memcpy(out, in, len);
    return Status::ok;
}
template <class T> Status none_decode_add(const uint8_t *in, size_t len, size_t n, const CodecParams &p, T *acc) {
    if (p.elem != elem_of(acc) || n > SIZE_MAX / sizeof(T) || len != n * sizeof(T)) return Status::corrupt;
    for (size_t i = 0; i < n; ++i) {
        T v;
        std::memcpy(&v, in + i * sizeof(T), sizeof v);
        acc[i] += v;
    }
    return Status::ok;
}

}  // namespace

extern const CodecOps codec_none_ops = {
    CodecId::none, "none", "fp32 verbatim (compression off)", CODEC_LOSSLESS,
    0, 0, 0, 0,
    none_check, none_max_payload, nullptr, none_encode<float>, none_decode<float>, none_decode_add<float>, nullptr,
    nullptr, nullptr,
    /* fp64: doubles verbatim (the collectives' exact transport of sums, as for fp32) */
    0, 0, 0, 0,
    nullptr, none_encode<double>, none_decode<double>, none_decode_add<double>, nullptr, nullptr,
};

}  // namespace compmpi

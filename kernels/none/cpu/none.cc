/* none: the payload is the data verbatim (fp32, or fp64 for doubles). Lossless; used as the
 * reference codec, by tests, and to stage host copies. NaN/Inf are carried exactly, so encode
 * never reports nonfinite. */
#include <cstring>

#include "codec.h"

namespace compmpi {
namespace {

Status none_check(const CodecParams &p) {
    const int full = p.elem == Elem::f64 ? 64 : 32;
    return (p.bits == 0 || p.bits == full) && p.variant == 0 && p.param == 0 ? Status::ok : Status::invalid_arg;
}
size_t none_max_payload(size_t n, const CodecParams &p) { return n * elem_bytes(p.elem); }

template <class T> Status none_encode(const T *in, size_t n, const CodecParams &, uint8_t *out, size_t cap, size_t *len) {
    if (cap < n * sizeof(T)) return Status::invalid_arg;
    if (n) std::memcpy(out, in, n * sizeof(T)); /* in may be null when n == 0 (UBSan) */
    *len = n * sizeof(T);
    return Status::ok;
}
template <class T> Status none_decode(const uint8_t *in, size_t len, size_t n, const CodecParams &, T *out) {
    if (len != n * sizeof(T)) return Status::corrupt;
    if (len) std::memcpy(out, in, len);
    return Status::ok;
}
template <class T> Status none_decode_add(const uint8_t *in, size_t len, size_t n, const CodecParams &, T *acc) {
    if (len != n * sizeof(T)) return Status::corrupt;
    for (size_t i = 0; i < n; ++i) {
        T v;
        std::memcpy(&v, in + i * sizeof(T), sizeof v);
        acc[i] += v;
    }
    return Status::ok;
}

}  // namespace

extern const CodecOps codec_none_ops = {
    CodecId::none, "none", "verbatim (compression off)", CODEC_LOSSLESS,
    0, 0, 0, 0,
    none_check, none_max_payload, nullptr, none_encode<float>, none_decode<float>, none_decode_add<float>, nullptr,
    nullptr, nullptr,
    0, 0, 0, 0,
    nullptr, none_encode<double>, none_decode<double>, none_decode_add<double>, nullptr, nullptr,
};

}  // namespace compmpi

/* none: the payload is the fp32 data verbatim. Lossless; used as the reference codec and
 * by tests. NaN/Inf are carried exactly, so encode never reports nonfinite. */
#include <cstring>

#include "codec.h"

namespace compmpi {
namespace {

Status none_check(const CodecParams &p) {
    return (p.bits == 0 || p.bits == 32) && p.variant == 0 && p.param == 0 ? Status::ok
                                                                           : Status::invalid_arg;
}
size_t none_max_payload(size_t n, const CodecParams &) { return n * sizeof(float); }

Status none_encode(const float *in, size_t n, const CodecParams &, uint8_t *out, size_t cap,
                   size_t *len) {
    if (cap < n * sizeof(float)) return Status::invalid_arg;
    if (n) std::memcpy(out, in, n * sizeof(float)); /* in may be null when n == 0 (UBSan) */
    *len = n * sizeof(float);
    return Status::ok;
}
Status none_decode(const uint8_t *in, size_t len, size_t n, const CodecParams &, float *out) {
    if (len != n * sizeof(float)) return Status::corrupt;
    if (len) std::memcpy(out, in, len);
    return Status::ok;
}
Status none_decode_add(const uint8_t *in, size_t len, size_t n, const CodecParams &, float *acc) {
    if (len != n * sizeof(float)) return Status::corrupt;
    for (size_t i = 0; i < n; ++i) {
        float v;
        std::memcpy(&v, in + i * sizeof(float), sizeof v);
        acc[i] += v;
    }
    return Status::ok;
}

}  // namespace

extern const CodecOps codec_none_ops = {
    CodecId::none, "none", "fp32 verbatim (compression off)", CODEC_LOSSLESS,
    0, 0, 0, 0,
    none_check, none_max_payload, nullptr, none_encode, none_decode, none_decode_add, nullptr,
};

}  // namespace compmpi

// SPDX-License-Identifier: BSD-3-Clause
/* none on the GPU: the payload is the fp32 data verbatim. The backend moves it with plain
 * copies (raw_fp32); the functions here serve decode-and-add and the host model. NaN/Inf
 * travel exactly, as on the CPU: encode never reports nonfinite. */
#include "common/cuda_util.cuh"
#include "common/gpu_codec.cuh"

namespace compmpi::cuda {
namespace {

bool none_supports(const CodecParams &) { return true; }

cudaError_t none_encode(const GpuEncodeArgs &a) {
    if (a.n == 0) return cudaSuccess;
    return cudaMemcpyAsync(a.out, a.in, a.n * sizeof(float), cudaMemcpyDeviceToDevice, a.stream);
}

cudaError_t none_decode(const GpuDecodeArgs &a, bool *corrupt) {
    if (a.len != a.n * sizeof(float)) {
        *corrupt = true;
        return cudaSuccess;
    }
    const float *src = reinterpret_cast<const float *>(a.in); /* 256-byte aligned workspace */
    if (a.add) return launch_add(a.out, src, a.n, a.stream);
    if (a.n == 0) return cudaSuccess;
    return cudaMemcpyAsync(a.out, src, a.len, cudaMemcpyDeviceToDevice, a.stream);
}

bool none_encode_host(const CodecOps &, const float *in, size_t n, const CodecParams &, uint8_t *out) {
    if (n) std::memcpy(out, in, n * sizeof(float));
    return false;
}

Status none_decode_host(const CodecOps &, const uint8_t *in, size_t len, size_t n, const CodecParams &, float *out,
                        bool add) {
    if (len != n * sizeof(float)) return Status::corrupt;
    for (size_t i = 0; i < n; ++i) {
        float v;
        std::memcpy(&v, in + i * sizeof(float), sizeof v);
        out[i] = add ? fadd(out[i], v) : v;
    }
    return Status::ok;
}

}  // namespace

extern const GpuCodec gpu_codec_none = {
    CodecId::none, true, none_supports, none_encode, none_decode, none_encode_host, none_decode_host,
};

}  // namespace compmpi::cuda

// SPDX-License-Identifier: BSD-3-Clause
/* The GPU side of a codec: kernels that write/read exactly the payload format of the CPU
 * codec (kernels/<codec>/<codec>.h), plus host executions of the same kernel bodies.
 * One table entry per codec with CUDA kernels (coll/cuda/backend_cuda.cu: kGpuCodecs);
 * codecs without one run through the CPU codec with the floats staged on the host. */
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "codec.h"

namespace compmpi::cuda {

inline constexpr int kEncodeWords = 63; /* zeroed device words an encoder may use */

struct GpuEncodeArgs {
    const CodecOps *cpu; /* the codec's CPU ops (tables are derived from them, see q8) */
    const float *in;     /* device (or managed) floats */
    size_t n;
    const CodecParams *p;
    uint8_t *out;    /* device payload buffer, 256-byte aligned, >= CodecOps::max_payload(n, p) */
    uint32_t *bad;   /* device flag, zeroed by the caller: set to 1 if the input held NaN/Inf */
    uint32_t *words; /* kEncodeWords device words, zeroed by the caller (e.g. a max-abs) */
    cudaStream_t stream;
    void *work = nullptr; /* GpuCodec::work_bytes(n, p) device bytes, 256-byte aligned (contents undefined) */
};

struct GpuDecodeArgs {
    const CodecOps *cpu;
    const uint8_t *in;      /* device copy of the payload, 256-byte aligned */
    const uint8_t *host_in; /* the same bytes on the host (small fields: scales, ranges) */
    size_t len;             /* payload bytes, validated by blob_peek against the header */
    size_t n;
    const CodecParams *p;
    float *out; /* device floats: written, or added to when add */
    bool add;
    cudaStream_t stream;
    void *work = nullptr; /* GpuCodec::decode_work_bytes(n, p) device bytes, 256-byte aligned */
};

struct GpuCodec {
    CodecId id;
    /* Payload = the fp32 data verbatim: the backend copies it without kernels. */
    bool raw_fp32;
    /* Parameters these kernels handle (the CPU codec's check() has passed). */
    bool (*supports)(const CodecParams &p);
    /* Enqueue encode of a dense codec: payload length is CodecOps::max_payload(n, p). */
    cudaError_t (*encode)(const GpuEncodeArgs &a);
    /* Enqueue decode. If a payload field checked on the host (a scale, a range) is invalid,
     * enqueue nothing, set *corrupt and return cudaSuccess. */
    cudaError_t (*decode)(const GpuDecodeArgs &a, bool *corrupt);
    /* Host model of the same bodies (host pointers): encode returns true on NaN/Inf (the
     * payload is then unspecified, as on the CPU). */
    bool (*encode_host)(const CodecOps &c, const float *in, size_t n, const CodecParams &p, uint8_t *out);
    Status (*decode_host)(const CodecOps &c, const uint8_t *in, size_t len, size_t n, const CodecParams &p,
                          float *out, bool add);
    /* Device workspace an encode needs besides the payload (bucket statistics); nullptr = none. */
    size_t (*work_bytes)(size_t n, const CodecParams &p) = nullptr;
    /* Variable-length payloads (sparse forms): encode leaves the payload length in
     * words[0] (low 32 bits) and words[1] (high 32 bits); the host model's encode is then
     * encode_host_var, which returns the length too. */
    bool variable = false;
    bool (*encode_host_var)(const CodecOps &c, const float *in, size_t n, const CodecParams &p, uint8_t *out,
                            size_t *len) = nullptr;
    size_t (*decode_work_bytes)(size_t n, const CodecParams &p) = nullptr;
    /* CodecOps::prepare on the device, the same bits (nullptr: staged through the host).
     * Enqueue; res (device, 2 floats) gets the statistic and the clip threshold it used
     * (what prepare() reports through p.clip_out); bad (device, zeroed) 1 on NaN/Inf. work:
     * prepare_work_bytes(n) device bytes. The host model: the same bodies, true on NaN/Inf. */
    cudaError_t (*prepare)(const float *in, size_t n, const CodecParams &p, void *work, float *res, uint32_t *bad,
                           cudaStream_t stream) = nullptr;
    size_t (*prepare_work_bytes)(size_t n) = nullptr;
    bool (*prepare_host)(const float *in, size_t n, const CodecParams &p, float res[2]) = nullptr;
};

extern const GpuCodec gpu_codec_none;
extern const GpuCodec gpu_codec_bitpack;
extern const GpuCodec gpu_codec_fp16;
extern const GpuCodec gpu_codec_bf16;
extern const GpuCodec gpu_codec_q8;
extern const GpuCodec gpu_codec_terngrad;
extern const GpuCodec gpu_codec_qsgd;
extern const GpuCodec gpu_codec_sparse;
extern const GpuCodec gpu_codec_rangefloat;
extern const GpuCodec gpu_codec_topk;

/* The table entry for id with kernels for p, or nullptr. */
const GpuCodec *gpu_codec(int id, const CodecParams &p);
/* The codec's kernels for any parameters (nullptr: none); prepare() serves every set. */
const GpuCodec *gpu_codec_of(int id);
/* "none bitpack": codecs with kernels. */
const char *gpu_codec_names();

/* ---- element-wise kernels, max-abs and the deterministic l2 norm (coll/cuda/reduce.cu) */
/* *mx = max(*mx, max_i bits(x_i) & 0x7FFFFFFF): the integer max-abs of fp16/q8 (order-free;
 * >= 0x7F800000 means NaN/Inf). *mx must be zeroed before. */
cudaError_t launch_maxabs(const float *x, size_t n, uint32_t *mx, cudaStream_t s);
/* *w = v, in stream order. */
cudaError_t launch_set_word(uint32_t *w, uint32_t v, cudaStream_t s);
uint32_t maxabs_host(const float *x, size_t n);
cudaError_t launch_add(float *dst, const float *src, size_t n, cudaStream_t s);           /* dst += src */
cudaError_t launch_sum(float *dst, const float *a, const float *b, size_t n, cudaStream_t s); /* a + b */
cudaError_t launch_sub(float *dst, const float *a, const float *b, size_t n, cudaStream_t s); /* a - b */

/* l2_norm_det (src/runtime/policy.cc) in the same order: per 16384-element block, 8 double lanes
 * summed sequentially, lanes folded ((a0+a1)+(a2+a3))+((a4+a5)+(a6+a7)); blocks summed in
 * order on the host. */
inline constexpr size_t kNormBlock = 16384;
inline size_t l2_blocks(size_t n) { return (n + kNormBlock - 1) / kNormBlock; }
/* Enqueue the per-block partials: part[b], b < l2_blocks(n) (device doubles). */
cudaError_t launch_l2_partials(const float *x, size_t n, double *part, cudaStream_t s);
/* Sum partials in block order, then sqrt (host). */
double l2_finish(const double *part, size_t nb);
/* The whole computation on the host, kernel bodies included (the host model). */
double l2norm_host(const float *x, size_t n);

}  // namespace compmpi::cuda

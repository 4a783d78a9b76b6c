// SPDX-License-Identifier: BSD-3-Clause
/* qsgd CUDA kernels: the payload of kernels/qsgd/qsgd.h, byte for byte (every width 2..8,
 * every bucket size).
 *
 * Encode, three kernels on the stream (src/cuda/stoch.cuh):
 *   1. lanes   one item per (segment, lane): the CPU's sequential double sums of squares;
 *   2. norms   one item per bucket: fold + accumulate in the CPU's order, N = float_up(sqrt),
 *              written as the payload's fp32 norm; NaN/Inf or a norm whose levels overflow
 *              raise the flag (Status::nonfinite, as the CPU);
 *   3. codes   in Philox tiles (stoch.cuh: each block computed once per tile, kept in shared
 *              memory), one item per field group (8 elements -> `bits` bytes): q_one with
 *              each element's 24-bit uniform drawn as the CPU does (philox::draw16 / refine8).
 * Decode: norms validated on the host copy (finite, sign clear, levels fit), then one item
 * per element: field * (N / s) [+ acc]. */
#include <vector>

#include "common/cuda_util.cuh"
#include "common/gpu_codec.cuh"
#include "common/stoch.cuh"
#include "qsgd/qsgd.h"

namespace compmpi::cuda {
namespace {

using namespace stoch;
constexpr float kTwo24 = 16777216.0f;

bool qs_supports(const CodecParams &p) {
    if (p.bucket && p.bucket != p.param) return false;
    return p.bits >= 2 && p.bits <= 8 && p.variant == 0;
}

__host__ __device__ inline float levels_of(int b) { return static_cast<float>((1 << (b - 1)) - 1); }

/* norm_fits: every field times N / s stays finite */
__host__ __device__ inline bool norm_fits(float N, int b) {
    const float step = fdiv(N, levels_of(b));
    return dmul(static_cast<double>(step), static_cast<double>(1u << (b - 1))) <= static_cast<double>(FLT_MAX);
}

struct NormBody {
    const Lane *parts; /* segment partials (FoldBody) */
    Geometry g;
    int bits;
    uint8_t *out;
    float *norm;
    __host__ __device__ bool operator()(size_t b) const {
        const Moments m = bucket_moments(parts, g, b);
        const float N = float_up(dsqrt(m.sumsq));
        norm[b] = N;
        store_vec(out + 4 * b, f2u(N));
        return m.bad || !norm_fits(N, bits);
    }
};

/* q_one with the CPU's Scale: r = (|v| pre) (s / (N pre)); a = draw16(st, i) */
__host__ __device__ inline int q_code(float v, float N, float sL, const Stream &st, size_t i, uint32_t a) {
    if (!(N > 0)) return 0;
    const float pre = N < 0x1p-60f ? 0x1p64f : 1.0f;
    const float rs = fdiv(sL, fmul(N, pre));
    const uint32_t u = f2u(v);
    const float r = fmul(fmul(u2f(u & 0x7FFFFFFFu), pre), rs);
    const float l = ffloor(r);
    const float t = fmul(fsub(r, l), kTwo24);
    const float up = fadd(l, below24(st, i, t, a) ? 1.0f : 0.0f);
    const float xi = up < sL ? up : sL;
    const int k = static_cast<int>(xi);
    return (u >> 31) ? -k : k;
}

/* Codes in Philox tiles (stoch.cuh): one item per field group (8 elements -> bits bytes),
 * draws from the tile's word table. */
struct CodeBody {
    const float *in;
    size_t n, B;
    const float *norm;
    Stream st;
    int bits;
    uint8_t *codes;
    int mode = kDraw16Words;
    size_t items_per_tile = kTile / 8;
    size_t items = (n + 7) / 8;
    __host__ __device__ bool code(size_t t, size_t item, const uint32_t *words) const {
        const float sL = levels_of(bits);
        pack_group(item, n, bits, codes,
                   [&](size_t i) { return q_code(in[i], norm[i / B], sL, st, i, tile_draw16(words, t, i)); });
        return false;
    }
};

size_t align256(size_t x) { return (x + 255) & ~size_t{255}; }

size_t qs_work_bytes(size_t n, const CodecParams &p) {
    const Geometry g = geometry(n, p.param);
    return stats_bytes(g) + align256(g.nb * sizeof(float)) + 256;
}

cudaError_t qs_encode(const GpuEncodeArgs &a) {
    const CodecParams &p = *a.p;
    const Geometry g = geometry(a.n, p.param);
    if (g.nb == 0) return cudaSuccess;
    float *norm = reinterpret_cast<float *>(static_cast<uint8_t *>(a.work) + stats_bytes(g));
    const Lane *parts = nullptr;
    cudaError_t e = launch_stats(a.in, g, a.work, a.stream, &parts);
    if (e == cudaSuccess) e = launch_for_each(g.nb, NormBody{parts, g, p.bits, a.out, norm}, a.bad, a.stream);
    if (e != cudaSuccess) return e;
    const CodeBody body{a.in, a.n, g.B, norm, make_stream(p.seed, p.stream), p.bits, a.out + 4 * g.nb};
    return launch_tiles(body, nullptr, a.stream);
}

bool qs_encode_host(const CodecOps &, const float *in, size_t n, const CodecParams &p, uint8_t *out) {
    const Geometry g = geometry(n, p.param);
    if (g.nb == 0) return false;
    std::vector<Lane> buf;
    std::vector<float> norm(g.nb);
    const Lane *parts = run_stats_host(in, g, buf);
    const bool bad = run_for_each_host(g.nb, NormBody{parts, g, p.bits, out, norm.data()});
    run_tiles_host(CodeBody{in, n, g.B, norm.data(), make_stream(p.seed, p.stream), p.bits, out + 4 * g.nb});
    return bad;
}

/* out[i] (+)= field_i * (N_j / s) */
struct Decode {
    const uint8_t *codes;
    size_t avail;
    int bits;
    const uint8_t *norms;
    size_t B;
    float *out;
    bool add;
    __host__ __device__ bool operator()(size_t i) const {
        const float step = fdiv(u2f(load_vec<uint32_t>(norms + 4 * (i / B))), levels_of(bits));
        const float v = fmul(static_cast<float>(field(codes, avail, bits, i)), step);
        out[i] = add ? fadd(out[i], v) : v;
        return false;
    }
};

Status validate(const uint8_t *in, size_t len, size_t n, const CodecParams &p) {
    const size_t nb = bucket_count(n, p.param);
    if (len != 4 * nb + field_bytes(n, p.bits)) return Status::corrupt;
    for (size_t j = 0; j < nb; ++j) {
        float v;
        std::memcpy(&v, in + 4 * j, 4);
        if (!std::isfinite(v) || std::signbit(v) || !norm_fits(v, p.bits)) return Status::corrupt;
    }
    return Status::ok;
}

Decode decode_body(const uint8_t *in, size_t len, size_t n, const CodecParams &p, float *out, bool add) {
    const size_t nb = bucket_count(n, p.param);
    const size_t B = nb <= 1 ? (n ? n : 1) : p.param;
    return Decode{in + 4 * nb, len - 4 * nb, p.bits, in, B, out, add};
}

cudaError_t qs_decode(const GpuDecodeArgs &a, bool *corrupt) {
    if (validate(a.host_in, a.len, a.n, *a.p) != Status::ok) {
        *corrupt = true;
        return cudaSuccess;
    }
    return launch_for_each(a.n, decode_body(a.in, a.len, a.n, *a.p, a.out, a.add), nullptr, a.stream);
}

Status qs_decode_host(const CodecOps &, const uint8_t *in, size_t len, size_t n, const CodecParams &p, float *out,
                      bool add) {
    const Status s = validate(in, len, n, p);
    if (s != Status::ok) return s;
    run_for_each_host(n, decode_body(in, len, n, p, out, add));
    return Status::ok;
}

}  // namespace

extern const GpuCodec gpu_codec_qsgd = {
    CodecId::qsgd, false, qs_supports, qs_encode, qs_decode, qs_encode_host, qs_decode_host, qs_work_bytes,
};

}  // namespace compmpi::cuda

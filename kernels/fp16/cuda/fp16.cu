// SPDX-License-Identifier: BSD-3-Clause
/* fp16 and bf16 CUDA kernels: the payloads of kernels/fp16/fp16.h (docs/codecs/fp16.md),
 * byte for byte.
 *
 * fp16 encode, two kernels on the stream, no host round trip:
 *   1. integer max-abs of the |x| bit patterns (launch_maxabs: order-free, exact);
 *   2. every thread derives k = clamp(floor(log2 max) - 14, -126, 113) (0 for an all-zero
 *      buffer) from that word, computes h = fp16(clamp(x * 2^-k, -lim, lim)) with IEEE
 *      round-to-nearest-even (lim = 65504, or 32752 when k = 113), 4 elements per thread;
 *      item 0 writes the 4-byte scale 2^k and raises the NaN/Inf flag if max >= 0x7F800000.
 *   x * 2^-k is one IEEE multiply on both sides and the conversion is IEEE RNE on both
 *   (cvt.rn.f16.f32 here, F16C or the scalar reference there), so the bytes are equal.
 * fp16 decode: the scale is validated on the host (corrupt: nothing launched), then
 *   x = float(h) * scale (the CPU's exact fp16_to_float, NaN made quiet) [+ acc].
 * bf16: the CPU's integer rule (denormal -> signed zero, no rounding up to Inf, else round to
 *   nearest even on the top half); decode = b << 16 [+ acc]. */
#include <cuda_fp16.h>

#include "common/cuda_util.cuh"
#include "common/gpu_codec.cuh"
#include "fp16/fp16.h"

namespace compmpi::cuda {
namespace {

constexpr uint32_t kExp = 0x7F800000u, kAbs = 0x7FFFFFFFu;
constexpr int kMinK = -126, kMaxK = 113;
constexpr uint32_t kBf16Sat = 0x7F7F7FFFu;

/* ---------------------------------------------------------------- fp16 */

struct F16Scale {
    uint32_t scale_bits; /* 2^k */
    float inv;           /* 2^-k */
    float lim;
};

__host__ __device__ inline F16Scale f16_scale(uint32_t mx) {
    const int e = static_cast<int>(mx >> 23) - 127;
    int k = 0;
    if (mx) k = e - 14 < kMinK ? kMinK : (e - 14 > kMaxK ? kMaxK : e - 14);
    /* 2^k and 2^-k are normal fp32 for k in [-126, 113]: build them from the exponent */
    return F16Scale{static_cast<uint32_t>(k + 127) << 23, u2f(static_cast<uint32_t>(127 - k) << 23),
                    k == kMaxK ? 32752.0f : 65504.0f};
}

/* IEEE round-to-nearest-even to fp16 in integer arithmetic, the same code on the GPU and in
 * the host model; |y| <= 65504 here (clamped), so never Inf. The first GPU run (H100, CUDA
 * 13.0) of the earlier __float2half_rn version wrote halves whose low byte differed from
 * the CPU's F16C conversion (docs/gpu.md, "What the GPU runs found"); the host model, which
 * runs cuda_fp16's software path, had matched. Integer code leaves nothing to the intrinsic. */
__host__ __device__ inline uint16_t to_half(float y) {
    const uint32_t u = f2u(y), sign = (u >> 16) & 0x8000u, a = u & 0x7FFFFFFFu;
    if (a >= 0x38800000u) { /* |y| >= 2^-14: a normal half; a rounding carry bumps the exponent */
        const uint32_t r = a - (112u << 23);
        return static_cast<uint16_t>(sign | ((r + 0xFFFu + ((r >> 13) & 1u)) >> 13));
    }
    if (a < 0x33000000u) return static_cast<uint16_t>(sign); /* below 2^-25: zero (2^-25 ties to even 0) */
    /* subnormal half m * 2^-24: the float's 24-bit significand shifted right by 126 - e */
    const uint32_t e = a >> 23, m = (a & 0x7FFFFFu) | 0x800000u, sh = 126u - e;
    return static_cast<uint16_t>(sign | ((m + (1u << (sh - 1)) - 1u + ((m >> sh) & 1u)) >> sh));
}

/* The CPU's fp16_to_float: exact, NaN made quiet. */
__host__ __device__ inline float from_half(uint32_t h) {
    const uint32_t sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
    if (e == 0) return u2f(f2u(static_cast<float>(m) * 0x1p-24f) | sign);
    if (e == 31) return u2f(sign | kExp | (m << 13) | (m ? 0x400000u : 0));
    return u2f(sign | ((e + 112u) << 23) | (m << 13));
}

struct F16Encode {
    const float *in;
    size_t n;
    uint8_t *out;
    const uint32_t *mx; /* device word (or host word in the model) */
    uint32_t *bad;
    bool vec;

    __host__ __device__ uint16_t one(float x, const F16Scale &s) const {
        float y = fmul(x, s.inv); /* one IEEE multiply, as on the CPU */
        y = y < -s.lim ? -s.lim : (s.lim < y ? s.lim : y); /* std::clamp */
        return to_half(y);
    }

    __host__ __device__ bool operator()(size_t g) const {
        const uint32_t m = *mx;
        const F16Scale s = f16_scale(m);
        if (g == 0) {
            store_vec(out, s.scale_bits);
            if (m >= kExp) *bad = 1;
        }
        uint8_t *h = out + half::kScaleBytes;
        const size_t i0 = 4 * g;
        if (vec && i0 + 4 <= n) {
            const float4 v = load_vec<float4>(in + i0);
            store_vec(h + 2 * i0, static_cast<uint32_t>(one(v.x, s)) | static_cast<uint32_t>(one(v.y, s)) << 16);
            store_vec(h + 2 * i0 + 4, static_cast<uint32_t>(one(v.z, s)) | static_cast<uint32_t>(one(v.w, s)) << 16);
            return false;
        }
        const size_t i1 = i0 + 4 < n ? i0 + 4 : n;
        for (size_t i = i0; i < i1; ++i) {
            const uint16_t c = one(in[i], s);
            h[2 * i] = static_cast<uint8_t>(c);
            h[2 * i + 1] = static_cast<uint8_t>(c >> 8);
        }
        return false;
    }
};

struct F16Decode {
    const uint8_t *in; /* codes, after the scale */
    size_t n;
    float scale;
    float *out;
    bool add, vec;

    __host__ __device__ float one(uint32_t h) const { return fmul(from_half(h), scale); }

    __host__ __device__ bool operator()(size_t g) const {
        const size_t i0 = 4 * g;
        if (vec && i0 + 4 <= n) {
            const uint32_t w0 = load_vec<uint32_t>(in + 2 * i0), w1 = load_vec<uint32_t>(in + 2 * i0 + 4);
            float4 v = make_float4(one(w0 & 0xFFFFu), one(w0 >> 16), one(w1 & 0xFFFFu), one(w1 >> 16));
            store4(out + i0, v, add);
            return false;
        }
        const size_t i1 = i0 + 4 < n ? i0 + 4 : n;
        for (size_t i = i0; i < i1; ++i) {
            const float v = one(static_cast<uint32_t>(in[2 * i]) | static_cast<uint32_t>(in[2 * i + 1]) << 8);
            out[i] = add ? fadd(out[i], v) : v;
        }
        return false;
    }
};

/* The CPU decoder's scale check: exactly 2^k, k in [-126, 113]. */
bool f16_scale_ok(const uint8_t *payload, float *scale) {
    uint32_t sb;
    std::memcpy(&sb, payload, 4);
    const int field = static_cast<int>(sb >> 23);
    if ((sb & 0x807FFFFFu) != 0 || field < kMinK + 127 || field > kMaxK + 127) return false;
    *scale = u2f(sb);
    return true;
}

bool h_supports(const CodecParams &p) { return p.bits == 16 && p.variant == 0 && p.param == 0; }

cudaError_t f16_encode(const GpuEncodeArgs &a) {
    uint32_t *mx = a.words;
    cudaError_t e = launch_maxabs(a.in, a.n, mx, a.stream);
    if (e != cudaSuccess) return e;
    /* n = 0 still writes the scale: one item */
    const F16Encode body{a.in, a.n, a.out, mx, a.bad, aligned(a.in, 16)};
    return launch_for_each(a.n ? (a.n + 3) / 4 : 1, body, nullptr, a.stream);
}

cudaError_t f16_decode(const GpuDecodeArgs &a, bool *corrupt) {
    float scale;
    if (a.len != half::kScaleBytes + 2 * a.n || !f16_scale_ok(a.host_in, &scale)) {
        *corrupt = true;
        return cudaSuccess;
    }
    const F16Decode body{a.in + half::kScaleBytes, a.n, scale, a.out, a.add, aligned(a.out, 16)};
    return launch_for_each((a.n + 3) / 4, body, nullptr, a.stream);
}

bool f16_encode_host(const CodecOps &, const float *in, size_t n, const CodecParams &, uint8_t *out) {
    const uint32_t mx = maxabs_host(in, n);
    uint32_t bad = 0;
    run_for_each_host(n ? (n + 3) / 4 : 1, F16Encode{in, n, out, &mx, &bad, aligned(in, 16)});
    return bad != 0;
}

Status f16_decode_host(const CodecOps &, const uint8_t *in, size_t len, size_t n, const CodecParams &, float *out,
                       bool add) {
    float scale;
    if (len != half::kScaleBytes + 2 * n || !f16_scale_ok(in, &scale)) return Status::corrupt;
    run_for_each_host((n + 3) / 4, F16Decode{in + half::kScaleBytes, n, scale, out, add, aligned(out, 16)});
    return Status::ok;
}

/* ---------------------------------------------------------------- bf16 */

/* The CPU's bf16_from_float. */
__host__ __device__ inline uint32_t to_bf16(uint32_t u) {
    if ((u & kAbs) < 0x00800000u) return (u >> 16) & 0x8000u; /* denormal: signed zero */
    if ((u & kAbs) > kBf16Sat) return u >> 16;                 /* would round to Inf (or NaN/Inf) */
    return (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
}

struct B16Encode {
    const float *in;
    size_t n;
    uint8_t *out;
    bool vec;

    __host__ __device__ bool operator()(size_t g) const {
        const size_t i0 = 4 * g;
        if (vec && i0 + 4 <= n) {
            const uint4 u = load_vec<uint4>(in + i0);
            const bool bad = ((u.x & kExp) == kExp) | ((u.y & kExp) == kExp) | ((u.z & kExp) == kExp) |
                             ((u.w & kExp) == kExp);
            store_vec(out + 2 * i0, make_uint2(to_bf16(u.x) | to_bf16(u.y) << 16, to_bf16(u.z) | to_bf16(u.w) << 16));
            return bad;
        }
        bool bad = false;
        const size_t i1 = i0 + 4 < n ? i0 + 4 : n;
        for (size_t i = i0; i < i1; ++i) {
            const uint32_t u = f2u(in[i]), b = to_bf16(u);
            bad |= (u & kExp) == kExp;
            out[2 * i] = static_cast<uint8_t>(b);
            out[2 * i + 1] = static_cast<uint8_t>(b >> 8);
        }
        return bad;
    }
};

struct B16Decode {
    const uint8_t *in;
    size_t n;
    float *out;
    bool add, vec;

    __host__ __device__ bool operator()(size_t g) const {
        const size_t i0 = 4 * g;
        if (vec && i0 + 4 <= n) {
            const uint2 w = load_vec<uint2>(in + 2 * i0);
            float4 v = make_float4(u2f(w.x << 16), u2f(w.x & 0xFFFF0000u), u2f(w.y << 16), u2f(w.y & 0xFFFF0000u));
            store4(out + i0, v, add);
            return false;
        }
        const size_t i1 = i0 + 4 < n ? i0 + 4 : n;
        for (size_t i = i0; i < i1; ++i) {
            const float v = u2f((static_cast<uint32_t>(in[2 * i]) | static_cast<uint32_t>(in[2 * i + 1]) << 8) << 16);
            out[i] = add ? fadd(out[i], v) : v;
        }
        return false;
    }
};

cudaError_t b16_encode(const GpuEncodeArgs &a) {
    const B16Encode body{a.in, a.n, a.out, aligned(a.in, 16) && aligned(a.out, 16)};
    return launch_for_each((a.n + 3) / 4, body, a.bad, a.stream);
}

cudaError_t b16_decode(const GpuDecodeArgs &a, bool *corrupt) {
    if (a.len != 2 * a.n) {
        *corrupt = true;
        return cudaSuccess;
    }
    const B16Decode body{a.in, a.n, a.out, a.add, aligned(a.in, 16) && aligned(a.out, 16)};
    return launch_for_each((a.n + 3) / 4, body, nullptr, a.stream);
}

bool b16_encode_host(const CodecOps &, const float *in, size_t n, const CodecParams &, uint8_t *out) {
    return run_for_each_host((n + 3) / 4, B16Encode{in, n, out, aligned(in, 16) && aligned(out, 16)});
}

Status b16_decode_host(const CodecOps &, const uint8_t *in, size_t len, size_t n, const CodecParams &, float *out,
                       bool add) {
    if (len != 2 * n) return Status::corrupt;
    run_for_each_host((n + 3) / 4, B16Decode{in, n, out, add, aligned(in, 16) && aligned(out, 16)});
    return Status::ok;
}

}  // namespace

extern const GpuCodec gpu_codec_fp16 = {
    CodecId::fp16, false, h_supports, f16_encode, f16_decode, f16_encode_host, f16_decode_host,
};
extern const GpuCodec gpu_codec_bf16 = {
    CodecId::bf16, false, h_supports, b16_encode, b16_decode, b16_encode_host, b16_decode_host,
};

}  // namespace compmpi::cuda

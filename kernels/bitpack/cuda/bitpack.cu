// SPDX-License-Identifier: BSD-3-Clause
/* bitpack CUDA kernels: the payload of kernels/bitpack/bitpack.h, byte for byte (element i's
 * top k = bits/8 bytes at [i*k, i*k+k), least significant kept byte first; 16 bits = the
 * bf16 pattern; nearest = round-to-nearest-even on the bit pattern unless that reaches the
 * Inf/NaN exponent). Integer work only, so bytes equal the CPU's by construction; decode
 * builds the fp32 pattern and adds with one IEEE add, as the CPU does.
 *
 * One thread handles a group of 4 elements: a 16-byte load and one 4/8/12/16-byte store
 * (encode), or the reverse (decode), when both pointers are 16-byte aligned; otherwise, and
 * for the last partial group, element by element. */
#include "bitpack/bitpack.h"
#include "common/cuda_util.cuh"
#include "common/gpu_codec.cuh"

namespace compmpi::cuda {
namespace {

constexpr uint32_t kExp = 0x7F800000u;

/* The CPU's round_bits (kernels/bitpack/cpu/bitpack.cc), s = dropped bits >= 8. */
__host__ __device__ inline uint32_t round_bits(uint32_t u, int s) {
    if ((u & kExp) == kExp) return u;
    uint32_t r = u + ((1u << (s - 1)) - 1) + ((u >> s) & 1u);
    return (r & kExp) == kExp ? u : r;
}

template <int K>
struct Encode {
    const float *in;
    size_t n;
    uint8_t *out;
    bool nearest, vec;

    __host__ __device__ bool operator()(size_t g) const {
        constexpr int s = 32 - 8 * K;
        const size_t i0 = 4 * g;
        if (vec && i0 + 4 <= n) {
            const float4 v = load_vec<float4>(in + i0);
            uint32_t u[4] = {f2u(v.x), f2u(v.y), f2u(v.z), f2u(v.w)};
            bool bad = false;
            for (int j = 0; j < 4; ++j) {
                bad |= (u[j] & kExp) == kExp;
                if (s && nearest) u[j] = round_bits(u[j], s);
            }
            if constexpr (K == 1) {
                store_vec(out + i0, (u[0] >> 24) | ((u[1] >> 24) << 8) | ((u[2] >> 24) << 16) | (u[3] & 0xFF000000u));
            } else if constexpr (K == 2) {
                store_vec(out + 2 * i0, make_uint2((u[0] >> 16) | (u[1] & 0xFFFF0000u), (u[2] >> 16) | (u[3] & 0xFFFF0000u)));
            } else if constexpr (K == 3) { /* a_j = u_j >> 8, 24 bits each, packed LSB first */
                uint8_t *o = out + 3 * i0;
                store_vec(o, (u[0] >> 8) | ((u[1] >> 8) << 24));
                store_vec(o + 4, (u[1] >> 16) | ((u[2] >> 8) << 16));
                store_vec(o + 8, (u[2] >> 24) | (u[3] & 0xFFFFFF00u));
            } else {
                store_vec(out + 4 * i0, make_uint4(u[0], u[1], u[2], u[3]));
            }
            return bad;
        }
        bool bad = false;
        const size_t i1 = i0 + 4 < n ? i0 + 4 : n;
        for (size_t i = i0; i < i1; ++i) {
            uint32_t u = f2u(in[i]);
            bad |= (u & kExp) == kExp;
            if (s && nearest) u = round_bits(u, s);
            for (int b = 0; b < K; ++b) out[i * K + b] = static_cast<uint8_t>(u >> (s + 8 * b));
        }
        return bad;
    }
};

template <int K>
struct Decode {
    const uint8_t *in;
    size_t n;
    float *out;
    bool add, vec;

    __host__ __device__ bool operator()(size_t g) const {
        constexpr int s = 32 - 8 * K;
        const size_t i0 = 4 * g;
        if (vec && i0 + 4 <= n) {
            uint32_t u[4];
            if constexpr (K == 1) {
                const uint32_t w = load_vec<uint32_t>(in + i0);
                for (int j = 0; j < 4; ++j) u[j] = ((w >> (8 * j)) & 0xFFu) << 24;
            } else if constexpr (K == 2) {
                const uint2 w = load_vec<uint2>(in + 2 * i0);
                u[0] = w.x << 16;
                u[1] = w.x & 0xFFFF0000u;
                u[2] = w.y << 16;
                u[3] = w.y & 0xFFFF0000u;
            } else if constexpr (K == 3) {
                const uint8_t *p = in + 3 * i0;
                const uint32_t w0 = load_vec<uint32_t>(p), w1 = load_vec<uint32_t>(p + 4), w2 = load_vec<uint32_t>(p + 8);
                u[0] = w0 << 8;
                u[1] = ((w0 >> 24) | (w1 << 8)) << 8;
                u[2] = ((w1 >> 16) | (w2 << 16)) << 8;
                u[3] = w2 & 0xFFFFFF00u;
            } else {
                const uint4 w = load_vec<uint4>(in + 4 * i0);
                u[0] = w.x;
                u[1] = w.y;
                u[2] = w.z;
                u[3] = w.w;
            }
            float4 v = make_float4(u2f(u[0]), u2f(u[1]), u2f(u[2]), u2f(u[3]));
            store4(out + i0, v, add);
            return false;
        }
        const size_t i1 = i0 + 4 < n ? i0 + 4 : n;
        for (size_t i = i0; i < i1; ++i) {
            uint32_t u = 0;
            for (int b = 0; b < K; ++b) u |= static_cast<uint32_t>(in[i * K + b]) << (s + 8 * b);
            out[i] = add ? fadd(out[i], u2f(u)) : u2f(u);
        }
        return false;
    }
};

bool bp_supports(const CodecParams &p) {
    return (p.bits == 8 || p.bits == 16 || p.bits == 24 || p.bits == 32) &&
           (p.variant == bitpack::kTrunc || p.variant == bitpack::kNearest);
}

/* Run an encode body on the device (stream != nullptr or flag given) or on the host. */
template <int K, bool Host>
bool encode_k(const float *in, size_t n, bool nearest, uint8_t *out, uint32_t *flag, cudaStream_t stream,
              cudaError_t *err) {
    const Encode<K> body{in, n, out, nearest, aligned(in, 16) && aligned(out, 16)};
    if constexpr (Host) return run_for_each_host((n + 3) / 4, body);
    *err = launch_for_each((n + 3) / 4, body, flag, stream);
    return false;
}

template <bool Host>
bool encode_any(const float *in, size_t n, const CodecParams &p, uint8_t *out, uint32_t *flag, cudaStream_t stream,
                cudaError_t *err) {
    const bool nearest = p.variant == bitpack::kNearest;
    switch (p.bits / 8) {
        case 1: return encode_k<1, Host>(in, n, nearest, out, flag, stream, err);
        case 2: return encode_k<2, Host>(in, n, nearest, out, flag, stream, err);
        case 3: return encode_k<3, Host>(in, n, nearest, out, flag, stream, err);
        default: return encode_k<4, Host>(in, n, nearest, out, flag, stream, err);
    }
}

template <int K, bool Host>
cudaError_t decode_k(const uint8_t *in, size_t n, float *out, bool add, cudaStream_t stream) {
    const Decode<K> body{in, n, out, add, aligned(in, 16) && aligned(out, 16)};
    if constexpr (Host) {
        run_for_each_host((n + 3) / 4, body);
        return cudaSuccess;
    }
    return launch_for_each((n + 3) / 4, body, nullptr, stream);
}

template <bool Host>
cudaError_t decode_any(const uint8_t *in, size_t n, int k, float *out, bool add, cudaStream_t stream) {
    switch (k) {
        case 1: return decode_k<1, Host>(in, n, out, add, stream);
        case 2: return decode_k<2, Host>(in, n, out, add, stream);
        case 3: return decode_k<3, Host>(in, n, out, add, stream);
        default: return decode_k<4, Host>(in, n, out, add, stream);
    }
}

cudaError_t bp_encode(const GpuEncodeArgs &a) {
    cudaError_t err = cudaSuccess;
    encode_any<false>(a.in, a.n, *a.p, a.out, a.bad, a.stream, &err);
    return err;
}

cudaError_t bp_decode(const GpuDecodeArgs &a, bool *corrupt) {
    const size_t k = a.p->bits / 8;
    if (a.len != a.n * k) {
        *corrupt = true;
        return cudaSuccess;
    }
    return decode_any<false>(a.in, a.n, static_cast<int>(k), a.out, a.add, a.stream);
}

bool bp_encode_host(const CodecOps &, const float *in, size_t n, const CodecParams &p, uint8_t *out) {
    cudaError_t err = cudaSuccess;
    return encode_any<true>(in, n, p, out, nullptr, nullptr, &err);
}

Status bp_decode_host(const CodecOps &, const uint8_t *in, size_t len, size_t n, const CodecParams &p, float *out,
                      bool add) {
    const size_t k = p.bits / 8;
    if (len != n * k) return Status::corrupt;
    decode_any<true>(in, n, static_cast<int>(k), out, add, nullptr);
    return Status::ok;
}

}  // namespace

extern const GpuCodec gpu_codec_bitpack = {
    CodecId::bitpack, false, bp_supports, bp_encode, bp_decode, bp_encode_host, bp_decode_host,
};

}  // namespace compmpi::cuda

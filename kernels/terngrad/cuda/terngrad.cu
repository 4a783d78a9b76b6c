/* terngrad CUDA kernels: the payload of kernels/terngrad/terngrad.h, byte for byte, for all
 * three variants (base4, base3, levels), every bucket size, clipping and the shared scale.
 *
 * Encode, three kernels on the stream (src/cuda/stoch.cuh):
 *   1. lanes   one item per (segment, lane): the CPU's sequential double sums and max|g|;
 *   2. scales  one item per bucket: fold + accumulate in the CPU's order, then scale_of()
 *              (mean, variance, c sigma in double, as the CPU), the shared scale
 *              (bstats::float_up, computed on the host), or for levels the round-down
 *              max/K; writes the fp32 scalers of the payload; raises the flag on NaN/Inf
 *              (and, for levels, a scaler that does not fit) -- Status::nonfinite;
 *   3. codes   one item per output byte (base4: 4 elements, base3: 5) or per field group
 *              (levels: 8 elements -> `bits` bytes); every element draws its 24-bit
 *              uniform as the CPU does (philox::draw16 / refine8: same key, counter and bits).
 * Decode: scalers and code bytes are validated on the host copy of the payload (the CPU
 * decoder's checks), then one item per element: field * s (base3: digit * s) [+ acc].
 * Performance note (GPU-only): each element computes a whole Philox block and keeps 16 bits
 * of it (8x the generator work of the CPU's group mapping); sharing blocks across
 * threads with shuffles is the obvious next step once a GPU can measure it. */
#include <vector>

#include "cuda/cuda_util.cuh"
#include "cuda/gpu_codec.cuh"
#include "cuda/stoch.cuh"
#include "terngrad/terngrad.h"

namespace compmpi::cuda {
namespace {

using namespace stoch;
constexpr float kTwo24 = 16777216.0f;

struct Scale {
    float s, cs;
};

bool tg_supports(const CodecParams &p) {
    if (p.bucket && p.bucket != p.param) return false; /* the CPU refuses it: let it say so */
    /* The CPU codec now clips at the whole contribution's sigma decided once per call
     * (p.clip_at, bucket mode included) and rounds the levels variant stochastically
     * (unbiased allreduce, docs/codecs/terngrad.md); these kernels still follow the earlier
     * per-bucket sigma and nearest levels. Until they are updated, such calls run the CPU
     * codec on staged data (same bytes as a CPU rank): docs/gpu.md. */
    if (p.clip_at > 0 || p.param != 0 || p.variant == terngrad::kLevels) return false;
    if (!(p.shared_scale >= 0) || std::isinf(p.shared_scale)) return false;
    if (p.variant == terngrad::kBase4 || p.variant == terngrad::kBase3) return p.bits == 2;
    return p.variant == terngrad::kLevels && p.bits >= 2 && p.bits <= terngrad::kMaxLevelBits;
}

size_t code_bytes(size_t n, const CodecParams &p) {
    if (p.variant == terngrad::kBase4) return (n + 3) / 4;
    if (p.variant == terngrad::kBase3) return (n + 4) / 5;
    return field_bytes(n, p.bits);
}

/* levels_fit: every field times s stays finite */
__host__ __device__ inline bool levels_fit(float s, int b) {
    return dmul(static_cast<double>(s), static_cast<double>(1u << (b - 1))) <= static_cast<double>(FLT_MAX);
}

/* ---------------------------------------------------------------- scales (one item per bucket) */
struct ScaleBody {
    const Lane *lanes;
    Geometry g;
    float clip;
    float shared; /* float_up(shared_scale) if it applies (one bucket, param 0), else 0 */
    int levels_bits; /* 0: base4/base3 */
    uint8_t *out;
    Scale *sc;
    __host__ __device__ bool operator()(size_t b) const {
        const Moments m = bucket_moments(lanes, g, b);
        Scale r;
        bool bad = m.bad != 0;
        if (levels_bits) {
            const float K = static_cast<float>((1 << (levels_bits - 1)) - 1);
            const double d = ddiv(static_cast<double>(m.maxabs), static_cast<double>(K));
            float s = d2f(d);
            if (static_cast<double>(s) > d) s = next_toward(s, 0.0f);
            if (shared > 0) s = shared;
            bad = bad || !levels_fit(s, levels_bits);
            r = Scale{s, 0};
        } else {
            const size_t end = (b + 1) * g.B < g.n ? (b + 1) * g.B : g.n, cnt = end - b * g.B;
            float cs = INFINITY;
            if (clip > 0) { /* scale_of */
                const double c = static_cast<double>(cnt);
                const double mean = ddiv(m.sum, c);
                double var = dsub(ddiv(m.sumsq, c), dmul(mean, mean));
                var = 0.0 < var ? var : 0.0; /* std::max(0.0, var) */
                const float cc = d2f(dmul(static_cast<double>(clip), dsqrt(var)));
                if (cc > 0) cs = cc;
            }
            r = Scale{m.maxabs < cs ? m.maxabs : cs, cs}; /* std::min(maxabs, cs) */
            if (shared > 0) {
                r.s = shared;
                r.cs = r.cs < r.s ? r.cs : r.s;
            }
        }
        sc[b] = r;
        store_vec(out + 4 * b, f2u(r.s));
        return bad;
    }
};

/* ---------------------------------------------------------------- codes */
/* tern_one with the CPU's Thresh: (gc * pre) * (2^24 / (s pre)) */
__host__ __device__ inline int tern_code(float g, const Scale &sc, const Stream &st, size_t i) {
    if (!(sc.s > 0)) return 0;
    const float pre = sc.s < 0x1p-60f ? 0x1p64f : 1.0f;
    const float r24 = fdiv(kTwo24, fmul(sc.s, pre));
    const uint32_t u = f2u(g);
    const float a = u2f(u & 0x7FFFFFFFu), gc = a < sc.cs ? a : sc.cs;
    const float t = fmul(fmul(gc, pre), r24);
    if (!below24(st, i, t)) return 0;
    return (u >> 31) ? -1 : 1;
}

/* level_one: round(x / s) clamped to [-K, K], RNE through 1.5 * 2^23 */
__host__ __device__ inline int32_t level_code(float x, float s, float K) {
    if (!(s > 0)) return 0;
    float q = fdiv(x, s);
    q = q < K ? q : K;
    q = q > -K ? q : -K;
    return static_cast<int32_t>(fsub(fadd(q, 0x1.8p23f), 0x1.8p23f));
}

struct CodeBody {
    const float *in;
    size_t n, B;
    const Scale *sc;
    Stream st;
    uint8_t variant;
    int bits;
    uint8_t *codes;

    __host__ __device__ int tern(size_t i) const { return tern_code(in[i], sc[i / B], st, i); }

    __host__ __device__ bool operator()(size_t item) const {
        if (variant == terngrad::kBase4) { /* byte item: elements 4 item .. +3, 2-bit fields */
            const size_t i0 = 4 * item, m = n - i0 < 4 ? n - i0 : 4;
            uint32_t v = 0;
            for (size_t j = 0; j < m; ++j) v |= (static_cast<uint32_t>(tern(i0 + j)) & 3u) << (2 * j);
            codes[item] = static_cast<uint8_t>(v);
        } else if (variant == terngrad::kBase3) { /* byte item: sum (k_j + 1) 3^j over present elements */
            const size_t i0 = 5 * item, m = n - i0 < 5 ? n - i0 : 5;
            int v = 0, w = 1;
            for (size_t j = 0; j < m; ++j, w *= 3) v += (tern(i0 + j) + 1) * w;
            codes[item] = static_cast<uint8_t>(v);
        } else {
            const float K = static_cast<float>((1 << (bits - 1)) - 1);
            pack_group(item, n, bits, codes, [&](size_t i) { return level_code(in[i], sc[i / B].s, K); });
        }
        return false;
    }
};

size_t align256(size_t x) { return (x + 255) & ~size_t{255}; }

size_t tg_work_bytes(size_t n, const CodecParams &p) {
    const Geometry g = geometry(n, p.param);
    return align256(lane_items(g) * sizeof(Lane)) + align256(g.nb * sizeof(Scale)) + 256;
}

float shared_of(const Geometry &g, const CodecParams &p) {
    return p.param == 0 && p.shared_scale > 0 && g.nb == 1 ? float_up(p.shared_scale) : 0.0f;
}

ScaleBody scale_body(const Lane *lanes, const Geometry &g, const CodecParams &p, uint8_t *out, Scale *sc) {
    return ScaleBody{lanes, g, p.clip, shared_of(g, p), p.variant == terngrad::kLevels ? int{p.bits} : 0, out, sc};
}

size_t code_items(size_t n, const CodecParams &p) {
    if (p.variant == terngrad::kBase4) return (n + 3) / 4;
    if (p.variant == terngrad::kBase3) return (n + 4) / 5;
    return (n + 7) / 8;
}

cudaError_t tg_encode(const GpuEncodeArgs &a) {
    const CodecParams &p = *a.p;
    const Geometry g = geometry(a.n, p.param);
    if (g.nb == 0) return cudaSuccess;
    Lane *lanes = static_cast<Lane *>(a.work);
    Scale *sc = reinterpret_cast<Scale *>(static_cast<uint8_t *>(a.work) + align256(lane_items(g) * sizeof(Lane)));
    cudaError_t e = launch_for_each(lane_items(g), LaneBody{a.in, g, lanes}, nullptr, a.stream);
    if (e == cudaSuccess) e = launch_for_each(g.nb, scale_body(lanes, g, p, a.out, sc), a.bad, a.stream);
    if (e != cudaSuccess) return e;
    const CodeBody body{a.in, a.n, g.B, sc, make_stream(p.seed, p.stream), p.variant, p.bits, a.out + 4 * g.nb};
    return launch_for_each(code_items(a.n, p), body, nullptr, a.stream);
}

bool tg_encode_host(const CodecOps &, const float *in, size_t n, const CodecParams &p, uint8_t *out) {
    const Geometry g = geometry(n, p.param);
    if (g.nb == 0) return false;
    std::vector<Lane> lanes(lane_items(g));
    std::vector<Scale> sc(g.nb);
    run_for_each_host(lanes.size(), LaneBody{in, g, lanes.data()});
    const bool bad = run_for_each_host(g.nb, scale_body(lanes.data(), g, p, out, sc.data()));
    const CodeBody body{in, n, g.B, sc.data(), make_stream(p.seed, p.stream), p.variant, p.bits, out + 4 * g.nb};
    run_for_each_host(code_items(n, p), body);
    return bad;
}

/* ---------------------------------------------------------------- decode */
struct Base3Decode {
    const uint8_t *codes;
    const uint8_t *scalers; /* fp32 per bucket */
    size_t B;
    float *out;
    bool add;
    __host__ __device__ bool operator()(size_t i) const {
        uint32_t v = codes[i / 5];
        for (size_t j = i % 5; j; --j) v /= 3;
        const float s = u2f(load_vec<uint32_t>(scalers + 4 * (i / B)));
        const float x = fmul(static_cast<float>(static_cast<int>(v % 3) - 1), s);
        out[i] = add ? fadd(out[i], x) : x;
        return false;
    }
};

/* The CPU decoder's checks on the host copy of the payload. */
Status validate(const uint8_t *in, size_t len, size_t n, const CodecParams &p) {
    const size_t nb = bucket_count(n, p.param);
    if (len != 4 * nb + code_bytes(n, p)) return Status::corrupt;
    for (size_t j = 0; j < nb; ++j) {
        float v;
        std::memcpy(&v, in + 4 * j, 4);
        if (!std::isfinite(v) || std::signbit(v) || (p.variant == terngrad::kLevels && !levels_fit(v, p.bits)))
            return Status::corrupt;
    }
    const uint8_t *codes = in + 4 * nb;
    const size_t avail = len - 4 * nb;
    uint32_t bad = 0;
    if (p.variant == terngrad::kBase4)
        for (size_t i = 0; i < avail; ++i) bad |= (codes[i] >> 1) & ~codes[i] & 0x55u;
    else if (p.variant == terngrad::kBase3)
        for (size_t i = 0; i < avail; ++i) bad |= codes[i] > 242;
    return bad ? Status::corrupt : Status::ok;
}

/* decode bodies over a payload (device or host copy) */
template <class Run>
void tg_decode_bodies(const uint8_t *in, size_t len, size_t n, const CodecParams &p, float *out, bool add, Run run) {
    const size_t nb = bucket_count(n, p.param);
    const size_t B = nb <= 1 ? (n ? n : 1) : p.param;
    if (p.variant == terngrad::kBase3) {
        run(n, Base3Decode{in + 4 * nb, in, B, out, add});
    } else {
        const int b = p.variant == terngrad::kBase4 ? 2 : p.bits;
        /* the scalers are the steps: fp32 at 4-byte offsets of a 256-byte aligned payload
         * on the device; the host model reads them through an aligned copy */
        run(n, FieldDecode{in + 4 * nb, len - 4 * nb, b, reinterpret_cast<const float *>(in), B, out, add});
    }
}

cudaError_t tg_decode(const GpuDecodeArgs &a, bool *corrupt) {
    if (validate(a.host_in, a.len, a.n, *a.p) != Status::ok) {
        *corrupt = true;
        return cudaSuccess;
    }
    cudaError_t e = cudaSuccess;
    tg_decode_bodies(a.in, a.len, a.n, *a.p, a.out, a.add,
                     [&](size_t items, const auto &body) { e = launch_for_each(items, body, nullptr, a.stream); });
    return e;
}

Status tg_decode_host(const CodecOps &, const uint8_t *in, size_t len, size_t n, const CodecParams &p, float *out,
                      bool add) {
    const Status s = validate(in, len, n, p);
    if (s != Status::ok) return s;
    std::vector<float> copy((len + 3) / 4); /* aligned, like the device workspace */
    std::memcpy(copy.data(), in, len);
    tg_decode_bodies(reinterpret_cast<const uint8_t *>(copy.data()), len, n, p, out, add,
                     [&](size_t items, const auto &body) { run_for_each_host(items, body); });
    return Status::ok;
}

}  // namespace

extern const GpuCodec gpu_codec_terngrad = {
    CodecId::terngrad, false, tg_supports, tg_encode, tg_decode, tg_encode_host, tg_decode_host, tg_work_bytes,
};

}  // namespace compmpi::cuda

// SPDX-License-Identifier: BSD-3-Clause
/* terngrad CUDA kernels: the payload of kernels/terngrad/terngrad.h, byte for byte, for all
 * three variants (base4, base3, levels), every bucket size, clipping at the collective's
 * threshold (clip_at) or at the one bucket's own sigma, and the shared scale.
 *
 * Encode, three kernels on the stream (src/cuda/stoch.cuh):
 *   1. lanes   one item per (segment, lane): the CPU's sequential double sums and max|g|;
 *   2. scales  one item per bucket: fold + accumulate in the CPU's order, then the clip
 *              threshold (p.clip_at, or c sigma in double as clip_threshold), s = min(max,
 *              cs), the shared scale (bstats::float_up, computed on the host), or for levels
 *              s_j = max|x_j| / K rounded up; writes the fp32 scalers of the payload; raises
 *              the flag on NaN/Inf (and, for levels, a scaler that does not fit) --
 *              Status::nonfinite;
 *   3. codes   in Philox tiles (stoch.cuh: every block computed once per tile of 1280
 *              elements into shared memory): one item per output byte (base4: 4 elements,
 *              base3: 5) or per field group (levels: 8 elements -> `bits` bytes); every element
 *              draws its 24-bit uniform as the CPU does (philox::draw16 / refine8), the
 *              stochastic levels their 32-bit word (philox::word); on the shared grid levels
 *              round to nearest.
 * The collective's case (one bucket, shared scale, clip_at given: the CPU's `given` path)
 * skips kernels 1 and 2: the scale is known on the host and kernel 3 checks NaN/Inf.
 * Decode: scalers and code bytes are validated on the host copy of the payload (the CPU
 * decoder's checks), then one item per element: field * s (base3: digit * s) [+ acc]. */
#include <vector>

#include "common/cuda_util.cuh"
#include "common/gpu_codec.cuh"
#include "common/stoch.cuh"
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
    /* The clip threshold is c sigma of the WHOLE contribution: p.clip_at when the collective
     * decided it (the allreduce always does), else computed here, which the kernels do only
     * for one bucket (its sigma is the buffer's). Buckets with clipping and no clip_at run
     * the CPU codec on staged data (same bytes): docs/gpu.md. */
    if (p.variant != terngrad::kLevels && p.param != 0 && p.clip > 0 && !(p.clip_at > 0)) return false;
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

/* The clip threshold: the collective's clip_at, else the CPU's clip_threshold of moments m
 * over cnt values (c sigma in double; none if c = 0 or sigma = 0), else none (INFINITY). */
__host__ __device__ inline float clip_of(const Moments &m, size_t cnt, float clip, float clip_at) {
    if (clip_at > 0) return clip_at;
    if (!(clip > 0) || cnt == 0) return INFINITY;
    const double c = static_cast<double>(cnt);
    const double mean = ddiv(m.sum, c);
    double var = dsub(ddiv(m.sumsq, c), dmul(mean, mean));
    var = 0.0 < var ? var : 0.0; /* std::max(0.0, var) */
    const float cc = d2f(dmul(static_cast<double>(clip), dsqrt(var)));
    return cc > 0 ? cc : INFINITY;
}

/* ---------------------------------------------------------------- scales (one item per bucket) */
struct ScaleBody {
    const Lane *parts; /* segment partials (FoldBody) */
    Geometry g;
    float clip;
    float clip_at; /* > 0: the collective's threshold for every bucket */
    float shared; /* float_up(shared_scale) if it applies (one bucket, param 0), else 0 */
    int levels_bits; /* 0: base4/base3 */
    uint8_t *out;
    Scale *sc;
    __host__ __device__ bool operator()(size_t b) const {
        const Moments m = bucket_moments(parts, g, b);
        Scale r;
        bool bad = m.bad != 0;
        if (levels_bits) { /* s_j = max|x_j| / K rounded up (|x| <= K s_j), or the grid's step */
            const float K = static_cast<float>((1 << (levels_bits - 1)) - 1);
            float s = float_up(ddiv(static_cast<double>(m.maxabs), static_cast<double>(K)));
            if (shared > 0) s = shared;
            bad = bad || !levels_fit(s, levels_bits);
            r = Scale{s, 0};
        } else {
            const size_t end = (b + 1) * g.B < g.n ? (b + 1) * g.B : g.n, cnt = end - b * g.B;
            /* one bucket when clip applies without clip_at: its sigma is the buffer's */
            const float cs = clip_of(m, cnt, clip, clip_at);
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
/* tern_one with the CPU's Thresh: (gc * pre) * (2^24 / (s pre)); draw = draw16(st, i) */
__host__ __device__ inline int tern_code(float g, const Scale &sc, const Stream &st, size_t i, uint32_t draw) {
    if (!(sc.s > 0)) return 0;
    const float pre = sc.s < 0x1p-60f ? 0x1p64f : 1.0f;
    const float r24 = fdiv(kTwo24, fmul(sc.s, pre));
    const uint32_t u = f2u(g);
    const float a = u2f(u & 0x7FFFFFFFu), gc = a < sc.cs ? a : sc.cs;
    const float t = fmul(fmul(gc, pre), r24);
    if (!below24(st, i, t, draw)) return 0;
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

/* level_stoch: floor(q) + Bernoulli(q - floor(q)) with the element's 32-bit word w */
__host__ __device__ inline int32_t level_stoch(float x, float s, float K, uint32_t w) {
    if (!(s > 0)) return 0;
    float q = fdiv(x, s);
    q = q < K ? q : K;
    q = q > -K ? q : -K;
    const float fl = ffloor(q);
    const float up = static_cast<float>(w >> 8) < fmul(fsub(q, fl), kTwo24) ? 1.0f : 0.0f;
    return static_cast<int32_t>(fadd(fl, up));
}

__host__ __device__ inline bool nonfinite(float x) { return (f2u(x) & kExpBits) == kExpBits; }

/* Codes in Philox tiles (stoch.cuh): base4 one item per byte (4 elements), base3 per byte
 * (5), levels per field group (8 elements -> bits bytes). Scalers: sc[bucket] from the
 * statistics kernels, or (sc == nullptr: one bucket, the agreed scale and clip threshold
 * given, no statistics pass -- the CPU's `given` path) the one scale `given`, written by
 * item 0, with NaN/Inf checked here (the flag). */
struct CodeBody {
    const float *in;
    size_t n, B;
    const Scale *sc;
    Scale given;
    Stream st;
    uint8_t variant;
    int bits;
    bool grid; /* levels on the shared grid: round to nearest, no draws */
    uint8_t *out; /* the payload: scalers, then codes */
    size_t nb;
    int mode;
    size_t items_per_tile, items;

    __host__ __device__ Scale scale(size_t i) const { return sc ? sc[i / B] : given; }
    __host__ __device__ int tern(size_t t, size_t i, const uint32_t *words) const {
        return tern_code(in[i], scale(i), st, i, tile_draw16(words, t, i));
    }

    __host__ __device__ bool code(size_t t, size_t item, const uint32_t *words) const {
        uint8_t *codes = out + 4 * nb;
        bool bad = false;
        if (!sc && item == 0) store_vec(out, f2u(given.s));
        if (variant == terngrad::kBase4) { /* byte item: elements 4 item .. +3, 2-bit fields */
            const size_t i0 = 4 * item, m = n - i0 < 4 ? n - i0 : 4;
            uint32_t v = 0;
            for (size_t j = 0; j < m; ++j) {
                v |= (static_cast<uint32_t>(tern(t, i0 + j, words)) & 3u) << (2 * j);
                bad |= !sc && nonfinite(in[i0 + j]);
            }
            codes[item] = static_cast<uint8_t>(v);
        } else if (variant == terngrad::kBase3) { /* byte item: sum (k_j + 1) 3^j over present elements */
            const size_t i0 = 5 * item, m = n - i0 < 5 ? n - i0 : 5;
            int v = 0, w = 1;
            for (size_t j = 0; j < m; ++j, w *= 3) {
                v += (tern(t, i0 + j, words) + 1) * w;
                bad |= !sc && nonfinite(in[i0 + j]);
            }
            codes[item] = static_cast<uint8_t>(v);
        } else {
            const float K = static_cast<float>((1 << (bits - 1)) - 1);
            const uint64_t w0 = t * kTile;
            pack_group(item, n, bits, codes, [&](size_t i) {
                const float s = sc[i / B].s;
                return grid ? level_code(in[i], s, K) : level_stoch(in[i], s, K, words[i - w0]);
            });
        }
        return bad;
    }
};

size_t align256(size_t x) { return (x + 255) & ~size_t{255}; }

size_t tg_work_bytes(size_t n, const CodecParams &p) {
    const Geometry g = geometry(n, p.param);
    return stats_bytes(g) + align256(g.nb * sizeof(Scale)) + 256;
}

float shared_of(const Geometry &g, const CodecParams &p) {
    return p.param == 0 && p.shared_scale > 0 && g.nb == 1 ? float_up(p.shared_scale) : 0.0f;
}

ScaleBody scale_body(const Lane *lanes, const Geometry &g, const CodecParams &p, uint8_t *out, Scale *sc) {
    const int levels_bits = p.variant == terngrad::kLevels ? int{p.bits} : 0;
    return ScaleBody{lanes, g, p.clip, p.clip_at, shared_of(g, p), levels_bits, out, sc};
}

size_t code_items(size_t n, const CodecParams &p) {
    if (p.variant == terngrad::kBase4) return (n + 3) / 4;
    if (p.variant == terngrad::kBase3) return (n + 4) / 5;
    return (n + 7) / 8;
}

/* The CPU's `given` case: one bucket, the agreed scaler (eq. 4) and the clip threshold
 * known (p.clip_at, or no clipping): this rank's statistics would be replaced, so none are
 * computed; the scale is {float_up(shared), min(cs, s)}. */
bool given_scale(const Geometry &g, const CodecParams &p, Scale *out) {
    if (p.variant == terngrad::kLevels || g.nb != 1 || p.param != 0 || !(p.shared_scale > 0)) return false;
    if (!(p.clip_at > 0) && p.clip > 0) return false;
    const float s = float_up(p.shared_scale), cs = p.clip_at > 0 ? p.clip_at : INFINITY;
    *out = Scale{s, cs < s ? cs : s};
    return true;
}

CodeBody code_body(const float *in, size_t n, const Geometry &g, const CodecParams &p, const Scale *sc, Scale given,
                   uint8_t *out) {
    const bool levels = p.variant == terngrad::kLevels;
    const bool grid = levels && shared_of(g, p) > 0;
    const int mode = levels ? (grid ? kNoWords : kFullWords) : kDraw16Words;
    const size_t ipt = p.variant == terngrad::kBase4 ? kTile / 4 : p.variant == terngrad::kBase3 ? kTile / 5 : kTile / 8;
    return CodeBody{in,   n,  g.B,  sc,  given, make_stream(p.seed, p.stream), p.variant, int{p.bits}, grid, out,
                    g.nb, mode, ipt, code_items(n, p)};
}

cudaError_t tg_encode(const GpuEncodeArgs &a) {
    const CodecParams &p = *a.p;
    const Geometry g = geometry(a.n, p.param);
    if (g.nb == 0) return cudaSuccess;
    Scale given{};
    if (given_scale(g, p, &given)) return launch_tiles(code_body(a.in, a.n, g, p, nullptr, given, a.out), a.bad, a.stream);
    Scale *sc = reinterpret_cast<Scale *>(static_cast<uint8_t *>(a.work) + stats_bytes(g));
    const Lane *parts = nullptr;
    cudaError_t e = launch_stats(a.in, g, a.work, a.stream, &parts);
    if (e == cudaSuccess) e = launch_for_each(g.nb, scale_body(parts, g, p, a.out, sc), a.bad, a.stream);
    if (e != cudaSuccess) return e;
    return launch_tiles(code_body(a.in, a.n, g, p, sc, Scale{}, a.out), nullptr, a.stream);
}

bool tg_encode_host(const CodecOps &, const float *in, size_t n, const CodecParams &p, uint8_t *out) {
    const Geometry g = geometry(n, p.param);
    if (g.nb == 0) return false;
    Scale given{};
    if (given_scale(g, p, &given)) return run_tiles_host(code_body(in, n, g, p, nullptr, given, out));
    std::vector<Lane> buf;
    std::vector<Scale> sc(g.nb);
    const Lane *parts = run_stats_host(in, g, buf);
    const bool bad = run_for_each_host(g.nb, scale_body(parts, g, p, out, sc.data()));
    run_tiles_host(code_body(in, n, g, p, sc.data(), Scale{}, out));
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
    /* base4: a field 0b10 is no code, (c >> 1) & ~c & 0x55 per byte -- eight bytes per 64-bit
     * word (the bit shifted in from the next byte lands on bit 7, which the mask drops);
     * base3: a byte above 242 = 3^5 - 1. Word-wide / max loops: the byte-serial loop ran at
     * about 3.5 GB/s, and this check is on every decode's critical path. */
    uint64_t bad = 0;
    size_t i = 0;
    if (p.variant == terngrad::kBase4) {
        for (; i + 8 <= avail; i += 8) {
            uint64_t w;
            std::memcpy(&w, codes + i, 8);
            bad |= (w >> 1) & ~w & 0x5555555555555555ull;
        }
        for (; i < avail; ++i) bad |= (codes[i] >> 1) & ~codes[i] & 0x55u;
    } else if (p.variant == terngrad::kBase3) {
        uint8_t mx = 0;
        for (; i < avail; ++i) mx = codes[i] > mx ? codes[i] : mx;
        bad = mx > 242;
    }
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

/* ---------------------------------------------------------------- prepare (the shared statistic)
 * tg_prepare: local_scales' max over buckets of min(max|g_j|, cs) with cs the WHOLE
 * contribution's threshold = min(max|g|, cs) over the buffer: one statistics pass over the
 * buffer as one bucket (the moments the CPU computes for sigma, in its order), then one item
 * derives cs (p.clip_at, else clip_threshold of those moments, else none) and the statistic. */
struct PrepareBody {
    const Lane *parts; /* segment partials (FoldBody) */
    Geometry g; /* the buffer as one bucket */
    float clip, clip_at;
    float *res;
    __host__ __device__ bool operator()(size_t) const {
        const Moments m = bucket_moments(parts, g, 0);
        const float cs = clip_of(m, g.n, clip, clip_at);
        res[0] = m.maxabs < cs ? m.maxabs : cs;
        res[1] = cs;
        return m.bad != 0;
    }
};

size_t tg_prepare_work(size_t n) { return stats_bytes(geometry(n, 0)) + 256; }

cudaError_t tg_prepare(const float *in, size_t n, const CodecParams &p, void *work, float *res, uint32_t *bad,
                       cudaStream_t stream) {
    const Geometry g = geometry(n, 0);
    const Lane *parts = nullptr;
    cudaError_t e = launch_stats(in, g, work, stream, &parts);
    if (e == cudaSuccess) e = launch_for_each(1, PrepareBody{parts, g, p.clip, p.clip_at, res}, bad, stream);
    return e;
}

bool tg_prepare_host(const float *in, size_t n, const CodecParams &p, float res[2]) {
    const Geometry g = geometry(n, 0);
    std::vector<Lane> buf;
    return run_for_each_host(1, PrepareBody{run_stats_host(in, g, buf), g, p.clip, p.clip_at, res});
}

}  // namespace

extern const GpuCodec gpu_codec_terngrad = {
    CodecId::terngrad, false,   tg_supports, tg_encode,       tg_decode,      tg_encode_host, tg_decode_host,
    tg_work_bytes,     false,   nullptr,     nullptr,         tg_prepare,     tg_prepare_work, tg_prepare_host,
};

}  // namespace compmpi::cuda

// SPDX-License-Identifier: BSD-3-Clause
/* Device (and host-model) versions of the pieces the scaled stochastic codecs share with
 * their CPU kernels, with the CPU's exact arithmetic order:
 *   philox   kernels/common/philox.h: Philox-4x32-10, same keying, same element -> (counter,
 *            word) mapping and the same 24-bit draws (16 bits per element, 8 more on a
 *            tie), so a GPU rank draws the CPU rank's random numbers;
 *   moments  kernels/common/bucket_stats.h: per bucket, segments of kSeg elements from the
 *            bucket's first element; in a segment element j goes to double lane j % 16,
 *            summed sequentially; lanes folded by fold16's tree; segments accumulated in
 *            order. One work item = one (segment, lane) sequential sum; one item per bucket
 *            folds and accumulates -- the same additions in the same order as the CPU;
 *   fields   kernels/common/fields.h: b-bit two's complement fields, 8 per b bytes.
 * All arithmetic is IEEE round-to-nearest, never contracted (cuda_util.cuh). */
#pragma once
#include <cfloat>
#include <cmath>
#include <vector>

#include "common/cuda_util.cuh"

namespace compmpi::cuda::stoch {

/* ---------------------------------------------------------------- Philox-4x32-10 */
inline constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
inline constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;

struct Stream {
    uint32_t k0, k1, s0, s1;
};
inline Stream make_stream(uint64_t seed, uint64_t stream) {
    return Stream{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32), static_cast<uint32_t>(stream),
                  static_cast<uint32_t>(stream >> 32)};
}

__host__ __device__ inline uint32_t mulhi32(uint32_t a, uint32_t b) {
#ifdef __CUDA_ARCH__
    return __umulhi(a, b);
#else
    return static_cast<uint32_t>((static_cast<uint64_t>(a) * b) >> 32);
#endif
}

/* One Philox-4x32-10 block (philox::block). */
__host__ __device__ inline void block(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0, uint32_t k1,
                                      uint32_t out[4]) {
    for (int rd = 0; rd < 10; ++rd) {
        if (rd) {
            k0 += kW0;
            k1 += kW1;
        }
        const uint32_t hi0 = mulhi32(kM0, c0), lo0 = kM0 * c0, hi1 = mulhi32(kM1, c2), lo1 = kM1 * c2;
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

/* The random word of element i (philox::word). */
__host__ __device__ inline uint32_t word(const Stream &s, uint64_t i) {
    const uint64_t q = i >> 6, r = i & 63, c = 16 * q + (r & 15);
    uint32_t out[4];
    block(static_cast<uint32_t>(c), static_cast<uint32_t>(c >> 32), s.s0, s.s1, s.k0, s.k1, out);
    const uint32_t l = static_cast<uint32_t>(r >> 4);
    return l == 0 ? out[0] : l == 1 ? out[1] : l == 2 ? out[2] : out[3];
}

/* 24-bit Bernoulli draws (common/philox.h): [u24 < t], u24 = 256 a + b, a = 16 bits from half
 * a Philox word (draw16), b = 8 bits from a word of its own only on a tie (refine8). */
/* philox::draw16: element i = 128 P + 64 g + 16 l + m takes half g of word l of block 16 P + m */
__host__ __device__ inline uint32_t draw16(const Stream &s, uint64_t i) {
    const uint64_t q = i >> 6; /* word(64 (q / 2) + i % 64) is word l of block 16 (q / 2) + m */
    return (word(s, ((q >> 1) << 6) | (i & 63)) >> (16 * static_cast<uint32_t>(q & 1))) & 0xFFFFu;
}

/* philox::refine8: top 8 bits of word 0 of the block with counter 2^63 + i */
__host__ __device__ inline uint32_t refine8(const Stream &s, uint64_t i) {
    uint32_t out[4];
    block(static_cast<uint32_t>(i), static_cast<uint32_t>(i >> 32) | 0x80000000u, s.s0, s.s1, s.k0, s.k1, out);
    return out[0] >> 24;
}

/* philox::below(s, i, a, ceil24(t)), a = draw16(s, i): t >= 0; NaN and t >= 2^24 hit */
__host__ __device__ inline bool below24(const Stream &s, uint64_t i, float t, uint32_t a) {
    const float tc = t < 0x1p24f ? t : 0x1p24f;
#ifdef __CUDA_ARCH__
    const uint32_t C = static_cast<uint32_t>(ceilf(tc));
#else
    const uint32_t C = static_cast<uint32_t>(std::ceil(tc));
#endif
    const uint32_t A = C >> 8, R = C & 255u;
    return a < A || (a == A && R != 0 && refine8(s, i) < R);
}

/* ---------------------------------------------------------------- Philox tiles
 * One Philox block gives four words, and draw16 takes half a word: computed per element, a
 * block serves one element and 7/8 of the generator's work is thrown away. The encoders
 * therefore work in tiles of kTile elements: first the tile's Philox blocks are computed once
 * each into a word table (shared memory on the GPU), then the code items of the tile read
 * their draws from it. The words are philox::word(w0 + j) for j < tile_words, so the draws
 * are the CPU's; only who computes which block changes.
 *   draw16 tiles: elements [kTile t, kTile (t+1)) use words [kTile t / 2, +kTile / 2)
 *                 (element i: half (i >> 6) & 1 of word 64 (i >> 7) + i % 64);
 *   word tiles:   element i uses word i (terngrad's stochastic levels): [kTile t, +kTile).
 * kTile = 1280 elements: 320 base4 bytes, 256 base3 bytes, 160 groups of 8 fields. */
inline constexpr size_t kTile = 1280;
inline constexpr int kTileThreads = 160;
enum TileWords : int { kNoWords = 0, kDraw16Words = 1, kFullWords = 2 };

__host__ __device__ inline uint64_t tile_word0(int mode, size_t t) {
    return mode == kDraw16Words ? t * (kTile / 2) : t * kTile;
}
__host__ __device__ inline int tile_blocks(int mode) {
    return mode == kDraw16Words ? static_cast<int>(kTile / 8) : mode == kFullWords ? static_cast<int>(kTile / 4) : 0;
}
/* Block kb of the tile starting at word w0 (a multiple of 64): block 16 (w0 / 64 + kb / 16)
 * + kb % 16, whose word l is word(w0 + 64 (kb / 16) + 16 l + kb % 16). */
__host__ __device__ inline void tile_fill(const Stream &s, uint64_t w0, int kb, uint32_t *words) {
    const uint64_t c = 16 * ((w0 >> 6) + static_cast<uint64_t>(kb / 16)) + static_cast<uint64_t>(kb % 16);
    uint32_t out[4];
    block(static_cast<uint32_t>(c), static_cast<uint32_t>(c >> 32), s.s0, s.s1, s.k0, s.k1, out);
    uint32_t *w = words + 64 * (kb / 16) + kb % 16;
    w[0] = out[0];
    w[16] = out[1];
    w[32] = out[2];
    w[48] = out[3];
}
/* draw16(s, i) for element i of tile t, from its word table */
__host__ __device__ inline uint32_t tile_draw16(const uint32_t *words, size_t t, uint64_t i) {
    const uint64_t j = i - t * kTile; /* < kTile */
    return (words[64 * (j >> 7) + (j & 63)] >> (16 * static_cast<uint32_t>((j >> 6) & 1))) & 0xFFFFu;
}

/* Body: int mode (TileWords), Stream st, size_t items_per_tile, size_t items (all tiles),
 * bool code(size_t t, size_t item, const uint32_t *words) -> true raises the flag. */
template <class Body>
__global__ void __launch_bounds__(kTileThreads) tile_kernel(size_t tiles, Body body, uint32_t *flag) {
    __shared__ uint32_t words[kTile];
    bool bad = false;
    const int nblk = tile_blocks(body.mode);
    for (size_t t = blockIdx.x; t < tiles; t += gridDim.x) {
        const uint64_t w0 = tile_word0(body.mode, t);
        for (int kb = threadIdx.x; kb < nblk; kb += blockDim.x) tile_fill(body.st, w0, kb, words);
        __syncthreads();
        const size_t i0 = t * body.items_per_tile;
        const size_t i1 = i0 + body.items_per_tile < body.items ? i0 + body.items_per_tile : body.items;
        for (size_t it = i0 + threadIdx.x; it < i1; it += blockDim.x) bad |= body.code(t, it, words);
        __syncthreads();
    }
    if (flag && __any_sync(0xFFFFFFFFu, bad) && (threadIdx.x & 31) == 0) atomicOr(flag, 1u);
}

template <class Body>
cudaError_t launch_tiles(const Body &body, uint32_t *flag, cudaStream_t stream) {
    const size_t tiles = (body.items + body.items_per_tile - 1) / body.items_per_tile;
    if (tiles == 0) return cudaSuccess;
    const size_t grid = tiles < 132 * 12 * 8 ? tiles : 132 * 12 * 8; /* grid-stride past ~8 waves */
    tile_kernel<<<static_cast<unsigned>(grid), kTileThreads, 0, stream>>>(tiles, body, flag);
    return cudaGetLastError();
}

/* The host model: the same fills and code items, tile by tile. */
template <class Body>
bool run_tiles_host(const Body &body) {
    uint32_t words[kTile];
    bool bad = false;
    const size_t tiles = (body.items + body.items_per_tile - 1) / body.items_per_tile;
    for (size_t t = 0; t < tiles; ++t) {
        const uint64_t w0 = tile_word0(body.mode, t);
        for (int kb = 0; kb < tile_blocks(body.mode); ++kb) tile_fill(body.st, w0, kb, words);
        const size_t i0 = t * body.items_per_tile;
        const size_t i1 = i0 + body.items_per_tile < body.items ? i0 + body.items_per_tile : body.items;
        for (size_t it = i0; it < i1; ++it) bad |= body.code(t, it, words);
    }
    return bad;
}

/* ---------------------------------------------------------------- double helpers */
__host__ __device__ inline double dsub(double a, double b) {
#ifdef __CUDA_ARCH__
    return __dsub_rn(a, b);
#else
    return a - b;
#endif
}
__host__ __device__ inline double ddiv(double a, double b) {
#ifdef __CUDA_ARCH__
    return __ddiv_rn(a, b);
#else
    return a / b;
#endif
}
__host__ __device__ inline double dsqrt(double a) {
#ifdef __CUDA_ARCH__
    return __dsqrt_rn(a);
#else
    return std::sqrt(a);
#endif
}
__host__ __device__ inline float d2f(double d) {
#ifdef __CUDA_ARCH__
    return __double2float_rn(d);
#else
    return static_cast<float>(d);
#endif
}
__host__ __device__ inline float next_toward(float f, float to) {
#ifdef __CUDA_ARCH__
    return nextafterf(f, to);
#else
    return std::nextafter(f, to);
#endif
}
__host__ __device__ inline float ffloor(float f) {
#ifdef __CUDA_ARCH__
    return floorf(f);
#else
    return std::floor(f);
#endif
}
/* bstats::float_up: the smallest float >= d (d finite, >= 0); +Inf past FLT_MAX. */
__host__ __device__ inline float float_up(double d) {
    float f = d2f(d);
    if (static_cast<double>(f) < d) f = next_toward(f, INFINITY);
    return f;
}

/* ---------------------------------------------------------------- bucket moments */
inline constexpr size_t kSeg = 1 << 15; /* bstats::kSeg */
inline constexpr uint32_t kExpBits = 0x7F800000u;

/* bstats::bucket_count */
__host__ __device__ inline size_t bucket_count(size_t n, size_t B) {
    if (n == 0) return 0;
    return B == 0 || B >= n ? 1 : (n + B - 1) / B;
}

struct Lane {
    double s, q;
    float mx;
    uint32_t bad;
};

struct Geometry {
    size_t n, nb, B, spb; /* B: bucket length (n for one bucket); spb: segments per bucket */
};
inline Geometry geometry(size_t n, size_t param) {
    Geometry g;
    g.n = n;
    g.nb = bucket_count(n, param);
    g.B = g.nb <= 1 ? (n ? n : 1) : param;
    g.spb = (g.B + kSeg - 1) / kSeg;
    return g;
}
inline size_t lane_items(const Geometry &g) { return g.nb * g.spb * 16; }

/* Item (segment, lane): the lane's sequential sums over the segment, as seg_tail adds them. */
struct LaneBody {
    const float *x;
    Geometry g;
    Lane *lanes;
    __host__ __device__ bool operator()(size_t item) const {
        const size_t j = item / 16, lane = item % 16;
        const size_t b = j / g.spb, k = j % g.spb;
        const size_t lo = b * g.B + k * kSeg;
        size_t hi = (b + 1) * g.B;
        hi = hi < g.n ? hi : g.n;
        hi = hi < lo + kSeg ? hi : lo + kSeg;
        double s = 0, q = 0;
        float mx = 0;
        uint32_t bad = 0;
        auto add = [&](float v) {
            const uint32_t u = f2u(v);
            bad |= static_cast<uint32_t>((u & kExpBits) == kExpBits);
            const float a = u2f(u & 0x7FFFFFFFu);
            mx = a > mx ? a : mx;
            const double d = v;
            s = dadd(s, d);
            q = dadd(q, dmul(d, d));
        };
        /* 16 loads in flight, then their adds in order (a load per dependent add would wait
         * out the memory latency 2048 times per segment) */
        size_t i = lo + lane;
        for (; i + 15 * 16 < hi; i += 16 * 16) {
            float v[16];
            for (int k = 0; k < 16; ++k) v[k] = x[i + 16 * k];
            for (int k = 0; k < 16; ++k) add(v[k]);
        }
        for (; i < hi; i += 16) add(x[i]);
        lanes[item] = Lane{s, q, mx, bad};
        return false;
    }
};

/* bstats::fold16 */
__host__ __device__ inline double fold16(const double a[16]) {
    double t8[8], t4[4];
    for (int j = 0; j < 8; ++j) t8[j] = dadd(a[j], a[j + 8]);
    for (int j = 0; j < 4; ++j) t4[j] = dadd(t8[j], t8[j + 4]);
    return dadd(dadd(t4[0], t4[2]), dadd(t4[1], t4[3]));
}

/* Item = segment: its 16 lanes folded by fold16's tree (sums) and max/or (the rest) into
 * one Lane, so that a bucket's item adds one partial per segment (in order) instead of
 * folding every segment itself. */
struct FoldBody {
    const Lane *lanes;
    Lane *parts;
    __host__ __device__ bool operator()(size_t j) const {
        const Lane *L = lanes + 16 * j;
        double s[16], q[16];
        float mx = 0;
        uint32_t bad = 0;
        for (int l = 0; l < 16; ++l) {
            s[l] = L[l].s;
            q[l] = L[l].q;
            mx = L[l].mx > mx ? L[l].mx : mx;
            bad |= L[l].bad;
        }
        parts[j] = Lane{fold16(s), fold16(q), mx, bad};
        return false;
    }
};

struct Moments {
    double sum, sumsq;
    float maxabs;
    uint32_t bad;
};

/* Bucket b's moments from its segments' folded partials (FoldBody), accumulated in order
 * (bstats::accumulate onto a zeroed Moments). */
__host__ __device__ inline Moments bucket_moments(const Lane *parts, const Geometry &g, size_t b) {
    Moments m{0, 0, 0, 0};
    const size_t end = (b + 1) * g.B < g.n ? (b + 1) * g.B : g.n;
    size_t ns = 0; /* the bucket's segments */
    while (ns < g.spb && b * g.B + ns * kSeg < end) ++ns;
    const Lane *P = parts + b * g.spb;
    auto add = [&](const Lane &x) {
        m.sum = dadd(m.sum, x.s);
        m.sumsq = dadd(m.sumsq, x.q);
        m.maxabs = x.mx > m.maxabs ? x.mx : m.maxabs;
        m.bad |= x.bad;
    };
    size_t k = 0;
    for (; k + 8 <= ns; k += 8) { /* 8 loads in flight, then the adds in order */
        Lane x[8];
        for (int j = 0; j < 8; ++j) x[j] = P[k + j];
        for (int j = 0; j < 8; ++j) add(x[j]);
    }
    for (; k < ns; ++k) add(P[k]);
    return m;
}

/* The statistics pass of geometry g: lanes, then segment folds, in `work` (stats_bytes);
 * returns the partials bucket_moments reads. The host model: the same bodies. */
inline size_t stats_align(size_t x) { return (x + 255) & ~size_t{255}; }
inline size_t stats_bytes(const Geometry &g) {
    return stats_align(lane_items(g) * sizeof(Lane)) + stats_align(g.nb * g.spb * sizeof(Lane));
}
inline cudaError_t launch_stats(const float *x, const Geometry &g, void *work, cudaStream_t stream,
                                const Lane **parts) {
    Lane *lanes = static_cast<Lane *>(work);
    Lane *p = reinterpret_cast<Lane *>(static_cast<uint8_t *>(work) + stats_align(lane_items(g) * sizeof(Lane)));
    *parts = p;
    const cudaError_t e = launch_for_each(lane_items(g), LaneBody{x, g, lanes}, nullptr, stream);
    return e == cudaSuccess ? launch_for_each(g.nb * g.spb, FoldBody{lanes, p}, nullptr, stream) : e;
}
inline const Lane *run_stats_host(const float *x, const Geometry &g, std::vector<Lane> &buf) {
    buf.assign(lane_items(g) + g.nb * g.spb, Lane{0, 0, 0, 0});
    run_for_each_host(lane_items(g), LaneBody{x, g, buf.data()});
    run_for_each_host(g.nb * g.spb, FoldBody{buf.data(), buf.data() + lane_items(g)});
    return buf.data() + lane_items(g);
}

/* ---------------------------------------------------------------- fields */
__host__ __device__ inline size_t field_bytes(size_t n, int b) { return (n * static_cast<size_t>(b) + 7) / 8; }

/* Field group g (8 fields, the last may be short) of b-bit codes code(i) -> b bytes at
 * out + g*b (bytes(m, b) for a short group): fields::pack_scalar / pack_wide_scalar. */
template <class CodeFn>
__host__ __device__ inline void pack_group(size_t g, size_t n, int b, uint8_t *out, const CodeFn &code) {
    const size_t i0 = 8 * g, m = n - i0 < 8 ? n - i0 : 8;
    const uint32_t mask = (1u << b) - 1;
    uint64_t lo = 0, hi = 0; /* a 128-bit little-endian word */
    for (size_t j = 0; j < m; ++j) {
        const uint64_t v = static_cast<uint32_t>(code(i0 + j)) & mask;
        const unsigned bit = static_cast<unsigned>(b * j);
        if (bit < 64) {
            lo |= v << bit;
            if (bit + b > 64) hi |= v >> (64 - bit);
        } else {
            hi |= v << (bit - 64);
        }
    }
    uint8_t *o = out + i0 / 8 * b;
    const size_t nbytes = field_bytes(m, b);
    for (size_t t = 0; t < nbytes; ++t) o[t] = static_cast<uint8_t>(t < 8 ? lo >> (8 * t) : hi >> (8 * (t - 8)));
}

/* fields::field */
__host__ __device__ inline int32_t field(const uint8_t *codes, size_t avail, int b, size_t i) {
    const size_t bit = i * static_cast<size_t>(b), byte = bit >> 3;
    uint64_t w = 0;
    for (size_t t = 0; byte + t < avail && t < 8; ++t) w |= static_cast<uint64_t>(codes[byte + t]) << (8 * t);
    const uint32_t f = static_cast<uint32_t>(w >> (bit & 7)) & ((1u << b) - 1);
    return static_cast<int32_t>(f << (32 - b)) >> (32 - b);
}

/* out[i] (+)= field_i * step[i / B]: fields::decode (unpack_scalar), one element per item. */
struct FieldDecode {
    const uint8_t *codes;
    size_t avail;
    int b;
    const float *step; /* per bucket */
    size_t B;
    float *out;
    bool add;
    __host__ __device__ bool operator()(size_t i) const {
        const float v = fmul(static_cast<float>(field(codes, avail, b, i)), step[i / B]);
        out[i] = add ? fadd(out[i], v) : v;
        return false;
    }
};

}  // namespace compmpi::cuda::stoch

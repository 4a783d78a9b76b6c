// SPDX-License-Identifier: BSD-3-Clause
/* sparse CUDA kernels: the payload of kernels/sparse/cpu/sparse.cc (index list, bitmap or
 * dense, whichever is smallest; ties keep the earlier of dense, index, bitmap), byte for byte.
 *
 * Encode (variable length: the length comes back in words[0..1]):
 *   1. count   one item per tile of kTile elements: nonzero bit patterns (-0.0 counts);
 *   2. scan    exclusive prefix sum of the tile counts (CUB DeviceScan on the GPU, a plain
 *              loop in the host model): each tile's first output position;
 *   3. form    one item: k, the form by the CPU's size rule, the 8-byte head, the length;
 *   4. scatter one item per tile: dense copies; index writes (i, value) pairs at its
 *              positions; bitmap writes its 8 bitmap bytes and its values.
 * Decode: the CPU decoder's checks run on the host copy of the payload (index order, bitmap
 * popcount, bits past n), then: dense, one item per element; index, zero (decode only) then
 * one item per entry (indices strictly increasing: no two items touch one float); bitmap,
 * tile counts from the bitmap, scan, one item per tile writing every element of its tile.
 * GPU-only: the CUB scan (the host model runs the same bodies around a sequential scan). */
#include <cub/device/device_scan.cuh>
#include <vector>

#include "common/cuda_util.cuh"
#include "common/gpu_codec.cuh"

namespace compmpi::cuda {
namespace {

enum : uint8_t { kIndex = 0, kBitmap = 1, kDense = 2 };
constexpr size_t kTile = 64; /* elements per item: 8 bitmap bytes */

__host__ __device__ inline size_t tiles(size_t n) { return (n + kTile - 1) / kTile; }

__host__ __device__ inline size_t body_size(uint8_t form, size_t n, size_t k) {
    return form == kIndex ? 4 + 8 * k : form == kBitmap ? 4 + (n + 7) / 8 + 4 * k : 4 * n;
}

/* byte-wise little-endian u32 (bitmap values sit at any byte offset) */
__host__ __device__ inline void put_u32(uint8_t *p, uint32_t v) {
    for (int t = 0; t < 4; ++t) p[t] = static_cast<uint8_t>(v >> (8 * t));
}
__host__ __device__ inline uint32_t get_u32(const uint8_t *p) {
    return p[0] | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
           static_cast<uint32_t>(p[3]) << 24;
}

struct CountBody {
    const float *in;
    size_t n;
    uint32_t *counts;
    __host__ __device__ bool operator()(size_t t) const {
        const size_t lo = t * kTile, hi = lo + kTile < n ? lo + kTile : n;
        uint32_t c = 0;
        for (size_t i = lo; i < hi; ++i) c += f2u(in[i]) != 0;
        counts[t] = c;
        return false;
    }
};

struct FormBody {
    size_t n;
    const uint32_t *counts, *offsets;
    uint8_t *out;
    uint32_t *words; /* [0..1] length, [2] form */
    __host__ __device__ bool operator()(size_t) const {
        const size_t nt = tiles(n);
        const size_t k = nt ? static_cast<size_t>(offsets[nt - 1]) + counts[nt - 1] : 0;
        uint8_t form = kDense;
        if (body_size(kIndex, n, k) < body_size(form, n, k)) form = kIndex;
        if (body_size(kBitmap, n, k) < body_size(form, n, k)) form = kBitmap;
        out[0] = form;
        out[1] = out[2] = out[3] = 0;
        if (form != kDense) put_u32(out + 4, static_cast<uint32_t>(k));
        const uint64_t len = 4 + body_size(form, n, k);
        words[0] = static_cast<uint32_t>(len);
        words[1] = static_cast<uint32_t>(len >> 32);
        words[2] = form;
        return false;
    }
};

struct ScatterBody {
    const float *in;
    size_t n;
    const uint32_t *offsets;
    const uint32_t *words;
    uint8_t *out;
    __host__ __device__ bool operator()(size_t t) const {
        const size_t lo = t * kTile, hi = lo + kTile < n ? lo + kTile : n;
        const uint8_t form = static_cast<uint8_t>(words[2]);
        if (form == kDense) {
            for (size_t i = lo; i < hi; ++i) put_u32(out + 4 + 4 * i, f2u(in[i]));
            return false;
        }
        size_t pos = offsets[t];
        if (form == kIndex) {
            for (size_t i = lo; i < hi; ++i) {
                const uint32_t u = f2u(in[i]);
                if (!u) continue;
                put_u32(out + 8 + 8 * pos, static_cast<uint32_t>(i));
                put_u32(out + 12 + 8 * pos, u);
                ++pos;
            }
            return false;
        }
        const size_t nbm = (n + 7) / 8;
        uint8_t *bm = out + 8, *vals = bm + nbm;
        for (size_t byte = lo / 8; byte * 8 < hi; ++byte) {
            uint32_t m = 0;
            for (size_t i = byte * 8; i < byte * 8 + 8 && i < hi; ++i) {
                const uint32_t u = f2u(in[i]);
                if (!u) continue;
                m |= 1u << (i % 8);
                put_u32(vals + 4 * pos, u);
                ++pos;
            }
            bm[byte] = static_cast<uint8_t>(m);
        }
        return false;
    }
};

size_t align256(size_t x) { return (x + 255) & ~size_t{255}; }

size_t scan_temp_bytes(size_t nt) {
    size_t bytes = 0;
    cub::DeviceScan::ExclusiveSum(nullptr, bytes, static_cast<const uint32_t *>(nullptr),
                                  static_cast<uint32_t *>(nullptr), static_cast<int>(nt ? nt : 1));
    return bytes;
}

/* work: counts | offsets | CUB temp */
size_t sp_work_bytes(size_t n, const CodecParams &) {
    const size_t nt = tiles(n);
    return 2 * align256(4 * (nt ? nt : 1)) + align256(scan_temp_bytes(nt)) + 256;
}

cudaError_t scan(const uint32_t *counts, uint32_t *offsets, size_t nt, void *temp, size_t temp_bytes,
                 cudaStream_t s) {
    if (nt == 0) return cudaSuccess;
    return cub::DeviceScan::ExclusiveSum(temp, temp_bytes, counts, offsets, static_cast<int>(nt), s);
}

void scan_host(const uint32_t *counts, uint32_t *offsets, size_t nt) {
    uint32_t acc = 0;
    for (size_t t = 0; t < nt; ++t) {
        offsets[t] = acc;
        acc += counts[t];
    }
}

bool sp_supports(const CodecParams &p) { return p.bits == 0 && p.variant == 0 && p.param == 0; }

cudaError_t sp_encode(const GpuEncodeArgs &a) {
    if (a.n > 0xFFFFFFFFu) return cudaErrorNotSupported; /* the CPU's limit too */
    const size_t nt = tiles(a.n), cb = align256(4 * (nt ? nt : 1));
    uint32_t *counts = static_cast<uint32_t *>(a.work);
    uint32_t *offsets = reinterpret_cast<uint32_t *>(static_cast<uint8_t *>(a.work) + cb);
    void *temp = static_cast<uint8_t *>(a.work) + 2 * cb;
    cudaError_t e = launch_for_each(nt, CountBody{a.in, a.n, counts}, nullptr, a.stream);
    if (e == cudaSuccess) e = scan(counts, offsets, nt, temp, align256(scan_temp_bytes(nt)), a.stream);
    if (e == cudaSuccess) e = launch_for_each(1, FormBody{a.n, counts, offsets, a.out, a.words}, nullptr, a.stream);
    if (e == cudaSuccess) e = launch_for_each(nt, ScatterBody{a.in, a.n, offsets, a.words, a.out}, nullptr, a.stream);
    return e;
}

bool sp_encode_host_var(const CodecOps &, const float *in, size_t n, const CodecParams &, uint8_t *out, size_t *len) {
    const size_t nt = tiles(n);
    std::vector<uint32_t> counts(nt), offsets(nt);
    uint32_t words[3] = {0, 0, 0};
    run_for_each_host(nt, CountBody{in, n, counts.data()});
    scan_host(counts.data(), offsets.data(), nt);
    run_for_each_host(1, FormBody{n, counts.data(), offsets.data(), out, words});
    run_for_each_host(nt, ScatterBody{in, n, offsets.data(), words, out});
    *len = words[0] | static_cast<size_t>(words[1]) << 32;
    return false;
}

bool sp_encode_host(const CodecOps &c, const float *in, size_t n, const CodecParams &p, uint8_t *out) {
    size_t len;
    return sp_encode_host_var(c, in, n, p, out, &len);
}

/* ---------------------------------------------------------------- decode */
/* sp_visit's checks (host copy of the payload); *form and *k on success */
Status validate(const uint8_t *p, size_t len, size_t n, uint8_t *form, size_t *k) {
    if (len < 4 || p[1] | p[2] | p[3]) return Status::corrupt;
    *form = p[0];
    const uint8_t *b = p + 4;
    const size_t blen = len - 4;
    if (*form == kDense) return blen == 4 * n ? Status::ok : Status::corrupt;
    if (blen < 4) return Status::corrupt;
    const uint32_t k32 = get_u32(b);
    *k = k32;
    if (k32 > n || blen != body_size(*form, n, k32)) return Status::corrupt;
    if (*form == kIndex) {
        uint64_t prev = 0;
        for (uint32_t e = 0; e < k32; ++e) {
            const uint32_t i = get_u32(b + 4 + 8 * e);
            if (i >= n || (e && i <= prev)) return Status::corrupt;
            prev = i;
        }
        return Status::ok;
    }
    if (*form != kBitmap) return Status::corrupt;
    const uint8_t *bm = b + 4;
    size_t pop = 0;
    for (size_t j = 0; j < (n + 7) / 8; ++j) pop += static_cast<size_t>(__builtin_popcount(bm[j]));
    if (n % 8 && (bm[(n - 1) / 8] >> (n % 8))) return Status::corrupt;
    return pop == k32 ? Status::ok : Status::corrupt;
}

struct IndexDecode {
    const uint8_t *pairs;
    float *out;
    bool add;
    __host__ __device__ bool operator()(size_t e) const {
        const uint32_t i = get_u32(pairs + 8 * e);
        const float v = u2f(get_u32(pairs + 8 * e + 4));
        out[i] = add ? fadd(out[i], v) : v;
        return false;
    }
};

struct BitmapCount {
    const uint8_t *bm;
    size_t nbm;
    uint32_t *counts;
    __host__ __device__ bool operator()(size_t t) const {
        uint32_t c = 0;
        for (size_t j = 8 * t; j < 8 * t + 8 && j < nbm; ++j) {
            uint32_t b = bm[j];
            for (; b; b &= b - 1) ++c;
        }
        counts[t] = c;
        return false;
    }
};

struct BitmapDecode {
    const uint8_t *bm, *vals;
    size_t n;
    const uint32_t *offsets;
    float *out;
    bool add;
    __host__ __device__ bool operator()(size_t t) const {
        size_t pos = offsets[t];
        const size_t lo = t * kTile, hi = lo + kTile < n ? lo + kTile : n;
        for (size_t i = lo; i < hi; ++i) {
            if (bm[i / 8] >> (i % 8) & 1) {
                const float v = u2f(get_u32(vals + 4 * pos++));
                out[i] = add ? fadd(out[i], v) : v;
            } else if (!add) {
                out[i] = 0.0f;
            }
        }
        return false;
    }
};

size_t sp_decode_work_bytes(size_t n, const CodecParams &p) { return sp_work_bytes(n, p); }

cudaError_t sp_decode(const GpuDecodeArgs &a, bool *corrupt) {
    uint8_t form;
    size_t k = 0;
    if (validate(a.host_in, a.len, a.n, &form, &k) != Status::ok) {
        *corrupt = true;
        return cudaSuccess;
    }
    if (form == kDense) return launch_for_each(a.n, DenseDecodeBody{a.in + 4, a.out, a.add}, nullptr, a.stream);
    if (form == kIndex) {
        cudaError_t e = a.add ? cudaSuccess : launch_for_each(a.n, ZeroBody{a.out}, nullptr, a.stream);
        if (e == cudaSuccess) e = launch_for_each(k, IndexDecode{a.in + 8, a.out, a.add}, nullptr, a.stream);
        return e;
    }
    const size_t nt = tiles(a.n), cb = align256(4 * (nt ? nt : 1)), nbm = (a.n + 7) / 8;
    uint32_t *counts = static_cast<uint32_t *>(a.work);
    uint32_t *offsets = reinterpret_cast<uint32_t *>(static_cast<uint8_t *>(a.work) + cb);
    void *temp = static_cast<uint8_t *>(a.work) + 2 * cb;
    cudaError_t e = launch_for_each(nt, BitmapCount{a.in + 8, nbm, counts}, nullptr, a.stream);
    if (e == cudaSuccess) e = scan(counts, offsets, nt, temp, align256(scan_temp_bytes(nt)), a.stream);
    if (e == cudaSuccess)
        e = launch_for_each(nt, BitmapDecode{a.in + 8, a.in + 8 + nbm, a.n, offsets, a.out, a.add}, nullptr, a.stream);
    return e;
}

Status sp_decode_host(const CodecOps &, const uint8_t *in, size_t len, size_t n, const CodecParams &, float *out,
                      bool add) {
    uint8_t form;
    size_t k = 0;
    const Status s = validate(in, len, n, &form, &k);
    if (s != Status::ok) return s;
    if (form == kDense) {
        run_for_each_host(n, DenseDecodeBody{in + 4, out, add});
    } else if (form == kIndex) {
        if (!add) run_for_each_host(n, ZeroBody{out});
        run_for_each_host(k, IndexDecode{in + 8, out, add});
    } else {
        const size_t nt = tiles(n), nbm = (n + 7) / 8;
        std::vector<uint32_t> counts(nt), offsets(nt);
        run_for_each_host(nt, BitmapCount{in + 8, nbm, counts.data()});
        scan_host(counts.data(), offsets.data(), nt);
        run_for_each_host(nt, BitmapDecode{in + 8, in + 8 + nbm, n, offsets.data(), out, add});
    }
    return Status::ok;
}

}  // namespace

extern const GpuCodec gpu_codec_sparse = {
    CodecId::sparse,    false, sp_supports, sp_encode, sp_decode, sp_encode_host, sp_decode_host, sp_work_bytes,
    true,               sp_encode_host_var,
    sp_decode_work_bytes,
};

}  // namespace compmpi::cuda

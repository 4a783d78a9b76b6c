// SPDX-License-Identifier: BSD-3-Clause
/* topk CUDA kernels: the payload of kernels/topk/topk.h (16-byte header, then an index list,
 * a bitmap plus packed values, or dense values), byte for byte, with the CPU's selection
 * (kernels/topk/select.h): the k = keep_count(n, theta) largest |x| bit patterns, ties to
 * the smaller index.
 *
 * Encode (k and the form are known on the host: keep_count and choose_form are inline):
 *   1. hist1   level-1 histogram of key >> 20 over every value (key = |x| bits; NaN/Inf fill
 *              buckets >= 0x7F8); on the GPU per-block shared-memory counts, then one
 *              64-bit atomicAdd per bucket: integer sums, the CPU's counts in any order;
 *   2. find1   one warp: the bucket holding the k-th largest key, as select.h's
 *              find_bucket scans it (lane sums over 64 buckets each, lane 0 walks the
 *              lanes from the top, then the chosen lane's buckets) -- and the NaN/Inf count;
 *   3. hist2 / find2, hist3 / find3: bits 19..9 among keys of bucket b1, bits 8..0 among
 *              keys of (b1, b2); T = (b1 << 20) | (b2 << 9) | b3 and `ties`, the number of
 *              keys == T to keep (the lowest positions first: select.h's per-segment take[]
 *              hands ties out in position order, so they are the first `ties` in the buffer);
 *   4. count   one item per 64-value word: (#key > T) << 32 | #key == T;
 *   5. scan    exclusive prefix sum of the word counts (CUB on the GPU, a loop in the host
 *              model): before word w, G values above T and E ties; the word keeps its
 *              min(eq, ties - min(E, ties)) lowest ties and its values start at
 *              G + min(E, ties);
 *   6. write   one item per word: its bitmap word and values, or its list entries, or its
 *              dense values; one item writes the header.
 * A buffer with NaN/Inf raises the flag after step 2 and writes nothing more (the payload is
 * then unspecified, as on the CPU). n >= 2^32 is refused (cudaErrorNotSupported: the
 * backend abandons the blob and the collective runs exactly); so are the word counts' 32-bit
 * halves.
 * Decode: the CPU decoder's checks on the host copy (form, reserved bytes, k, length,
 * bitmap popcount and bits past n, index order, finite values), then dense one item per
 * value; list zero (decode only) then one item per entry; bitmap per-word popcounts, scan,
 * one item per word.
 * GPU-only: the shared-memory histogram and its atomics, the warp's lane sums, the CUB scan;
 * the host model runs the same key, find, count and write bodies around plain loops. */
#include <cub/device/device_scan.cuh>
#include <vector>

#include "common/cuda_util.cuh"
#include "common/gpu_codec.cuh"
#include "topk/select.h"
#include "topk/topk.h"

namespace compmpi::cuda {
namespace {

using ull = unsigned long long;

/* buckets per level (select.h: 11 + 11 + 9 bits) */
__host__ __device__ constexpr uint32_t nb_of(int level) { return level == 2 ? 512u : 2048u; }
constexpr int kLanes = 32;

struct SelState {
    ull h[3][2048];  /* level histograms (level 3 uses 512) */
    ull need[4];     /* need[0] = k; need[L] = rank left inside level L's bucket; need[3] = ties */
    uint32_t b[3];   /* the levels' buckets */
    uint32_t T;      /* the threshold key */
    uint32_t nonfinite;
    uint32_t pad[3];
};

__host__ __device__ inline uint32_t key_of(const float *in, size_t i) { return f2u(in[i]) & 0x7FFFFFFFu; }

/* bucket of value i at level L (0-based), or -1 if it is not a candidate there */
struct LevelKey {
    const float *in;
    const SelState *s;
    int level;
    __host__ __device__ int operator()(size_t i) const {
        const uint32_t k = key_of(in, i);
        if (level == 0) return static_cast<int>(k >> 20);
        if ((k >> 20) != s->b[0]) return -1;
        if (level == 1) return static_cast<int>((k >> 9) & 2047u);
        if (((k >> 9) & 2047u) != s->b[1]) return -1;
        return static_cast<int>(k & 511u);
    }
};

__global__ void __launch_bounds__(kThreads) hist_kernel(size_t n, LevelKey key, ull *h, uint32_t nb) {
    __shared__ uint32_t sh[2048];
    for (uint32_t t = threadIdx.x; t < nb; t += blockDim.x) sh[t] = 0;
    __syncthreads();
    if (key.level == 0 || !key.s->nonfinite) {
        const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
        for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
            const int b = key(i);
            if (b >= 0) atomicAdd(&sh[b], 1u);
        }
    }
    __syncthreads();
    for (uint32_t t = threadIdx.x; t < nb; t += blockDim.x)
        if (sh[t]) atomicAdd(&h[t], static_cast<ull>(sh[t]));
}

void hist_host(size_t n, const LevelKey &key, ull *h) {
    if (key.level > 0 && key.s->nonfinite) return;
    for (size_t i = 0; i < n; ++i) {
        const int b = key(i);
        if (b >= 0) ++h[b];
    }
}

/* select.h's find_bucket over level L's histogram, from lane sums (lane j: buckets
 * [j * per, (j + 1) * per)): the lane holding the need-th largest key from the top, then
 * its bucket. Level 0 also counts NaN/Inf (buckets >= 0x7F8) and stops there; level 2 sets T. */
__host__ __device__ inline void pick(SelState *s, int level, const ull *lane_sum, uint32_t *bad) {
    const ull *h = s->h[level];
    const uint32_t nb = nb_of(level), per = nb / kLanes;
    if (level == 0) {
        ull nf = 0;
        for (uint32_t j = 0x7F800000u >> 20; j < nb; ++j) nf += h[j];
        if (nf) {
            s->nonfinite = 1;
            if (bad) *bad = 1;
            return;
        }
    } else if (s->nonfinite) {
        return;
    }
    ull need = s->need[level];
    uint32_t bucket = 0;
    for (int lane = kLanes; lane-- > 0;) {
        if (lane_sum[lane] < need) {
            need -= lane_sum[lane];
            continue;
        }
        for (uint32_t b = (lane + 1) * per; b-- > lane * per;) {
            if (h[b] >= need) {
                bucket = b;
                break;
            }
            need -= h[b];
        }
        break;
    }
    s->b[level] = bucket;
    s->need[level + 1] = need;
    if (level == 2) s->T = (s->b[0] << 20) | (s->b[1] << 9) | s->b[2];
}

__host__ __device__ inline ull lane_sum_of(const SelState *s, int level, int lane) {
    const uint32_t per = nb_of(level) / kLanes;
    ull sum = 0;
    for (uint32_t b = lane * per; b < (lane + 1) * per; ++b) sum += s->h[level][b];
    return sum;
}

__global__ void find_kernel(SelState *s, int level, uint32_t *bad) {
    __shared__ ull ls[kLanes];
    const int lane = static_cast<int>(threadIdx.x);
    ls[lane] = lane_sum_of(s, level, lane);
    __syncwarp();
    if (lane == 0) pick(s, level, ls, bad);
}

void find_host(SelState *s, int level, uint32_t *bad) {
    ull ls[kLanes];
    for (int lane = 0; lane < kLanes; ++lane) ls[lane] = lane_sum_of(s, level, lane);
    pick(s, level, ls, bad);
}

/* the gt / eq masks of word w against T (cnt <= 64 values) */
__host__ __device__ inline void masks(const float *in, size_t n, size_t w, uint32_t T, uint64_t *gt, uint64_t *eq) {
    const size_t base = 64 * w, cnt = n - base < 64 ? n - base : 64;
    uint64_t g = 0, e = 0;
    if (cnt == 64 && aligned(in + base, 16)) {
        for (size_t j = 0; j < 64; j += 4) {
            const float4 v = load_vec<float4>(in + base + j);
            const float f[4] = {v.x, v.y, v.z, v.w};
            for (int t = 0; t < 4; ++t) {
                const uint32_t a = f2u(f[t]) & 0x7FFFFFFFu;
                g |= static_cast<uint64_t>(a > T) << (j + t);
                e |= static_cast<uint64_t>(a == T) << (j + t);
            }
        }
    } else {
        for (size_t j = 0; j < cnt; ++j) {
            const uint32_t a = key_of(in, base + j);
            g |= static_cast<uint64_t>(a > T) << j;
            e |= static_cast<uint64_t>(a == T) << j;
        }
    }
    *gt = g;
    *eq = e;
}

__host__ __device__ inline uint32_t popc64(uint64_t v) {
#ifdef __CUDA_ARCH__
    return static_cast<uint32_t>(__popcll(v));
#else
    return static_cast<uint32_t>(__builtin_popcountll(v));
#endif
}

struct CountBody {
    const float *in;
    size_t n;
    const SelState *s;
    ull *cnt;
    __host__ __device__ bool operator()(size_t w) const {
        if (s->nonfinite) return false;
        uint64_t gt, eq;
        masks(in, n, w, s->T, &gt, &eq);
        cnt[w] = static_cast<ull>(popc64(gt)) << 32 | popc64(eq);
        return false;
    }
};

struct InitBody {
    SelState *s;
    uint64_t k;
    __host__ __device__ bool operator()(size_t) const {
        s->need[0] = k;
        return false;
    }
};

struct HeaderBody {
    uint8_t *out;
    uint8_t form;
    uint64_t k;
    __host__ __device__ bool operator()(size_t) const {
        out[0] = form;
        for (int t = 1; t < 8; ++t) out[t] = 0;
        for (int t = 0; t < 8; ++t) out[8 + t] = static_cast<uint8_t>(k >> (8 * t));
        return false;
    }
};

/* One item per word. vals: the bitmap form's values, the list's values (its indices at
 * body), the dense values. Positions past k are never written (a guard only: they cannot
 * arise once the selection has run on finite data). */
struct WriteBody {
    const float *in;
    size_t n;
    uint64_t k;
    uint8_t form;
    const SelState *s;
    const ull *pre; /* exclusive prefix sums of the counts; nullptr when k == 0 */
    uint8_t *body, *vals;
    __host__ __device__ bool operator()(size_t w) const {
        const size_t base = 64 * w, cnt = n - base < 64 ? n - base : 64;
        if (s->nonfinite) return false;
        uint64_t word = 0;
        size_t pos = 0;
        if (k) {
            uint64_t gt, eq;
            masks(in, n, w, s->T, &gt, &eq);
            const ull ties = s->need[3], E = pre[w] & 0xFFFFFFFFull, G = pre[w] >> 32;
            const ull before = E < ties ? E : ties;
            ull take = ties - before;
            word = gt;
            for (; take && eq; --take) { /* the word's lowest ties */
                const uint64_t low = eq & (~eq + 1);
                word |= low;
                eq ^= low;
            }
            pos = static_cast<size_t>(G + before);
        }
        if (form == topk::kBitmap) store_vec<uint64_t>(body + 8 * w, word);
        if (form == topk::kDense) {
            for (size_t j = 0; j < cnt; ++j)
                store_vec<uint32_t>(vals + 4 * (base + j), (word >> j) & 1 ? f2u(in[base + j]) : 0u);
            return false;
        }
        for (uint64_t m = word; m && pos < k; m &= m - 1, ++pos) {
            const uint32_t j = popc64((m & (~m + 1)) - 1); /* index of the lowest set bit */
            store_vec<uint32_t>(vals + 4 * pos, f2u(in[base + j]));
            if (form == topk::kList) store_vec<uint32_t>(body + 4 * pos, static_cast<uint32_t>(base + j));
        }
        return false;
    }
};

size_t align256(size_t x) { return (x + 255) & ~size_t{255}; }
size_t words_of(size_t n) { return (n + 63) / 64; }

template <class T>
size_t scan_temp_bytes(size_t items) {
    size_t bytes = 0;
    cub::DeviceScan::ExclusiveSum(nullptr, bytes, static_cast<const T *>(nullptr), static_cast<T *>(nullptr),
                                  static_cast<int>(items ? items : 1));
    return bytes;
}

template <class T>
void scan_host(const T *in, T *out, size_t items) {
    T acc = 0;
    for (size_t i = 0; i < items; ++i) {
        out[i] = acc;
        acc += in[i];
    }
}

/* encode work: SelState | cnt[nw] | pre[nw] | CUB temp */
size_t tk_work_bytes(size_t n, const CodecParams &) {
    const size_t nw = words_of(n);
    return align256(sizeof(SelState)) + 2 * align256(8 * (nw ? nw : 1)) + align256(scan_temp_bytes<ull>(nw)) + 256;
}

bool tk_supports(const CodecParams &p) {
    return p.bits == 0 && p.variant == 0 && p.param == 0 && p.theta >= 0.0f && p.theta < 1.0f;
}

struct Plan {
    uint64_t k;
    uint8_t form;
    size_t nw, vals_off; /* values' offset from the body */
};
Plan plan_of(size_t n, const CodecParams &p) {
    Plan q;
    q.k = sparse::keep_count(n, p.theta);
    q.form = topk::choose_form(n, q.k);
    q.nw = words_of(n);
    q.vals_off = q.form == topk::kBitmap ? 8 * q.nw : q.form == topk::kList ? 4 * q.k : 0;
    return q;
}

cudaError_t tk_encode(const GpuEncodeArgs &a) {
    if (a.n > 0xFFFFFFFFull) return cudaErrorNotSupported; /* the word counts' 32-bit halves */
    const Plan q = plan_of(a.n, *a.p);
    uint8_t *w8 = static_cast<uint8_t *>(a.work);
    SelState *s = reinterpret_cast<SelState *>(w8);
    ull *cnt = reinterpret_cast<ull *>(w8 + align256(sizeof(SelState)));
    ull *pre = reinterpret_cast<ull *>(w8 + align256(sizeof(SelState)) + align256(8 * (q.nw ? q.nw : 1)));
    void *temp = w8 + align256(sizeof(SelState)) + 2 * align256(8 * (q.nw ? q.nw : 1));
    size_t temp_bytes = align256(scan_temp_bytes<ull>(q.nw)); /* CUB takes it by reference */
    cudaError_t e = cudaMemsetAsync(s, 0, sizeof(SelState), a.stream);
    if (e == cudaSuccess) e = launch_for_each(1, InitBody{s, q.k}, nullptr, a.stream);
    for (int level = 0; level < 3 && e == cudaSuccess && a.n; ++level) {
        hist_kernel<<<grid_for(a.n), kThreads, 0, a.stream>>>(a.n, LevelKey{a.in, s, level}, s->h[level], nb_of(level));
        e = cudaGetLastError();
        if (e == cudaSuccess) {
            find_kernel<<<1, kLanes, 0, a.stream>>>(s, level, a.bad);
            e = cudaGetLastError();
        }
        if (q.k == 0) break; /* nothing to select: the level-1 pass only looks for NaN/Inf */
    }
    if (e == cudaSuccess) e = launch_for_each(1, HeaderBody{a.out, q.form, q.k}, nullptr, a.stream);
    if (q.k && e == cudaSuccess) e = launch_for_each(q.nw, CountBody{a.in, a.n, s, cnt}, nullptr, a.stream);
    if (q.k && e == cudaSuccess && q.nw)
        e = cub::DeviceScan::ExclusiveSum(temp, temp_bytes, cnt, pre, static_cast<int>(q.nw), a.stream);
    uint8_t *body = a.out + topk::kHeaderBytes;
    if (e == cudaSuccess && (q.k || q.form != topk::kList))
        e = launch_for_each(q.nw, WriteBody{a.in, a.n, q.k, q.form, s, q.k ? pre : nullptr, body, body + q.vals_off},
                            nullptr, a.stream);
    return e;
}

bool tk_encode_host(const CodecOps &, const float *in, size_t n, const CodecParams &p, uint8_t *out) {
    const Plan q = plan_of(n, p);
    std::vector<SelState> st(1);
    SelState *s = st.data();
    *s = SelState{};
    run_for_each_host(1, InitBody{s, q.k});
    uint32_t bad = 0;
    for (int level = 0; level < 3 && n; ++level) {
        hist_host(n, LevelKey{in, s, level}, s->h[level]);
        find_host(s, level, &bad);
        if (q.k == 0) break;
    }
    run_for_each_host(1, HeaderBody{out, q.form, q.k});
    std::vector<ull> cnt(q.nw), pre(q.nw);
    if (q.k) {
        run_for_each_host(q.nw, CountBody{in, n, s, cnt.data()});
        scan_host(cnt.data(), pre.data(), q.nw);
    }
    uint8_t *body = out + topk::kHeaderBytes;
    if (q.k || q.form != topk::kList)
        run_for_each_host(q.nw, WriteBody{in, n, q.k, q.form, s, q.k ? pre.data() : nullptr, body, body + q.vals_off});
    return bad != 0;
}

/* ---------------------------------------------------------------- decode */
uint64_t get64(const uint8_t *p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
}
uint32_t get32(const uint8_t *p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}
bool finite_words(const uint8_t *p, size_t cnt) {
    uint32_t b = 0;
    for (size_t i = 0; i < cnt; ++i) b |= static_cast<uint32_t>((get32(p + 4 * i) & 0x7F800000u) == 0x7F800000u);
    return b == 0;
}

/* topk::decode's checks on the host copy, before anything is written */
Status validate(const uint8_t *in, size_t len, size_t n, uint8_t *form, uint64_t *k) {
    if (len < topk::kHeaderBytes) return Status::corrupt;
    *form = in[0];
    for (int i = 1; i < 8; ++i)
        if (in[i]) return Status::corrupt;
    *k = get64(in + 8);
    if (*k > n || *form > topk::kDense || *form != topk::choose_form(n, *k) || len != topk::payload_bytes(n, *k))
        return Status::corrupt;
    const uint8_t *body = in + topk::kHeaderBytes;
    const size_t nw = words_of(n);
    if (*form == topk::kDense) return finite_words(body, n) ? Status::ok : Status::corrupt;
    if (*form == topk::kList) {
        for (uint64_t i = 0; i < *k; ++i) {
            const uint32_t ix = get32(body + 4 * i);
            if (ix >= n || (i && ix <= get32(body + 4 * (i - 1)))) return Status::corrupt;
        }
        return finite_words(body + 4 * *k, *k) ? Status::ok : Status::corrupt;
    }
    uint64_t pop = 0;
    for (size_t w = 0; w < nw; ++w) pop += static_cast<uint64_t>(__builtin_popcountll(get64(body + 8 * w)));
    if (n % 64 && (get64(body + 8 * (nw - 1)) >> (n % 64))) return Status::corrupt;
    if (pop != *k) return Status::corrupt;
    return finite_words(body + 8 * nw, *k) ? Status::ok : Status::corrupt;
}

struct ListDecode {
    const uint8_t *idx, *vals;
    float *out;
    bool add;
    __host__ __device__ bool operator()(size_t e) const { /* indices strictly increase: no two items share a float */
        const uint32_t i = load_vec<uint32_t>(idx + 4 * e);
        const float v = u2f(load_vec<uint32_t>(vals + 4 * e));
        out[i] = add ? fadd(out[i], v) : v;
        return false;
    }
};

struct WordCount {
    const uint8_t *bm;
    uint32_t *cnt;
    __host__ __device__ bool operator()(size_t w) const {
        cnt[w] = popc64(load_vec<uint64_t>(bm + 8 * w));
        return false;
    }
};

struct BitmapDecode {
    const uint8_t *bm, *vals;
    size_t n;
    const uint32_t *pre;
    float *out;
    bool add;
    __host__ __device__ bool operator()(size_t w) const {
        const uint64_t m = load_vec<uint64_t>(bm + 8 * w);
        const size_t base = 64 * w, cnt = n - base < 64 ? n - base : 64;
        size_t pos = pre[w];
        for (size_t j = 0; j < cnt; ++j) {
            if ((m >> j) & 1) {
                const float v = u2f(load_vec<uint32_t>(vals + 4 * pos++));
                out[base + j] = add ? fadd(out[base + j], v) : v;
            } else if (!add) {
                out[base + j] = 0.0f;
            }
        }
        return false;
    }
};

/* decode work: cnt[nw] | pre[nw] | CUB temp */
size_t tk_decode_work_bytes(size_t n, const CodecParams &) {
    const size_t nw = words_of(n);
    return 2 * align256(4 * (nw ? nw : 1)) + align256(scan_temp_bytes<uint32_t>(nw)) + 256;
}

cudaError_t tk_decode(const GpuDecodeArgs &a, bool *corrupt) {
    uint8_t form;
    uint64_t k = 0;
    if (a.n > 0xFFFFFFFFull || validate(a.host_in, a.len, a.n, &form, &k) != Status::ok) {
        *corrupt = true;
        return cudaSuccess;
    }
    const uint8_t *body = a.in + topk::kHeaderBytes;
    if (form == topk::kDense) return launch_for_each(a.n, DenseDecodeBody{body, a.out, a.add}, nullptr, a.stream);
    if (form == topk::kList) {
        cudaError_t e = a.add ? cudaSuccess : launch_for_each(a.n, ZeroBody{a.out}, nullptr, a.stream);
        if (e == cudaSuccess) e = launch_for_each(k, ListDecode{body, body + 4 * k, a.out, a.add}, nullptr, a.stream);
        return e;
    }
    const size_t nw = words_of(a.n), cb = align256(4 * (nw ? nw : 1));
    uint32_t *cnt = static_cast<uint32_t *>(a.work);
    uint32_t *pre = reinterpret_cast<uint32_t *>(static_cast<uint8_t *>(a.work) + cb);
    void *temp = static_cast<uint8_t *>(a.work) + 2 * cb;
    size_t temp_bytes = align256(scan_temp_bytes<uint32_t>(nw));
    cudaError_t e = launch_for_each(nw, WordCount{body, cnt}, nullptr, a.stream);
    if (e == cudaSuccess && nw)
        e = cub::DeviceScan::ExclusiveSum(temp, temp_bytes, cnt, pre, static_cast<int>(nw), a.stream);
    if (e == cudaSuccess)
        e = launch_for_each(nw, BitmapDecode{body, body + 8 * nw, a.n, pre, a.out, a.add}, nullptr, a.stream);
    return e;
}

Status tk_decode_host(const CodecOps &, const uint8_t *in, size_t len, size_t n, const CodecParams &, float *out,
                      bool add) {
    uint8_t form;
    uint64_t k = 0;
    const Status s = validate(in, len, n, &form, &k);
    if (s != Status::ok) return s;
    const uint8_t *body = in + topk::kHeaderBytes;
    if (form == topk::kDense) {
        run_for_each_host(n, DenseDecodeBody{body, out, add});
    } else if (form == topk::kList) {
        if (!add) run_for_each_host(n, ZeroBody{out});
        run_for_each_host(k, ListDecode{body, body + 4 * k, out, add});
    } else {
        const size_t nw = words_of(n);
        std::vector<uint32_t> cnt(nw), pre(nw);
        run_for_each_host(nw, WordCount{body, cnt.data()});
        scan_host(cnt.data(), pre.data(), nw);
        run_for_each_host(nw, BitmapDecode{body, body + 8 * nw, n, pre.data(), out, add});
    }
    return Status::ok;
}

}  // namespace

extern const GpuCodec gpu_codec_topk = {
    CodecId::topk, false,        tk_supports, tk_encode,           tk_decode, tk_encode_host, tk_decode_host,
    tk_work_bytes, false,        nullptr,     tk_decode_work_bytes,
};

}  // namespace compmpi::cuda

/* q8 CUDA kernels: the payload of kernels/q8/q8.h (docs/codecs/q8.md), byte for byte.
 *
 * Tables: taken from the CPU codec itself, once per type, so no table or rounding rule is
 * written twice:
 *   magnitudes   decode a payload {scale 1.0, codes 0..127} with the CPU decoder;
 *   thresholds   the CPU encoder's decision boundaries: t_i = the largest fp32 y in [0, 1]
 *                whose code is <= i, found by bisection over bit patterns with the CPU
 *                encoder on {1.0, y} (scale 1, so y is encoded as is). The code of y is then
 *                #{i : y > t_i}, which is what the CPU's bucket table computes (nearest
 *                magnitude, ties to the smaller).
 * Encode, two kernels on the stream: integer max-abs (launch_maxabs), then per element
 *   y = min(|x| * (1/max), 1) (|x| / max when 1/max overflows, as on the CPU), a 7-step
 *   binary search over the 127 thresholds in shared memory, sign in bit 7; item 0 writes the
 *   fp32 scale and raises the NaN/Inf flag.
 * Decode: the 256-entry table ±bits(magnitude * scale) in shared memory (the scale is
 *   validated on the host first), 4 codes per thread [+ acc]. */
#include <mutex>

#include "cuda/cuda_util.cuh"
#include "cuda/gpu_codec.cuh"
#include "q8/q8.h"

namespace compmpi::cuda {
namespace {

constexpr uint32_t kExp = 0x7F800000u, kAbs = 0x7FFFFFFFu;

struct Q8Tables {
    uint32_t tb[127]; /* thresholds, fp32 bits, strictly increasing */
    float mag[128];
};

/* ---------------------------------------------------------------- tables from the CPU codec */

int cpu_code(const CodecOps &c, const CodecParams &p, uint32_t ybits) {
    const float x[2] = {1.0f, u2f(ybits)};
    uint8_t out[q8::kScaleBytes + 2];
    size_t len = 0;
    if (c.encode(x, 2, p, out, sizeof out, &len) != Status::ok || len != sizeof out) return -1;
    return out[q8::kScaleBytes + 1] & 0x7F;
}

bool build(const CodecOps &c, int type, Q8Tables *t) {
    CodecParams p;
    p.bits = 8;
    p.variant = static_cast<uint8_t>(type);
    p.threads = 1;
    uint8_t pay[q8::kScaleBytes + 128];
    const float one = 1.0f;
    std::memcpy(pay, &one, 4);
    for (int m = 0; m < 128; ++m) pay[q8::kScaleBytes + m] = static_cast<uint8_t>(m);
    if (c.decode(pay, sizeof pay, 128, p, t->mag) != Status::ok) return false;
    const uint32_t kOne = 0x3F800000u;
    if (cpu_code(c, p, 0) != 0 || cpu_code(c, p, kOne) != 127) return false;
    for (int i = 0; i < 127; ++i) {
        uint32_t lo = i ? t->tb[i - 1] : 0, hi = kOne; /* code(lo) <= i < code(hi) */
        while (hi - lo > 1) {
            const uint32_t mid = lo + (hi - lo) / 2;
            const int k = cpu_code(c, p, mid);
            if (k < 0) return false;
            (k <= i ? lo : hi) = mid;
        }
        t->tb[i] = lo;
        if (i && t->tb[i] <= t->tb[i - 1]) return false;
    }
    return true;
}

const Q8Tables *tables(const CodecOps &c, int type) {
    static std::once_flag once[q8::kNumTypes];
    static Q8Tables t[q8::kNumTypes];
    static bool ok[q8::kNumTypes];
    if (type < 0 || type >= q8::kNumTypes || c.id != CodecId::q8) return nullptr;
    std::call_once(once[type], [&] { ok[type] = build(c, type, &t[type]); });
    return ok[type] ? &t[type] : nullptr;
}

/* ---------------------------------------------------------------- kernel bodies */

struct Encode {
    const float *in;
    size_t n;
    uint8_t *out;
    const uint32_t *mx;
    uint32_t *bad;
    const uint32_t *tb; /* shared memory on the GPU */
    bool vec;

    __host__ __device__ uint32_t code(float x, float scale, float inv, bool divide) const {
        const uint32_t u = f2u(x);
        const float a = u2f(u & kAbs);
        float y = divide ? fdiv(a, scale) : fmul(a, inv);
        y = 1.0f < y ? 1.0f : y; /* std::min(y, 1.0f) */
        const uint32_t yu = f2u(y);
        uint32_t pos = 0; /* #{i : tb[i] < yu} over 127 = 2^7 - 1 sorted entries */
        for (uint32_t step = 64; step; step >>= 1)
            if (tb[pos + step - 1] < yu) pos += step;
        return pos | ((u >> 24) & 0x80u);
    }

    __host__ __device__ bool operator()(size_t g) const {
        const uint32_t m = *mx;
        const float scale = u2f(m);
        const float inv = m ? fdiv(1.0f, scale) : 0.0f;
        const bool divide = f2u(inv) == kExp; /* +Inf: a denormal max */
        if (g == 0) {
            store_vec(out, m);
            if (m >= kExp) *bad = 1;
        }
        uint8_t *codes = out + q8::kScaleBytes;
        const size_t i0 = 4 * g;
        if (vec && i0 + 4 <= n) {
            const float4 v = load_vec<float4>(in + i0);
            store_vec(codes + i0, code(v.x, scale, inv, divide) | code(v.y, scale, inv, divide) << 8 |
                                      code(v.z, scale, inv, divide) << 16 | code(v.w, scale, inv, divide) << 24);
            return false;
        }
        const size_t i1 = i0 + 4 < n ? i0 + 4 : n;
        for (size_t i = i0; i < i1; ++i) codes[i] = static_cast<uint8_t>(code(in[i], scale, inv, divide));
        return false;
    }
};

struct Decode {
    const uint8_t *codes;
    size_t n;
    const float *tab; /* 256 entries; shared memory on the GPU */
    float *out;
    bool add, vec;

    __host__ __device__ bool operator()(size_t g) const {
        const size_t i0 = 4 * g;
        if (vec && i0 + 4 <= n) {
            const uint32_t w = load_vec<uint32_t>(codes + i0);
            float4 v = make_float4(tab[w & 0xFF], tab[(w >> 8) & 0xFF], tab[(w >> 16) & 0xFF], tab[w >> 24]);
            if (add) {
                const float4 o = load_vec<float4>(out + i0);
                v = make_float4(fadd(o.x, v.x), fadd(o.y, v.y), fadd(o.z, v.z), fadd(o.w, v.w));
            }
            store_vec(out + i0, v);
            return false;
        }
        const size_t i1 = i0 + 4 < n ? i0 + 4 : n;
        for (size_t i = i0; i < i1; ++i) out[i] = add ? fadd(out[i], tab[codes[i]]) : tab[codes[i]];
        return false;
    }
};

/* sign * magnitude * scale, as the CPU's decode table */
__host__ __device__ inline void table_entry(const float *mag, float scale, int m, float *tab) {
    const uint32_t v = f2u(fmul(mag[m], scale));
    tab[m] = u2f(v);
    tab[m + 128] = u2f(v | 0x80000000u);
}

__global__ void __launch_bounds__(kThreads) encode_kernel(Encode body, size_t items, Q8Tables T) {
    __shared__ uint32_t tb[128];
    for (int i = threadIdx.x; i < 127; i += blockDim.x) tb[i] = T.tb[i];
    __syncthreads();
    body.tb = tb;
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t g = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; g < items; g += stride) body(g);
}

__global__ void __launch_bounds__(kThreads) decode_kernel(Decode body, size_t items, float scale, Q8Tables T) {
    __shared__ float tab[256];
    for (int m = threadIdx.x; m < 128; m += blockDim.x) table_entry(T.mag, scale, m, tab);
    __syncthreads();
    body.tab = tab;
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t g = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; g < items; g += stride) body(g);
}

/* The CPU decoder's scale check: finite, sign bit clear. */
bool scale_ok(const uint8_t *payload, float *scale) {
    uint32_t sb;
    std::memcpy(&sb, payload, 4);
    if (sb >= kExp) return false; /* NaN, Inf, or any negative value (sign bit set) */
    *scale = u2f(sb);
    return true;
}

bool q8_supports(const CodecParams &p) { return p.bits == 8 && p.variant < q8::kNumTypes && p.param == 0; }

cudaError_t q8_encode(const GpuEncodeArgs &a) {
    const Q8Tables *T = a.cpu ? tables(*a.cpu, a.p->variant) : nullptr;
    if (!T) return cudaErrorNotSupported;
    uint32_t *mx = a.words;
    cudaError_t e = launch_maxabs(a.in, a.n, mx, a.stream);
    if (e != cudaSuccess) return e;
    const size_t items = a.n ? (a.n + 3) / 4 : 1; /* n = 0 still writes the scale */
    const Encode body{a.in, a.n, a.out, mx, a.bad, nullptr, aligned(a.in, 16)};
    encode_kernel<<<grid_for(items), kThreads, 0, a.stream>>>(body, items, *T);
    return cudaGetLastError();
}

cudaError_t q8_decode(const GpuDecodeArgs &a, bool *corrupt) {
    float scale;
    const Q8Tables *T = a.cpu ? tables(*a.cpu, a.p->variant) : nullptr;
    if (!T) return cudaErrorNotSupported;
    if (a.len != q8::kScaleBytes + a.n || !scale_ok(a.host_in, &scale)) {
        *corrupt = true;
        return cudaSuccess;
    }
    if (a.n == 0) return cudaSuccess;
    const size_t items = (a.n + 3) / 4;
    const Decode body{a.in + q8::kScaleBytes, a.n, nullptr, a.out, a.add, aligned(a.out, 16)};
    decode_kernel<<<grid_for(items), kThreads, 0, a.stream>>>(body, items, scale, *T);
    return cudaGetLastError();
}

bool q8_encode_host(const CodecOps &c, const float *in, size_t n, const CodecParams &p, uint8_t *out) {
    const Q8Tables *T = tables(c, p.variant);
    if (!T) return true;
    const uint32_t mx = maxabs_host(in, n);
    uint32_t bad = 0;
    run_for_each_host(n ? (n + 3) / 4 : 1, Encode{in, n, out, &mx, &bad, T->tb, aligned(in, 16)});
    return bad != 0;
}

Status q8_decode_host(const CodecOps &c, const uint8_t *in, size_t len, size_t n, const CodecParams &p, float *out,
                      bool add) {
    const Q8Tables *T = tables(c, p.variant);
    float scale;
    if (!T) return Status::unsupported;
    if (len != q8::kScaleBytes + n || !scale_ok(in, &scale)) return Status::corrupt;
    float tab[256];
    for (int m = 0; m < 128; ++m) table_entry(T->mag, scale, m, tab);
    run_for_each_host((n + 3) / 4, Decode{in + q8::kScaleBytes, n, tab, out, add, aligned(out, 16)});
    return Status::ok;
}

}  // namespace

extern const GpuCodec gpu_codec_q8 = {
    CodecId::q8, false, q8_supports, q8_encode, q8_decode, q8_encode_host, q8_decode_host,
};

}  // namespace compmpi::cuda

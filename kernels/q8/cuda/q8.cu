// SPDX-License-Identifier: BSD-3-Clause
/* q8 CUDA kernels: the payload of kernels/q8/q8.h (docs/codecs/q8.md), byte for byte.
 *
 * Tables: taken from the CPU codec itself, once per type, so no table, rounding rule or
 * scale rule is written twice:
 *   magnitudes   decode a payload {scale 1 (= 10^0), codes 0..127} with the CPU decoder;
 *   steps        the CPU encoder's decision rule at scale 1 is a step function of y whose
 *                value magnitude(code(y)) never decreases: each boundary is the largest fp32
 *                y of a step, found by bisection over bit patterns with the CPU encoder on
 *                {X, y} (X = the top magnitude: scale 1 for max-abs and offset types), and
 *                the code of each step is the CPU's;
 *   offsets      (static tree, mantissa) the scale the CPU encoder picks is a step function
 *                of max |x|: each step's largest max-abs and its 10^k, found the same way
 *                with the CPU encoder on {v}.
 * Encode, two kernels on the stream: integer max-abs (launch_maxabs), then per element
 *   the scale (max-abs, or the offset step holding it), y = min(|x| * (1/s), 16) (|x| / s when
 *   1/s overflows, as on the CPU), a 7-step binary search over the (padded) boundaries in
 *   shared memory, the step's code, sign in bit 7; item 0 writes the fp32 scale and raises the
 *   NaN/Inf flag.
 * Decode: the 256-entry table +-bits(magnitude * scale) in shared memory (the scale is
 *   validated on the host first), 4 codes per thread [+ acc]. */
#include <mutex>

#include "common/cuda_util.cuh"
#include "common/gpu_codec.cuh"
#include "q8/q8.h"

namespace compmpi::cuda {
namespace {

constexpr uint32_t kExp = 0x7F800000u, kAbs = 0x7FFFFFFFu;
constexpr int kMaxOffsets = 72;

struct Q8Tables {
    uint32_t tb[128];    /* step boundaries, fp32 bits, increasing; padded with +Inf */
    uint32_t code[128];  /* code of each step */
    float mag[128];      /* magnitude of each code at scale 1 */
    int nsc;             /* offset types: number of offsets; 0: the scale is max |x| */
    uint32_t bnd[kMaxOffsets]; /* largest max-abs of each offset (fp32 bits), increasing */
    uint32_t sc[kMaxOffsets];  /* fp32 bits of that offset 10^k */
};

/* ---------------------------------------------------------------- tables from the CPU codec */

bool cpu_encode(const CodecOps &c, const CodecParams &p, const float *x, size_t n, uint8_t *out) {
    size_t len = 0;
    return c.encode(x, n, p, out, q8::kScaleBytes + n, &len) == Status::ok && len == q8::kScaleBytes + n;
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
    float top = 0;
    for (float v : t->mag) top = top < v ? v : top;
    /* offset types refuse a scale that is not 10^k */
    const float three = 3.0f;
    std::memcpy(pay, &three, 4);
    float scratch[128];
    const bool offset = c.decode(pay, sizeof pay, 128, p, scratch) == Status::corrupt;
    /* the max that makes the CPU's scale 1: max-abs 1, or the top magnitude (offset 10^0) */
    const float X = offset ? top : 1.0f;
    /* value of the code the CPU writes for y at scale 1 (-1: failure) */
    auto value = [&](uint32_t ybits, int *code) -> float {
        const float x[2] = {X, u2f(ybits)};
        uint8_t out[q8::kScaleBytes + 2];
        float s = 0;
        if (!cpu_encode(c, p, x, 2, out)) return -1;
        std::memcpy(&s, out, 4);
        if (s != 1.0f) return -1;
        *code = out[q8::kScaleBytes + 1] & 0x7F;
        return t->mag[*code];
    };
    int code = 0, nb = 0;
    float v = value(0, &code);
    if (v < 0) return false;
    t->code[0] = static_cast<uint32_t>(code);
    const uint32_t ytop = f2u(X);
    for (uint32_t lo = 0; lo < ytop;) { /* lo: a y of the current step */
        uint32_t hi = ytop;             /* value(hi) > v, or hi = ytop */
        int ch = 0;
        if (value(hi, &ch) <= v) break; /* the last step reaches the top */
        while (hi - lo > 1) {
            const uint32_t mid = lo + (hi - lo) / 2;
            const float vm = value(mid, &ch);
            if (vm < 0) return false;
            (vm <= v ? lo : hi) = mid;
        }
        if (nb >= 127) return false;
        t->tb[nb++] = lo; /* largest y of the step */
        v = value(hi, &code);
        t->code[nb] = static_cast<uint32_t>(code);
        lo = hi;
    }
    for (int i = nb; i < 128; ++i) t->tb[i] = kExp;
    t->nsc = 0;
    if (offset) { /* the scale as a step function of max |x| */
        auto scale = [&](uint32_t vb) -> uint32_t {
            const float x = u2f(vb);
            uint8_t out[q8::kScaleBytes + 1];
            uint32_t s = 0;
            if (!cpu_encode(c, p, &x, 1, out)) return 0;
            std::memcpy(&s, out, 4);
            return s;
        };
        const uint32_t kMax = 0x7F7FFFFFu; /* FLT_MAX */
        uint32_t lo = 0, cur = scale(0);
        while (true) {
            if (!cur || t->nsc >= kMaxOffsets) return false;
            uint32_t hi = kMax;
            if (scale(hi) == cur) {
                t->bnd[t->nsc] = kMax;
                t->sc[t->nsc++] = cur;
                break;
            }
            while (hi - lo > 1) {
                const uint32_t mid = lo + (hi - lo) / 2;
                (scale(mid) == cur ? lo : hi) = mid;
            }
            t->bnd[t->nsc] = lo;
            t->sc[t->nsc++] = cur;
            lo = hi;
            cur = scale(hi);
        }
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
    const uint32_t *tb, *code; /* shared memory on the GPU */
    const uint32_t *bnd, *sc;  /* offset steps (shared memory on the GPU) */
    int nsc;
    bool vec;
    bool fixed = false; /* *mx holds the scale's bits (CodecParams::fixed_scale), not max |x| */

    __host__ __device__ uint32_t code_of(float x, float scale, float inv, bool divide) const {
        const uint32_t u = f2u(x);
        const float a = u2f(u & kAbs);
        float y = divide ? fdiv(a, scale) : fmul(a, inv);
        y = 16.0f < y ? 16.0f : y; /* std::min(y, kYMax) */
        const uint32_t yu = f2u(y);
        uint32_t pos = 0; /* #{i : tb[i] < yu} over 127 = 2^7 - 1 sorted entries */
        for (uint32_t step = 64; step; step >>= 1)
            if (tb[pos + step - 1] < yu) pos += step;
        return code[pos] | ((u >> 24) & 0x80u);
    }

    /* the CPU's scale: max |x|, or the first offset step holding it */
    __host__ __device__ uint32_t scale_bits(uint32_t m) const {
        if (!nsc) return m;
        int lo = 0, hi = nsc - 1; /* the first j with m <= bnd[j]; bnd[nsc-1] = FLT_MAX */
        while (lo < hi) {
            const int mid = (lo + hi) / 2;
            if (m <= bnd[mid]) hi = mid;
            else lo = mid + 1;
        }
        return sc[lo];
    }

    __host__ __device__ bool operator()(size_t g) const {
        const uint32_t m = *mx;
        const uint32_t sb = fixed || m >= kExp ? m : scale_bits(m);
        const float scale = u2f(sb);
        const float inv = sb ? fdiv(1.0f, scale) : 0.0f;
        const bool divide = f2u(inv) == kExp; /* +Inf: a denormal max */
        if (g == 0) {
            store_vec(out, sb);
            if (!fixed && m >= kExp) *bad = 1; /* a fixed scale was checked on the whole input */
        }
        uint8_t *codes = out + q8::kScaleBytes;
        const size_t i0 = 4 * g;
        if (vec && i0 + 4 <= n) {
            const float4 v = load_vec<float4>(in + i0);
            store_vec(codes + i0, code_of(v.x, scale, inv, divide) | code_of(v.y, scale, inv, divide) << 8 |
                                      code_of(v.z, scale, inv, divide) << 16 | code_of(v.w, scale, inv, divide) << 24);
            return false;
        }
        const size_t i1 = i0 + 4 < n ? i0 + 4 : n;
        for (size_t i = i0; i < i1; ++i) codes[i] = static_cast<uint8_t>(code_of(in[i], scale, inv, divide));
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
            store4(out + i0, v, add);
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
    __shared__ uint32_t tb[128], code[128], bnd[kMaxOffsets], sc[kMaxOffsets];
    for (int i = threadIdx.x; i < 128; i += blockDim.x) tb[i] = T.tb[i], code[i] = T.code[i];
    for (int i = threadIdx.x; i < T.nsc; i += blockDim.x) bnd[i] = T.bnd[i], sc[i] = T.sc[i];
    __syncthreads();
    body.tb = tb;
    body.code = code;
    body.bnd = bnd;
    body.sc = sc;
    body.nsc = T.nsc;
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

/* The CPU decoder's scale check: finite, sign bit clear; an exact offset 10^k for the
 * offset types. */
bool scale_ok(const uint8_t *payload, const Q8Tables &T, float *scale) {
    uint32_t sb;
    std::memcpy(&sb, payload, 4);
    if (sb >= kExp) return false; /* NaN, Inf, or any negative value (sign bit set) */
    if (T.nsc) {
        bool found = false;
        for (int i = 0; i < T.nsc; ++i) found |= T.sc[i] == sb;
        if (!found) return false;
    }
    *scale = u2f(sb);
    return true;
}

bool q8_supports(const CodecParams &p) { return p.bits == 8 && p.variant < q8::kNumTypes && p.param == 0; }

cudaError_t q8_encode(const GpuEncodeArgs &a) {
    const Q8Tables *T = a.cpu ? tables(*a.cpu, a.p->variant) : nullptr;
    if (!T) return cudaErrorNotSupported;
    uint32_t *mx = a.words;
    /* a segment of a contribution encoded in pieces takes the whole contribution's scale, as
     * the CPU encoder does (CodecParams::fixed_scale): no max-abs pass, the word holds it */
    const bool fixed = a.p->fixed_scale >= 0;
    cudaError_t e = fixed ? launch_set_word(mx, f2u(a.p->fixed_scale), a.stream) : launch_maxabs(a.in, a.n, mx, a.stream);
    if (e != cudaSuccess) return e;
    const size_t items = a.n ? (a.n + 3) / 4 : 1; /* n = 0 still writes the scale */
    const Encode body{a.in, a.n, a.out, mx, a.bad, nullptr, nullptr, nullptr, nullptr, 0, aligned(a.in, 16), fixed};
    encode_kernel<<<grid_for(items), kThreads, 0, a.stream>>>(body, items, *T);
    return cudaGetLastError();
}

cudaError_t q8_decode(const GpuDecodeArgs &a, bool *corrupt) {
    float scale;
    const Q8Tables *T = a.cpu ? tables(*a.cpu, a.p->variant) : nullptr;
    if (!T) return cudaErrorNotSupported;
    if (a.len != q8::kScaleBytes + a.n || !scale_ok(a.host_in, *T, &scale)) {
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
    const bool fixed = p.fixed_scale >= 0;
    const uint32_t mx = fixed ? f2u(p.fixed_scale) : maxabs_host(in, n);
    uint32_t bad = 0;
    run_for_each_host(n ? (n + 3) / 4 : 1,
                      Encode{in, n, out, &mx, &bad, T->tb, T->code, T->bnd, T->sc, T->nsc, aligned(in, 16), fixed});
    return bad != 0;
}

Status q8_decode_host(const CodecOps &c, const uint8_t *in, size_t len, size_t n, const CodecParams &p, float *out,
                      bool add) {
    const Q8Tables *T = tables(c, p.variant);
    float scale;
    if (!T) return Status::unsupported;
    if (len != q8::kScaleBytes + n || !scale_ok(in, *T, &scale)) return Status::corrupt;
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

// SPDX-License-Identifier: BSD-3-Clause
/* rangefloat CUDA kernels: the payload of kernels/rangefloat/rangefloat.h (12-byte range
 * header, then N-bit codes packed LSB first), byte for byte.
 *
 * Encode:
 *   1. stats    one item per 8 values: exact min nonzero / max |x| and NaN/Inf (integer
 *               atomicMin/atomicMax on fp32 bit patterns), the binade histogram over the
 *               CPU's sample (every value below 2^16 values, else every 8th: position
 *               i % 8 == 0) with integer atomicAdd -- order-free, so the same counts as the
 *               CPU's merged per-block partials;
 *   2. fit      on the host: the 2 KiB histogram comes back (one synchronisation), the CPU's
 *               own fit_mantissa / write_range / make_format run on it (rangefloat.h);
 *   3. codes    one item per 8 values -> N bytes: encode_mag (the CPU's integer rounding,
 *               ported line by line below) and the same LSB-first packing.
 * Decode: read_range on the host copy (the CPU's header checks), then one item per value:
 * decode_one [+ acc].
 * Paper mode (header variant 1, rangefloat.h "paper mode"):
 *   1. range   one item per 8 values: the signed min and max (0 included; integer
 *              atomicMin/atomicMax on order-preserving keys, +-0 as one key), NaN/Inf, and
 *              the fit's sample (rf::paper_sample_stride: sample[j] = x[j * stride]);
 *   2. fit     on the host: range and sample come back (one synchronisation; at most ~2^19
 *              floats), the CPU's own rf::paper_fit_range chooses m and eps on them in the
 *              CPU's order, write_paper writes the header;
 *   3. codes   one item per 8 values: paper_encode_one ported line by line, the same packing.
 * Decode: read_paper on the host copy, then paper_decode_one [+ acc] per value. */
#include <type_traits>
#include <vector>

#include "common/cuda_util.cuh"
#include "common/gpu_codec.cuh"
#include "rangefloat/rangefloat.h"

namespace compmpi::cuda {
namespace {

constexpr size_t kHistStride = 8, kHistAllBelow = 1 << 16; /* rangefloat.cc */

struct DevStats {
    uint32_t amin, amax, bad, pad;
    unsigned long long hist[rf::kHistBins];
};

/* the plain format fields, device-copyable */
struct Fmt {
    int bits, m, emin;
    uint32_t cmax, minnorm, rebias;
    float sub_unit;
};
Fmt fmt_of(const rf::Format &f) { return Fmt{f.bits, f.m, f.emin, f.cmax, f.minnorm, f.rebias, f.sub_unit}; }

__host__ __device__ inline void at_min(uint32_t *p, uint32_t v) {
#ifdef __CUDA_ARCH__
    atomicMin(p, v);
#else
    *p = v < *p ? v : *p;
#endif
}
__host__ __device__ inline void at_max(uint32_t *p, uint32_t v) {
#ifdef __CUDA_ARCH__
    atomicMax(p, v);
#else
    *p = v > *p ? v : *p;
#endif
}
__host__ __device__ inline void at_add(unsigned long long *p, unsigned long long v) {
#ifdef __CUDA_ARCH__
    atomicAdd(p, v);
#else
    *p += v;
#endif
}

struct StatsBody {
    const float *in;
    size_t n, stride;
    DevStats *st;
    __host__ __device__ bool operator()(size_t g) const {
        const size_t i0 = 8 * g, i1 = i0 + 8 < n ? i0 + 8 : n;
        uint32_t lo = 0x7F800000u, hi = 0, bad = 0;
        for (size_t i = i0; i < i1; ++i) {
            const uint32_t a = f2u(in[i]) & 0x7FFFFFFFu;
            bad |= static_cast<uint32_t>(a >= 0x7F800000u);
            hi = a > hi ? a : hi;
            const uint32_t l = a ? a : 0x7F800000u;
            lo = l < lo ? l : lo;
            if (i % stride == 0 && a) at_add(&st->hist[a >> 23], 1);
        }
        at_min(&st->amin, lo);
        at_max(&st->amax, hi);
        if (bad) at_max(&st->bad, 1);
        return false;
    }
};

/* rf::encode_mag / encode_one */
__host__ __device__ inline uint32_t encode_mag(uint32_t u, const Fmt &f) {
    const int s = 23 - f.m;
    const uint32_t r = u + ((1u << (s - 1)) - 1) + ((u >> s) & 1u);
    uint32_t cn = (r >> s) - f.rebias;
    cn = cn > f.cmax ? f.cmax : cn;
    const uint32_t be = u >> 23;
    const uint32_t mant = be ? ((u & 0x7FFFFFu) | 0x800000u) : u;
    int sh = 150 + f.emin - f.m - static_cast<int>(be ? be : 1u);
    sh = sh < 1 ? 1 : (sh > 31 ? 31 : sh);
    const uint32_t cs = (mant + ((1u << (sh - 1)) - 1) + ((mant >> sh) & 1u)) >> sh;
    return u >= f.minnorm ? cn : cs;
}
__host__ __device__ inline uint32_t encode_one(float x, const Fmt &f) {
    const uint32_t u = f2u(x);
    return ((u >> 31) << (f.bits - 1)) | encode_mag(u & 0x7FFFFFFFu, f);
}
/* rf::decode_one */
__host__ __device__ inline float decode_one(uint32_t code, const Fmt &f) {
    const uint32_t c = code & f.cmax;
    const uint32_t sign = (code >> (f.bits - 1)) << 31;
    const uint32_t un = (c + f.rebias) << (23 - f.m);
    const uint32_t us = f2u(fmul(static_cast<float>(static_cast<int32_t>(c)), f.sub_unit));
    return u2f(((c >> f.m) ? un : us) | sign);
}

/* the paper mode's format fields (rf::PaperFormat) */
struct PFmt {
    int bits, m;
    uint32_t pbase, P, cmax;
};
PFmt pfmt_of(const rf::PaperFormat &f) { return PFmt{f.bits, f.m, f.pbase, f.P, f.cmax()}; }

/* rf::paper_encode_one */
__host__ __device__ inline uint32_t encode_one(float x, const PFmt &f) {
    const int s = 23 - f.m;
    const uint32_t u = f2u(x);
    const uint32_t q = (u & 0x7FFFFFFFu) >> s;
    if (q < f.pbase) return 0;
    const uint32_t c = q - f.pbase + 1;
    if (!(u >> 31)) return c < f.P ? c : f.P;
    return f.P + c < f.cmax ? f.P + c : f.cmax;
}
/* rf::paper_decode_one */
__host__ __device__ inline float decode_one(uint32_t c, const PFmt &f) {
    const int s = 23 - f.m;
    if (c == 0) return 0.0f;
    if (c <= f.P) return u2f((c + f.pbase - 1) << s);
    return u2f(((c - f.P + f.pbase - 1) << s) | 0x80000000u);
}

/* order-preserving key of a finite fp32 (+-0 one key) and back */
__host__ __device__ inline uint32_t order_key(float x) {
    const uint32_t u = f2u(x) & 0x7FFFFFFFu ? f2u(x) : 0u;
    return u >> 31 ? ~u : u | 0x80000000u;
}
__host__ __device__ inline float from_key(uint32_t k) { return u2f(k >> 31 ? k & 0x7FFFFFFFu : ~k); }

struct DevRange {
    uint32_t lo, hi, bad, pad;
};

struct RangeBody {
    const float *in;
    size_t n, stride;
    DevRange *r;
    float *sample;
    __host__ __device__ bool operator()(size_t g) const {
        const size_t i0 = 8 * g, i1 = i0 + 8 < n ? i0 + 8 : n;
        uint32_t lo = order_key(0.0f), hi = lo, bad = 0;
        for (size_t i = i0; i < i1; ++i) {
            const float v = in[i];
            if ((f2u(v) & 0x7F800000u) == 0x7F800000u) {
                bad = 1;
                continue;
            }
            const uint32_t k = order_key(v);
            lo = k < lo ? k : lo;
            hi = k > hi ? k : hi;
            if (i % stride == 0) sample[i / stride] = v;
        }
        at_min(&r->lo, lo);
        at_max(&r->hi, hi);
        if (bad) at_max(&r->bad, 1);
        return false;
    }
};

template <class F>
struct CodeBody {
    const float *in;
    size_t n;
    F f;
    uint8_t *codes;
    __host__ __device__ bool operator()(size_t g) const {
        const size_t i0 = 8 * g, m = n - i0 < 8 ? n - i0 : 8;
        uint64_t lo = 0, hi = 0;
        const int N = f.bits;
        for (size_t j = 0; j < m; ++j) {
            const uint64_t v = encode_one(in[i0 + j], f);
            const unsigned bit = static_cast<unsigned>(N * j);
            if (bit < 64) {
                lo |= v << bit;
                if (bit + N > 64) hi |= v >> (64 - bit);
            } else {
                hi |= v << (bit - 64);
            }
        }
        uint8_t *o = codes + g * N;
        const size_t nbytes = (m * N + 7) / 8;
        for (size_t t = 0; t < nbytes; ++t) o[t] = static_cast<uint8_t>(t < 8 ? lo >> (8 * t) : hi >> (8 * (t - 8)));
        return false;
    }
};

template <class F>
struct DecodeBody {
    const uint8_t *codes;
    size_t nbytes;
    F f;
    float *out;
    bool add;
    __host__ __device__ bool operator()(size_t i) const {
        const int N = f.bits;
        const size_t bit = i * N, byte = bit >> 3;
        uint32_t w = 0;
        for (size_t t = 0; t < 4 && byte + t < nbytes; ++t) w |= static_cast<uint32_t>(codes[byte + t]) << (8 * t);
        const uint32_t code = (w >> (bit & 7)) & ((1u << N) - 1); /* bit & 7 + N <= 23 */
        const float v = decode_one(code, f);
        out[i] = add ? fadd(out[i], v) : v;
        return false;
    }
};

bool rf_supports(const CodecParams &p) {
    return p.bits >= rf::kBitsMin && p.bits <= rf::kBitsMax && rf::mode_ok(p.variant) && p.param == 0;
}

size_t sample_count(size_t n) {
    const size_t st = rf::paper_sample_stride(n);
    return (n + st - 1) / st;
}
size_t align256(size_t x) { return (x + 255) & ~size_t{255}; }

/* range_sign: DevStats; paper: DevRange | sample */
size_t rf_work_bytes(size_t n, const CodecParams &p) {
    if (p.variant == rf::kModePaper) return align256(sizeof(DevRange)) + align256(4 * (sample_count(n) + 1)) + 256;
    return sizeof(DevStats) + 256;
}

/* Both modes' second half: the host's fit (false: NaN/Inf -> the flag), the header up, the codes. */
template <class F, class Fit>
cudaError_t finish_encode(const GpuEncodeArgs &a, Fit fit) {
    uint8_t header[rf::kRangeHeaderBytes];
    F f;
    if (!fit(header, &f)) {
        static const uint32_t one = 1;
        return cudaMemcpyAsync(a.bad, &one, 4, cudaMemcpyHostToDevice, a.stream);
    }
    cudaError_t e = cudaMemcpyAsync(a.out, header, sizeof header, cudaMemcpyHostToDevice, a.stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(a.stream); /* header is a stack buffer */
    if (e != cudaSuccess) return e;
    return launch_for_each((a.n + 7) / 8, CodeBody<F>{a.in, a.n, f, a.out + rf::kRangeHeaderBytes}, nullptr, a.stream);
}

/* the paper mode's host half: range and sample -> the CPU's fit and header; false on NaN/Inf */
bool paper_fit(const DevRange &r, const float *sample, size_t n, int N, uint8_t header[rf::kRangeHeaderBytes], PFmt *f) {
    if (r.bad) return false;
    const size_t stride = rf::paper_sample_stride(n);
    const rf::PaperFormat pf = rf::paper_fit_range(sample, sample_count(n), 1, stride > 1, from_key(r.lo), from_key(r.hi), N);
    rf::write_paper(header, pf);
    *f = pfmt_of(pf);
    return true;
}

DevRange range_init() {
    const uint32_t zero = order_key(0.0f);
    return DevRange{zero, zero, 0, 0};
}

cudaError_t paper_encode(const GpuEncodeArgs &a) {
    DevRange *r = static_cast<DevRange *>(a.work);
    float *sample = reinterpret_cast<float *>(static_cast<uint8_t *>(a.work) + align256(sizeof(DevRange)));
    const size_t groups = (a.n + 7) / 8, stride = rf::paper_sample_stride(a.n), ns = sample_count(a.n);
    static const DevRange init = range_init();
    cudaError_t e = cudaMemcpyAsync(r, &init, sizeof init, cudaMemcpyHostToDevice, a.stream);
    if (e == cudaSuccess) e = launch_for_each(groups, RangeBody{a.in, a.n, stride, r, sample}, nullptr, a.stream);
    DevRange h;
    std::vector<float> hs(ns);
    if (e == cudaSuccess) e = cudaMemcpyAsync(&h, r, sizeof h, cudaMemcpyDeviceToHost, a.stream);
    if (e == cudaSuccess && ns) e = cudaMemcpyAsync(hs.data(), sample, 4 * ns, cudaMemcpyDeviceToHost, a.stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(a.stream);
    if (e != cudaSuccess) return e;
    return finish_encode<PFmt>(a, [&](uint8_t *header, PFmt *f) { return paper_fit(h, hs.data(), a.n, a.p->bits, header, f); });
}

bool paper_encode_host(const float *in, size_t n, const CodecParams &p, uint8_t *out) {
    DevRange r = range_init();
    std::vector<float> sample(sample_count(n));
    run_for_each_host((n + 7) / 8, RangeBody{in, n, rf::paper_sample_stride(n), &r, sample.data()});
    PFmt f;
    if (!paper_fit(r, sample.data(), n, p.bits, out, &f)) return true;
    run_for_each_host((n + 7) / 8, CodeBody<PFmt>{in, n, f, out + rf::kRangeHeaderBytes});
    return false;
}

/* the host half: stats -> the CPU's fit; false on NaN/Inf */
bool fit(const DevStats &d, size_t n, int N, uint8_t header[rf::kRangeHeaderBytes], Fmt *f) {
    if (d.bad) return false;
    rf::Stats st;
    st.amin = d.amin;
    st.amax = d.amax;
    for (int b = 0; b < rf::kHistBins; ++b) st.hist[b] = d.hist[b];
    if (n >= kHistAllBelow && st.amax && st.amax < 0x7F800000u) ++st.hist[st.amax >> 23];
    const int m = rf::fit_mantissa(st, N);
    rf::write_range(header, m, st);
    *f = fmt_of(rf::make_format(N, m, st.amax));
    return true;
}

DevStats stats_init() {
    DevStats d{};
    d.amin = 0x7F800000u;
    return d;
}

cudaError_t rf_encode(const GpuEncodeArgs &a) {
    if (a.p->variant == rf::kModePaper) return paper_encode(a);
    DevStats *st = static_cast<DevStats *>(a.work);
    const DevStats init = stats_init();
    const size_t groups = (a.n + 7) / 8, stride = a.n < kHistAllBelow ? 1 : kHistStride;
    cudaError_t e = cudaMemcpyAsync(st, &init, sizeof init, cudaMemcpyHostToDevice, a.stream);
    if (e == cudaSuccess) e = launch_for_each(groups, StatsBody{a.in, a.n, stride, st}, nullptr, a.stream);
    DevStats h;
    if (e == cudaSuccess) e = cudaMemcpyAsync(&h, st, sizeof h, cudaMemcpyDeviceToHost, a.stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(a.stream);
    if (e != cudaSuccess) return e;
    return finish_encode<Fmt>(a, [&](uint8_t *header, Fmt *f) { return fit(h, a.n, a.p->bits, header, f); });
}

bool rf_encode_host(const CodecOps &, const float *in, size_t n, const CodecParams &p, uint8_t *out) {
    if (p.variant == rf::kModePaper) return paper_encode_host(in, n, p, out);
    DevStats st = stats_init();
    const size_t groups = (n + 7) / 8, stride = n < kHistAllBelow ? 1 : kHistStride;
    run_for_each_host(groups, StatsBody{in, n, stride, &st});
    Fmt f;
    if (!fit(st, n, p.bits, out, &f)) return true;
    run_for_each_host(groups, CodeBody<Fmt>{in, n, f, out + rf::kRangeHeaderBytes});
    return false;
}

/* the CPU decoder's checks (length, the mode's header) on the host copy */
Status validate(const uint8_t *in, size_t len, size_t n, int N, int mode, Fmt *f, PFmt *pf) {
    if (N < rf::kBitsMin || N > rf::kBitsMax || !rf::mode_ok(mode)) return Status::corrupt;
    if (len != rf::kRangeHeaderBytes + rf::packed_bytes(n, N)) return Status::corrupt;
    if (mode == rf::kModePaper) {
        rf::PaperFormat P;
        const Status s = rf::read_paper(in, N, &P);
        if (s == Status::ok) *pf = pfmt_of(P);
        return s;
    }
    rf::Format F;
    const Status s = rf::read_range(in, N, &F);
    if (s == Status::ok) *f = fmt_of(F);
    return s;
}

template <class Run>
Status decode_with(const uint8_t *in, size_t len, size_t n, const CodecParams &p, Run run) {
    Fmt f;
    PFmt pf;
    const Status s = validate(in, len, n, p.bits, p.variant, &f, &pf);
    if (s != Status::ok) return s;
    if (p.variant == rf::kModePaper) run(pf);
    else run(f);
    return Status::ok;
}

cudaError_t rf_decode(const GpuDecodeArgs &a, bool *corrupt) {
    cudaError_t e = cudaSuccess;
    const Status s = decode_with(a.host_in, a.len, a.n, *a.p, [&](const auto &f) {
        using F = std::decay_t<decltype(f)>;
        const DecodeBody<F> body{a.in + rf::kRangeHeaderBytes, a.len - rf::kRangeHeaderBytes, f, a.out, a.add};
        e = launch_for_each(a.n, body, nullptr, a.stream);
    });
    if (s != Status::ok) *corrupt = true;
    return e;
}

Status rf_decode_host(const CodecOps &, const uint8_t *in, size_t len, size_t n, const CodecParams &p, float *out,
                      bool add) {
    return decode_with(in, len, n, p, [&](const auto &f) {
        using F = std::decay_t<decltype(f)>;
        run_for_each_host(n, DecodeBody<F>{in + rf::kRangeHeaderBytes, len - rf::kRangeHeaderBytes, f, out, add});
    });
}

}  // namespace

extern const GpuCodec gpu_codec_rangefloat = {
    CodecId::rangefloat, false, rf_supports, rf_encode, rf_decode, rf_encode_host, rf_decode_host, rf_work_bytes,
};

}  // namespace compmpi::cuda

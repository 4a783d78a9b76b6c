// SPDX-License-Identifier: BSD-3-Clause
/* zfp CPU kernels: Debian's libzfp (ZFP 1.0) through its block-level API, 1-D, floats and
 * doubles (format and modes: zfp.h; docs/codecs/zfp.md).
 *
 *   fixed rate     every block takes exactly 4*rate bits, so the payload is cut into pieces
 *                  of kPieceBlocks blocks, each starting on a byte: OpenMP encodes and
 *                  decodes the pieces apart (ZFP 1.0 itself decodes serially), and the bytes
 *                  are those of one serial zfp_compress whatever the thread count.
 *   fixed accuracy blocks vary in size: ZFP's own OpenMP compressor (zfp_exec_omp, which
 *                  concatenates per-thread streams into the serial stream) encodes; the decoder
 *                  is serial (a block's place is known only after the blocks before it).
 *
 * Reading: ZFP's bit reader never checks where the buffer ends. Every block is decoded with a
 * bit budget (maxbits) it cannot exceed, whatever the bytes: 4*rate in fixed rate, 140 (fp32)
 * or 271 (fp64) in fixed accuracy. A block that starts at least maxbits before the payload's
 * end is read in place; the last blocks are read from a copy of the payload's tail padded by
 * more than maxbits, so no byte past the payload is read. The bits consumed must then end in
 * the payload's last byte, and the bits after them be zero; a decoded value that is not
 * finite (only a damaged exponent gives one) makes the payload corrupt too. */
#include "zfp/zfp.h"

#include <zfp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace compmpi::zfp {
namespace {

template <class T> struct Tr;
template <> struct Tr<float> {
    using U = uint32_t;
    static constexpr zfp_type type = zfp_type_float;
    static constexpr Elem elem = Elem::f32;
    static constexpr U abs_mask = 0x7FFFFFFFu;
    static constexpr U too_big = 0x7E800000u; /* 2^126: ZFP decodes values up to 2^(e+1) */
    static constexpr U tiny = 0x0E800000u;    /* 2^-98: below, ZFP's 2^(30-e) scale overflows */
    static constexpr unsigned max_block_bits = 140; /* 1 + 8 + 3 + 4 * 32: ZFP FAQ, "maximum block size" */
    /* planes_lost: rate - the bit planes every block surely holds; acc_planes: the planes of
     * max |x| a tolerance must lie within (accuracy_floor); wrap_rate: the highest rate at
     * which the decoder's integers may wrap (docs/codecs/zfp.md, "Bounds") */
    static constexpr int rate_max = 32, planes_lost = 3, acc_planes = 24, wrap_rate = 6;
    static constexpr int tiny_exp = -98, rel_floor_exp = -22;
    /* every block below 2^-98 then codes no plane (ZFP's tolerance: 2^-94) */
    static constexpr double tol_min = 0x1p-93;
    static size_t enc(zfp_stream *z, const float *b) { return zfp_encode_block_float_1(z, b); }
    static size_t enc_part(zfp_stream *z, const float *b, size_t m) {
        return zfp_encode_partial_block_strided_float_1(z, b, m, 1);
    }
    static size_t dec(zfp_stream *z, float *b) { return zfp_decode_block_float_1(z, b); }
    static size_t dec_part(zfp_stream *z, float *b, size_t m) {
        return zfp_decode_partial_block_strided_float_1(z, b, m, 1);
    }
};
template <> struct Tr<double> {
    using U = uint64_t;
    static constexpr zfp_type type = zfp_type_double;
    static constexpr Elem elem = Elem::f64;
    static constexpr U abs_mask = 0x7FFFFFFFFFFFFFFFull;
    static constexpr U too_big = 0x7FD0000000000000ull; /* 2^1022 */
    static constexpr U tiny = 0x03D0000000000000ull;    /* 2^-962 */
    static constexpr unsigned max_block_bits = 271;     /* 1 + 11 + 3 + 4 * 64 */
    static constexpr int rate_max = 64, planes_lost = 4, acc_planes = 56, wrap_rate = 7;
    static constexpr int tiny_exp = -962, rel_floor_exp = -51;
    static constexpr double tol_min = 0x1p-149; /* the smallest float: any tolerance param */
    static size_t enc(zfp_stream *z, const double *b) { return zfp_encode_block_double_1(z, b); }
    static size_t enc_part(zfp_stream *z, const double *b, size_t m) {
        return zfp_encode_partial_block_strided_double_1(z, b, m, 1);
    }
    static size_t dec(zfp_stream *z, double *b) { return zfp_decode_block_double_1(z, b); }
    static size_t dec_part(zfp_stream *z, double *b, size_t m) {
        return zfp_decode_partial_block_strided_double_1(z, b, m, 1);
    }
};

constexpr int kRateMin = 4;
/* Fixed rate: blocks per piece (an even count, so every piece starts on a byte). */
constexpr size_t kPieceBlocks = 4096;
constexpr size_t kParallelMin = size_t{1} << 15; /* elements; below, one thread */
/* ZFP 1.0's OpenMP compressor counts blocks in 32-bit unsigned integers */
constexpr size_t kOmpMax = size_t{1} << 31;

template <class T> typename Tr<T>::U bits_of(T v) {
    typename Tr<T>::U u;
    std::memcpy(&u, &v, sizeof u);
    return u;
}
template <class T> T value_of(typename Tr<T>::U u) {
    T v;
    std::memcpy(&v, &u, sizeof v);
    return v;
}

size_t blocks_of(size_t n) { return n / 4 + (n % 4 != 0); }

Status check_params(const CodecParams &p) {
    /* the payload format is the byte stream of a ZFP built with 8-bit stream words (Debian's) */
    if (stream_word_bits != 8) return Status::unsupported;
    const bool d = p.elem == Elem::f64;
    if (p.elem != Elem::f32 && !d) return Status::invalid_arg;
    if (p.variant == kFixedRate) {
        if (p.bits < kRateMin || p.bits > (d ? Tr<double>::rate_max : Tr<float>::rate_max) || p.param != 0)
            return Status::invalid_arg;
        return Status::ok;
    }
    if (p.variant != kFixedAccuracy || p.bits != 0) return Status::invalid_arg;
    const float tol = tolerance_of(p.param);
    if (!std::isfinite(tol) || !(tol >= (d ? Tr<double>::tol_min : Tr<float>::tol_min))) return Status::invalid_arg;
    return Status::ok;
}

size_t block_bits(const CodecParams &p) {
    if (p.variant == kFixedRate) return 4u * p.bits;
    return p.elem == Elem::f64 ? Tr<double>::max_block_bits : Tr<float>::max_block_bits;
}

size_t payload_bytes(size_t n, const CodecParams &p) {
    if (check_params(p) != Status::ok) return 0;
    return (blocks_of(n) * block_bits(p) + 7) / 8;
}

/* The zfp_stream parameters of p (no bit stream, serial). Fixed accuracy is ZFP's accuracy
 * mode at zfp_tolerance(T), half ZFP's own power of two (zfp.h), with maxbits lowered from
 * 16658 to the largest block the mode can write: the same
 * bytes (tests/unit/test_zfp.cc compares them), and a budget that bounds what the decoder
 * reads per block. */
template <class T> void set_params(const CodecParams &p, zfp_stream *z) {
    if (p.variant == kFixedRate) {
        zfp_stream_set_rate(z, p.bits, Tr<T>::type, 1, zfp_false);
    } else {
        zfp_stream_set_accuracy(z, zfp_tolerance(tolerance_of(p.param)));
        z->maxbits = Tr<T>::max_block_bits;
    }
}

/* Largest |x| as bits (the sign cleared); NaN and Inf compare above every finite value. */
template <class T> typename Tr<T>::U max_abs_bits(const T *in, size_t n, int threads) {
    using U = typename Tr<T>::U;
    U m = 0;
#pragma omp parallel for num_threads(threads) schedule(static) reduction(max : m) if (n >= 4 * kParallelMin && threads > 1)
    for (size_t i = 0; i < n; ++i) m = std::max<U>(m, bits_of(in[i]) & Tr<T>::abs_mask);
    return m;
}

double exp2i(int e) { return std::ldexp(1.0, e); }

/* maxabs < 2^e */
int exponent_above(double maxabs) {
    int e = 0;
    std::frexp(maxabs, &e);
    return e;
}

template <class T> double accuracy_floor_t(double maxabs) {
    if (!(maxabs > 0)) return Tr<T>::tol_min;
    return std::max(Tr<T>::tol_min, exp2i(exponent_above(maxabs) - Tr<T>::acc_planes));
}

template <class T> double rate_bound_t(double maxabs, int rate) {
    if (rate < kRateMin || rate > Tr<T>::rate_max || !(maxabs >= 0)) return HUGE_VAL;
    if (maxabs == 0) return 0;
    if (!(maxabs < value_of<T>(Tr<T>::too_big))) return HUGE_VAL; /* refused: nonfinite */
    const double tiny = exp2i(Tr<T>::tiny_exp);
    if (maxabs < tiny) return maxabs; /* encoded as zeros */
    const int e = exponent_above(maxabs), p = rate - Tr<T>::planes_lost;
    double rel = 16 * exp2i(e - p) + exp2i(e + Tr<T>::rel_floor_exp);
    /* at the lowest rates the decoder's integers may wrap; any decoded integer is then
     * within 3 * 2^e of the input (both fit the integer type): 4 * 2^e covers it */
    if (rate <= Tr<T>::wrap_rate) rel = std::max(rel, 4 * exp2i(e));
    return std::max(rel, tiny);
}

/* ---------------------------------------------------------------- encode */

/* Fixed rate, blocks [b0, b1) into out + b0 * bits / 8 (a byte boundary: b0 is a multiple of
 * kPieceBlocks). A block whose values are all below 2^-98 (2^-962) is written as zeros. */
template <class T> bool encode_piece(const T *in, size_t n, const zfp_stream &base, size_t b0, size_t b1,
                                     uint8_t *out) {
    static const T zeros[4] = {0, 0, 0, 0};
    const size_t bb = base.maxbits;
    bitstream *bs = stream_open(out + b0 * bb / 8, ((b1 - b0) * bb + 7) / 8);
    if (!bs) return false;
    zfp_stream z = base;
    z.stream = bs;
    for (size_t b = b0; b < b1; ++b) {
        const T *x = in + 4 * b;
        const size_t m = std::min<size_t>(4, n - 4 * b);
        typename Tr<T>::U mx = 0;
        for (size_t j = 0; j < m; ++j) mx = std::max<typename Tr<T>::U>(mx, bits_of(x[j]) & Tr<T>::abs_mask);
        if (mx < Tr<T>::tiny) x = zeros;
        if (m == 4) Tr<T>::enc(&z, x);
        else Tr<T>::enc_part(&z, x, m);
    }
    stream_flush(bs);
    stream_close(bs);
    return true;
}

template <class T> Status encode_t(const T *in, size_t n, const CodecParams &p, uint8_t *out, size_t cap,
                                   size_t *len) {
    CMPI_CHECK(check_params(p));
    if (p.elem != Tr<T>::elem) return Status::invalid_arg;
    const size_t maxp = payload_bytes(n, p);
    if (cap < maxp) return Status::invalid_arg;
    const int threads = std::max(1, p.threads);
    const typename Tr<T>::U mx = max_abs_bits(in, n, threads);
    if (mx >= Tr<T>::too_big) return Status::nonfinite; /* NaN, Inf, or beyond what ZFP decodes finite */
    if (n == 0) {
        *len = 0;
        return Status::ok;
    }
    if (p.variant == kFixedRate) {
        zfp_stream base{};
        set_params<T>(p, &base);
        const size_t blocks = blocks_of(n), pieces = (blocks + kPieceBlocks - 1) / kPieceBlocks;
        int failed = 0;
#pragma omp parallel for num_threads(threads) schedule(static) reduction(| : failed) if (n >= kParallelMin && threads > 1)
        for (size_t k = 0; k < pieces; ++k)
            failed |= !encode_piece(in, n, base, k * kPieceBlocks, std::min(blocks, (k + 1) * kPieceBlocks), out);
        if (failed) return Status::no_memory;
        *len = maxp;
        return Status::ok;
    }
    /* fixed accuracy: the bound is proven for tol >= accuracy_floor(max |x|) (docs/codecs/zfp.md) */
    if (static_cast<double>(tolerance_of(p.param)) < accuracy_floor_t<T>(value_of<T>(mx))) return Status::unsupported;
    zfp_stream *z = zfp_stream_open(nullptr);
    bitstream *bs = stream_open(out, maxp);
    if (!z || !bs) {
        if (bs) stream_close(bs);
        if (z) zfp_stream_close(z);
        return Status::no_memory;
    }
    set_params<T>(p, z);
    zfp_stream_set_bit_stream(z, bs);
    /* identical bytes whatever the thread count: ZFP FAQ "Are parallel compressed streams
     * identical to serial streams?" (yes), and tests/unit/test_zfp.cc */
    if (threads > 1 && n >= kParallelMin && n < kOmpMax && zfp_stream_set_execution(z, zfp_exec_omp))
        zfp_stream_set_omp_threads(z, static_cast<unsigned>(threads));
    zfp_field f{};
    f.type = Tr<T>::type;
    f.nx = n;
    f.data = const_cast<T *>(in);
    const size_t bytes = zfp_compress(z, &f);
    zfp_stream_close(z);
    stream_close(bs);
    if (bytes == 0 || bytes > maxp) return Status::unsupported; /* not expected: ZFP refused the field */
    *len = bytes;
    return Status::ok;
}

/* ---------------------------------------------------------------- decode */

/* Decode blocks [b0, b1) of the payload in[0..len) starting at bit pos into out (add: into
 * out's values). Returns false if the payload is corrupt; *end = the bit after the last
 * block. */
template <class T> bool decode_blocks(const uint8_t *in, size_t len, size_t n, const zfp_stream &base, size_t b0,
                                      size_t b1, size_t pos, T *out, bool add, size_t *end) {
    const size_t maxbits = base.maxbits, limit = len * 8;
    /* the tail copy: what is left of the payload when a block could reach past it, zeros after */
    uint8_t tail[2 * ((Tr<double>::max_block_bits + 7) / 8) + 16];
    size_t tail_at = 0; /* byte of the payload where tail[0] sits; 0 = reading in place */
    bool in_tail = false;
    bitstream *bs = stream_open(const_cast<uint8_t *>(in), len);
    if (!bs) return false;
    zfp_stream z = base;
    z.stream = bs;
    stream_rseek(bs, pos);
    bool ok = true;
    T v[4];
    for (size_t b = b0; b < b1 && ok; ++b) {
        if (pos > limit) {
            ok = false;
            break;
        }
        if (!in_tail && limit - pos < maxbits) {
            tail_at = pos / 8;
            std::memset(tail, 0, sizeof tail);
            std::memcpy(tail, in + tail_at, len - tail_at);
            stream_close(bs);
            bs = stream_open(tail, sizeof tail);
            if (!bs) return false;
            z.stream = bs;
            stream_rseek(bs, pos - 8 * tail_at);
            in_tail = true;
        }
        const size_t m = std::min<size_t>(4, n - 4 * b);
        T *dst = out + 4 * b;
        T *w = (!add && m == 4) ? dst : v;
        pos += m == 4 ? Tr<T>::dec(&z, w) : Tr<T>::dec_part(&z, w, m);
        for (size_t j = 0; j < m; ++j) ok &= std::isfinite(w[j]);
        if (w == v)
            for (size_t j = 0; j < m; ++j) dst[j] = add ? dst[j] + v[j] : v[j];
    }
    stream_close(bs);
    *end = pos;
    return ok && pos <= limit;
}

/* The bits of the payload's last byte after bit `end` must be zero (the encoder pads with
 * zeros). */
bool pad_clean(const uint8_t *in, size_t len, size_t end) {
    if (end % 8 == 0) return true;
    return (in[len - 1] >> (end % 8)) == 0;
}

template <class T> Status decode_t(const uint8_t *in, size_t len, size_t n, const CodecParams &p, T *out, bool add) {
    if (check_params(p) != Status::ok || p.elem != Tr<T>::elem) return Status::corrupt;
    const size_t maxp = payload_bytes(n, p);
    if (len > maxp) return Status::corrupt;
    if (n == 0) return len == 0 ? Status::ok : Status::corrupt;
    zfp_stream base{};
    set_params<T>(p, &base);
    const size_t blocks = blocks_of(n);
    if (p.variant == kFixedRate) {
        if (len != maxp || !pad_clean(in, len, blocks * base.maxbits)) return Status::corrupt;
        const size_t pieces = (blocks + kPieceBlocks - 1) / kPieceBlocks;
        const int threads = std::max(1, p.threads);
        int bad = 0;
#pragma omp parallel for num_threads(threads) schedule(static) reduction(| : bad) if (n >= kParallelMin && threads > 1)
        for (size_t k = 0; k < pieces; ++k) {
            const size_t b0 = k * kPieceBlocks, b1 = std::min(blocks, b0 + kPieceBlocks);
            size_t end = 0;
            if (!decode_blocks(in, len, n, base, b0, b1, b0 * base.maxbits, out, add, &end) ||
                end != b1 * base.maxbits)
                bad = 1;
        }
        return bad ? Status::corrupt : Status::ok;
    }
    if (len == 0) return Status::corrupt; /* every block takes at least one bit */
    size_t end = 0;
    if (!decode_blocks(in, len, n, base, 0, blocks, 0, out, add, &end)) return Status::corrupt;
    /* the stream ends in the payload's last byte: no byte missing, none left over */
    if ((end + 7) / 8 != len || !pad_clean(in, len, end)) return Status::corrupt;
    return Status::ok;
}

template <class T> Status max_abs_error_t(const T *in, size_t n, const CodecParams &p, double *bound) {
    CMPI_CHECK(check_params(p));
    if (p.elem != Tr<T>::elem) return Status::invalid_arg;
    using U = typename Tr<T>::U;
    const U mx = max_abs_bits(in, n, std::max(1, p.threads));
    if (mx >= Tr<T>::too_big) return Status::nonfinite;
    if (p.variant == kFixedAccuracy) {
        const double tol = tolerance_of(p.param);
        if (tol < accuracy_floor_t<T>(value_of<T>(mx))) return Status::unsupported;
        *bound = tol;
        return Status::ok;
    }
    /* the bound grows with a block's max |x|, except that blocks below the tiny threshold
     * (encoded as zeros) err by up to their own max: the largest block max on each side */
    U big = 0, small = 0;
    for (size_t b = 0; b < blocks_of(n); ++b) {
        U m = 0;
        for (size_t j = 4 * b; j < std::min(n, 4 * b + 4); ++j) m = std::max<U>(m, bits_of(in[j]) & Tr<T>::abs_mask);
        if (m < Tr<T>::tiny) small = std::max(small, m);
        else big = std::max(big, m);
    }
    const double e_big = big ? rate_bound_t<T>(value_of<T>(big), p.bits) : 0;
    *bound = std::max(e_big, static_cast<double>(value_of<T>(small)));
    return Status::ok;
}

/* ---------------------------------------------------------------- CodecOps */

Status zfp_check(const CodecParams &p) { return check_params(p); }
size_t zfp_max_payload(size_t n, const CodecParams &p) { return payload_bytes(n, p); }
bool zfp_variable(const CodecParams &p) { return p.variant == kFixedAccuracy; }

template <class T> using ZfpDecode = DecodeOps<T, decode_t<T>>;

}  // namespace

uint32_t tolerance_param(float tol) { return bits_of(tol); }
float tolerance_of(uint32_t param) { return value_of<float>(param); }
double zfp_tolerance(double tol) {
    int e = 0;
    std::frexp(tol, &e); /* 2^(e-1) <= tol < 2^e */
    return exp2i(e - 2);
}

double accuracy_floor(double maxabs, Elem e) {
    return e == Elem::f64 ? accuracy_floor_t<double>(maxabs) : accuracy_floor_t<float>(maxabs);
}
double rate_error_bound(double maxabs, int rate, Elem e) {
    return e == Elem::f64 ? rate_bound_t<double>(maxabs, rate) : rate_bound_t<float>(maxabs, rate);
}
Status max_abs_error(const float *in, size_t n, const CodecParams &p, double *bound) {
    return max_abs_error_t(in, n, p, bound);
}
Status max_abs_error(const double *in, size_t n, const CodecParams &p, double *bound) {
    return max_abs_error_t(in, n, p, bound);
}

}  // namespace compmpi::zfp

namespace compmpi {
extern const CodecOps codec_zfp_ops = {
    CodecId::zfp, "zfp",
    "ZFP 1.0, 1-D blocks of 4: fixed rate (variant 0, bits = rate per value) or fixed accuracy "
    "(variant 1, param = float bits of the absolute tolerance; variable size)",
    CODEC_VARIABLE_VARIANT,
    16, 4, 32, 1,
    zfp::zfp_check, zfp::zfp_max_payload, nullptr, zfp::encode_t<float>, zfp::ZfpDecode<float>::decode,
    zfp::ZfpDecode<float>::decode_add, nullptr, nullptr, nullptr,
    /* fp64 */
    32, 4, 64, 1,
    nullptr, zfp::encode_t<double>, zfp::ZfpDecode<double>::decode, zfp::ZfpDecode<double>::decode_add, nullptr,
    nullptr,
    zfp::zfp_variable,
};
}  // namespace compmpi

// SPDX-License-Identifier: BSD-3-Clause
/* Error models of the deterministic codecs (error_model.h). Each bound below is on one
 * encode-decode round trip of a finite value y, |y| <= max_value.
 *
 * bitpack, width w (fp32: 1 sign, 8 exponent and m = w - 9 mantissa bits kept; fp64: 1, 11,
 * m = w - 12). A normal y lies in [2^e, 2^(e+1)); the kept bits are a multiple of 2^(e-m), so
 * truncation changes y by less than 2^(e-m) <= 2^-m |y|, rounding to nearest by at most
 * 2^(e-m-1) <= 2^-(m+1) |y|. A subnormal y has the quantum 2^(emin-m) (emin = -126 / -1022):
 * the error is below 2^-m normal_min (trunc), 2^-(m+1) normal_min (nearest). Nearest rounding
 * that would reach the Inf exponent truncates instead (bitpack.h); max_value = half the
 * largest finite value keeps every value of the model below that. Widths with m < 1 (fp32
 * w = 8: no mantissa bit) have no model; w = 32 (fp32) / 64 (fp64) is exact.
 * fp32 (doubles narrowed to the nearest float): |y| in the float normal range is rounded with
 * a relative error <= 2^-24; below FLT_MIN the float quantum is 2^-149, error <= 2^-150 =
 * 2^-24 FLT_MIN. Values beyond FLT_MAX make the encode report nonfinite (exact path).
 * none: exact.
 * zfp fixed rate (absolute model only): zfp::rate_error_bound(B, rate) bounds a block whose
 * max |y| is B < 2^e by c(e) 2^e (docs/codecs/zfp.md); for B in [2^(e-1), 2^e) that is at most
 * 2 B c, and c is the same for every e, so slope = 2 rate_error_bound(0.75) holds for all B;
 * blocks below ZFP's tiny threshold are within max(B, tiny) of their input: floor = the
 * bound at B = 0+ (tiny). Fixed accuracy has no model here: its payload size is the data's,
 * so the error-bounded mode does not choose it (docs/error_bound.md).
 * sz (absolute model only): every decoded value is within eb (the header param) of its input,
 * for every finite value: the encoder keeps a code only after checking, with the decoder's
 * own arithmetic, that its decoded value is within eb, and stores any other value verbatim
 * (kernels/sz/sz.h, docs/codecs/sz.md): slope 0, floor eb, no upper limit on |y|. */
#include "error_model.h"

#include "sz/sz.h"
#include "zfp/zfp.h"

#include <cfloat>
#include <algorithm>
#include <cmath>
#include <limits>

namespace compmpi {

bool codec_error_model(const CodecOps &c, const CodecParams &p, ErrorModel *m) {
    const bool d = p.elem == Elem::f64;
    switch (c.id) {
        case CodecId::none:
            *m = ErrorModel{0, d ? DBL_MIN : FLT_MIN, d ? DBL_MAX : FLT_MAX};
            return true;
        case CodecId::bitpack: {
            const int w = codec_bits_for(c, p.bits, p.elem);
            if (!codec_bits_ok(c, w, p.elem)) return false;
            const int mant = w - (d ? 12 : 9);
            if (mant < 1) return false;
            const bool exact = w == (d ? 64 : 32);
            const double u = exact ? 0 : std::ldexp(1.0, -(mant + (p.variant == 1 ? 1 : 0)));
            *m = ErrorModel{u, d ? DBL_MIN : FLT_MIN, (d ? DBL_MAX : FLT_MAX) / 2};
            return true;
        }
        case CodecId::fp32:
            if (!d) return false;
            *m = ErrorModel{0x1p-24, FLT_MIN, FLT_MAX};
            return true;
        default: return false;
    }
}

double codec_abs_error(const CodecOps &c, const CodecParams &p, double B) {
    ErrorModel m;
    if (codec_error_model(c, p, &m)) return B <= m.max_value ? m.rel * std::max(B, m.normal_min) : -1;
    if (c.id == CodecId::zfp && p.variant == zfp::kFixedRate) {
        const double e = zfp::rate_error_bound(B, codec_bits_for(c, p.bits, p.elem), p.elem);
        return std::isfinite(e) ? e : -1;
    }
    if (c.id == CodecId::sz && c.check(p) == Status::ok) return static_cast<double>(sz::eb_of(p.param));
    return -1;
}

bool codec_abs_error_linear(const CodecOps &c, const CodecParams &p, double *slope, double *floor, double *max_value) {
    ErrorModel m;
    if (codec_error_model(c, p, &m)) {
        *slope = m.rel;
        *floor = m.rel * m.normal_min;
        *max_value = m.max_value;
        return true;
    }
    if (c.id == CodecId::zfp && p.variant == zfp::kFixedRate) {
        const int rate = codec_bits_for(c, p.bits, p.elem);
        if (!codec_bits_ok(c, rate, p.elem)) return false;
        const bool d = p.elem == Elem::f64;
        *slope = 2 * zfp::rate_error_bound(0.75, rate, p.elem);
        /* zfp.h: blocks below 2^-98 (fp32) / 2^-962 (fp64) are encoded as zeros, and no bound
         * is below that threshold */
        *floor = d ? 0x1p-962 : 0x1p-98;
        *max_value = d ? 0x1p1021 : 0x1p125;  /* refused at 2^1022 / 2^126 */
        return std::isfinite(*slope) && std::isfinite(*floor);
    }
    if (c.id == CodecId::sz && c.check(p) == Status::ok) {
        /* every finite value, by the encoder's own check (escapes are exact) */
        *slope = 0;
        *floor = static_cast<double>(sz::eb_of(p.param));
        *max_value = p.elem == Elem::f64 ? DBL_MAX : FLT_MAX;
        return true;
    }
    return false;
}

namespace {
template <class T> bool outside_any(const T *in, size_t n, double lo, double hi) {
    const T l = static_cast<T>(lo), h = static_cast<T>(hi);
    bool any = false;
#pragma omp simd reduction(|| : any)
    for (size_t i = 0; i < n; ++i) {
        const T a = std::fabs(in[i]);
        any = any || (a != 0 && a < l) || a > h;
    }
    return any;
}
template <class T> double max_abs(const T *in, size_t n) {
    T mx = 0;
    bool bad = false;
#pragma omp simd reduction(max : mx) reduction(|| : bad)
    for (size_t i = 0; i < n; ++i) {
        const T a = std::fabs(in[i]);
        bad = bad || !(a <= std::numeric_limits<T>::max());
        mx = a > mx ? a : mx;
    }
    return bad ? HUGE_VAL : static_cast<double>(mx);
}
}  // namespace

bool outside_range_any(const float *in, size_t n, double lo, double hi) { return outside_any(in, n, lo, hi); }
bool outside_range_any(const double *in, size_t n, double lo, double hi) { return outside_any(in, n, lo, hi); }
double max_abs_of(const float *in, size_t n) { return max_abs(in, n); }
double max_abs_of(const double *in, size_t n) { return max_abs(in, n); }

}  // namespace compmpi

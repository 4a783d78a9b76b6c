// SPDX-License-Identifier: BSD-3-Clause
/* sz: an error-bounded linear quantiser of the SZ / fZ-light family (docs/codecs/sz.md): every
 * decoded value lies within eb of its input, for floats and doubles, and the integer codes go
 * through zstd inside the codec, so the payload size depends on the data
 * (CODEC_VARIABLE_VARIANT, every variant variable).
 *
 * Header: bits = 0; variant kPlain (0) or kLorenzo (1); param = eb as the bits of an IEEE
 * float, a normal positive finite float (eb_param / eb_of).
 *
 * Quantisation (both variants). The bin width is D = 2 eb (15/16), a double computed exactly
 * (the 1/16 of eb left over absorbs the rounding of the arithmetic below). For each value x:
 *     t = fl64(x / D);  k = nearest integer to t (ties to even);  d = dequant(k) = fl_T(fl64(k * D))
 * and x is kept as the code k only if |t| <= 2^51 and the encoder's own check
 * fl64(|d - x|) <= fl64(eb (1 - 2^-50)) passes; otherwise x is escaped: stored verbatim,
 * decoded exactly. The decoder computes the same d = dequant(k) (one multiply, one narrowing;
 * -ffp-contract=off), so every decoded value is within eb of its input by construction; the
 * analysis in docs/codecs/sz.md shows no value escapes while |x| <= kNoEscapeRatio(T) * eb.
 *
 * Prediction (variant kLorenzo): the 1-D Lorenzo predictor on the decoded values, blockwise.
 * Decoded values are the grid points k D, so predicting d_i by d_{i-1} and quantising the
 * residual on the same grid sends k_i - k_{i-1}, integers: the decoder reproduces the
 * encoder's decoded neighbours bit for bit. The prediction restarts at 0 in every block; an
 * escaped value does not move it (the next value is predicted from the last coded one).
 *
 * Codes: r = k - prediction (plain: prediction 0), stored as c = zigzag(r) + 1, and c = 0
 * for an escape (|k| <= 2^51, |r| <= 2^52, so c <= 2^53 + 1: at most 7 bytes).
 *
 * Payload, for n elements of E = 4 or 8 bytes in blocks of kBlock elements (the last shorter):
 *   u32 len[nblocks]            bytes of each block's record
 *   record: u8 w, u8 mode, u16 0, u32 nesc, then by mode:
 *     kRaw:     m codes of w bytes (1..7), byte planes (byte 0 of every code, then byte 1...),
 *               then nesc escaped values (E bytes each, in order)      len = 8 + m w + nesc E
 *     kZstd:    one zstd frame that expands to exactly the m w bytes of kRaw's codes, then the
 *               nesc escaped values                                     len = 8 + f + nesc E
 *     kVerbatim: w = 0, nesc = 0, the block's m values                 len = 8 + m E
 * The encoder writes the smallest; no record is longer than kVerbatim's, so
 * max_payload(n) = 12 nblocks + n E is a true upper bound. A decoder checks every length, w,
 * mode, nesc, every code (|k| <= 2^51, the number of escape codes == nesc) and that escaped
 * and verbatim values are finite before it writes out: otherwise Status::corrupt. NaN/Inf in
 * the input: Status::nonfinite (the exact path takes the call). */
#pragma once
#include <cstdint>
#include <cstring>

#include "codec.h"

namespace compmpi::sz {

inline constexpr uint8_t kPlain = 0, kLorenzo = 1;
inline constexpr uint8_t kRaw = 0, kZstd = 1, kVerbatim = 2;
inline constexpr size_t kBlock = size_t{1} << 15;
inline constexpr size_t kRecordHeader = 8;
/* |x| / eb below which no value escapes (docs/codecs/sz.md, "Proof"): the rounding of the
 * decode (u_T |x| at most, plus 2^-51 |x|) stays below the eb/16 left over */
inline constexpr double kNoEscapeRatio32 = 0x1p19, kNoEscapeRatio64 = 0x1p46;
inline constexpr double no_escape_ratio(Elem e) { return e == Elem::f64 ? kNoEscapeRatio64 : kNoEscapeRatio32; }

inline uint32_t eb_param(float eb) {
    uint32_t u;
    std::memcpy(&u, &eb, 4);
    return u;
}
inline float eb_of(uint32_t param) {
    float f;
    std::memcpy(&f, &param, 4);
    return f;
}
/* the bin width D = 2 eb (15/16) = eb * 1.875: exact in double (24 + 4 significant bits) */
inline double bin_width(float eb) { return static_cast<double>(eb) * 1.875; }

/* The bits a fixed-width code needs for values up to |x| <= A at bound eb (zigzag of the
 * largest |k| <= A / D + 1/2, plus the escape code): the planner's size estimate. */
double code_bits(double A, double eb);

}  // namespace compmpi::sz

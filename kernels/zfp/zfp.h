// SPDX-License-Identifier: BSD-3-Clause
/* zfp: ZFP 1.0 (Lindstrom, LLNL; Debian's libzfp) compressing each buffer as one 1-D array of
 * floats or doubles, in one of two modes named by the header variant:
 *
 *   variant 0, fixed rate:     bits = rate in bits per value (fp32 4..32, fp64 4..64, every
 *                              integer), param = 0. Every block of 4 values takes 4*bits
 *                              bits: payload = ceil(ceil(n/4) * bits / 2) bytes, exactly.
 *   variant 1, fixed accuracy: bits = 0, param = the absolute tolerance T as the bits of an
 *                              IEEE float (fp32 data: >= 2^-93). The stream is ZFP's accuracy
 *                              mode at zfp_tolerance(T) = 2^(floor(log2 T) - 1). Every decoded
 *                              value is within T of its input (see accuracy_floor()); the
 *                              payload size depends on the data, at most max_payload(): the
 *                              variant is variable-size (CODEC_VARIABLE_VARIANT).
 *
 * Payload: the ZFP stream itself (no ZFP header: the blob header carries what it would say),
 * blocks in order, ending at the byte after its last bit, the bits after it zero -- what
 * zfp_compress writes with Debian's 8-bit stream words. Any ZFP 1.0 decoder given the same
 * parameters reads it (fixed accuracy: expert mode with maxbits = the most a block can take,
 * 140 bits for floats, 271 for doubles, which ZFP's accuracy mode never exceeds).
 *
 * Differences from calling zfp_compress on the caller's array, all on inputs ZFP cannot
 * represent: |x| >= 2^126 (fp32) or 2^1022 (fp64) anywhere, NaN or Inf -> Status::nonfinite
 * (ZFP's decoded values could round to Inf; the exact path takes the call); fixed rate
 * encodes a block whose values are all below 2^-98 (fp32) / 2^-962 (fp64) as zeros (ZFP's
 * float-to-integer scale overflows there and decodes garbage of about that size); fixed
 * accuracy refuses (Status::unsupported) a tolerance below accuracy_floor(max |x|), where
 * the guarantee is not proven. docs/codecs/zfp.md has the bounds and the measurements. */
#pragma once
#include <cstddef>
#include <cstdint>

#include "codec.h"

namespace compmpi::zfp {

inline constexpr uint8_t kFixedRate = 0, kFixedAccuracy = 1;

/* The header param of fixed accuracy for tolerance tol (its float bits), and back. */
uint32_t tolerance_param(float tol);
float tolerance_of(uint32_t param);
/* The tolerance handed to ZFP's accuracy mode for a guarantee of tol: 2^(floor(log2 tol) - 1),
 * half of ZFP's own power of two. At ZFP's own, a block whose largest |x| is just below that
 * power of two keeps 3 bit planes, and the decoder's integers can wrap: measured 1.43 x the
 * tolerance (docs/codecs/zfp.md, "Bounds"). */
double zfp_tolerance(double tol);

/* Fixed accuracy: the smallest tolerance for which every decoded value of data whose largest
 * |x| is maxabs is proven within it of its input: tol >= 2^(e-24) (fp32), 2^(e-56) (fp64),
 * maxabs < 2^e; closer to the integers' last bit plane the transform's and the output's
 * rounding could exceed it (docs/codecs/zfp.md, "Bounds"). Never below the variant's smallest
 * tolerance (fp32 2^-93, fp64 2^-149). */
double accuracy_floor(double maxabs, Elem e);

/* Fixed rate: a proven bound on |decoded - x| for every value of a block whose largest |x| is
 * at most maxabs, at `rate` bits per value: with p = rate-3 (fp32) / rate-4 (fp64) the bit
 * planes every block is sure to hold, and maxabs < 2^e,
 *     2^e * (16 * 2^-p + 2^-22)  (fp32),   2^e * (16 * 2^-p + 2^-51)  (fp64),
 * at least 4 * 2^e at rates up to 6 (fp32) / 7 (fp64), where the decoder's integers may wrap;
 * at least 2^-98 (2^-962); maxabs itself for blocks below 2^-98 (2^-962), which are encoded as
 * zeros; 0 for maxabs = 0; HUGE_VAL for maxabs >= 2^126 (2^1022), which the codec refuses,
 * and for a rate out of range. Derived from ZFP 1.0's encoder, transform and negabinary
 * truncation in docs/codecs/zfp.md, "Bounds" (the derivation gives 80 (fp32) / 160 (fp64)
 * times 2^(e-rate) where this says 128 / 256). Monotone in maxabs. */
double rate_error_bound(double maxabs, int rate, Elem e);

/* The largest |decoded - x| that encoding in[0..n) with p can give (fixed rate: the block
 * bounds above, block by block; fixed accuracy: the tolerance). nonfinite: the data holds
 * NaN/Inf or values ZFP cannot represent; unsupported: a tolerance below accuracy_floor;
 * invalid_arg: p is not a zfp parameter set. */
Status max_abs_error(const float *in, size_t n, const CodecParams &p, double *bound);
Status max_abs_error(const double *in, size_t n, const CodecParams &p, double *bound);

}  // namespace compmpi::zfp

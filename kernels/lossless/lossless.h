// SPDX-License-Identifier: BSD-3-Clause
/* lossless: bit-exact compression of floats and doubles (UCCL-Zip's and ZipNN's idea: the
 * exponent bytes of real data carry far less than 8 bits of entropy; docs/codecs/lossless.md).
 *
 * Payload (variable size), for n elements of E = 4 or 8 bytes, cut into blocks of
 * B = 2^param elements (the last one shorter):
 *
 *   u32 len[nblocks]          bytes of each block's record
 *   record[0] record[1] ...   len[b] == raw bytes of the block: the block verbatim
 *                             len[b] <  raw bytes: one zstd frame of the block's
 *                                       transformed bytes (the transform: variant)
 *
 * variant kShuffle: byte-plane shuffle (byte k of every element, then byte k+1, ...);
 * variant kDelta:   each element's bit pattern minus its predecessor's in the block (modulo
 *                   2^(8E), reversible), then the shuffle -- for smooth fields.
 * The zstd level is the encoder's choice (CodecParams::level); the decoder needs none.
 * Every record is checked before a byte of it is used: lengths against the payload, a zstd
 * frame must expand to exactly the block's bytes. NaN payloads, +-0, subnormals and Inf
 * round-trip bit for bit, so encode never reports nonfinite. */
#pragma once
#include <cstdint>

#include "codec.h"

namespace compmpi::lossless {

inline constexpr uint8_t kShuffle = 0;
inline constexpr uint8_t kDelta = 1;
/* log2 of the elements per block: 2^16 (256 KiB of floats, 512 KiB of doubles), within the
 * range a decoder accepts */
inline constexpr uint32_t kBlockLog2 = 16, kBlockLog2Min = 10, kBlockLog2Max = 24;

}  // namespace compmpi::lossless

// SPDX-License-Identifier: BSD-3-Clause
/* The entropy stage (issue 43 part 2; docs/codecs/entropy.md): a lossless pass over a blob's
 * payload after any quantiser, so that fixed-width codes travel near their entropy.
 *
 * It works on a finished blob in host memory, whatever backend encoded it: the codec's payload
 * (P bytes) is byte-plane shuffled with the stride of its codes (bitpack 16: 2, fp32 codes: 4,
 * q8: 1, ...), then compressed with Debian's libzstd at a fast level; where the frame is
 * shorter than P, it replaces the payload and the header says so:
 *
 *   header byte 10  stage    0 none, 1 zstd
 *   header byte 11  stride   the shuffle's element width in bytes, 1..8 (1: no shuffle);
 *                            0 when stage is 0
 *   header payload           the frame's bytes (the coded length on the wire)
 *
 * The frame records P (its content size) and a checksum of the content (zstd's XXH64, 4 bytes),
 * so a corrupted frame is refused rather than decoded to other codes. A decoder undoes the stage before the codec sees a
 * byte: the frame must be one whole zstd frame of exactly the bytes it claims, expand to a
 * size the codec accepts for the header's count (exactly max_payload for a fixed-size codec,
 * at most max_payload for a variable one), else Status::corrupt. Decoded values are the
 * codec's own: the stage is lossless, so results are bit-identical with and without it.
 * A blob whose payload does not shrink, a flagged blob (NaN/Inf, abandon) and a blob of a
 * codec that codes its own payload (lossless, zfp, sz) are sent as they are. */
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "codec.h"

namespace compmpi {

inline constexpr uint8_t kEntropyNone = 0;
inline constexpr uint8_t kEntropyZstd = 1;
inline constexpr uint8_t kEntropyStrideMax = 8;

/* The encode side's choice: method (kEntropyNone: off) and the zstd level (negative levels are
 * zstd's fast ones). */
struct EntropyParams {
    uint8_t method = kEntropyNone;
    int level = -100; /* the setting entropy_level's default */
};

/* Does the stage apply to blobs of codec c (not to codecs that entropy-code their own payload)? */
bool entropy_applies(const CodecOps &c);
/* The shuffle stride of codec c's payload with parameters p: the width of its codes in bytes
 * where that is a whole number of bytes, else 1. */
uint8_t entropy_stride(const CodecOps &c, const CodecParams &p);

/* blob: a valid, unflagged blob of *len bytes (header + payload) in host memory. Codes its
 * payload in place when that makes it shorter (*len then shrinks; the header says so).
 * Returns true if the blob was coded. Never fails: on any error the blob stays as it was. */
bool blob_entropy_encode(const CodecOps &c, const CodecParams &p, uint8_t *blob, size_t *len, const EntropyParams &sp);
/* Whether the blob (at least a header's bytes) says its payload is entropy-coded. */
inline bool blob_entropy_coded(const uint8_t *blob, size_t avail) {
    return avail >= kBlobHeaderBytes && blob[10] != kEntropyNone;
}
/* The raw blob of a coded one: validated (blob_peek with expect_count, then the frame), into
 * scratch; *raw points to it and *raw_avail is its length. A blob that is not coded: *raw =
 * blob, *raw_avail = avail, nothing copied. Status::corrupt for any frame that does not
 * decode to exactly what the header allows. */
Status blob_entropy_decode(const uint8_t *blob, size_t avail, size_t expect_count, std::vector<uint8_t> &scratch,
                    const uint8_t **raw, size_t *raw_avail);

/* Byte-plane shuffle of n bytes with element width w (1..8): byte k of every whole element,
 * then byte k+1, ...; the n % w tail bytes last, as they are. unshuffle inverts it. */
void byte_shuffle(const uint8_t *src, size_t n, unsigned w, uint8_t *dst);
void byte_unshuffle(const uint8_t *src, size_t n, unsigned w, uint8_t *dst);

}  // namespace compmpi

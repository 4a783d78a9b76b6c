// SPDX-License-Identifier: BSD-3-Clause
/* The codec interface: one struct of operations for every codec, and the self-describing
 * payload ("blob") format every encoded message carries. Codecs know nothing of MPI.
 *
 * Blob = 32-byte header + payload. Header, little-endian:
 *
 *   off size field
 *   0   4    magic      'C','M','P','I'
 *   4   1    version    kBlobVersion
 *   5   1    codec      id from src/base/codecs.def
 *   6   1    flags      BLOB_NONFINITE: the input held NaN/Inf; BLOB_ABANDON: the sender
 *                       hit a local error. Either way the payload is empty and every
 *                       rank falls back to the exact path for this call
 *   7   1    bits       codec bit width (0 if none)
 *   8   1    variant    codec variant (bitpack rounding, q8 type, ...)
 *   9   1    elem       element type of the data: 0 fp32, 1 fp64 (Elem); a decoder for one type
 *                       refuses a blob of the other
 *   10  1    stage      the entropy stage over the payload (kernels/entropy.h): 0 none, 1 zstd
 *   11  1    stride     the stage's byte-plane shuffle width, 1..8 (0 without the stage)
 *   12  4    param      codec parameter (e.g. float bits of theta), 0 if none
 *   16  8    count      number of elements encoded
 *   24  8    payload    payload bytes that follow the header
 *
 * A decoder checks every field before it reads a payload byte: bad magic/version/codec,
 * a count other than the one the receiver expects, a payload longer than the bytes
 * received or different from what the codec says that count needs -> Status::corrupt.
 */
#pragma once
#include <cstddef>
#include <cstdint>

#include "simd.h"
#include "base/codec_ids.h"
#include "base/status.h"

namespace compmpi {


inline constexpr uint32_t kBlobMagic = 0x49504D43u; /* "CMPI" */
inline constexpr uint8_t kBlobVersion = 1;
inline constexpr size_t kBlobHeaderBytes = 32;
inline constexpr uint8_t BLOB_NONFINITE = 0x01;
inline constexpr uint8_t BLOB_ABANDON = 0x02;
inline constexpr uint8_t BLOB_FLAGS = BLOB_NONFINITE | BLOB_ABANDON;
/* Largest element count a header may claim: no codec's size arithmetic (a few bytes per
 * element at most) overflows below it. Found by tests/fuzz/fuzz_header: a bitpack header
 * claiming 2^62 elements had a 32-bit payload bound of 2^64 = 0 bytes and passed. */
inline constexpr uint64_t kBlobMaxCount = uint64_t{1} << 56;

/* The element type of a call's data, and of a blob (header byte 9). fp32 is 0: every fp32 blob
 * is the same bytes it always was. */
enum class Elem : uint8_t { f32 = 0, f64 = 1 };
inline constexpr size_t elem_bytes(Elem e) { return e == Elem::f64 ? 8 : 4; }
inline const char *elem_name(Elem e) { return e == Elem::f64 ? "fp64" : "fp32"; }
/* The element type of float or double data */
inline constexpr Elem elem_of(const float *) { return Elem::f32; }
inline constexpr Elem elem_of(const double *) { return Elem::f64; }

/* Everything a codec needs besides the data. bits/variant/param travel in the header;
 * the rest is encode-side context only. */
struct CodecParams {
    uint8_t bits = 0;
    uint8_t variant = 0;
    uint32_t param = 0;
    Elem elem = Elem::f32; /* travels in the header too: check() and max_payload() answer for it */
    /* encode-side context, never on the wire */
    double shared_scale = 0; /* agreed across ranks (MAX) for codecs with CODEC_SHARED_SCALE */
    uint64_t seed = 0;       /* stochastic codecs: counter-based RNG key (seed, rank, call) */
    uint64_t stream = 0;
    float theta = 0;         /* sparsifiers: fraction of values dropped */
    float clip = 0;          /* terngrad: clip at clip * sigma (0 = off) */
    /* terngrad: the clip threshold of the whole contribution (clip * sigma of the buffer,
     * +inf = none), decided once by the collective before the buffer is cut into chunks and
     * segments; 0 = clip * sigma of the data being encoded (direct callers) */
    float clip_at = 0;
    /* prepare() writes the clip threshold it applied here when non-null (the collective
     * passes it back in clip_at); host memory */
    float *clip_out = nullptr;
    uint32_t bucket = 0;     /* per-bucket scalers: elements per bucket (0 = whole buffer) */
    uint32_t block = 0;      /* blockwise transforms: elements per block (0 = whole buffer) */
    int nranks = 1;          /* ranks whose contributions a reduced value sums */
    /* >= 0: the scale CodecOps::whole_scale returned for the whole contribution this encode
     * is a segment of (the caller checked it finite); encode uses it instead of its own */
    float fixed_scale = -1;
    /* decode side: the caller's whole output (the collective's result, of which this call
     * may write a segment) is at least stream_store_min_bytes() in host memory, so decoders
     * may write it with non-temporal stores (terngrad's paired decode does); same values */
    bool stream_out = false;
    /* error-bounded mode, relative bound (src/runtime/bound.h): the collective encodes a value
     * only if every nonzero |y| lies in [range_lo, range_hi], else the exact path takes it
     * (coll_encode); range_hi = 0: no check */
    double range_lo = 0, range_hi = 0;
    /* lossless: the zstd level (encode side only; the decoder needs none) */
    int level = 1;
    SimdLevel simd = SimdLevel::scalar;
    int threads = 1;
};

enum CodecFlags : uint32_t {
    CODEC_LOSSLESS = 1u << 0,      /* decode(encode(x)) == x bit for bit */
    CODEC_SPARSE = 1u << 1,        /* payload size depends on the data: allgather-based paths */
    CODEC_SHARED_SCALE = 1u << 2,  /* has prepare(): ranks MAX-reduce a statistic before encode */
    CODEC_STOCHASTIC = 1u << 3,    /* uses seed/stream */
    CODEC_ADAPTIVE_BITS = 1u << 4, /* the awp policy may change bits */
    CODEC_SPATIAL_SPARSE = 1u << 5, /* decoded data is sparse in its own domain (topk, sparse):
                                       the allreduce may sum exact sparse partial sums */
    CODEC_FP64_ONLY = 1u << 6,      /* has no fp32 form (fp32: narrowing doubles): its check()
                                       refuses Elem::f32, encode of floats is unsupported */
    /* Some parameter sets (variants) give a payload whose size depends on the data, the others
     * an exact one (zfp: fixed-accuracy vs fixed-rate). CodecOps::variable_payload says which;
     * codec_variable_payload() answers for any codec. Where it is true, max_payload is an upper
     * bound (blob_peek accepts any payload up to it), and a collective must treat the call as
     * it treats a CODEC_SPARSE codec: exchange the actual sizes (allgather of variable-size
     * blobs) rather than count on max_payload bytes, or at least accept blobs shorter than
     * their max_payload slot. */
    CODEC_VARIABLE_VARIANT = 1u << 7,
};

struct CodecOps {
    CodecId id;
    const char *name;
    const char *doc;
    uint32_t flags;
    /* bit widths the codec accepts: bits_min..bits_max in steps of bits_step; 0 = none */
    uint8_t bits_default, bits_min, bits_max, bits_step;

    /* Validate bits/variant/param as read from settings or a header. */
    Status (*check)(const CodecParams &p);
    /* Upper bound on the payload for n elements (exact for non-sparse codecs). */
    size_t (*max_payload)(size_t n, const CodecParams &p);
    /* Optional (CODEC_SHARED_SCALE): a statistic of the data that ranks MAX-reduce and hand
     * back in p.shared_scale. Returns nonfinite if the data holds NaN/Inf. Called on a rank's
     * whole contribution; a codec that clips reports its threshold through p.clip_out. */
    Status (*prepare)(const float *in, size_t n, const CodecParams &p, double *stat);
    /* Encode n floats into out (capacity cap); *len = payload bytes written.
     * Returns Status::nonfinite (output unspecified) if the input holds NaN or Inf. */
    Status (*encode)(const float *in, size_t n, const CodecParams &p, uint8_t *out, size_t cap,
                     size_t *len);
    /* Decode a payload of len bytes into n floats; decode_add adds them to acc instead.
     * Both validate len against the params and never read past it. */
    Status (*decode)(const uint8_t *in, size_t len, size_t n, const CodecParams &p, float *out);
    Status (*decode_add)(const uint8_t *in, size_t len, size_t n, const CodecParams &p, float *acc);
    /* Optional: parameters for re-encoding a sum of p.nranks decoded contributions (phase 2
     * of the two-phase allreduce). terngrad uses it to send the 2P+1 levels exactly.
     * nullptr: phase 2 uses the same parameters. */
    Status (*reduced_params)(const CodecParams &p, CodecParams *out);
    /* Optional (codecs whose decode is linear in a domain of their own): out = the sum of the
     * cnt payloads' decoded values, added in index order, every payload validated before out
     * is written; the same bits for the same payloads on every rank and thread count. All
     * payloads share p (bits/variant/param). fft_topk sums the spectra, then inverts once.
     * nullptr: callers decode each payload and add (decode_add). */
    Status (*decode_sum)(const uint8_t *const *in, const size_t *len, int cnt, size_t n, const CodecParams &p,
                         float *out);
    /* Optional (codecs with one scale per contribution, computed inside encode: q8's max-abs):
     * that scale of in[0..n), or Status::nonfinite. A caller that encodes the contribution in
     * segments passes it in p.fixed_scale: each segment then encodes exactly as the whole
     * would (the same bytes for its elements). nullptr: encode has no such scale. */
    Status (*whole_scale)(const float *in, size_t n, const CodecParams &p, float *scale);

    /* ---- fp64 (p.elem == Elem::f64): the same contracts on doubles, in the codec's own fp64
     * payload format. nullptr encode64: the codec has no fp64 form, and a call on doubles with
     * it goes to MPI unchanged (eligibility reason `codec_no_fp64`). A codec with encode64 has
     * decode64 and decode_add64; the others are optional as their fp32 counterparts. bits64_*:
     * the widths it accepts on doubles (0 = none), as bits_* for floats. */
    uint8_t bits64_default, bits64_min, bits64_max, bits64_step;
    Status (*prepare64)(const double *in, size_t n, const CodecParams &p, double *stat);
    Status (*encode64)(const double *in, size_t n, const CodecParams &p, uint8_t *out, size_t cap, size_t *len);
    Status (*decode64)(const uint8_t *in, size_t len, size_t n, const CodecParams &p, double *out);
    Status (*decode_add64)(const uint8_t *in, size_t len, size_t n, const CodecParams &p, double *acc);
    Status (*decode_sum64)(const uint8_t *const *in, const size_t *len, int cnt, size_t n, const CodecParams &p,
                           double *out);
    Status (*whole_scale64)(const double *in, size_t n, const CodecParams &p, float *scale);

    /* Optional (CODEC_VARIABLE_VARIANT): whether payloads with these parameters (bits, variant,
     * param, elem) vary in size with the data. nullptr: the flag CODEC_SPARSE alone says. */
    bool (*variable_payload)(const CodecParams &p);
};

/* CodecOps::decode and decode_add (decode64, decode_add64) of a codec whose decoder of
 * floats or doubles (T) takes an add flag: Decode(..., out, false) and Decode(..., acc, true). */
template <class T, Status (*Decode)(const uint8_t *, size_t, size_t, const CodecParams &, T *, bool)>
struct DecodeOps {
    static Status decode(const uint8_t *in, size_t len, size_t n, const CodecParams &p, T *out) {
        return Decode(in, len, n, p, out, false);
    }
    static Status decode_add(const uint8_t *in, size_t len, size_t n, const CodecParams &p, T *acc) {
        return Decode(in, len, n, p, acc, true);
    }
};

/* Whether a payload of codec c with parameters p may be shorter than max_payload (its size
 * depends on the data): every CODEC_SPARSE codec, and a CODEC_VARIABLE_VARIANT codec for the
 * variants it names. Otherwise max_payload is the exact size and blob_peek insists on it. */
inline bool codec_variable_payload(const CodecOps &c, const CodecParams &p) {
    if (c.flags & CODEC_SPARSE) return true;
    return (c.flags & CODEC_VARIABLE_VARIANT) && c.variable_payload && c.variable_payload(p);
}

/* Whether codec c can encode elements of type e. */
inline bool codec_has_elem(const CodecOps &c, Elem e) {
    return e == Elem::f32 ? !(c.flags & CODEC_FP64_ONLY) : c.encode64 != nullptr;
}
/* The codec's decode_sum (decode_sum64) for the element type, where it has one. */
inline bool codec_has_decode_sum(const CodecOps &c, Elem e) {
    return e == Elem::f64 ? c.decode_sum64 != nullptr : c.decode_sum != nullptr;
}
inline Status codec_decode_sum(const CodecOps &c, const uint8_t *const *in, const size_t *len, int cnt, size_t n,
                               const CodecParams &p, float *out) {
    return c.decode_sum(in, len, cnt, n, p, out);
}
inline Status codec_decode_sum(const CodecOps &c, const uint8_t *const *in, const size_t *len, int cnt, size_t n,
                               const CodecParams &p, double *out) {
    return c.decode_sum64(in, len, cnt, n, p, out);
}

/* Registry (kernels/codec.cc): lookup by id or name; nullptr if unknown. */
const CodecOps *codec_by_id(int id);
const CodecOps *codec_by_name(const char *name);
/* "none|bitpack|..." for messages and docs. */
const char *codec_names();
/* Whether bits is acceptable for this codec on elements of type e (0 means the default). */
bool codec_bits_ok(const CodecOps &c, int bits, Elem e = Elem::f32);
/* The width bits means for elements of type e: the codec's default for 0. */
int codec_bits_for(const CodecOps &c, int bits, Elem e);

struct BlobInfo {
    CodecId codec;
    uint8_t flags, bits, variant;
    uint32_t param;
    uint64_t count, payload;
    Elem elem = Elem::f32;
};

/* The codec parameters a header carries (bits, variant, param, element type). */
inline CodecParams blob_params(const BlobInfo &i) {
    CodecParams p;
    p.bits = i.bits;
    p.variant = i.variant;
    p.param = i.param;
    p.elem = i.elem;
    return p;
}

/* Header + worst-case payload. */
size_t blob_max_bytes(const CodecOps &c, size_t n, const CodecParams &p);
/* Encode n floats (doubles: p.elem must be Elem::f64) into a blob; *len = header + payload.
 * If the data holds NaN/Inf, writes a header flagged BLOB_NONFINITE with an empty payload and
 * returns Status::nonfinite. */
Status blob_encode(const CodecOps &c, const CodecParams &p, const float *in, size_t n, uint8_t *out,
                   size_t cap, size_t *len);
Status blob_encode(const CodecOps &c, const CodecParams &p, const double *in, size_t n, uint8_t *out,
                   size_t cap, size_t *len);
/* Parse and validate a header against the bytes available and the expected count. */
Status blob_peek(const uint8_t *blob, size_t avail, size_t expect_count, BlobInfo *info);
/* Decode (or add into out when accumulate) a validated blob. A NONFINITE blob gives
 * Status::nonfinite, an ABANDON blob Status::corrupt; neither writes out. */
Status blob_decode(const uint8_t *blob, size_t avail, size_t expect_count, float *out, bool accumulate,
                   SimdLevel simd, int threads);
/* The same for a blob of doubles; a blob of the other element type is Status::corrupt (both). */
Status blob_decode(const uint8_t *blob, size_t avail, size_t expect_count, double *out, bool accumulate,
                   SimdLevel simd, int threads);
/* Write a header alone (used for flagged blobs). */
void blob_write_header(uint8_t *out, const BlobInfo &info);

/* Helpers shared by codecs */
/* true if any of n floats (doubles) is NaN or Inf */
bool any_nonfinite(const float *x, size_t n);
bool any_nonfinite(const double *x, size_t n);

}  // namespace compmpi

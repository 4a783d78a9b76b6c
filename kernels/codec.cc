// SPDX-License-Identifier: BSD-3-Clause
#include "codec.h"
#include "entropy.h"
#include "error_model.h"

#include <cstring>
#include <string>
#include <vector>

#include "base/log.h"

namespace compmpi {

#define COMPMPI_CODEC(sym, id, name) extern const CodecOps codec_##sym##_ops;
#include "base/codecs.def"
#undef COMPMPI_CODEC

namespace {

const CodecOps *const kCodecs[] = {
#define COMPMPI_CODEC(sym, id, name) &codec_##sym##_ops,
#include "base/codecs.def"
#undef COMPMPI_CODEC
};

void put32(uint8_t *p, uint32_t v) { std::memcpy(p, &v, 4); }
void put64(uint8_t *p, uint64_t v) { std::memcpy(p, &v, 8); }
uint32_t get32(const uint8_t *p) { uint32_t v; std::memcpy(&v, p, 4); return v; }
uint64_t get64(const uint8_t *p) { uint64_t v; std::memcpy(&v, p, 8); return v; }

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the blob format is little-endian");

}  // namespace

const CodecOps *codec_by_id(int id) {
    for (const CodecOps *c : kCodecs)
        if (static_cast<int>(c->id) == id) return c;
    return nullptr;
}

const CodecOps *codec_by_name(const char *name) {
    for (const CodecOps *c : kCodecs)
        if (std::strcmp(c->name, name) == 0) return c;
    return nullptr;
}

const char *codec_names() {
    static const std::string names = [] {
        std::string s;
        for (const CodecOps *c : kCodecs) {
            if (!s.empty()) s += '|';
            s += c->name;
        }
        return s;
    }();
    return names.c_str();
}

bool codec_bits_ok(const CodecOps &c, int bits, Elem e) {
    if (bits == 0) return true;
    const bool d = e == Elem::f64;
    const int step = d ? c.bits64_step : c.bits_step, lo = d ? c.bits64_min : c.bits_min,
              hi = d ? c.bits64_max : c.bits_max;
    if (step == 0) return false;
    return bits >= lo && bits <= hi && (bits - lo) % step == 0;
}

int codec_bits_for(const CodecOps &c, int bits, Elem e) {
    return bits ? bits : e == Elem::f64 ? c.bits64_default : c.bits_default;
}

size_t blob_max_bytes(const CodecOps &c, size_t n, const CodecParams &p) {
    return kBlobHeaderBytes + c.max_payload(n, p);
}

void blob_write_header(uint8_t *out, const BlobInfo &info) {
    put32(out + 0, kBlobMagic);
    out[4] = kBlobVersion;
    out[5] = static_cast<uint8_t>(info.codec);
    out[6] = info.flags;
    out[7] = info.bits;
    out[8] = info.variant;
    out[9] = static_cast<uint8_t>(info.elem);
    out[10] = out[11] = 0; /* the entropy stage (entropy.h) sets them on a finished blob */
    put32(out + 12, info.param);
    put64(out + 16, info.count);
    put64(out + 24, info.payload);
}

namespace {
Status encode_elems(const CodecOps &c, const CodecParams &p, const float *in, size_t n, uint8_t *out, size_t cap,
                    size_t *len) {
    return p.elem == Elem::f32 ? c.encode(in, n, p, out, cap, len) : Status::invalid_arg;
}
Status encode_elems(const CodecOps &c, const CodecParams &p, const double *in, size_t n, uint8_t *out, size_t cap,
                    size_t *len) {
    return p.elem == Elem::f64 && c.encode64 ? c.encode64(in, n, p, out, cap, len) : Status::invalid_arg;
}
Status decode_elems(const CodecOps &c, const CodecParams &p, const uint8_t *in, size_t len, size_t n, float *out,
                    bool add) {
    return add ? c.decode_add(in, len, n, p, out) : c.decode(in, len, n, p, out);
}
Status decode_elems(const CodecOps &c, const CodecParams &p, const uint8_t *in, size_t len, size_t n, double *out,
                    bool add) {
    return add ? c.decode_add64(in, len, n, p, out) : c.decode64(in, len, n, p, out);
}

template <class T>
Status blob_encode_t(const CodecOps &c, const CodecParams &p, const T *in, size_t n, uint8_t *out, size_t cap,
                     size_t *len) {
    if (cap < kBlobHeaderBytes) return Status::invalid_arg;
    BlobInfo info{c.id, 0, p.bits, p.variant, p.param, n, 0, p.elem};
    size_t plen = 0;
    /* error-bounded mode, relative bound (src/runtime/bound.h): a value outside the codec's
     * relative model (a subnormal, or near the overflow) sends these values the exact way,
     * like NaN/Inf */
    Status s = p.range_hi > 0 && outside_range_any(in, n, p.range_lo, p.range_hi)
                   ? Status::nonfinite
                   : encode_elems(c, p, in, n, out + kBlobHeaderBytes, cap - kBlobHeaderBytes, &plen);
    if (s == Status::nonfinite) {
        info.flags = BLOB_NONFINITE;
        blob_write_header(out, info);
        *len = kBlobHeaderBytes;
        return s;
    }
    if (s != Status::ok) return s;
    info.payload = plen;
    blob_write_header(out, info);
    *len = kBlobHeaderBytes + plen;
    return Status::ok;
}

template <class T>
Status blob_decode_t(const uint8_t *blob, size_t avail, size_t expect_count, T *out, bool accumulate, SimdLevel simd,
                     int threads) {
    BlobInfo info;
    CMPI_CHECK(blob_peek(blob, avail, expect_count, &info));
    if (blob_entropy_coded(blob, avail)) { /* the entropy stage first (entropy.h): the codec sees its own bytes */
        thread_local std::vector<uint8_t> raw;
        const uint8_t *r = nullptr;
        size_t ra = 0;
        CMPI_CHECK(blob_entropy_decode(blob, avail, expect_count, raw, &r, &ra));
        blob = r, avail = ra;
        CMPI_CHECK(blob_peek(blob, avail, expect_count, &info));
    }
    if (info.elem != elem_of(out)) return Status::corrupt;
    if (info.flags & BLOB_ABANDON) return Status::corrupt;
    if (info.flags & BLOB_NONFINITE) return Status::nonfinite;
    const CodecOps *c = codec_by_id(static_cast<int>(info.codec));
    CodecParams p = blob_params(info);
    p.simd = simd;
    p.threads = threads;
    return decode_elems(*c, p, blob + kBlobHeaderBytes, info.payload, info.count, out, accumulate);
}
}  // namespace

Status blob_encode(const CodecOps &c, const CodecParams &p, const float *in, size_t n, uint8_t *out, size_t cap,
                   size_t *len) {
    return blob_encode_t(c, p, in, n, out, cap, len);
}
Status blob_encode(const CodecOps &c, const CodecParams &p, const double *in, size_t n, uint8_t *out, size_t cap,
                   size_t *len) {
    return blob_encode_t(c, p, in, n, out, cap, len);
}

Status blob_peek(const uint8_t *blob, size_t avail, size_t expect_count, BlobInfo *info) {
    if (avail < kBlobHeaderBytes) return Status::corrupt;
    if (get32(blob) != kBlobMagic || blob[4] != kBlobVersion) return Status::corrupt;
    if (blob[9] > static_cast<uint8_t>(Elem::f64)) return Status::corrupt;
    /* the entropy stage (entropy.h): byte 10 the method, byte 11 the shuffle stride */
    const bool staged = blob[10] != kEntropyNone;
    if (staged ? blob[10] != kEntropyZstd || blob[11] < 1 || blob[11] > kEntropyStrideMax : blob[11] != 0)
        return Status::corrupt;
    const CodecOps *c = codec_by_id(blob[5]);
    if (!c) return Status::corrupt;
    BlobInfo i;
    i.codec = c->id;
    i.flags = blob[6];
    i.bits = blob[7];
    i.variant = blob[8];
    i.param = get32(blob + 12);
    i.count = get64(blob + 16);
    i.payload = get64(blob + 24);
    i.elem = static_cast<Elem>(blob[9]);
    if (i.flags & ~BLOB_FLAGS) return Status::corrupt;
    if (i.count != expect_count || i.count > kBlobMaxCount) return Status::corrupt;
    if (i.payload > avail - kBlobHeaderBytes) return Status::corrupt;
    if (i.flags) {
        if (i.payload != 0 || staged) return Status::corrupt;
    } else {
        if (!codec_has_elem(*c, i.elem)) return Status::corrupt;
        const CodecParams p = blob_params(i);
        if (c->check(p) != Status::ok) return Status::corrupt;
        size_t maxp = c->max_payload(i.count, p);
        if (i.payload > maxp) return Status::corrupt;
        /* a coded payload is shorter than the raw one (blob_entropy_decode checks the frame's content) */
        if (staged ? !entropy_applies(*c) || i.payload == 0 : !codec_variable_payload(*c, p) && i.payload != maxp)
            return Status::corrupt;
    }
    *info = i;
    return Status::ok;
}

Status blob_decode(const uint8_t *blob, size_t avail, size_t expect_count, float *out, bool accumulate,
                   SimdLevel simd, int threads) {
    return blob_decode_t(blob, avail, expect_count, out, accumulate, simd, threads);
}
Status blob_decode(const uint8_t *blob, size_t avail, size_t expect_count, double *out, bool accumulate,
                   SimdLevel simd, int threads) {
    return blob_decode_t(blob, avail, expect_count, out, accumulate, simd, threads);
}

bool any_nonfinite(const float *x, size_t n) {
    const uint32_t *u = reinterpret_cast<const uint32_t *>(x);
    uint32_t bad = 0;
    for (size_t i = 0; i < n; ++i) bad |= static_cast<uint32_t>((u[i] & 0x7F800000u) == 0x7F800000u);
    return bad != 0;
}

bool any_nonfinite(const double *x, size_t n) {
    const uint64_t *u = reinterpret_cast<const uint64_t *>(x);
    uint64_t bad = 0;
    for (size_t i = 0; i < n; ++i) bad |= static_cast<uint64_t>((u[i] & 0x7FF0000000000000ull) == 0x7FF0000000000000ull);
    return bad != 0;
}

}  // namespace compmpi

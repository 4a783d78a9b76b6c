// SPDX-License-Identifier: BSD-3-Clause
/* sz CPU kernels: quantise (plain or 1-D Lorenzo on the integer codes), zigzag, byte planes,
 * Debian's libzstd, block by block (format and contract: sz.h; proof: docs/codecs/sz.md).
 *
 * Encode writes each block's record into the slot its worst case gives it (table + b * (8 +
 * kBlock E)), OpenMP over blocks, then moves the records together in order: the same bytes for
 * any thread count. */
#include "sz/sz.h"

#include <zstd.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

namespace compmpi::sz {

double code_bits(double A, double eb) {
    const double c = 2 * A / bin_width(static_cast<float>(eb)) + 3;
    return std::ceil(std::log2(c));
}

namespace {

constexpr size_t kParallelMinBlocks = 2;
constexpr double kMaxCode = 0x1p51;
constexpr double kRoundMagic = 0x1.8p52;

template <class T> struct Tr;
template <> struct Tr<float> {
    static constexpr Elem elem = Elem::f32;
};
template <> struct Tr<double> {
    static constexpr Elem elem = Elem::f64;
};

/* the decoded value of code k: one multiply in double, one narrowing to T; encoder and
 * decoder call this same function (the build has -ffp-contract=off) */
template <class T> inline T dequant(int64_t k, double D) {
    return static_cast<T>(static_cast<double>(k) * D);
}

inline uint64_t zigzag(int64_t r) { return (static_cast<uint64_t>(r) << 1) ^ static_cast<uint64_t>(r >> 63); }
inline int64_t unzigzag(uint64_t z) { return static_cast<int64_t>(z >> 1) ^ -static_cast<int64_t>(z & 1); }

struct CctxFree {
    void operator()(ZSTD_CCtx *c) const { ZSTD_freeCCtx(c); }
};
struct DctxFree {
    void operator()(ZSTD_DCtx *c) const { ZSTD_freeDCtx(c); }
};
/* one context and scratch per thread, kept for the thread's life */
struct ThreadScratch {
    std::unique_ptr<ZSTD_CCtx, CctxFree> cctx;
    std::unique_ptr<ZSTD_DCtx, DctxFree> dctx;
    std::vector<uint64_t> codes;
    std::vector<uint8_t> planes, esc;
};
ThreadScratch &scratch() {
    thread_local ThreadScratch s;
    return s;
}

size_t nblocks(size_t n) { return (n + kBlock - 1) / kBlock; }
size_t payload_max(size_t n, Elem e) { return (4 + kRecordHeader) * nblocks(n) + n * elem_bytes(e); }

bool eb_ok(uint32_t param) {
    const float eb = eb_of(param);
    return std::isfinite(eb) && eb >= FLT_MIN;
}

Status check_params(const CodecParams &p) {
    if (p.bits != 0 || p.variant > kLorenzo || !eb_ok(p.param)) return Status::invalid_arg;
    return Status::ok;
}

int bytes_for(uint64_t c) {
    int w = 1;
    while (w < 8 && (c >> (8 * w)) != 0) ++w;
    return w;
}

void put_u32(uint8_t *p, uint32_t v) { std::memcpy(p, &v, 4); }
uint32_t get_u32(const uint8_t *p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

/* one block: m values into slot (capacity 8 + m E); returns the record's bytes, 0 on failure */
template <class T> size_t encode_block(const T *x, size_t m, const CodecParams &p, uint8_t *slot) {
    ThreadScratch &s = scratch();
    const float eb = eb_of(p.param);
    const double D = bin_width(eb), guard = static_cast<double>(eb) * (1 - 0x1p-50);
    if (s.codes.size() < m) s.codes.resize(m);
    if (s.esc.size() < m * sizeof(T)) s.esc.resize(m * sizeof(T));
    uint64_t *codes = s.codes.data();
    T *esc = reinterpret_cast<T *>(s.esc.data());
    size_t nesc = 0;
    int64_t pred = 0;
    uint64_t cmax = 0;
    const bool lorenzo = p.variant == kLorenzo;
    for (size_t i = 0; i < m; ++i) {
        const double t = static_cast<double>(x[i]) / D;
        bool ok = std::fabs(t) <= kMaxCode;
        int64_t k = 0;
        if (ok) {
            /* the nearest integer, ties to even (IEEE default rounding; exact for |t| <= 2^51),
             * without a libm call */
            k = static_cast<int64_t>((t + kRoundMagic) - kRoundMagic);
            const T d = dequant<T>(k, D);
            ok = std::fabs(static_cast<double>(d) - static_cast<double>(x[i])) <= guard;
        }
        if (!ok) {
            codes[i] = 0;
            esc[nesc++] = x[i];
            continue;
        }
        const uint64_t c = zigzag(k - pred) + 1;
        if (lorenzo) pred = k;
        codes[i] = c;
        cmax = std::max(cmax, c);
    }
    const size_t E = sizeof(T), verbatim = kRecordHeader + m * E;
    const int w = bytes_for(cmax);
    const size_t raw = m * static_cast<size_t>(w), tail = nesc * E;
    auto write_verbatim = [&]() {
        slot[0] = 0, slot[1] = kVerbatim, slot[2] = slot[3] = 0;
        put_u32(slot + 4, 0);
        std::memcpy(slot + kRecordHeader, x, m * E);
        return verbatim;
    };
    if (kRecordHeader + raw + tail >= verbatim) return write_verbatim();
    if (s.planes.size() < raw) s.planes.resize(raw);
    uint8_t *pl = s.planes.data();
    for (int b = 0; b < w; ++b) {
        uint8_t *dst = pl + static_cast<size_t>(b) * m;
        for (size_t i = 0; i < m; ++i) dst[i] = static_cast<uint8_t>(codes[i] >> (8 * b));
    }
    /* room for the frame: what would still beat kRaw */
    const size_t room = raw - 1;
    size_t f = 0;
    if (!s.cctx) s.cctx.reset(ZSTD_createCCtx());
    if (s.cctx && room > 0) f = ZSTD_compressCCtx(s.cctx.get(), slot + kRecordHeader, room, pl, raw, p.level);
    uint8_t mode = kZstd;
    if (!s.cctx || ZSTD_isError(f) || f == 0 || f >= raw) {
        mode = kRaw;
        std::memcpy(slot + kRecordHeader, pl, raw);
        f = raw;
    }
    slot[0] = static_cast<uint8_t>(w), slot[1] = mode, slot[2] = slot[3] = 0;
    put_u32(slot + 4, static_cast<uint32_t>(nesc));
    std::memcpy(slot + kRecordHeader + f, esc, tail);
    return kRecordHeader + f + tail;
}

template <class T>
Status encode_t(const T *in, size_t n, const CodecParams &p, uint8_t *out, size_t cap, size_t *len) {
    if (check_params(p) != Status::ok || p.elem != Tr<T>::elem) return Status::invalid_arg;
    if (cap < payload_max(n, p.elem)) return Status::invalid_arg;
    if (any_nonfinite(in, n)) return Status::nonfinite;
    const size_t nb = nblocks(n), table = 4 * nb, slot_bytes = kRecordHeader + kBlock * sizeof(T);
    std::vector<uint32_t> lens(nb);
    const int threads = std::max(1, p.threads);
#pragma omp parallel for num_threads(threads) schedule(static) if (nb >= kParallelMinBlocks && threads > 1)
    for (size_t b = 0; b < nb; ++b) {
        const size_t m = std::min(kBlock, n - b * kBlock);
        lens[b] = static_cast<uint32_t>(encode_block(in + b * kBlock, m, p, out + table + b * slot_bytes));
    }
    size_t pos = table;
    for (size_t b = 0; b < nb; ++b) {
        std::memmove(out + pos, out + table + b * slot_bytes, lens[b]);
        put_u32(out + 4 * b, lens[b]);
        pos += lens[b];
    }
    *len = pos;
    return Status::ok;
}

/* one record of l bytes into m values (out, or added to it); Status::corrupt on anything the
 * encoder does not write. Nothing is written to out before the record is fully validated. */
template <class T> Status decode_block(const uint8_t *rec, size_t l, size_t m, const CodecParams &p, T *out, bool add) {
    const size_t E = sizeof(T);
    if (l < kRecordHeader || rec[2] != 0 || rec[3] != 0) return Status::corrupt;
    const int w = rec[0];
    const uint8_t mode = rec[1];
    const size_t nesc = get_u32(rec + 4);
    const uint8_t *body = rec + kRecordHeader;
    const size_t bl = l - kRecordHeader;
    if (mode == kVerbatim) {
        if (w != 0 || nesc != 0 || bl != m * E) return Status::corrupt;
        T v;
        for (size_t i = 0; i < m; ++i) {
            std::memcpy(&v, body + i * E, E);
            if (!std::isfinite(v)) return Status::corrupt;
        }
        for (size_t i = 0; i < m; ++i) {
            std::memcpy(&v, body + i * E, E);
            out[i] = add ? out[i] + v : v;
        }
        return Status::ok;
    }
    if ((mode != kRaw && mode != kZstd) || w < 1 || w > 7 || nesc > m) return Status::corrupt;
    const size_t raw = m * static_cast<size_t>(w), tail = nesc * E;
    if (bl < tail) return Status::corrupt;
    const size_t f = bl - tail;
    ThreadScratch &s = scratch();
    const uint8_t *pl = body;
    if (mode == kRaw) {
        if (f != raw) return Status::corrupt;
    } else {
        if (f == 0 || f >= raw) return Status::corrupt;
        if (!s.dctx) s.dctx.reset(ZSTD_createDCtx());
        if (!s.dctx) return Status::no_memory;
        if (s.planes.size() < raw) s.planes.resize(raw);
        const size_t r = ZSTD_decompressDCtx(s.dctx.get(), s.planes.data(), raw, body, f);
        if (ZSTD_isError(r) || r != raw) return Status::corrupt;
        pl = s.planes.data();
    }
    const uint8_t *escb = body + f;
    /* the integer codes, validated into scratch first */
    if (s.codes.size() < m) s.codes.resize(m);
    uint64_t *k = s.codes.data(); /* holds k as two's complement; escape marked separately */
    std::vector<uint8_t> &isesc = s.esc;
    if (isesc.size() < m) isesc.resize(m);
    const bool lorenzo = p.variant == kLorenzo;
    int64_t pred = 0;
    size_t seen = 0;
    for (size_t i = 0; i < m; ++i) {
        uint64_t c = 0;
        for (int b = 0; b < w; ++b) c |= static_cast<uint64_t>(pl[static_cast<size_t>(b) * m + i]) << (8 * b);
        if (c == 0) {
            isesc[i] = 1;
            ++seen;
            continue;
        }
        if (c > (uint64_t{1} << 55)) return Status::corrupt;
        const int64_t kk = unzigzag(c - 1) + pred; /* |pred| <= 2^51, |r| <= 2^54: no overflow */
        if (kk > (int64_t{1} << 51) || kk < -(int64_t{1} << 51)) return Status::corrupt;
        if (lorenzo) pred = kk;
        isesc[i] = 0;
        k[i] = static_cast<uint64_t>(kk);
    }
    if (seen != nesc) return Status::corrupt;
    T v;
    for (size_t j = 0; j < nesc; ++j) {
        std::memcpy(&v, escb + j * E, E);
        if (!std::isfinite(v)) return Status::corrupt;
    }
    const double D = bin_width(eb_of(p.param));
    size_t j = 0;
    for (size_t i = 0; i < m; ++i) {
        if (isesc[i]) {
            std::memcpy(&v, escb + (j++) * E, E);
        } else {
            v = dequant<T>(static_cast<int64_t>(k[i]), D);
        }
        out[i] = add ? out[i] + v : v;
    }
    return Status::ok;
}

template <class T>
Status decode_t(const uint8_t *in, size_t len, size_t n, const CodecParams &p, T *out, bool add) {
    if (check_params(p) != Status::ok || p.elem != Tr<T>::elem) return Status::corrupt;
    const size_t nb = nblocks(n), table = 4 * nb, E = sizeof(T);
    if (len < table || len > payload_max(n, p.elem)) return Status::corrupt;
    /* every record's place, checked before a byte of it is read */
    std::vector<size_t> off(nb + 1);
    off[0] = table;
    for (size_t b = 0; b < nb; ++b) {
        const size_t l = get_u32(in + 4 * b), m = std::min(kBlock, n - b * kBlock);
        if (l < kRecordHeader || l > kRecordHeader + m * E) return Status::corrupt;
        off[b + 1] = off[b] + l;
    }
    if (off[nb] != len) return Status::corrupt;
    /* each record is validated whole before its own elements are written (as lossless) */
    int bad = 0;
    const int threads = std::max(1, p.threads);
#pragma omp parallel for num_threads(threads) schedule(static) reduction(| : bad) if (nb >= kParallelMinBlocks && threads > 1)
    for (size_t b = 0; b < nb; ++b) {
        const size_t m = std::min(kBlock, n - b * kBlock);
        const Status s = decode_block(in + off[b], off[b + 1] - off[b], m, p, out + b * kBlock, add);
        if (s != Status::ok) bad |= s == Status::no_memory ? 2 : 1;
    }
    if (bad & 1) return Status::corrupt;
    return bad ? Status::no_memory : Status::ok;
}

Status sz_check(const CodecParams &p) { return check_params(p); }
size_t sz_max_payload(size_t n, const CodecParams &p) { return payload_max(n, p.elem); }
bool sz_variable(const CodecParams &) { return true; }
template <class T> using SzDecode = DecodeOps<T, decode_t<T>>;

}  // namespace
}  // namespace compmpi::sz

namespace compmpi {
extern const CodecOps codec_sz_ops = {
    CodecId::sz, "sz",
    "error-bounded linear quantiser (SZ / fZ-light): every decoded value within eb (param, float bits) of its "
    "input, plain (variant 0) or 1-D Lorenzo (variant 1) integer codes, zigzag, byte planes, zstd (variable size)",
    CODEC_VARIABLE_VARIANT,
    0, 0, 0, 0,
    sz::sz_check, sz::sz_max_payload, nullptr, sz::encode_t<float>,
    sz::SzDecode<float>::decode, sz::SzDecode<float>::decode_add, nullptr, nullptr, nullptr,
    /* fp64 */
    0, 0, 0, 0,
    nullptr, sz::encode_t<double>, sz::SzDecode<double>::decode, sz::SzDecode<double>::decode_add,
    nullptr, nullptr,
    sz::sz_variable,
};
}  // namespace compmpi

// SPDX-License-Identifier: BSD-3-Clause
/* The `lossless` codec against the data's entropy, fpzip and memcpy, in one run.
 *
 *   lossless_bench [--reps R] [--f32 FILE]...   (FILE: raw little-endian float32, e.g. a
 *                                                 gradient from tools/dump_gradients.py)
 *
 * Data sets: gradient-like fp32 (codec_bench's generator, 16 MiB), a smooth fp64 field (a sum
 * of 16 Gaussians on a 128^3 grid, 16 MiB), the same field with relative noise 1e-6 (its low
 * mantissa bits random), the smooth field as fp32, and every --f32 FILE. For each: the order-0
 * entropy of its byte planes (the bound a byte-plane coder without context can reach: ratio
 * 8E / sum of the planes' entropies), then per coder the ratio raw/coded bytes and encode and
 * decode GB/s of raw data on ONE thread, best of R, beside memcpy's GB/s measured in the same
 * run: lossless shuffle and delta at zstd levels 1 and 3, and fpzip 1.3 (lossless, prec 0). */
#include <fpzip.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "best_of.h"
#include "smooth_field.h"
#include "codec.h"
#include "kernels/lossless/lossless.h"

using namespace compmpi;
using clk = std::chrono::steady_clock;

namespace {

using bestof::best_seconds;
using bestof::g_reps;

struct Data {
    std::string name;
    Elem elem;
    std::vector<uint8_t> bytes; /* n * E raw bytes */
    size_t n() const { return bytes.size() / (elem == Elem::f64 ? 8 : 4); }
};

double plane_entropy_bits(const Data &d) { /* sum over byte planes of order-0 entropy */
    const size_t E = d.elem == Elem::f64 ? 8 : 4, n = d.n();
    double sum = 0;
    for (size_t k = 0; k < E; ++k) {
        size_t h[256] = {};
        for (size_t i = 0; i < n; ++i) ++h[d.bytes[i * E + k]];
        for (size_t c : h)
            if (c) sum -= static_cast<double>(c) / n * std::log2(static_cast<double>(c) / n);
    }
    return sum;
}

Data gradient_like(size_t n) {
    Data d{"gradient-like fp32 (synthetic)", Elem::f32, std::vector<uint8_t>(n * 4)};
    uint64_t s = 12345;
    double scale = 1e-3;
    for (size_t i = 0; i < n; ++i) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        double u1 = ((s >> 11) + 1.0) / 9007199254740993.0;
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        double u2 = (s >> 11) / 9007199254740992.0;
        if (i % 4096 == 0) scale = std::pow(10.0, -5 + 4 * u2);
        float v = static_cast<float>(std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307 * u2) * scale);
        std::memcpy(&d.bytes[i * 4], &v, 4);
    }
    return d;
}

using bestof::gaussians;

template <class T> Data as_data(const char *name, Elem e, const std::vector<double> &f) {
    Data d{name, e, std::vector<uint8_t>(f.size() * sizeof(T))};
    for (size_t i = 0; i < f.size(); ++i) {
        T v = static_cast<T>(f[i]);
        std::memcpy(&d.bytes[i * sizeof(T)], &v, sizeof(T));
    }
    return d;
}

void row(const char *coder, double raw, size_t coded, double te, double td, double mcpy) {
    double gb = raw / 1e9;
    std::printf("  %-22s %7.2fx  enc %6.2f GB/s (%4.2fx memcpy)  dec %6.2f GB/s (%4.2fx memcpy)\n", coder, raw / coded,
                gb / te, gb / te / mcpy, gb / td, gb / td / mcpy);
}

void bench(const Data &d) {
    const size_t n = d.n(), E = d.elem == Elem::f64 ? 8 : 4, raw = n * E;
    std::vector<uint8_t> out(raw), blob;
    double mcpy = raw / 1e9 / best_seconds([&] { std::memcpy(out.data(), d.bytes.data(), raw); });
    double h = plane_entropy_bits(d);
    std::printf("%s: %zu values, %.1f MiB; byte-plane order-0 entropy %.2f of %zu bits (bound %.2fx); memcpy %.2f GB/s\n",
                d.name.c_str(), n, raw / 1048576.0, h, 8 * E, 8.0 * E / h, mcpy);
    const CodecOps *c = codec_by_name("lossless");
    for (uint8_t variant : {lossless::kShuffle, lossless::kDelta})
        for (int level : {1, 3}) {
            CodecParams p;
            p.elem = d.elem;
            p.variant = variant;
            p.param = lossless::kBlockLog2;
            p.level = level;
            blob.resize(c->max_payload(n, p));
            size_t len = 0;
            Status st = Status::ok;
            double te = best_seconds([&] {
                st = d.elem == Elem::f64
                         ? c->encode64(reinterpret_cast<const double *>(d.bytes.data()), n, p, blob.data(), blob.size(), &len)
                         : c->encode(reinterpret_cast<const float *>(d.bytes.data()), n, p, blob.data(), blob.size(), &len);
            });
            Status sd = Status::ok;
            double td = best_seconds([&] {
                sd = d.elem == Elem::f64 ? c->decode64(blob.data(), len, n, p, reinterpret_cast<double *>(out.data()))
                                         : c->decode(blob.data(), len, n, p, reinterpret_cast<float *>(out.data()));
            });
            if (st != Status::ok || sd != Status::ok || std::memcmp(out.data(), d.bytes.data(), raw) != 0) {
                std::printf("  lossless failed (%s/%s or not bit-exact)\n", status_str(st), status_str(sd));
                std::exit(1);
            }
            char label[64];
            std::snprintf(label, sizeof label, "lossless %s zstd-%d", variant == lossless::kDelta ? "delta" : "shuffle", level);
            row(label, raw, len, te, td, mcpy);
        }
    /* fpzip, lossless: a 1-D array of n values */
    std::vector<uint8_t> fz(raw + 1024);
    size_t flen = 0;
    double te = best_seconds([&] {
        FPZ *z = fpzip_write_to_buffer(fz.data(), fz.size());
        z->type = d.elem == Elem::f64 ? FPZIP_TYPE_DOUBLE : FPZIP_TYPE_FLOAT;
        z->prec = 0;
        z->nx = static_cast<int>(n), z->ny = z->nz = z->nf = 1;
        flen = fpzip_write(z, d.bytes.data());
        fpzip_write_close(z);
    });
    double td = best_seconds([&] {
        FPZ *z = fpzip_read_from_buffer(fz.data());
        z->type = d.elem == Elem::f64 ? FPZIP_TYPE_DOUBLE : FPZIP_TYPE_FLOAT;
        z->prec = 0;
        z->nx = static_cast<int>(n), z->ny = z->nz = z->nf = 1;
        fpzip_read(z, out.data());
        fpzip_read_close(z);
    });
    if (flen == 0 || std::memcmp(out.data(), d.bytes.data(), raw) != 0) std::printf("  fpzip failed\n");
    else row("fpzip 1.3 (1-D)", raw, flen, te, td, mcpy);
}

}  // namespace

int main(int argc, char **argv) {
    std::vector<Data> sets;
    sets.push_back(gradient_like(size_t(4) << 20));
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) g_reps = std::atoi(argv[++i]);
        else if (!std::strcmp(argv[i], "--f32") && i + 1 < argc) {
            const char *path = argv[++i];
            FILE *f = std::fopen(path, "rb");
            if (!f) return std::fprintf(stderr, "lossless_bench: cannot open %s\n", path), 2;
            Data d{std::string("fp32 file ") + path, Elem::f32, {}};
            uint8_t buf[65536];
            for (size_t r; (r = std::fread(buf, 1, sizeof buf, f)) > 0;) d.bytes.insert(d.bytes.end(), buf, buf + r);
            std::fclose(f);
            d.bytes.resize(d.bytes.size() / 4 * 4);
            sets.push_back(std::move(d));
        } else {
            std::fprintf(stderr, "usage: lossless_bench [--reps R] [--f32 FILE]...\n");
            return 2;
        }
    }
    auto smooth = gaussians(128, 0), noisy = gaussians(128, 1e-6);
    sets.push_back(as_data<double>("smooth fp64 field (16 Gaussians, 128^3)", Elem::f64, smooth));
    sets.push_back(as_data<double>("smooth fp64 field + 1e-6 relative noise", Elem::f64, noisy));
    sets.push_back(as_data<float>("smooth field as fp32", Elem::f32, smooth));
    for (const auto &d : sets) bench(d);
    return 0;
}

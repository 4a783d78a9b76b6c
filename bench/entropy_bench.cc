// SPDX-License-Identifier: BSD-3-Clause
/* The entropy stage (kernels/entropy.h) against the order-0 entropy of each codec's codes,
 * and the lossless coders it was chosen from, in one run:
 *
 *   entropy_bench [--reps R] [--f32 FILE]...   (FILE: raw little-endian float32, e.g. a
 *                                                gradient from tools/dump_gradients.py)
 *
 * For every data set (each --f32 FILE, else a synthetic gradient: N(0, 1e-3^2) with a few
 * outliers, 4 Mi values) and every codec with fixed-width codes, the codec's payload P (bytes)
 * is measured against:
 *   H0     the order-0 entropy of its byte planes at the stage's shuffle width (the bound a
 *          coder without context reaches on the shuffled bytes), in bytes;
 *   stage  what the stage sends (blob_entropy_encode at zstd levels -1000, -100, -20, 1), its encode and
 *          decode GB/s of payload bytes on ONE thread, best of R;
 *   lz4    LZ4_compress_default of the same shuffled bytes;
 *   blosc  blosc_compress (its own shuffle at the same type size; blosclz, lz4 and zstd-1).
 * and memcpy GB/s of the same bytes, measured in the same run. Columns: wire/H0 (1.00 = the
 * entropy), and the codes' reduction P/wire. */
#include <blosc.h>
#include <lz4.h>
#include <zstd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "best_of.h"
#include "codec.h"
#include "entropy.h"

using namespace compmpi;
using clk = std::chrono::steady_clock;

namespace {

using bestof::best_seconds;
using bestof::g_reps;

double plane_entropy_bytes(const uint8_t *p, size_t n, unsigned w) {
    const size_t m = n / w;
    double bits = 0;
    for (unsigned k = 0; k < w; ++k) {
        size_t h[256] = {};
        for (size_t i = 0; i < m; ++i) ++h[p[i * w + k]];
        for (size_t c : h)
            if (c) bits -= static_cast<double>(c) * std::log2(static_cast<double>(c) / static_cast<double>(m));
    }
    return bits / 8 + static_cast<double>(n - m * w); /* the tail as it is */
}

struct Case {
    const char *codec;
    int bits;
};
const Case kCases[] = {{"bitpack", 8}, {"bitpack", 16}, {"fp16", 0}, {"bf16", 0}, {"q8", 0},
                       {"terngrad", 0}, {"qsgd", 4}, {"rangefloat", 0}, {"none", 0}};

void run(const std::string &name, const std::vector<float> &x) {
    const size_t n = x.size();
    std::printf("\n## %s: %zu floats (%.1f MiB)\n\n", name.c_str(), n, n * 4.0 / 1048576);
    std::printf("| codec | P (payload B) | P/H0 | stage -1000: wire/H0, P/wire, enc, dec GB/s | stage -100 | stage -20 | stage 1 | lz4 wire/H0 | blosc blosclz / lz4 / zstd-1 wire/H0 | memcpy GB/s |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
    for (const Case &k : kCases) {
        const CodecOps &c = *codec_by_name(k.codec);
        CodecParams p;
        const bool widths = c.bits_step != 0;
        p.bits = widths ? static_cast<uint8_t>(codec_bits_for(c, k.bits, Elem::f32)) : 0;
        if (c.id == CodecId::qsgd) p.param = p.bucket = 512;
        p.seed = 1;
        if (c.flags & CODEC_SHARED_SCALE) {
            double st = 0;
            if (c.prepare(x.data(), n, p, &st) == Status::ok) p.shared_scale = st;
        }
        std::vector<uint8_t> blob(blob_max_bytes(c, n, p));
        size_t len = 0;
        if (blob_encode(c, p, x.data(), n, blob.data(), blob.size(), &len) != Status::ok) {
            std::printf("| %s %d | encode failed | | | | | | | |\n", k.codec, p.bits);
            continue;
        }
        const size_t P = len - kBlobHeaderBytes;
        const unsigned w = entropy_stride(c, p);
        const double H0 = plane_entropy_bytes(blob.data() + kBlobHeaderBytes, P, w);
        std::vector<uint8_t> dst(P + 64);
        const double t_copy = best_seconds([&] { std::memcpy(dst.data(), blob.data() + kBlobHeaderBytes, P); });
        std::printf("| %s%s | %zu | %.2f |", k.codec, p.bits ? (" " + std::to_string(p.bits)).c_str() : "", P, P / H0);
        for (int level : {-1000, -100, -20, 1}) {
            std::vector<uint8_t> coded;
            size_t cl = len;
            EntropyParams ep{kEntropyZstd, level};
            const double te = best_seconds([&] {
                coded.assign(blob.begin(), blob.begin() + static_cast<long>(len));
                cl = len;
                blob_entropy_encode(c, p, coded.data(), &cl, ep);
            });
            std::vector<uint8_t> scratch;
            const uint8_t *raw = nullptr;
            size_t ra = 0;
            const double td = best_seconds([&] { blob_entropy_decode(coded.data(), cl, n, scratch, &raw, &ra); });
            const size_t wire = cl - kBlobHeaderBytes;
            std::printf(" %.2f, %.2fx, %.2f, %.2f |", wire / H0, static_cast<double>(P) / wire, P / te / 1e9, P / td / 1e9);
        }
        {
            std::vector<uint8_t> sh(P), out(static_cast<size_t>(LZ4_compressBound(static_cast<int>(P))));
            byte_shuffle(blob.data() + kBlobHeaderBytes, P, w, sh.data());
            const int l = LZ4_compress_default(reinterpret_cast<const char *>(sh.data()),
                                               reinterpret_cast<char *>(out.data()), static_cast<int>(P),
                                               static_cast<int>(out.size()));
            std::printf(" %.2f |", l / H0);
        }
        for (const char *comp : {"blosclz", "lz4", "zstd"}) {
            std::vector<uint8_t> out(P + BLOSC_MAX_OVERHEAD);
            blosc_set_compressor(comp);
            const int l = blosc_compress(comp[0] == 'z' ? 1 : 5, BLOSC_SHUFFLE, w, P, blob.data() + kBlobHeaderBytes,
                                         out.data(), out.size());
            std::printf(" %.2f%s", l > 0 ? l / H0 : 0.0, comp[0] == 'z' ? " |" : " /");
        }
        std::printf(" %.1f |\n", P / t_copy / 1e9);
    }
}

std::vector<float> synthetic(size_t n) {
    std::vector<float> v(n);
    uint64_t s = 42;
    auto u = [&] {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        return ((s >> 11) + 0.5) / 9007199254740992.0;
    };
    for (size_t i = 0; i < n; ++i) {
        const double g = std::sqrt(-2 * std::log(u())) * std::cos(6.283185307179586 * u());
        v[i] = static_cast<float>(g * 1e-3 * (i % 997 == 0 ? 50 : 1));
    }
    return v;
}

}  // namespace

int main(int argc, char **argv) {
    std::vector<std::string> files;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) g_reps = std::atoi(argv[++i]);
        else if (!std::strcmp(argv[i], "--f32") && i + 1 < argc) files.push_back(argv[++i]);
        else {
            std::fprintf(stderr, "usage: entropy_bench [--reps R] [--f32 FILE]...\n");
            return 2;
        }
    }
    blosc_init();
    blosc_set_nthreads(1);
    std::printf("entropy_bench: one thread, best of %d; zstd %s, lz4 %s, blosc %s\n", g_reps, ZSTD_versionString(),
                LZ4_versionString(), BLOSC_VERSION_STRING);
    if (files.empty()) run("synthetic gradient N(0, 1e-3^2), 1 in 997 x50", synthetic(size_t{4} << 20));
    for (const std::string &f : files) {
        FILE *fp = std::fopen(f.c_str(), "rb");
        if (!fp) {
            std::fprintf(stderr, "entropy_bench: cannot open %s\n", f.c_str());
            return 1;
        }
        std::vector<float> x;
        float buf[4096];
        size_t got;
        while ((got = std::fread(buf, sizeof(float), 4096, fp)) > 0) x.insert(x.end(), buf, buf + got);
        std::fclose(fp);
        run(f, x);
    }
    blosc_destroy();
    return 0;
}

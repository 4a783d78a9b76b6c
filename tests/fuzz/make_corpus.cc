// SPDX-License-Identifier: BSD-3-Clause
/* Writes the seed corpus of the fuzz targets (tests/fuzz/corpus/, committed): valid blobs of
 * every codec at every width it accepts and each header variant the settings name (bitpack
 * rounding, q8 types, terngrad packing and buckets, qsgd buckets, sparsifier theta and FFT
 * blocks), at two lengths, plus a NaN-flagged blob per codec; the same as fp64 blobs (name
 * suffix -f64) for the codecs with an fp64 form, at their fp64 widths; and every setting with its
 * default and each allowed value as "key=value" under the three key spellings.
 * fuzz_decode's inputs go to fuzz_decode/<codec>/ (one libFuzzer campaign per decoder).
 * Usage: make_corpus DIR   (regenerate after a format change; inputs are deterministic). */
#include <sys/stat.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "codec.h"
#include "fuzz_target.h"
#include "runtime/policy.h"
#include "base/settings.h"

using namespace compmpi;

namespace {
std::string g_dir;
int g_files = 0;

void write(const std::string &sub, const std::string &name, const std::vector<uint8_t> &bytes) {
    const std::string path = g_dir + "/" + sub + "/" + name;
    FILE *f = std::fopen(path.c_str(), "wb");
    if (!f || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) {
        std::fprintf(stderr, "make_corpus: cannot write %s\n", path.c_str());
        std::exit(1);
    }
    std::fclose(f);
    ++g_files;
}
void put_le(std::vector<uint8_t> &v, uint64_t x, int bytes) {
    for (int i = 0; i < bytes; ++i) v.push_back(static_cast<uint8_t>(x >> (8 * i)));
}

/* gradient-like data: normal-ish values, a few orders of magnitude */
std::vector<float> data(size_t n, bool nan) {
    std::vector<float> x(n);
    uint64_t s = 0x243F6A8885A308D3ull + n;
    for (size_t i = 0; i < n; ++i) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        double u = ((s >> 11) + 0.5) / 9007199254740992.0;
        x[i] = static_cast<float>(std::tan(3.14159 * (u - 0.5)) * std::pow(10.0, -3.0 + static_cast<int>(i / 64 % 3)));
    }
    if (nan && n) x[n / 2] = NAN;
    return x;
}

void blob(const CodecOps &c, const Settings &cfg, const std::string &tag, size_t n, bool nan, int idx,
          Elem elem = Elem::f32) {
    CodecParams p;
    /* the settings' params for this element type (it sets p.elem: passing elem matters) */
    if (codec_params_from_settings(c, cfg, &p, elem) != Status::ok) return;
    if (!codec_has_elem(c, elem) || !codec_bits_ok(c, p.bits, elem)) return;
    p.simd = simd_detect();
    std::vector<float> x = data(n, nan);
    /* fp64: the same values, every other block 2^200 larger (outside fp32's range) */
    std::vector<double> x64(x.begin(), x.end());
    for (size_t i = 0; i < n; ++i)
        if (i / 64 % 2) x64[i] = std::ldexp(x64[i], 200);
    if (c.flags & CODEC_SHARED_SCALE) {
        double stat = 0;
        const Status ps = elem == Elem::f64 ? c.prepare64(x64.data(), n, p, &stat) : c.prepare(x.data(), n, p, &stat);
        if (ps == Status::ok) p.shared_scale = stat;
    }
    std::vector<uint8_t> b(blob_max_bytes(c, n, p));
    size_t len = 0;
    Status s = elem == Elem::f64 ? blob_encode(c, p, x64.data(), n, b.data(), b.size(), &len)
                                 : blob_encode(c, p, x.data(), n, b.data(), b.size(), &len);
    if (s == Status::nonfinite && !nan && elem == Elem::f64) { /* fp32 narrowing, q8: fp32's range only */
        x64.assign(x.begin(), x.end());
        if (c.flags & CODEC_SHARED_SCALE) {
            double stat = 0;
            if (c.prepare64(x64.data(), n, p, &stat) == Status::ok) p.shared_scale = stat;
        }
        s = blob_encode(c, p, x64.data(), n, b.data(), b.size(), &len);
    }
    if (s == Status::unsupported) return; /* e.g. a zfp tolerance below this data's floor: no seed */
    if (s != Status::ok && !(nan && s == Status::nonfinite)) {
        std::fprintf(stderr, "make_corpus: %s %s n=%zu: %s\n", c.name, tag.c_str(), n, status_str(s));
        std::exit(1);
    }
    b.resize(len);
    const std::string name = std::string(c.name) + "-" + tag + "-n" + std::to_string(n) + (nan ? "-nan" : "") +
                             (elem == Elem::f64 ? "-f64" : "");
    /* fuzz_decode: control (decode-add on every other input, detected SIMD, count from the
     * header), count, blob */
    std::vector<uint8_t> d;
    d.push_back(static_cast<uint8_t>(0x06 | (idx & 1)));
    put_le(d, n, 4);
    d.insert(d.end(), b.begin(), b.end());
    write("fuzz_decode/" + std::string(c.name), name, d); /* one directory per decoder */
    std::vector<uint8_t> h;
    put_le(h, n, 8);
    h.insert(h.end(), b.begin(), b.end());
    write("fuzz_header", name, h);
}

void set(Settings *s, const char *key, const std::string &val) {
    SettingId id;
    std::string err;
    if (!setting_lookup(key, &id) || setting_parse(id, val, s, &err) != Status::ok) {
        std::fprintf(stderr, "make_corpus: setting %s=%s: %s\n", key, val.c_str(), err.c_str());
        std::exit(1);
    }
}

std::vector<std::string> split(const std::string &allowed) {
    std::vector<std::string> out;
    size_t a = 0;
    while (a <= allowed.size()) {
        size_t b = allowed.find('|', a);
        if (b == std::string::npos) b = allowed.size();
        if (b > a) out.push_back(allowed.substr(a, b - a));
        a = b + 1;
    }
    return out;
}
}  // namespace

int main(int argc, char **argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: make_corpus DIR\n");
        return 2;
    }
    g_dir = argv[1];
    for (const char *sub : {"", "/fuzz_decode", "/fuzz_header", "/fuzz_settings"}) mkdir((g_dir + sub).c_str(), 0755);
    for (int id = 0; id < 256; ++id)
        if (const CodecOps *c = codec_by_id(id)) mkdir((g_dir + "/fuzz_decode/" + c->name).c_str(), 0755);

    /* header variants named by settings, per codec */
    struct Variant { const char *codec, *key, *values; };
    const Variant variants[] = {
        {"bitpack", "rounding", "trunc|nearest"},
        {"q8", "q8_type", "dynamic_tree|linear|static_tree|mantissa"},
        {"terngrad", "terngrad_packing", "base4|base3"},
        {"terngrad", "terngrad_bucket", "0|64"},
        {"qsgd", "qsgd_bucket", "0|512|100"},
        {"topk", "theta", "0.5|0.85|0.99"},
        {"fft_topk", "theta", "0.5|0.85"},
        {"fft_topk", "fft_block", "0|256"},
        {"sparse", "theta", "0.5|0.85"},
        {"zfp", "zfp_tolerance", "0.01|0.5"},
        {"lossless", "lossless_mode", "shuffle|delta"},
        {"sz", "sz_mode", "plain|lorenzo"},
        {"sz", "sz_bound", "1e-6|0.5"},
    };
    int idx = 0, idx64 = 0; /* idx64: the fp64 blobs' own count, so the fp32 inputs stay as they were */
    for (int id = 0; id < 256; ++id) {
        const CodecOps *c = codec_by_id(id);
        if (!c) continue;
        std::vector<int> widths;
        if (c->bits_step) for (int b = c->bits_min; b <= c->bits_max; b += c->bits_step) widths.push_back(b);
        else widths.push_back(0);
        for (int w : widths) {
            Settings base = settings_defaults();
            base.codec = id;
            base.bits = w;
            const std::string wt = "b" + std::to_string(w);
            for (size_t n : {size_t{5}, size_t{300}}) blob(*c, base, wt, n, false, idx++);
            for (const Variant &v : variants) {
                if (std::string(v.codec) != c->name) continue;
                if (std::string(v.key) == "zfp_tolerance" && w != c->bits_default) continue; /* no rate */
                for (const std::string &val : split(v.values)) {
                    Settings s = base;
                    set(&s, v.key, val);
                    blob(*c, s, wt + "-" + v.key + "_" + val, 300, false, idx++);
                }
            }
        }
        Settings s = settings_defaults();
        s.codec = id;
        blob(*c, s, "default", 64, true, idx++);
        /* fp64 blobs of the codecs that have them: every fp64 width, the same variants */
        if (!codec_has_elem(*c, Elem::f64)) continue;
        std::vector<int> w64;
        if (c->bits64_step) for (int b = c->bits64_min; b <= c->bits64_max; b += c->bits64_step) w64.push_back(b);
        else w64.push_back(0);
        for (int w : w64) {
            Settings base = settings_defaults();
            base.codec = id;
            base.bits = w;
            const std::string wt = "b" + std::to_string(w);
            for (size_t n : {size_t{5}, size_t{300}}) blob(*c, base, wt, n, false, idx64++, Elem::f64);
            for (const Variant &v : variants) {
                if (std::string(v.codec) != c->name) continue;
                for (const std::string &val : split(v.values)) {
                    Settings s2 = base;
                    set(&s2, v.key, val);
                    blob(*c, s2, wt + "-" + v.key + "_" + val, 300, false, idx64++, Elem::f64);
                }
            }
        }
        blob(*c, s, "default", 64, true, idx64++, Elem::f64);
    }

    for (int i = 0; i < kNumSettings; ++i) {
        const SettingDesc &d = kSettings[i];
        std::vector<std::string> vals{d.def};
        if (d.type == SettingType::ENUM || d.type == SettingType::LIST) for (auto &v : split(d.allowed)) vals.push_back(v);
        if (d.type == SettingType::CODEC) for (auto &v : split(codec_names())) vals.push_back(v);
        int k = 0;
        for (const std::string &v : vals) {
            std::string key = d.name;
            if (k % 3 == 1) key = "compmpi_" + key;
            if (k % 3 == 2) {
                key = "COMPMPI_" + key;
                for (auto &ch : key) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
            }
            const std::string text = key + "=" + v;
            write("fuzz_settings", std::string(d.name) + "-" + std::to_string(k++), std::vector<uint8_t>(text.begin(), text.end()));
        }
    }
    std::printf("make_corpus: %d files under %s\n", g_files, g_dir.c_str());
    return 0;
}

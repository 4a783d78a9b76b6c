// SPDX-License-Identifier: BSD-3-Clause
/* rf_measure: error and bytes of rangefloat (both modes), fft_topk (both quantiser modes)
 * and topk on gradients stored as raw float32 files (tools/dump_gradients.py writes them).
 *
 *   rf_measure [--theta 0.85] [--block 16384] FILE.f32 ...
 *
 * Per file: rangefloat at N = 8, 10, 12, 16 in mode range_sign and paper; fft_topk at the
 * given theta and block with N = 8, 10, 16 in both modes; topk at the same theta. Columns:
 * relative l2 error |x - x^|/|x|, max |x - x^| (absolute, and relative to max|x|), payload
 * bytes (codec payload without the 32-byte blob header) and ratio 4n/bytes, and for the
 * rangefloat rows the format chosen (m; paper: P). Everything goes through the codecs'
 * CodecOps, single thread, scalar path (all paths give identical bytes).
 * Last: "coefficients" = the re/im parts of the fft_topk kept coefficients of the same file
 * (blockwise real FFT, top (1-theta) by |c|^2, computed here with FFTW), quantised by
 * rangefloat in both modes: the quantiser's own error inside fft_topk.
 * "paper, fixed [-1, 1]" rows: Algorithm 1 with the experiments' fixed range instead of the
 * buffer's (values above 1 clamp, below -1 saturate at 1..1), m chosen as in the codec. */
#include <fftw3.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "codec.h"
#include "rangefloat/rangefloat.h"

using namespace compmpi;

namespace {

std::vector<float> load(const char *path) {
    std::vector<float> v;
    FILE *f = std::fopen(path, "rb");
    if (!f) return v;
    std::fseek(f, 0, SEEK_END);
    const long bytes = std::ftell(f);
    std::fseek(f, 0, SEEK_SET);
    v.resize(static_cast<size_t>(bytes) / 4);
    if (std::fread(v.data(), 4, v.size(), f) != v.size()) v.clear();
    std::fclose(f);
    return v;
}

struct Result {
    double rel_l2 = 0, max_abs = 0, max_rel = 0;
    size_t bytes = 0;
    std::string fmt;
};

bool run(const char *codec, const CodecParams &p, const std::vector<float> &x, Result *r) {
    const CodecOps *c = codec_by_name(codec);
    if (!c || c->check(p) != Status::ok) return false;
    std::vector<uint8_t> buf(c->max_payload(x.size(), p));
    size_t len = 0;
    if (c->encode(x.data(), x.size(), p, buf.data(), buf.size(), &len) != Status::ok) return false;
    CodecParams dp = p;
    dp.theta = 0; /* a decoder knows only what the header carries */
    std::vector<float> y(x.size());
    if (c->decode(buf.data(), len, x.size(), dp, y.data()) != Status::ok) return false;
    double e2 = 0, s2 = 0, amax = 0;
    r->max_abs = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        const double d = static_cast<double>(x[i]) - y[i];
        e2 += d * d;
        s2 += static_cast<double>(x[i]) * x[i];
        r->max_abs = std::max(r->max_abs, std::fabs(d));
        amax = std::max(amax, std::fabs(static_cast<double>(x[i])));
    }
    r->rel_l2 = s2 > 0 ? std::sqrt(e2 / s2) : 0;
    r->max_rel = amax > 0 ? r->max_abs / amax : 0;
    r->bytes = len;
    r->fmt.clear();
    if (std::strcmp(codec, "rangefloat") == 0) {
        char tmp[64];
        if (p.variant == rf::kModePaper) {
            rf::PaperFormat f;
            rf::read_paper(buf.data(), p.bits, &f);
            std::snprintf(tmp, sizeof tmp, "m=%d P=%u", f.m, f.P);
        } else {
            std::snprintf(tmp, sizeof tmp, "m=%d", buf[0]);
        }
        r->fmt = tmp;
    }
    return true;
}

/* re/im parts of the top (1-theta) of the blockwise r2c coefficients, in position order */
std::vector<float> kept_coefficients(const std::vector<float> &x, uint32_t block, double theta) {
    const size_t n = x.size(), B = block && block < n ? block : n;
    std::vector<float> re, im;
    for (size_t lo = 0; lo < n; lo += B) {
        const size_t L = std::min(B, n - lo), C = L / 2 + 1;
        float *in = fftwf_alloc_real(2 * C);
        fftwf_complex *out = fftwf_alloc_complex(C);
        fftwf_plan pl = fftwf_plan_dft_r2c_1d(static_cast<int>(L), in, out, FFTW_ESTIMATE);
        std::copy(x.begin() + static_cast<long>(lo), x.begin() + static_cast<long>(lo + L), in);
        fftwf_execute(pl);
        for (size_t j = 0; j < C; ++j) re.push_back(out[j][0]), im.push_back(out[j][1]);
        fftwf_destroy_plan(pl);
        fftwf_free(in);
        fftwf_free(out);
    }
    const size_t C = re.size(), k = static_cast<size_t>(std::ceil((1.0 - theta) * static_cast<double>(C)));
    std::vector<float> mag(C);
    for (size_t j = 0; j < C; ++j) mag[j] = re[j] * re[j] + im[j] * im[j];
    std::vector<float> sorted = mag;
    std::nth_element(sorted.begin(), sorted.begin() + static_cast<long>(C - k), sorted.end());
    const float T = sorted[C - k];
    std::vector<float> parts;
    for (size_t j = 0; j < C && parts.size() < 2 * k; ++j)
        if (mag[j] >= T) parts.push_back(re[j]), parts.push_back(im[j]);
    return parts;
}

/* Algorithm 1 with the paper's fixed range [-1, 1] (Section 4.2) instead of the buffer's:
 * every m in 1..N tuned for eps, the best by squared error. Not a codec setting: for the
 * comparison in docs/codecs/rangefloat.md. */
bool run_fixed_range(const std::vector<float> &x, int N, Result *r) {
    double best = HUGE_VAL;
    for (int m = 1; m <= N; ++m) {
        const rf::PaperFormat f = rf::paper_tune(N, m, -1.0f, 1.0f);
        if (!rf::paper_valid(f)) continue;
        double e2 = 0, s2 = 0, mx = 0, amax = 0;
        for (float v : x) {
            const float c = v > 1.0f ? 1.0f : v; /* line 2-3: x > max -> max */
            const double d = static_cast<double>(v) - rf::paper_decode_one(rf::paper_encode_one(c, f), f);
            e2 += d * d;
            s2 += static_cast<double>(v) * v;
            mx = std::max(mx, std::fabs(d));
            amax = std::max(amax, std::fabs(static_cast<double>(v)));
        }
        if (e2 <= best) {
            best = e2;
            r->rel_l2 = s2 > 0 ? std::sqrt(e2 / s2) : 0;
            r->max_abs = mx;
            r->max_rel = amax > 0 ? mx / amax : 0;
            r->bytes = rf::kRangeHeaderBytes + rf::packed_bytes(x.size(), N);
            char tmp[64];
            std::snprintf(tmp, sizeof tmp, "m=%d P=%u", f.m, f.P);
            r->fmt = tmp;
        }
    }
    return best < HUGE_VAL;
}

void row(const char *name, const char *mode, int N, const Result &r, size_t n) {
    std::printf("| %s | %s | %d | %.4g | %.3g | %.3g | %zu | %.2f | %s |\n", name, mode, N, r.rel_l2, r.max_abs, r.max_rel,
                r.bytes, 4.0 * static_cast<double>(n) / static_cast<double>(r.bytes), r.fmt.c_str());
}

}  // namespace

int main(int argc, char **argv) {
    double theta = 0.85;
    uint32_t block = 16384;
    std::vector<const char *> files;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--theta") && i + 1 < argc) theta = std::atof(argv[++i]);
        else if (!std::strcmp(argv[i], "--block") && i + 1 < argc) block = static_cast<uint32_t>(std::atol(argv[++i]));
        else files.push_back(argv[i]);
    }
    if (files.empty()) {
        std::fprintf(stderr, "usage: rf_measure [--theta T] [--block B] FILE.f32 ...\n");
        return 2;
    }
    const char *modes[] = {"range_sign", "paper"};
    for (const char *path : files) {
        const std::vector<float> x = load(path);
        if (x.empty()) {
            std::fprintf(stderr, "rf_measure: cannot read %s\n", path);
            return 1;
        }
        std::printf("\n%s: n = %zu, theta = %g, fft_block = %u\n\n", path, x.size(), theta, block);
        std::printf("| codec | mode | N | rel. l2 | max abs | max abs / max abs(x) | bytes | ratio | format |\n");
        std::printf("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n");
        Result r;
        for (int N : {8, 10, 12, 16})
            for (int mode = 0; mode < 2; ++mode) {
                CodecParams p;
                p.bits = static_cast<uint8_t>(N);
                p.variant = static_cast<uint8_t>(mode);
                if (!run("rangefloat", p, x, &r)) return 1;
                row("rangefloat", modes[mode], N, r, x.size());
            }
        for (int N : {8, 10})
            if (run_fixed_range(x, N, &r)) row("rangefloat", "paper, fixed [-1, 1]", N, r, x.size());
        for (int N : {8, 10, 16})
            for (int mode = 0; mode < 2; ++mode) {
                CodecParams p;
                p.bits = static_cast<uint8_t>(N);
                p.variant = static_cast<uint8_t>(mode);
                p.param = block;
                p.theta = static_cast<float>(theta);
                if (!run("fft_topk", p, x, &r)) return 1;
                row("fft_topk", modes[mode], N, r, x.size());
            }
        CodecParams p;
        p.theta = static_cast<float>(theta);
        if (!run("topk", p, x, &r)) return 1;
        row("topk", "-", 32, r, x.size());
        const std::vector<float> parts = kept_coefficients(x, block, theta);
        for (int N : {8, 10, 12, 16})
            for (int mode = 0; mode < 2; ++mode) {
                CodecParams q;
                q.bits = static_cast<uint8_t>(N);
                q.variant = static_cast<uint8_t>(mode);
                if (!run("rangefloat", q, parts, &r)) return 1;
                row("coefficients", modes[mode], N, r, parts.size());
            }
        for (int N : {8, 10})
            if (run_fixed_range(parts, N, &r)) row("coefficients", "paper, fixed [-1, 1]", N, r, parts.size());
    }
    return 0;
}

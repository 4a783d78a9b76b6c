// SPDX-License-Identifier: BSD-3-Clause
/* fft_topk (Wang et al., "FFT-based Gradient Sparsification for the Distributed Training of
 * Deep Neural Networks", HPDC 2020): real FFT of the buffer (blockwise), keep the top (1-theta)
 * fraction of complex coefficients by magnitude, quantise their real and imaginary parts with
 * the range-based N-bit float (rangefloat/rangefloat.h), pack as bitmap + codes. Decode
 * scatters the coefficients back and runs the inverse FFT (normalised by 1/block).
 *
 * Blocks: the buffer is cut into blocks of B = param elements (header param; 0 = one block,
 * i.e. B = n, capped at 2^30); the last block may be shorter. Block i of length L has
 * L/2+1 complex coefficients, which occupy positions [i*P, i*P + L/2+1) of a coefficient
 * index space where P = round_up(B/2+1, 64): every bitmap word belongs to one block.
 * All blocks' coefficients compete in one global top-k (ties to the lower position).
 *
 * Header variant: the range-based float's mode (rangefloat.h: 0 range_sign, 1 paper).
 * Payload (little-endian):
 *   0   12   header of the kept parts' quantiser (rangefloat.h; range_sign: u8 m, 3 x 0,
 *            f32 min|x|, f32 max|x|; paper: u8 m, 3 x 0, u32 pbase, u32 P)
 *   12  u8   sc         the FFT ran on x * 2^-sc (0 unless |x| is huge; keeps |c|^2 finite)
 *   13  3    zero
 *   16  u64  k          coefficients kept
 *   24  u64  bitmap[Cp/64]   positions kept; padding positions zero; popcount == k
 *   ..  codes: 2k codes of N bits (re, im of each kept coefficient in position order),
 *        packed LSB first; rank r's codes start at bit 2rN (decoders find r by popcounts)
 * Size 24 + Cp/8 + ceil(2kN/8): a function of (n, param, k, N). theta is encode-side
 * context only (CodecParams::theta). */
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "codec.h"

namespace compmpi::fft_topk {

inline constexpr size_t kHeaderBytes = 24;
inline constexpr size_t kMaxBlock = size_t{1} << 30;
inline constexpr int kBitsDefault = 10;

struct Layout {
    size_t n = 0, B = 0;      /* elements, block length */
    size_t nfull = 0;         /* full blocks */
    size_t tail = 0;          /* length of the last, shorter block (0: none) */
    size_t C = 0;             /* complex coefficients (sum of L/2+1) */
    size_t P = 0;             /* positions per full block (multiple of 64) */
    size_t Cp = 0;            /* positions in all (multiple of 64) */
    size_t nblocks() const { return nfull + (tail ? 1 : 0); }
    size_t len(size_t i) const { return i < nfull ? B : tail; }
    size_t coefs(size_t i) const { return len(i) / 2 + 1; }
    size_t pos(size_t i) const { return i * P; }
    size_t slots(size_t i) const { return i < nfull ? P : (coefs(i) + 63) / 64 * 64; }
};

Layout layout(size_t n, uint32_t param);
size_t payload_bytes(const Layout &L, uint64_t k, int N);

/* Kernels for one SIMD level, all threads given. encode: Status::nonfinite for NaN/Inf,
 * Status::unsupported if |x| is so large (> 1e38 / (8 * coefficients)) that the inverse
 * transform could overflow. */
Status encode(const float *in, size_t n, int N, uint32_t param, double theta, uint8_t *out, size_t cap,
              size_t *len, SimdLevel lvl, int threads, int mode = 0);
Status decode(const uint8_t *in, size_t len, size_t n, int N, uint32_t param, float *out, bool add, SimdLevel lvl,
              int threads, int mode = 0, bool stream = false);

/* out = (or out +=, add) the sum of the cnt payloads' decoded values, added in index order.
 * spectral (default): the kept coefficients of every payload are added per block into one
 * spectrum (in index order, each scaled by 2^(sc_j - max sc), exact), then ONE inverse
 * transform per block (the FFT is linear); spatial: one inverse transform per payload, the
 * results added in index order (what decode_add P times computes, bit for bit). Either way
 * every payload is validated before out is written, and the result depends only on the
 * payloads and their order (same bits on every rank, any thread count). A block whose summed
 * spectrum could overflow (only near the encoder's refusal limit) is summed spatially.
 * stream (CodecParams::stream_out; not with add): the output is written with non-temporal
 * stores (the same bits; 64 MiB, 2 payloads, one thread: 48 -> 41 ms here). */
Status decode_sum(const uint8_t *const *in, const size_t *len, int cnt, size_t n, int N, uint32_t param, float *out,
                  bool add, SimdLevel lvl, int threads, int mode = 0, bool spectral = true, bool stream = false);

/* decode_sum for payloads whose bytes arrive in order, e.g. in pieces of a collective's
 * exchange, so the inverse transforms run while the rest is still in flight (the same bits as
 * decode_sum of the whole payloads, spectral or spatial, any thread count). begin() once the
 * first prefix_bytes() of every payload have arrived (header and bitmap: validated there;
 * len[] are the full lengths); then advance() with how many bytes of each have arrived
 * (avail[j] <= len[j]): it dequantises what it can and writes every block whose codes have
 * all arrived, at most max_blocks; need(j) is how many bytes of payload j the next block
 * waits for. Unlike decode_sum, a payload whose codes break the overflow bound is found only
 * at its block: earlier blocks are written by then, so `out` must not be the caller's only
 * copy of anything (the input of an in-place allreduce) unless may_refuse() is false: begin()
 * found every block's bound met even with each kept part at the largest magnitude its
 * payload's quantiser decodes to (always, but near the encoder's refusal limit), and then
 * advance() refuses nothing. One stream per thread at a time (it uses the decoders'
 * per-thread scratch). */
class SumStream {
  public:
    SumStream();
    ~SumStream();
    SumStream(const SumStream &) = delete;
    SumStream &operator=(const SumStream &) = delete;
    static size_t prefix_bytes(size_t n, uint32_t param);
    Status begin(const uint8_t *const *in, const size_t *len, int cnt, size_t n, int N, uint32_t param, float *out,
                 bool add, SimdLevel lvl, int threads, int mode = 0, bool spectral = true, bool stream = false);
    Status advance(const size_t *avail, size_t max_blocks = SIZE_MAX);
    size_t need(int j) const;
    bool done() const;
    bool may_refuse() const;

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

/* A hash of what this process's transforms make of a fixed input: encode (θ = 0.85, 10 bits)
 * and decode of min(param, 65536) + 1000 probe values (param 0: one 17384-point transform),
 * the decoded bits hashed. Processes on the same CPU type and FFTW build agree; FFTW's
 * codelets depend on both. Computed once per length (a few ms: the plans, kept for later). */
uint64_t probe(uint32_t param);

/* Planning rigor of the transforms of one length (fft_plan setting). estimate: FFTW_ESTIMATE,
 * no timing, the same plan in every process (the default for every length). measure /
 * patient: FFTW times candidate plans, so processes would choose different plans (and
 * decode different bits) unless they share the choice: one process calls tune_plans, which
 * plans the length (its r2c, in-place c2r and out-of-place c2r) with that rigor (no time
 * limit: FFTW records time-limited plans at a lower rigor, which the others then cannot find;
 * 16384 points here: measure ~2 s, patient ~22 s), installs the plans for later calls and
 * returns FFTW's wisdom as text
 * ("" if planning failed: nothing changed); the others call adopt_plans with that text,
 * which plans the same length from the wisdom alone (no timing: the same plans) and installs
 * them, or returns false (the plans unchanged; the wisdom may have been imported). Imported or
 * measured wisdom also steers later FFTW_ESTIMATE plans of other lengths (FFTW uses wisdom for
 * sub-problems), the same in every process that holds the same wisdom. reset_plans forgets
 * all FFTW wisdom of the process and puts FFTW_ESTIMATE plans back for the length: what every
 * process must do where some could not adopt.
 * Not thread-safe against codec calls running at the same time (the plans of a length are
 * replaced): call these before any transform of that length, as MPI_Init does. Plans
 * replaced are kept (not destroyed), so a copy held elsewhere stays valid. */
enum class PlanRigor : int { estimate = 0, measure = 1, patient = 2 };
std::string tune_plans(size_t len, PlanRigor rigor);
bool adopt_plans(size_t len, PlanRigor rigor, const std::string &wisdom);
void reset_plans(size_t len);

/* fp64 (cpu/fft_topk64.cc; docs/codecs/fft_topk.md, "fp64"): FFTW's double transforms
 * (FFTW_ESTIMATE plans only), 63-bit |c|^2 keys, the kept parts rounded to fp32 and quantised as
 * for floats; the same layout except bytes 12..13: int16 sc, the parts are the quantised
 * values times 2^sc (sc = the exponent of max|x|, the transform ran on x 2^-sc), 14..15 zero.
 * encode: nonfinite for NaN/Inf, unsupported if 8 C max|x| > 1e307. decode_sum: always the
 * spectral sum (one inverse transform per block), every payload validated first. */
Status encode(const double *in, size_t n, int N, uint32_t param, double theta, uint8_t *out, size_t cap,
              size_t *len, SimdLevel lvl, int threads, int mode = 0);
Status decode(const uint8_t *in, size_t len, size_t n, int N, uint32_t param, double *out, bool add, SimdLevel lvl,
              int threads, int mode = 0);
Status decode_sum(const uint8_t *const *in, const size_t *len, int cnt, size_t n, int N, uint32_t param, double *out,
                  bool add, SimdLevel lvl, int threads, int mode = 0);

/* For benchmarks: the forward and inverse transforms alone, with the codec's plans and
 * buffers (x -> blockwise r2c -> c2r -> y, unnormalised). */
void transforms_only(const float *x, size_t n, uint32_t param, float *y, int threads);

}  // namespace compmpi::fft_topk

namespace compmpi {
extern const CodecOps codec_fft_topk_ops;
}

// SPDX-License-Identifier: BSD-3-Clause
// fmnist_train.cc — plain-MPI data-parallel MLP trainer for Fashion-MNIST.
//
// This program knows nothing about libcompmpi: it is an ordinary MPI
// application that uses MPI_Bcast (initial weights, one call per tensor) and
// MPI_Allreduce (gradients, one call per tensor, MPI_FLOAT / MPI_SUM).  Run it
// with LD_PRELOAD=libcompmpi.so to get compressed collectives transparently.
//
// Build: examples/build.sh OUTDIR   (see examples/README.md)
//
// Output (rank 0, stdout and --log FILE), one machine-readable line each:
//   config ranks=2 hidden=2048,1024 params=3716106 ...
//   epoch=1 steps=469 time_s=... elapsed_s=... train_loss=... train_acc=...
//           test_acc=... comm_s=... eval_s=...
//   eval epoch=0 step=0 elapsed_s=0.000 test_acc=...   (before training, at every
//        epoch end, and every --eval-every N steps; for accuracy-vs-time plots)
//   final test_acc=... total_s=... steps=... epochs=... replica_maxdiff=...
// elapsed_s is cumulative training wall time (evaluation excluded);
// comm_s is the time spent inside MPI_Allreduce/MPI_Bcast calls on rank 0.

#include <mpi.h>
#include <zlib.h>

#ifdef FMNIST_USE_CBLAS
#include <cblas.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <climits>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

// ---------------------------------------------------------------------------
// Error handling
// ---------------------------------------------------------------------------
static int g_rank = 0;

[[noreturn]] static void die(const char* fmt, ...) {
  // Format into one buffer and write it at once so ranks do not interleave.
  char msg[2048];
  int off = std::snprintf(msg, sizeof msg, "fmnist_train[rank %d]: error: ", g_rank);
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(msg + off, sizeof msg - size_t(off) - 1, fmt, ap);
  va_end(ap);
  std::strncat(msg, "\n", sizeof msg - std::strlen(msg) - 1);
  std::fputs(msg, stderr);
  std::fflush(stderr);
  int inited = 0;
  MPI_Initialized(&inited);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (inited && !finalized) MPI_Abort(MPI_COMM_WORLD, 1);
  std::exit(1);
}

static void mpi_check(int rc, const char* what, const char* file, int line) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING + 1];
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) {
    std::snprintf(msg, sizeof msg, "(unknown MPI error %d)", rc);
  } else {
    msg[len] = '\0';
  }
  die("%s failed at %s:%d: %s", what, file, line, msg);
}
#define MPI_CHECK(call) mpi_check((call), #call, __FILE__, __LINE__)

// ---------------------------------------------------------------------------
// Deterministic RNG (splitmix64 + xoshiro256**): identical on every platform,
// independent of the C++ standard library implementation.
// ---------------------------------------------------------------------------
struct Rng {
  uint64_t s[4];
  explicit Rng(uint64_t seed) {
    for (auto& x : s) {
      seed += 0x9E3779B97F4A7C15ull;
      uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      x = z ^ (z >> 31);
    }
  }
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t next() {
    const uint64_t r = rotl(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
  }
  double uniform() { return (next() >> 11) * (1.0 / 9007199254740992.0); }  // [0,1)
  uint64_t below(uint64_t n) {  // unbiased integer in [0, n)
    const uint64_t lim = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = next(); while (x >= lim);
    return x % n;
  }
  double normal() {  // Box-Muller
    double u1 = uniform();
    while (u1 <= 1e-300) u1 = uniform();
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
};

// ---------------------------------------------------------------------------
// IDX (gzip) loading
// ---------------------------------------------------------------------------
struct Dataset {
  int n = 0, rows = 0, cols = 0;
  std::vector<uint8_t> images;  // n * rows * cols
  std::vector<uint8_t> labels;  // n
  int dim() const { return rows * cols; }
};

static void gz_read_exact(gzFile f, void* buf, size_t len, const std::string& path) {
  auto* p = static_cast<unsigned char*>(buf);
  while (len > 0) {
    const unsigned chunk = len > (1u << 30) ? (1u << 30) : static_cast<unsigned>(len);
    const int got = gzread(f, p, chunk);
    if (got <= 0) {
      int errnum = 0;
      const char* msg = gzerror(f, &errnum);
      die("%s: truncated or corrupt gzip IDX file (%s)", path.c_str(),
          got == 0 ? "unexpected end of file" : msg);
    }
    p += got;
    len -= static_cast<size_t>(got);
  }
}

static uint32_t be32(const unsigned char* b) {
  return (uint32_t(b[0]) << 24) | (uint32_t(b[1]) << 16) | (uint32_t(b[2]) << 8) | uint32_t(b[3]);
}

static gzFile gz_open_or_die(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) {
    die("cannot open '%s': %s\n  (expected Fashion-MNIST gzip IDX files; install the "
        "dataset-fashion-mnist package or pass --data DIR / set FMNIST_DIR)",
        path.c_str(), errno ? std::strerror(errno) : "gzopen failed");
  }
  return f;
}

// Loads images (magic 0x00000803, u8, 3 dims) and labels (0x00000801, u8, 1 dim).
static Dataset load_idx_pair(const std::string& img_path, const std::string& lbl_path) {
  Dataset d;
  {
    gzFile f = gz_open_or_die(img_path);
    unsigned char hdr[16];
    gz_read_exact(f, hdr, sizeof hdr, img_path);
    const uint32_t magic = be32(hdr);
    if (magic != 0x00000803u)
      die("%s: bad IDX magic 0x%08x (want 0x00000803: unsigned byte, 3 dims)", img_path.c_str(),
          magic);
    const uint32_t n = be32(hdr + 4), r = be32(hdr + 8), c = be32(hdr + 12);
    if (n == 0 || n > 10000000u || r != 28 || c != 28)
      die("%s: unexpected dimensions %ux%ux%u (want N x 28 x 28)", img_path.c_str(), n, r, c);
    d.n = static_cast<int>(n);
    d.rows = static_cast<int>(r);
    d.cols = static_cast<int>(c);
    d.images.resize(size_t(n) * r * c);
    gz_read_exact(f, d.images.data(), d.images.size(), img_path);
    unsigned char extra;
    if (gzread(f, &extra, 1) != 0) die("%s: trailing data after %u images", img_path.c_str(), n);
    gzclose(f);
  }
  {
    gzFile f = gz_open_or_die(lbl_path);
    unsigned char hdr[8];
    gz_read_exact(f, hdr, sizeof hdr, lbl_path);
    const uint32_t magic = be32(hdr);
    if (magic != 0x00000801u)
      die("%s: bad IDX magic 0x%08x (want 0x00000801: unsigned byte, 1 dim)", lbl_path.c_str(),
          magic);
    const uint32_t n = be32(hdr + 4);
    if (n != uint32_t(d.n))
      die("%s: %u labels but %d images in %s", lbl_path.c_str(), n, d.n, img_path.c_str());
    d.labels.resize(n);
    gz_read_exact(f, d.labels.data(), n, lbl_path);
    gzclose(f);
    for (uint32_t i = 0; i < n; ++i)
      if (d.labels[i] > 9) die("%s: label %u at index %u out of range 0..9", lbl_path.c_str(),
                               unsigned(d.labels[i]), i);
  }
  return d;
}

// Pixel normalisation constants for Fashion-MNIST (mean/std of x/255).
static constexpr float kPixMean = 0.2860f;
static constexpr float kPixStd = 0.3530f;

static void gather_batch(const Dataset& d, const int* idx, int m, float* X, int* y) {
  const int D = d.dim();
  const float scale = 1.0f / (255.0f * kPixStd), shift = -kPixMean / kPixStd;
  for (int i = 0; i < m; ++i) {
    const uint8_t* src = d.images.data() + size_t(idx[i]) * D;
    float* dst = X + size_t(i) * D;
    for (int j = 0; j < D; ++j) dst[j] = float(src[j]) * scale + shift;
    y[i] = d.labels[idx[i]];
  }
}

// ---------------------------------------------------------------------------
// GEMM: row-major C[m x n] = alpha * op(A) * op(B) + beta * C
// ---------------------------------------------------------------------------
#ifdef FMNIST_USE_CBLAS
static void sgemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* A, int lda,
                  const float* B, int ldb, float beta, float* C, int ldc) {
  if (m == 0 || n == 0) return;
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
              k, alpha, A, lda, B, ldb, beta, C, ldc);
}
static const char* gemm_backend() { return "openblas"; }
#else
// Portable blocked GEMM: packs op(A) and op(B) into contiguous tiles and runs
// a register-blocked MR x NR micro-kernel that GCC vectorises.
namespace hand {
constexpr int MR = 4, NR = 32, KC = 256, MC = 64, NC = 1024;

static void pack_a(bool ta, const float* A, int lda, int i0, int mc, int p0, int kc, float* out) {
  // out: panels of MR rows, each stored k-major: out[(panel*kc + p)*MR + r]
  for (int ib = 0; ib < mc; ib += MR) {
    const int mr = std::min(MR, mc - ib);
    float* o = out + size_t(ib) * kc;
    for (int p = 0; p < kc; ++p)
      for (int r = 0; r < MR; ++r) {
        float v = 0.0f;
        if (r < mr) {
          const int i = i0 + ib + r, kk = p0 + p;
          v = ta ? A[size_t(kk) * lda + i] : A[size_t(i) * lda + kk];
        }
        o[p * MR + r] = v;
      }
  }
}

static void pack_b(bool tb, const float* B, int ldb, int p0, int kc, int j0, int nc, float* out) {
  // out: panels of NR cols, each stored k-major: out[(panel*kc + p)*NR + c]
  for (int jb = 0; jb < nc; jb += NR) {
    const int nr = std::min(NR, nc - jb);
    float* o = out + size_t(jb) * kc;
    for (int p = 0; p < kc; ++p) {
      const int kk = p0 + p;
      if (!tb && nr == NR) {
        std::memcpy(o + p * NR, B + size_t(kk) * ldb + j0 + jb, NR * sizeof(float));
        continue;
      }
      for (int c = 0; c < NR; ++c) {
        float v = 0.0f;
        if (c < nr) {
          const int j = j0 + jb + c;
          v = tb ? B[size_t(j) * ldb + kk] : B[size_t(kk) * ldb + j];
        }
        o[p * NR + c] = v;
      }
    }
  }
}

static inline void micro(int kc, const float* __restrict a, const float* __restrict b,
                         float* __restrict acc) {
  float c[MR][NR];
  for (int r = 0; r < MR; ++r)
    for (int j = 0; j < NR; ++j) c[r][j] = 0.0f;
  for (int p = 0; p < kc; ++p) {
    const float* bp = b + p * NR;
    const float* ap = a + p * MR;
    for (int r = 0; r < MR; ++r) {
      const float av = ap[r];
      for (int j = 0; j < NR; ++j) c[r][j] += av * bp[j];
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int j = 0; j < NR; ++j) acc[r * NR + j] = c[r][j];
}
}  // namespace hand

static void sgemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* A, int lda,
                  const float* B, int ldb, float beta, float* C, int ldc) {
  using namespace hand;
  if (m == 0 || n == 0) return;
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) C[size_t(i) * ldc + j] = beta == 0.0f ? 0.0f : beta * C[size_t(i) * ldc + j];
  static thread_local std::vector<float> pa, pb;
  pa.resize(size_t(MC + MR) * KC);
  pb.resize(size_t(NC + NR) * KC);
  alignas(64) float acc[MR * NR];
  for (int j0 = 0; j0 < n; j0 += NC) {
    const int nc = std::min(NC, n - j0);
    for (int p0 = 0; p0 < k; p0 += KC) {
      const int kc = std::min(KC, k - p0);
      pack_b(tb, B, ldb, p0, kc, j0, nc, pb.data());
      for (int i0 = 0; i0 < m; i0 += MC) {
        const int mc = std::min(MC, m - i0);
        pack_a(ta, A, lda, i0, mc, p0, kc, pa.data());
        for (int jb = 0; jb < nc; jb += NR) {
          const int nr = std::min(NR, nc - jb);
          for (int ib = 0; ib < mc; ib += MR) {
            const int mr = std::min(MR, mc - ib);
            micro(kc, pa.data() + size_t(ib) * kc, pb.data() + size_t(jb) * kc, acc);
            for (int r = 0; r < mr; ++r) {
              float* crow = C + size_t(i0 + ib + r) * ldc + j0 + jb;
              for (int c = 0; c < nr; ++c) crow[c] += alpha * acc[r * NR + c];
            }
          }
        }
      }
    }
  }
}
static const char* gemm_backend() { return "hand"; }
#endif

// ---------------------------------------------------------------------------
// Model
// ---------------------------------------------------------------------------
struct Layer {
  int in = 0, out = 0;
  std::vector<float> W, b;    // W: out x in (row-major), b: out
  std::vector<float> gW, gb;  // gradients
  std::vector<float> vW, vb;  // momentum buffers
};

struct Options {
  int epochs = 2;
  int batch = 128;  // global batch
  double lr = 0.02;
  double momentum = 0.9;
  uint64_t seed = 42;
  long train_limit = 0;  // 0 = all
  long test_limit = 0;   // 0 = all
  long eval_every = 0;   // extra evaluations every N steps (0 = only at epoch ends)
  std::vector<int> hidden = {2048, 1024};
  std::string log_path;
  std::string data_dir;
  bool help = false;
};

static void usage(FILE* f) {
  std::fprintf(f,
               "usage: fmnist_train [--epochs E] [--batch B] [--lr LR] [--momentum M] [--seed S]\n"
               "                    [--train-limit N] [--test-limit N] [--hidden H1,H2,...]\n"
               "                    [--eval-every N] [--log FILE] [--data DIR]\n"
               "  --epochs E        epochs to train (default 2)\n"
               "  --batch B         GLOBAL batch size, split across ranks (default 128)\n"
               "  --lr LR           SGD learning rate (default 0.02)\n"
               "  --momentum M      SGD momentum (default 0.9)\n"
               "  --seed S          seed for init and shuffling (default 42)\n"
               "  --train-limit N   use only the first N training samples (default all)\n"
               "  --test-limit N    evaluate on only the first N test samples (default all)\n"
               "  --hidden LIST     hidden layer sizes, comma separated (default 2048,1024)\n"
               "  --eval-every N    also evaluate every N optimizer steps (default 0: only\n"
               "                    at epoch ends); evaluation time is excluded from time_s\n"
               "  --log FILE        also append rank-0 result lines to FILE\n"
               "  --data DIR        dataset dir (default $FMNIST_DIR or "
               "/usr/share/datasets/fashion-mnist)\n");
}

static long parse_long(const char* flag, const char* s, long lo, long hi) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(s, &end, 10);
  if (errno || end == s || *end != '\0' || v < lo || v > hi)
    die("%s: invalid integer '%s' (allowed %ld..%ld)", flag, s, lo, hi);
  return v;
}
static double parse_double(const char* flag, const char* s, double lo, double hi) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s, &end);
  if (errno || end == s || *end != '\0' || !(v >= lo && v <= hi))
    die("%s: invalid number '%s' (allowed %g..%g)", flag, s, lo, hi);
  return v;
}

static Options parse_args(int argc, char** argv) {
  Options o;
  const char* env_dir = std::getenv("FMNIST_DIR");
  o.data_dir = env_dir && *env_dir ? env_dir : "/usr/share/datasets/fashion-mnist";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    std::string val;
    bool has_inline = false;
    const size_t eq = a.find('=');
    if (a.rfind("--", 0) == 0 && eq != std::string::npos) {
      val = a.substr(eq + 1);
      a = a.substr(0, eq);
      has_inline = true;
    }
    if (a == "-h" || a == "--help") {
      o.help = true;
      continue;
    }
    auto next = [&]() -> std::string {
      if (has_inline) return val;
      if (i + 1 >= argc) die("%s requires a value (see --help)", a.c_str());
      return argv[++i];
    };
    if (a == "--epochs") o.epochs = int(parse_long("--epochs", next().c_str(), 1, 100000));
    else if (a == "--batch") o.batch = int(parse_long("--batch", next().c_str(), 1, 1 << 24));
    else if (a == "--lr") o.lr = parse_double("--lr", next().c_str(), 0.0, 1e6);
    else if (a == "--momentum") o.momentum = parse_double("--momentum", next().c_str(), 0.0, 0.9999);
    else if (a == "--seed") o.seed = uint64_t(parse_long("--seed", next().c_str(), 0, LONG_MAX));
    else if (a == "--train-limit") o.train_limit = parse_long("--train-limit", next().c_str(), 0, LONG_MAX);
    else if (a == "--test-limit") o.test_limit = parse_long("--test-limit", next().c_str(), 0, LONG_MAX);
    else if (a == "--eval-every") o.eval_every = parse_long("--eval-every", next().c_str(), 0, LONG_MAX);
    else if (a == "--log") o.log_path = next();
    else if (a == "--data") o.data_dir = next();
    else if (a == "--hidden") {
      const std::string s = next();
      o.hidden.clear();
      size_t pos = 0;
      while (pos <= s.size()) {
        size_t c = s.find(',', pos);
        if (c == std::string::npos) c = s.size();
        const std::string tok = s.substr(pos, c - pos);
        if (tok.empty()) die("--hidden: empty size in '%s'", s.c_str());
        o.hidden.push_back(int(parse_long("--hidden", tok.c_str(), 1, 1 << 20)));
        pos = c + 1;
      }
    } else {
      if (g_rank == 0) usage(stderr);
      die("unknown argument '%s' (see --help)", argv[i]);
    }
  }
  return o;
}

// ---------------------------------------------------------------------------
// Communication wrappers (timed, error-checked)
// ---------------------------------------------------------------------------
static double g_comm_s = 0.0;

static void timed_bcast(float* buf, size_t n, int root) {
  if (n > size_t(INT32_MAX)) die("tensor too large for one MPI_Bcast (%zu)", n);
  const double t0 = MPI_Wtime();
  MPI_CHECK(MPI_Bcast(buf, int(n), MPI_FLOAT, root, MPI_COMM_WORLD));
  g_comm_s += MPI_Wtime() - t0;
}
static void timed_allreduce_sum(float* buf, size_t n) {
  if (n > size_t(INT32_MAX)) die("tensor too large for one MPI_Allreduce (%zu)", n);
  const double t0 = MPI_Wtime();
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf, int(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
  g_comm_s += MPI_Wtime() - t0;
}

// ---------------------------------------------------------------------------
// Forward / backward
// ---------------------------------------------------------------------------
struct Workspace {
  std::vector<std::vector<float>> act;  // act[0] = input, act[l+1] = output of layer l
  std::vector<float> delta, delta_prev; // gradient wrt current pre-activation
  std::vector<float> Xbuf;
  std::vector<int> ybuf;
};

// Computes logits for m rows of act[0]; returns pointer to logits (m x 10).
static const float* forward(std::vector<Layer>& L, Workspace& ws, int m) {
  for (size_t l = 0; l < L.size(); ++l) {
    Layer& ly = L[l];
    const float* A = ws.act[l].data();
    float* Z = ws.act[l + 1].data();
    for (int i = 0; i < m; ++i) std::memcpy(Z + size_t(i) * ly.out, ly.b.data(), ly.out * sizeof(float));
    sgemm(false, true, m, ly.out, ly.in, 1.0f, A, ly.in, ly.W.data(), ly.in, 1.0f, Z, ly.out);
    if (l + 1 < L.size()) {
      const size_t cnt = size_t(m) * ly.out;
      for (size_t i = 0; i < cnt; ++i) Z[i] = Z[i] > 0.0f ? Z[i] : 0.0f;
    }
  }
  return ws.act[L.size()].data();
}

static int argmax10(const float* z, int k) {
  int best = 0;
  for (int c = 1; c < k; ++c)
    if (z[c] > z[best]) best = c;
  return best;
}

// Forward + backward on m local rows.  Gradients are scaled by grad_scale
// (so that summing over ranks and dividing by the world size yields the mean
// over the global batch).  Returns the summed (unscaled) loss over the m rows.
static double train_step_local(std::vector<Layer>& L, Workspace& ws, int m, float grad_scale,
                               long* correct) {
  const int nl = int(L.size());
  if (m == 0) {
    for (auto& ly : L) {
      std::fill(ly.gW.begin(), ly.gW.end(), 0.0f);
      std::fill(ly.gb.begin(), ly.gb.end(), 0.0f);
    }
    return 0.0;
  }
  const float* logits = forward(L, ws, m);
  const int K = L.back().out;
  ws.delta.resize(size_t(m) * K);
  double loss = 0.0;
  for (int i = 0; i < m; ++i) {
    const float* z = logits + size_t(i) * K;
    float* d = ws.delta.data() + size_t(i) * K;
    float mx = z[0];
    for (int c = 1; c < K; ++c) mx = std::max(mx, z[c]);
    double sum = 0.0;
    for (int c = 0; c < K; ++c) sum += std::exp(double(z[c] - mx));
    const int y = ws.ybuf[i];
    loss += std::log(sum) - double(z[y] - mx);
    if (argmax10(z, K) == y) ++*correct;
    for (int c = 0; c < K; ++c) {
      const double p = std::exp(double(z[c] - mx)) / sum;
      d[c] = float((p - (c == y ? 1.0 : 0.0)) * grad_scale);
    }
  }
  for (int l = nl - 1; l >= 0; --l) {
    Layer& ly = L[l];
    const float* A = ws.act[l].data();
    // gW = delta^T * A   (out x m) * (m x in)
    sgemm(true, false, ly.out, ly.in, m, 1.0f, ws.delta.data(), ly.out, A, ly.in, 0.0f,
          ly.gW.data(), ly.in);
    std::fill(ly.gb.begin(), ly.gb.end(), 0.0f);
    for (int i = 0; i < m; ++i) {
      const float* d = ws.delta.data() + size_t(i) * ly.out;
      for (int j = 0; j < ly.out; ++j) ly.gb[j] += d[j];
    }
    if (l > 0) {
      // delta_prev = (delta * W) .* relu'(A)
      ws.delta_prev.resize(size_t(m) * ly.in);
      sgemm(false, false, m, ly.in, ly.out, 1.0f, ws.delta.data(), ly.out, ly.W.data(), ly.in,
            0.0f, ws.delta_prev.data(), ly.in);
      const size_t cnt = size_t(m) * ly.in;
      for (size_t i = 0; i < cnt; ++i)
        if (A[i] <= 0.0f) ws.delta_prev[i] = 0.0f;
      ws.delta.swap(ws.delta_prev);
    }
  }
  return loss;
}

static void log_line(FILE* logf, const char* fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  std::fputs(buf, stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
  if (logf) {
    std::fputs(buf, logf);
    std::fputc('\n', logf);
    std::fflush(logf);
  }
}

// Evaluates accuracy on a shard of the test set; returns the global correct count.
static long evaluate(std::vector<Layer>& L, Workspace& ws, const Dataset& test, long n_test,
                     int rank, int size, int chunk) {
  const long lo = n_test * rank / size, hi = n_test * (rank + 1) / size;
  std::vector<int> idx(chunk);
  long correct = 0;
  const int K = L.back().out;
  for (long s = lo; s < hi; s += chunk) {
    const int m = int(std::min<long>(chunk, hi - s));
    for (int i = 0; i < m; ++i) idx[i] = int(s + i);
    gather_batch(test, idx.data(), m, ws.act[0].data(), ws.ybuf.data());
    const float* logits = forward(L, ws, m);
    for (int i = 0; i < m; ++i)
      if (argmax10(logits + size_t(i) * K, K) == ws.ybuf[i]) ++correct;
  }
  long long local = correct, global = 0;
  // Integer reduction: not a float collective, passes through libcompmpi untouched.
  MPI_CHECK(MPI_Reduce(&local, &global, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD));
  return long(global);
}

int main(int argc, char** argv) {
  MPI_CHECK(MPI_Init(&argc, &argv));
  MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  int rank = 0, size = 1;
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  g_rank = rank;

#ifdef FMNIST_USE_CBLAS
  openblas_set_num_threads(1);  // one core per rank: ranks share the machine
#endif
#ifdef _OPENMP
  omp_set_num_threads(1);
#endif

  Options opt = parse_args(argc, argv);
  if (opt.help) {
    if (rank == 0) usage(stdout);
    MPI_CHECK(MPI_Finalize());
    return 0;
  }
  if (opt.batch < size) die("--batch %d is smaller than the number of ranks %d", opt.batch, size);

  FILE* logf = nullptr;
  if (rank == 0 && !opt.log_path.empty()) {
    logf = std::fopen(opt.log_path.c_str(), "a");
    if (!logf) die("cannot open log file '%s': %s", opt.log_path.c_str(), std::strerror(errno));
  }

  // Every rank loads the data (small); all ranks use the same shuffled order.
  const double t_load0 = MPI_Wtime();
  const std::string dir = opt.data_dir;
  Dataset train = load_idx_pair(dir + "/train-images-idx3-ubyte.gz", dir + "/train-labels-idx1-ubyte.gz");
  Dataset test = load_idx_pair(dir + "/t10k-images-idx3-ubyte.gz", dir + "/t10k-labels-idx1-ubyte.gz");
  if (train.dim() != test.dim()) die("train/test image sizes differ");
  const long n_train = opt.train_limit > 0 ? std::min<long>(opt.train_limit, train.n) : train.n;
  const long n_test = opt.test_limit > 0 ? std::min<long>(opt.test_limit, test.n) : test.n;
  const double t_load = MPI_Wtime() - t_load0;

  // Model
  std::vector<int> dims;
  dims.push_back(train.dim());
  for (int h : opt.hidden) dims.push_back(h);
  dims.push_back(10);
  std::vector<Layer> layers(dims.size() - 1);
  long n_params = 0;
  for (size_t l = 0; l < layers.size(); ++l) {
    Layer& ly = layers[l];
    ly.in = dims[l];
    ly.out = dims[l + 1];
    const size_t nw = size_t(ly.in) * ly.out;
    ly.W.assign(nw, 0.0f);
    ly.gW.assign(nw, 0.0f);
    ly.vW.assign(nw, 0.0f);
    ly.b.assign(ly.out, 0.0f);
    ly.gb.assign(ly.out, 0.0f);
    ly.vb.assign(ly.out, 0.0f);
    n_params += long(nw) + ly.out;
  }
  if (rank == 0) {  // deterministic He-normal init, zero biases
    Rng rng(opt.seed ^ 0x1A17ull);
    for (auto& ly : layers) {
      const double sd = std::sqrt(2.0 / ly.in);
      for (auto& w : ly.W) w = float(rng.normal() * sd);
    }
  }
  g_comm_s = 0.0;
  const double t_bc0 = MPI_Wtime();
  for (auto& ly : layers) {  // one Bcast per parameter tensor
    timed_bcast(ly.W.data(), ly.W.size(), 0);
    timed_bcast(ly.b.data(), ly.b.size(), 0);
  }
  const double t_bcast = MPI_Wtime() - t_bc0;

  const int local_max = (opt.batch + size - 1) / size;
  const int eval_chunk = 500;
  Workspace ws;
  ws.act.resize(dims.size());
  const int rows = std::max(local_max, eval_chunk);
  for (size_t l = 0; l < dims.size(); ++l) ws.act[l].assign(size_t(rows) * dims[l], 0.0f);
  ws.ybuf.assign(rows, 0);

  const long steps_per_epoch = (n_train + opt.batch - 1) / opt.batch;
  if (rank == 0) {
    std::string hs;
    for (size_t i = 0; i < opt.hidden.size(); ++i) hs += (i ? "," : "") + std::to_string(opt.hidden[i]);
    log_line(logf,
             "config ranks=%d hidden=%s params=%ld grad_bytes=%ld batch=%d local_batch=%d lr=%g "
             "momentum=%g seed=%llu train_n=%ld test_n=%ld epochs=%d steps_per_epoch=%ld gemm=%s "
             "load_s=%.3f init_bcast_s=%.4f",
             size, hs.c_str(), n_params, n_params * 4, opt.batch, local_max, opt.lr, opt.momentum,
             (unsigned long long)opt.seed, n_train, n_test, opt.epochs, steps_per_epoch,
             gemm_backend(), t_load, t_bcast);
  }

  auto eval_line = [&](int epoch, long step, double elapsed_s) -> double {
    const long correct = evaluate(layers, ws, test, n_test, rank, size, eval_chunk);
    const double acc = n_test ? double(correct) / double(n_test) : 0.0;
    if (rank == 0)
      log_line(logf, "eval epoch=%d step=%ld elapsed_s=%.3f test_acc=%.4f", epoch, step, elapsed_s, acc);
    return acc;
  };
  eval_line(0, 0, 0.0);

  std::vector<int> order(n_train);
  const float grad_scale_base = float(size);  // times 1/global_batch, per step
  const float inv_size = 1.0f / float(size);
  const float lr = float(opt.lr), mu = float(opt.momentum);
  double elapsed = 0.0;
  long total_steps = 0;
  double final_acc = 0.0;

  for (int epoch = 1; epoch <= opt.epochs; ++epoch) {
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    const double t_ep0 = MPI_Wtime();
    g_comm_s = 0.0;
    // Same permutation on all ranks (seeded by seed and epoch).
    for (long i = 0; i < n_train; ++i) order[i] = int(i);
    Rng srng(opt.seed * 0x9E3779B97F4A7C15ull + uint64_t(epoch));
    for (long i = n_train - 1; i > 0; --i) std::swap(order[i], order[srng.below(uint64_t(i) + 1)]);

    double loss_sum = 0.0, t_mid_eval = 0.0;
    long correct_train = 0, seen_local = 0;
    for (long s = 0; s < n_train; s += opt.batch) {
      const int B = int(std::min<long>(opt.batch, n_train - s));
      // Disjoint, balanced shard of this global batch.
      const int lo = int(long(B) * rank / size), hi = int(long(B) * (rank + 1) / size);
      const int m = hi - lo;
      gather_batch(train, order.data() + s + lo, m, ws.act[0].data(), ws.ybuf.data());
      loss_sum += train_step_local(layers, ws, m, grad_scale_base / float(B), &correct_train);
      seen_local += m;
      // One Allreduce per parameter tensor (backward order, like DDP buckets).
      for (int l = int(layers.size()) - 1; l >= 0; --l) {
        Layer& ly = layers[l];
        timed_allreduce_sum(ly.gW.data(), ly.gW.size());
        timed_allreduce_sum(ly.gb.data(), ly.gb.size());
      }
      for (auto& ly : layers) {
        const size_t nw = ly.W.size();
        float* __restrict W = ly.W.data();
        float* __restrict V = ly.vW.data();
        const float* __restrict G = ly.gW.data();
        for (size_t i = 0; i < nw; ++i) {
          V[i] = mu * V[i] + G[i] * inv_size;
          W[i] -= lr * V[i];
        }
        for (int j = 0; j < ly.out; ++j) {
          ly.vb[j] = mu * ly.vb[j] + ly.gb[j] * inv_size;
          ly.b[j] -= lr * ly.vb[j];
        }
      }
      ++total_steps;
      if (opt.eval_every > 0 && total_steps % opt.eval_every == 0 && s + opt.batch < n_train) {
        const double t0 = MPI_Wtime();
        eval_line(epoch, total_steps, elapsed + (t0 - t_ep0 - t_mid_eval));
        t_mid_eval += MPI_Wtime() - t0;
      }
    }
    const double t_train = MPI_Wtime() - t_ep0 - t_mid_eval;
    // Use rank 0's epoch time (measured from a common barrier).
    elapsed += t_train;
    const double comm = g_comm_s;

    const double t_ev0 = MPI_Wtime();
    double loc[3] = {loss_sum, double(seen_local), double(correct_train)}, glob[3] = {0, 0, 0};
    MPI_CHECK(MPI_Reduce(loc, glob, 3, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD));
    final_acc = eval_line(epoch, total_steps, elapsed);
    const double t_eval = MPI_Wtime() - t_ev0;
    if (rank == 0) {
      const double train_loss = glob[1] > 0 ? glob[0] / glob[1] : 0.0;
      const double train_acc = glob[1] > 0 ? glob[2] / glob[1] : 0.0;
      if (!std::isfinite(train_loss))
        std::fprintf(stderr, "fmnist_train: warning: non-finite training loss in epoch %d\n", epoch);
      log_line(logf,
               "epoch=%d steps=%ld time_s=%.3f elapsed_s=%.3f train_loss=%.4f train_acc=%.4f "
               "test_acc=%.4f comm_s=%.3f step_ms=%.2f eval_s=%.3f",
               epoch, steps_per_epoch, t_train, elapsed, train_loss, train_acc, final_acc, comm,
               steps_per_epoch ? 1000.0 * t_train / double(steps_per_epoch) : 0.0, t_eval + t_mid_eval);
    }
  }

  // Replica consistency check: all ranks should hold bit-identical weights.
  // (Double reductions: not float collectives, pass through libcompmpi.)
  double checksum = 0.0;
  for (auto& ly : layers) {
    for (float w : ly.W) checksum += double(w);
    for (float w : ly.b) checksum += double(w);
  }
  double cmax = 0.0, cmin = 0.0;
  MPI_CHECK(MPI_Allreduce(&checksum, &cmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
  MPI_CHECK(MPI_Allreduce(&checksum, &cmin, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD));

  if (rank == 0) {
    log_line(logf, "final test_acc=%.4f total_s=%.3f steps=%ld epochs=%d ranks=%d replica_maxdiff=%.6g",
             final_acc, elapsed, total_steps, opt.epochs, size, cmax - cmin);
  }
  if (logf) std::fclose(logf);
  MPI_CHECK(MPI_Finalize());
  return 0;
}

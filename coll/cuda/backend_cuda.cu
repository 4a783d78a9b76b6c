// SPDX-License-Identifier: BSD-3-Clause
/* The CUDA backend (coll/backend.h) and the module's entry point.
 *
 *   encode:  data (device) ──kernel──► payload (device workspace)
 *                                         │ cudaMemcpyAsync D2H, compressed bytes only,
 *                                         ▼ through a ring of 2 pinned 4 MiB buffers
 *            blob (host)  = header (written on the host) + payload
 *   decode:  blob payload (host) ──H2D through the ring──► device workspace ──kernel──► data
 *            (accumulate: one fused decode-and-add kernel)
 *
 * Codecs without CUDA kernels (gpu_codec() == nullptr) stay correct: the floats are staged
 * through the host and the CPU codec runs (CoreApi::blob_encode/blob_decode); decode with
 * accumulation copies the accumulator down and back up, so the bits are the CPU's exactly.
 *
 * One context per communicator: a stream (blocking flavour: it waits for work the
 * application queued on the legacy default stream), three events, the pinned ring and
 * grow-only device workspaces. Every Backend call ends with an event wait, so when it
 * returns its output is complete (the contract of coll/backend.h) and nothing is in
 * flight. Memory bound per context (docs/gpu.md):
 *   pinned  2 x kStageBytes + 256 B                        (fixed, 8 MiB)
 *   device  payload of the largest encode/decode + 1 MiB, l2 partials (8 B per 16384
 *           floats) + 1 MiB, 256 B flag, and the scratch slots the core asks for (+1 MiB each)
 *   host    4 B x the largest count handled by a CPU-fallback codec or prepare()
 * all freed by ctx_destroy. */
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <vector>

#include "common/cuda_util.cuh"
#include "common/gpu_codec.cuh"
#include "cuda/module_abi.h"

#ifndef COMPMPI_CUDA_ARCHS
#define COMPMPI_CUDA_ARCHS "?"
#endif
#define CMPI_STR2(x) #x
#define CMPI_STR(x) CMPI_STR2(x)

namespace compmpi::cuda {

/* ---------------------------------------------------------------- the codec table */
namespace {
const GpuCodec *const kGpuCodecs[] = {&gpu_codec_none, &gpu_codec_bitpack, &gpu_codec_fp16, &gpu_codec_bf16,
                                      &gpu_codec_q8,   &gpu_codec_terngrad, &gpu_codec_qsgd, &gpu_codec_sparse,
                                      &gpu_codec_rangefloat, &gpu_codec_topk};
}  // namespace

const GpuCodec *gpu_codec(int id, const CodecParams &p) {
    /* a scale fixed by the caller (the whole contribution's, for an encode in segments): the
     * q8 kernels take it; any other codec given one runs the host fallback, which does */
    if (p.fixed_scale >= 0 && id != static_cast<int>(CodecId::q8)) return nullptr;
    for (const GpuCodec *g : kGpuCodecs)
        if (static_cast<int>(g->id) == id) return g->supports(p) ? g : nullptr;
    return nullptr;
}

/* The codec's kernels whatever the parameters (prepare() covers every parameter set). */
const GpuCodec *gpu_codec_of(int id) {
    for (const GpuCodec *g : kGpuCodecs)
        if (static_cast<int>(g->id) == id) return g;
    return nullptr;
}

const char *gpu_codec_names() { return "none bitpack fp16 bf16 q8 terngrad qsgd sparse rangefloat topk"; }

namespace {

constexpr size_t kStageBytes = 4u << 20; /* one pinned ring buffer */
constexpr size_t kGrain = 1u << 20;      /* device workspaces grow in MiB steps */
constexpr int kScratchSlots = 4;

/* ---------------------------------------------------------------- pinned allocations made by
 * mem_alloc(kMemPinned): the backend DMAs straight into/out of them */
std::mutex g_pin_mu;
std::map<uintptr_t, size_t> g_pinned;

bool is_our_pinned(const void *p, size_t bytes) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    std::lock_guard<std::mutex> lk(g_pin_mu);
    auto it = g_pinned.upper_bound(a);
    if (it == g_pinned.begin()) return false;
    --it;
    return a >= it->first && a - it->first <= it->second && bytes <= it->second - (a - it->first);
}

struct DevBuf {
    void *p = nullptr;
    size_t cap = 0;
};

struct Ctx {
    const CoreApi *core;
    int device = -1; /* bound on first use */
    cudaStream_t stream = nullptr;
    cudaEvent_t ev[2] = {nullptr, nullptr}; /* ring slots */
    cudaEvent_t done = nullptr;
    bool busy[2] = {false, false}; /* a DMA may still use ring slot s */
    uint8_t *stage[2] = {nullptr, nullptr};
    uint32_t *pinned_flag = nullptr; /* 256 B pinned: the NaN/Inf flag comes back here */
    DevBuf payload, parts, flag, work, slot[kScratchSlots];
    std::vector<float> host_tmp;
    std::vector<double> host_parts;
    bool pending_error = false; /* a void call (copy/add/...) failed: fail the next encode/decode */
    /* error-feedback residuals of device buffers: (key, n) -> {residual, next}, device memory */
    struct Ef {
        float *res = nullptr, *next = nullptr;
    };
    std::map<std::pair<uintptr_t, size_t>, Ef> ef;
};

/* data lies in one of the context's scratch slots */
bool owns(const Ctx *x, const void *data) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(data);
    for (const DevBuf &b : x->slot)
        if (b.p && a >= reinterpret_cast<uintptr_t>(b.p) && a - reinterpret_cast<uintptr_t>(b.p) < b.cap) return true;
    return false;
}

bool check(Ctx *x, cudaError_t e, const char *what) {
    if (e == cudaSuccess) return true;
    x->core->log_error("CUDA backend: %s failed: %s (%s)", what, cudaGetErrorName(e), cudaGetErrorString(e));
    cudaGetLastError(); /* clear a non-sticky error so the next call starts clean */
    return false;
}

/* Make the context's device current for the scope of one call and restore the caller's.
 * Binds an unbound context: to the device of `data` if given, else the current device. */
class Scope {
  public:
    Scope(Ctx *x, const void *data) : x_(x) {
        cudaError_t e = cudaGetDevice(&prev_);
        if (!check(x, e, "cudaGetDevice")) {
            prev_ = -1;
            return;
        }
        int dev = prev_;
        bool managed = false;
        if (data && x->device >= 0 && owns(x, data)) {
            dev = x->device; /* our own scratch: no attribute query */
        } else if (data) {
            cudaPointerAttributes a;
            e = cudaPointerGetAttributes(&a, data);
            if (!check(x, e, "cudaPointerGetAttributes")) return;
            if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged) {
                x->core->log_error("CUDA backend: %p is not device or managed memory", data);
                return;
            }
            managed = a.type == cudaMemoryTypeManaged;
            if (!managed) dev = a.device;
        }
        if (x->device >= 0 && dev != x->device && !managed) {
            x->core->log_error("CUDA backend: buffers of one communicator must stay on one GPU (bound to %d, "
                               "got a buffer on %d); this call falls back to the exact MPI collective",
                               x->device, dev);
            return;
        }
        const int want = x->device >= 0 ? x->device : dev;
        if (want != prev_) {
            if (!check(x, cudaSetDevice(want), "cudaSetDevice")) return;
            switched_ = true;
        }
        if (x->device < 0 && !init(want)) return;
        ok_ = true;
    }
    ~Scope() {
        if (switched_) cudaSetDevice(prev_);
    }
    bool ok() const { return ok_; }

  private:
    /* Creates what is missing, so a failed attempt is completed by a later call; what was
     * created is freed by ctx_destroy either way. */
    bool init(int dev) {
        Ctx *x = x_;
        if (!x->stream && !check(x, cudaStreamCreate(&x->stream), "cudaStreamCreate")) return false;
        for (cudaEvent_t *e : {&x->ev[0], &x->ev[1], &x->done})
            if (!*e && !check(x, cudaEventCreateWithFlags(e, cudaEventDisableTiming), "cudaEventCreate")) return false;
        for (uint8_t *&s : x->stage)
            if (!s && !check(x, cudaMallocHost(reinterpret_cast<void **>(&s), kStageBytes), "cudaMallocHost (staging)"))
                return false;
        if (!x->pinned_flag &&
            !check(x, cudaMallocHost(reinterpret_cast<void **>(&x->pinned_flag), 256), "cudaMallocHost (flag)"))
            return false;
        x->device = dev;
        return true;
    }

    Ctx *x_;
    int prev_ = -1;
    bool switched_ = false;
    bool ok_ = false;
};

bool grow(Ctx *x, DevBuf *b, size_t need, size_t grain = kGrain) {
    if (need <= b->cap && b->p) return true;
    if (b->p) cudaFree(b->p); /* nothing in flight between calls */
    b->p = nullptr;
    b->cap = 0;
    const size_t cap = (std::max<size_t>(need, 1) + grain - 1) / grain * grain;
    if (!check(x, cudaMalloc(&b->p, cap), "cudaMalloc (workspace)")) return false;
    b->cap = cap;
    return true;
}

/* Wait until ring slot s is free for the host to touch. */
bool wait_slot(Ctx *x, int s) {
    if (!x->busy[s]) return true;
    x->busy[s] = false;
    return check(x, cudaEventSynchronize(x->ev[s]), "cudaEventSynchronize");
}

/* Wait for everything queued on the context's stream. */
bool finish(Ctx *x) {
    x->busy[0] = x->busy[1] = false;
    return check(x, cudaEventRecord(x->done, x->stream), "cudaEventRecord") &&
           check(x, cudaEventSynchronize(x->done), "cudaEventSynchronize");
}

/* Device -> host, complete on return. Pieces alternate between the two pinned buffers: the
 * host copies piece k-1 out while the DMA of piece k runs. */
bool d2h(Ctx *x, void *dst, const void *src, size_t bytes) {
    if (bytes == 0) return true;
    if (is_our_pinned(dst, bytes))
        return check(x, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, x->stream), "cudaMemcpyAsync D2H") &&
               finish(x);
    uint8_t *out = static_cast<uint8_t *>(dst);
    const uint8_t *in = static_cast<const uint8_t *>(src);
    size_t off_of[2] = {0, 0}, len_of[2] = {0, 0};
    auto drain = [&](int s) {
        if (!x->busy[s]) return true;
        if (!wait_slot(x, s)) return false;
        std::memcpy(out + off_of[s], x->stage[s], len_of[s]);
        return true;
    };
    int k = 0;
    for (size_t off = 0; off < bytes; off += kStageBytes, ++k) {
        const int s = k & 1;
        if (!drain(s)) return false;
        const size_t len = std::min(kStageBytes, bytes - off);
        if (!check(x, cudaMemcpyAsync(x->stage[s], in + off, len, cudaMemcpyDeviceToHost, x->stream),
                   "cudaMemcpyAsync D2H") ||
            !check(x, cudaEventRecord(x->ev[s], x->stream), "cudaEventRecord"))
            return false;
        x->busy[s] = true;
        off_of[s] = off;
        len_of[s] = len;
    }
    return drain(k & 1) && drain((k + 1) & 1); /* older piece first */
}

/* Host -> device, queued on the stream (the caller's finish() completes it). */
bool h2d(Ctx *x, void *dst, const void *src, size_t bytes) {
    if (bytes == 0) return true;
    if (is_our_pinned(src, bytes))
        return check(x, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, x->stream), "cudaMemcpyAsync H2D");
    uint8_t *out = static_cast<uint8_t *>(dst);
    const uint8_t *in = static_cast<const uint8_t *>(src);
    int k = 0;
    for (size_t off = 0; off < bytes; off += kStageBytes, ++k) {
        const int s = k & 1;
        if (!wait_slot(x, s)) return false;
        const size_t len = std::min(kStageBytes, bytes - off);
        std::memcpy(x->stage[s], in + off, len);
        if (!check(x, cudaMemcpyAsync(out + off, x->stage[s], len, cudaMemcpyHostToDevice, x->stream),
                   "cudaMemcpyAsync H2D") ||
            !check(x, cudaEventRecord(x->ev[s], x->stream), "cudaEventRecord"))
            return false;
        x->busy[s] = true;
    }
    return true;
}

float *host_floats(Ctx *x, size_t n) {
    try {
        /* at least one element: an empty vector's data() is nullptr, which means failure here */
        if (x->host_tmp.size() < std::max<size_t>(n, 1)) x->host_tmp.resize(std::max<size_t>(n, 1));
    } catch (const std::bad_alloc &) {
        x->core->log_error("CUDA backend: out of host memory staging %zu floats", n);
        return nullptr;
    }
    return x->host_tmp.data();
}

/* ---------------------------------------------------------------- Backend */

uint8_t abandon(Ctx *x, const CodecOps &c, const CodecParams &p, size_t n, uint8_t *blob, size_t cap, size_t *plen,
                const char *why) {
    x->core->log_error("%s encode of %zu floats on the GPU failed (%s); this call falls back to the exact MPI "
                       "collective",
                       c.name, n, why);
    if (cap >= kBlobHeaderBytes)
        x->core->blob_write_header(blob, BlobInfo{c.id, BLOB_ABANDON, p.bits, p.variant, p.param, n, 0});
    if (plen) *plen = kBlobHeaderBytes;
    return BLOB_ABANDON;
}

uint8_t encode_fallback(Ctx *x, const CodecOps &c, const CodecParams &p, const float *data, size_t n, uint8_t *blob,
                        size_t cap, size_t *plen) {
    float *h = host_floats(x, n);
    if (!h) return abandon(x, c, p, n, blob, cap, plen, "out of host memory");
    if (!d2h(x, h, data, n * sizeof(float)) || !finish(x)) return abandon(x, c, p, n, blob, cap, plen, "staging copy");
    size_t len = kBlobHeaderBytes;
    const Status s = x->core->blob_encode(c, p, h, n, blob, cap, &len);
    if (plen) *plen = s == Status::ok ? len : kBlobHeaderBytes;
    if (s == Status::ok) return 0;
    if (s == Status::nonfinite) return BLOB_NONFINITE;
    return abandon(x, c, p, n, blob, cap, plen, x->core->status_str(s));
}

uint8_t gpu_encode(void *ctx, const CodecOps &c, const CodecParams &p, const float *data, size_t n, uint8_t *blob,
                   size_t cap, size_t *plen) {
    Ctx *x = static_cast<Ctx *>(ctx);
    if (cap < kBlobHeaderBytes) return abandon(x, c, p, n, blob, cap, plen, "blob capacity below the header");
    if (x->pending_error) {
        x->pending_error = false;
        return abandon(x, c, p, n, blob, cap, plen, "an earlier GPU operation of this call failed");
    }
    if (c.check(p) != Status::ok) return abandon(x, c, p, n, blob, cap, plen, "invalid codec parameters");
    Scope scope(x, n ? data : nullptr);
    if (!scope.ok()) return abandon(x, c, p, n, blob, cap, plen, "no usable device");
    const GpuCodec *g = gpu_codec(static_cast<int>(c.id), p);
    if (!g) return encode_fallback(x, c, p, data, n, blob, cap, plen);

    BlobInfo info{c.id, 0, p.bits, p.variant, p.param, n, 0};
    size_t payload = c.max_payload(n, p);
    if (payload > cap - kBlobHeaderBytes) return abandon(x, c, p, n, blob, cap, plen, "blob capacity");
    const uint8_t *src = reinterpret_cast<const uint8_t *>(data);
    *x->pinned_flag = 0;
    if (!g->raw_fp32) { /* also for n = 0: some payloads start with a scale */
        const size_t work = g->work_bytes ? g->work_bytes(n, p) : 0;
        if (!grow(x, &x->payload, payload) || !grow(x, &x->flag, 256, 256) || (work && !grow(x, &x->work, work)))
            return abandon(x, c, p, n, blob, cap, plen, "device workspace");
        uint32_t *dflag = static_cast<uint32_t *>(x->flag.p);
        const GpuEncodeArgs a{&c,        data,       n, &p, static_cast<uint8_t *>(x->payload.p), dflag, dflag + 1,
                              x->stream, x->work.p};
        if (!check(x, cudaMemsetAsync(dflag, 0, (1 + kEncodeWords) * sizeof(uint32_t), x->stream), "cudaMemsetAsync") ||
            !check(x, g->encode(a), "encode kernel") ||
            !check(x, cudaMemcpyAsync(x->pinned_flag, dflag, sizeof(uint32_t), cudaMemcpyDeviceToHost, x->stream),
                   "cudaMemcpyAsync (flag)"))
            return abandon(x, c, p, n, blob, cap, plen, "kernel launch");
        src = static_cast<const uint8_t *>(x->payload.p);
        if (g->variable) { /* the payload length is known on the device only: fetch it first */
            if (!check(x,
                       cudaMemcpyAsync(x->pinned_flag + 1, dflag + 1, 2 * sizeof(uint32_t), cudaMemcpyDeviceToHost,
                                       x->stream),
                       "cudaMemcpyAsync (length)") ||
                !finish(x))
                return abandon(x, c, p, n, blob, cap, plen, "fetching the payload length");
            const size_t len = x->pinned_flag[1] | static_cast<size_t>(x->pinned_flag[2]) << 32;
            if (len > payload) return abandon(x, c, p, n, blob, cap, plen, "payload length out of range");
            payload = len;
        }
    }
    if (!d2h(x, blob + kBlobHeaderBytes, src, payload) || !finish(x))
        return abandon(x, c, p, n, blob, cap, plen, "copying the payload to the host");
    if (*x->pinned_flag) {
        info.flags = BLOB_NONFINITE;
        x->core->blob_write_header(blob, info);
        if (plen) *plen = kBlobHeaderBytes;
        return BLOB_NONFINITE;
    }
    info.payload = payload;
    x->core->blob_write_header(blob, info);
    if (plen) *plen = kBlobHeaderBytes + payload;
    return 0;
}

Status decode_fallback(Ctx *x, const uint8_t *blob, size_t avail, size_t n, float *data, bool accumulate,
                       const CodecParams &p) {
    float *h = host_floats(x, n);
    if (!h) return Status::no_memory;
    /* accumulate: bring the accumulator down so the CPU codec's own decode_add runs */
    if (accumulate && (!d2h(x, h, data, n * sizeof(float)) || !finish(x))) return Status::corrupt;
    const Status s = x->core->blob_decode(blob, avail, n, h, accumulate, p.simd, p.threads);
    if (s != Status::ok) return s;
    if (!h2d(x, data, h, n * sizeof(float)) || !finish(x)) return Status::corrupt;
    return Status::ok;
}

Status gpu_decode(void *ctx, const uint8_t *blob, size_t avail, size_t n, float *data, bool accumulate,
                  const CodecParams &p) {
    Ctx *x = static_cast<Ctx *>(ctx);
    BlobInfo info;
    Status s = x->core->blob_peek(blob, avail, n, &info);
    if (s != Status::ok) return s;
    if (info.flags & BLOB_ABANDON) return Status::corrupt;
    if (info.flags & BLOB_NONFINITE) return Status::nonfinite;
    if (x->pending_error) {
        x->pending_error = false;
        return Status::corrupt;
    }
    if (n == 0) { /* nothing to move; let the CPU codec judge the payload as it would */
        float dummy = 0;
        return x->core->blob_decode(blob, avail, 0, &dummy, accumulate, p.simd, p.threads);
    }
    Scope scope(x, data);
    if (!scope.ok()) return Status::corrupt;
    CodecParams q;
    q.bits = info.bits;
    q.variant = info.variant;
    q.param = info.param;
    q.simd = p.simd;
    q.threads = p.threads;
    const CodecOps *c = x->core->codec_by_id(static_cast<int>(info.codec));
    const GpuCodec *g = gpu_codec(static_cast<int>(info.codec), q);
    if (!g || !c) return decode_fallback(x, blob, avail, n, data, accumulate, p);

    const uint8_t *payload = blob + kBlobHeaderBytes;
    if (g->raw_fp32 && !accumulate) {
        if (info.payload != n * sizeof(float)) return Status::corrupt;
        return h2d(x, data, payload, info.payload) && finish(x) ? Status::ok : Status::corrupt;
    }
    if (!grow(x, &x->payload, info.payload) || !h2d(x, x->payload.p, payload, info.payload)) {
        finish(x);
        return Status::corrupt;
    }
    bool corrupt = false;
    const size_t work = g->decode_work_bytes ? g->decode_work_bytes(n, q) : 0;
    if (work && !grow(x, &x->work, work)) {
        finish(x);
        return Status::corrupt;
    }
    const GpuDecodeArgs a{c,    static_cast<const uint8_t *>(x->payload.p), payload, info.payload, n, &q, data, accumulate,
                          x->stream, x->work.p};
    const bool launched = check(x, g->decode(a, &corrupt), "decode kernel");
    if (!finish(x) || !launched) return Status::corrupt;
    return corrupt ? Status::corrupt : Status::ok;
}

float *gpu_scratch(void *ctx, int slot, size_t n) {
    Ctx *x = static_cast<Ctx *>(ctx);
    if (slot < 0 || slot >= kScratchSlots) return nullptr;
    Scope scope(x, nullptr);
    if (!scope.ok() || !grow(x, &x->slot[slot], std::max<size_t>(n, 1) * sizeof(float))) return nullptr;
    return static_cast<float *>(x->slot[slot].p);
}

/* The void operations cannot report failure: a failure is logged and makes the next
 * encode/decode of this context fail, so the collective falls back on every rank. */
void gpu_copy(void *ctx, float *dst, const float *src, size_t n) {
    Ctx *x = static_cast<Ctx *>(ctx);
    if (dst == src || n == 0) return;
    Scope scope(x, dst);
    if (!scope.ok() ||
        !check(x, cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice, x->stream), "copy") ||
        !finish(x))
        x->pending_error = true;
}

template <class Launch>
void run_binary(void *ctx, float *dst, size_t n, const char *what, Launch launch) {
    Ctx *x = static_cast<Ctx *>(ctx);
    if (n == 0) return;
    Scope scope(x, dst);
    if (!scope.ok() || !check(x, launch(x->stream), what) || !finish(x)) x->pending_error = true;
}

void gpu_add(void *ctx, float *dst, const float *src, size_t n) {
    run_binary(ctx, dst, n, "add kernel", [&](cudaStream_t s) { return launch_add(dst, src, n, s); });
}
void gpu_sum(void *ctx, float *dst, const float *a, const float *b, size_t n) {
    run_binary(ctx, dst, n, "sum kernel", [&](cudaStream_t s) { return launch_sum(dst, a, b, n, s); });
}
void gpu_sub(void *ctx, float *dst, const float *a, const float *b, size_t n) {
    run_binary(ctx, dst, n, "sub kernel", [&](cudaStream_t s) { return launch_sub(dst, a, b, n, s); });
}

/* prepare() (terngrad's shared statistic) on the device where the codec's kernels have it:
 * the CPU's order-dependent sums in the CPU's order (stoch.cuh), so the statistic has the
 * CPU's bits; three words come back. Otherwise the floats are staged through the host. */
Status gpu_prepare(void *ctx, const CodecOps &c, const CodecParams &p, const float *data, size_t n, double *stat) {
    Ctx *x = static_cast<Ctx *>(ctx);
    if (!c.prepare) return Status::unsupported;
    const GpuCodec *g = gpu_codec_of(static_cast<int>(c.id));
    if (g && g->prepare && n) {
        Scope scope(x, data);
        if (!scope.ok()) return Status::unsupported;
        if (!grow(x, &x->work, g->prepare_work_bytes(n)) || !grow(x, &x->flag, 256, 256)) return Status::no_memory;
        uint32_t *dflag = static_cast<uint32_t *>(x->flag.p);
        if (!check(x, cudaMemsetAsync(dflag, 0, 3 * sizeof(uint32_t), x->stream), "cudaMemsetAsync") ||
            !check(x, g->prepare(data, n, p, x->work.p, reinterpret_cast<float *>(dflag + 1), dflag, x->stream),
                   "prepare kernels") ||
            !check(x, cudaMemcpyAsync(x->pinned_flag, dflag, 3 * sizeof(uint32_t), cudaMemcpyDeviceToHost, x->stream),
                   "cudaMemcpyAsync (statistic)") ||
            !finish(x))
            return Status::unsupported;
        if (x->pinned_flag[0]) return Status::nonfinite;
        float res[2];
        std::memcpy(res, x->pinned_flag + 1, sizeof res);
        *stat = res[0];
        if (p.clip_out) *p.clip_out = res[1];
        return Status::ok;
    }
    float *h = host_floats(x, n ? n : 1);
    if (!h) return Status::no_memory;
    if (n) {
        Scope scope(x, data);
        if (!scope.ok() || !d2h(x, h, data, n * sizeof(float)) || !finish(x)) return Status::unsupported;
    }
    return c.prepare(h, n, p, stat);
}

double gpu_l2norm(void *ctx, const float *data, size_t n) {
    Ctx *x = static_cast<Ctx *>(ctx);
    const size_t nb = l2_blocks(n);
    if (nb == 0) return 0.0;
    Scope scope(x, data);
    if (!scope.ok() || !grow(x, &x->parts, nb * sizeof(double))) return NAN;
    try {
        if (x->host_parts.size() < nb) x->host_parts.resize(nb);
    } catch (const std::bad_alloc &) {
        return NAN;
    }
    double *part = static_cast<double *>(x->parts.p);
    if (!check(x, launch_l2_partials(data, n, part, x->stream), "l2 norm kernel") ||
        !d2h(x, x->host_parts.data(), part, nb * sizeof(double)) || !finish(x))
        return NAN;
    return l2_finish(x->host_parts.data(), nb);
}

const Backend kBackend = {"cuda",   gpu_encode, gpu_decode, gpu_scratch, gpu_copy,
                          gpu_add,  gpu_sum,    gpu_sub,    gpu_prepare, gpu_l2norm};

/* ---------------------------------------------------------------- context life cycle */

void *ctx_create(const CoreApi *core) {
    if (!core || core->abi_version != kCudaModuleAbi || core->size != sizeof(CoreApi)) return nullptr;
    Ctx *x = new (std::nothrow) Ctx;
    if (x) x->core = core;
    return x;
}

/* Error feedback on the device: the residual of (key, n), zeroed when first seen, and in
 * *next a device buffer for the new residual; at most kMaxEf buffers are tracked (past
 * that all are dropped, as the core does with host residuals). nullptr on failure. */
constexpr size_t kMaxEf = 64;

float *ef_residual(void *ctx, const void *key, size_t n, float **next) {
    Ctx *x = static_cast<Ctx *>(ctx);
    if (!x || n == 0) return nullptr;
    Scope scope(x, key); /* the key is the user's device buffer: binds an unbound context to its device */
    if (!scope.ok()) return nullptr;
    const auto k = std::make_pair(reinterpret_cast<uintptr_t>(key), n);
    auto it = x->ef.find(k);
    if (it == x->ef.end()) {
        if (x->ef.size() >= kMaxEf) {
            if (x->stream) cudaStreamSynchronize(x->stream);
            for (auto &kv : x->ef) cudaFree(kv.second.res), cudaFree(kv.second.next);
            x->ef.clear();
        }
        Ctx::Ef e;
        if (!check(x, cudaMalloc(&e.res, n * sizeof(float)), "cudaMalloc (residual)") ||
            !check(x, cudaMalloc(&e.next, n * sizeof(float)), "cudaMalloc (residual)") ||
            !check(x, cudaMemsetAsync(e.res, 0, n * sizeof(float), x->stream), "cudaMemsetAsync (residual)") ||
            !finish(x)) {
            if (e.res) cudaFree(e.res);
            if (e.next) cudaFree(e.next);
            return nullptr;
        }
        it = x->ef.emplace(k, e).first;
    }
    *next = it->second.next;
    return it->second.res;
}

/* The call succeeded: the new residual becomes the residual. */
void ef_commit(void *ctx, const void *key, size_t n) {
    Ctx *x = static_cast<Ctx *>(ctx);
    if (!x) return;
    auto it = x->ef.find(std::make_pair(reinterpret_cast<uintptr_t>(key), n));
    if (it != x->ef.end()) std::swap(it->second.res, it->second.next);
}

void ctx_destroy(void *ctx) {
    Ctx *x = static_cast<Ctx *>(ctx);
    if (!x) return;
    /* Errors are ignored: at process exit the runtime may already be unloading. */
    if (x->stream || x->done || x->ev[0] || x->ev[1] || x->stage[0] || x->stage[1] || x->pinned_flag) {
        int prev = -1;
        const bool sw = x->device >= 0 && cudaGetDevice(&prev) == cudaSuccess && prev != x->device &&
                        cudaSetDevice(x->device) == cudaSuccess;
        if (x->stream) cudaStreamSynchronize(x->stream);
        for (DevBuf *b : {&x->payload, &x->parts, &x->flag, &x->work, &x->slot[0], &x->slot[1], &x->slot[2], &x->slot[3]})
            if (b->p) cudaFree(b->p);
        for (auto &kv : x->ef) {
            if (kv.second.res) cudaFree(kv.second.res);
            if (kv.second.next) cudaFree(kv.second.next);
        }
        for (uint8_t *s : x->stage)
            if (s) cudaFreeHost(s);
        if (x->pinned_flag) cudaFreeHost(x->pinned_flag);
        for (cudaEvent_t e : {x->ev[0], x->ev[1], x->done})
            if (e) cudaEventDestroy(e);
        if (x->stream) cudaStreamDestroy(x->stream);
        if (sw) cudaSetDevice(prev);
        cudaGetLastError();
    }
    delete x;
}

/* ---------------------------------------------------------------- module-level helpers */

int has_kernels(int codec_id, const CodecParams *p) {
    static const CodecParams none{};
    return gpu_codec(codec_id, p ? *p : none) != nullptr;
}

int device_count() {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
    cudaGetLastError();
    return n;
}

void *mem_alloc(size_t bytes, int kind) {
    void *p = nullptr;
    cudaError_t e;
    switch (kind) {
        case kMemDevice: e = cudaMalloc(&p, bytes); break;
        case kMemManaged: e = cudaMallocManaged(&p, bytes); break;
        case kMemPinned: e = cudaMallocHost(&p, bytes); break;
        default: return nullptr;
    }
    if (e != cudaSuccess) {
        cudaGetLastError();
        return nullptr;
    }
    if (kind == kMemPinned) {
        try {
            std::lock_guard<std::mutex> lk(g_pin_mu);
            g_pinned[reinterpret_cast<uintptr_t>(p)] = bytes;
        } catch (...) {
            cudaFreeHost(p);
            return nullptr;
        }
    }
    return p;
}

void mem_free(void *p, int kind) {
    if (!p) return;
    if (kind == kMemPinned) {
        {
            std::lock_guard<std::mutex> lk(g_pin_mu);
            g_pinned.erase(reinterpret_cast<uintptr_t>(p));
        }
        cudaFreeHost(p);
    } else {
        cudaFree(p);
    }
}

int memcpy_sync(void *dst, const void *src, size_t bytes) {
    const cudaError_t e = cudaMemcpy(dst, src, bytes, cudaMemcpyDefault);
    if (e != cudaSuccess) cudaGetLastError();
    return static_cast<int>(e);
}

/* ---------------------------------------------------------------- host model */

Status model_encode(const CodecOps &c, const CodecParams &p, const float *in, size_t n, uint8_t *out, size_t cap,
                    size_t *len) {
    const GpuCodec *g = gpu_codec(static_cast<int>(c.id), p);
    if (!g || c.check(p) != Status::ok) return Status::unsupported;
    size_t need = c.max_payload(n, p);
    if (cap < need) return Status::invalid_arg;
    const bool bad = g->encode_host_var ? g->encode_host_var(c, in, n, p, out, &need) : g->encode_host(c, in, n, p, out);
    *len = need;
    return bad ? Status::nonfinite : Status::ok;
}

Status model_decode(const CodecOps &c, const CodecParams &p, const uint8_t *in, size_t len, size_t n, float *out,
                    bool accumulate) {
    const GpuCodec *g = gpu_codec(static_cast<int>(c.id), p);
    if (!g || c.check(p) != Status::ok) return Status::unsupported;
    return g->decode_host(c, in, len, n, p, out, accumulate);
}

Status model_prepare(const CodecOps &c, const CodecParams &p, const float *in, size_t n, double *stat) {
    const GpuCodec *g = gpu_codec_of(static_cast<int>(c.id));
    if (!g || !g->prepare_host || !c.prepare || n == 0) return Status::unsupported;
    float res[2];
    if (g->prepare_host(in, n, p, res)) return Status::nonfinite;
    *stat = res[0];
    if (p.clip_out) *p.clip_out = res[1];
    return Status::ok;
}

const CudaHostModel kModel = {model_encode, model_decode, l2norm_host, model_prepare};

#ifdef CUDART_VERSION
#define CMPI_CUDART_STR "CUDA runtime " CMPI_STR(CUDART_VERSION)
#else
#define CMPI_CUDART_STR "CUDA runtime ?"
#endif

const CudaModule kModule = {
    kCudaModuleAbi, sizeof(CudaModule),
    CMPI_CUDART_STR ", archs " COMPMPI_CUDA_ARCHS ", kernels: none bitpack fp16 bf16 q8 terngrad qsgd sparse rangefloat topk",
    &kBackend,      ctx_create,         ctx_destroy, has_kernels, device_count, mem_alloc, mem_free, memcpy_sync,
    &kModel,        ef_residual,        ef_commit,
};

}  // namespace
}  // namespace compmpi::cuda

extern "C" __attribute__((visibility("default"))) const compmpi::CudaModule *compmpi_cuda_module_v1(void) {
    return &compmpi::cuda::kModule;
}

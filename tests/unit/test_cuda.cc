// SPDX-License-Identifier: BSD-3-Clause
/* GPU support: the core's loader (always), the CUDA module's host model (when the module
 * is built), and the CUDA backend against the CPU codecs (when a GPU is present).
 *
 * Groups:
 *   cuda_cpu    no CUDA needed: pointer classification without a driver and with a fake
 *               one (tests/unit/test_cuda_fakedrv.cc), module loading failures, the
 *               default module path. `test_cuda --cpu-only` runs just this group.
 *   cuda_model  the module's kernel bodies run on the host (CudaHostModel) against the CPU
 *               codecs and l2_norm_det: same bytes, same floats, same norm bits. Needs the
 *               module (configure found nvcc), not a GPU.
 *   cuda_gpu    the Backend on device memory against the CPU path: every codec's blob
 *               bytes, decode and decode-and-add, NaN/Inf flags, l2 norm bits, element-wise
 *               ops, scratch, prepare, pointer classification of real allocations.
 * Tests that cannot run here print why and call skip(): they are reported as SKIPPED,
 * never as passed. */
#include <dlfcn.h>
#include <limits.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <string>
#include <thread>

#include "bitpack/bitpack.h"
#include "q8/q8.h"
#include "codec.h"
#include "runtime/cuda_loader.h"
#include "runtime/policy.h"
#include "testutil.h"

using namespace compmpi;
using testutil::gradient_data;

namespace {

#define SKIP_BECAUSE(...)              \
    do {                               \
        print_message(__VA_ARGS__);    \
        print_message("\n");           \
        skip();                        \
    } while (0)

const void *addr(uint64_t a) { return reinterpret_cast<const void *>(static_cast<uintptr_t>(a)); }

/* ================================================================ cuda_cpu */

void given_missing_driver_when_classifying_expect_host(void **) {
    CudaPtrClassifier c("libcompmpi-no-such-driver.so.1");
    float x = 1;
    std::vector<float> v(64);
    assert_false(c.is_device(&x));
    assert_false(c.is_device(v.data()));
    assert_false(c.is_device(nullptr));
    assert_false(c.driver_loaded());
    for (int i = 0; i < 1000; ++i) assert_false(c.is_device(v.data() + i % 64));
    assert_int_equal(c.driver_queries(), 0);
    assert_int_equal(c.cached_ranges(), 0);
}

void given_host_memory_when_classifying_globally_expect_false(void **) {
    /* True on every machine: with libcuda these are CUDA_ERROR_INVALID_VALUE or
     * CUDA_ERROR_NOT_INITIALIZED, without it the classifier never asks. */
    static float global_array[16];
    float stack_value = 0;
    std::vector<float> heap(1 << 16);
    assert_false(cuda_is_device_ptr(nullptr));
    assert_false(cuda_is_device_ptr(&stack_value));
    assert_false(cuda_is_device_ptr(global_array));
    assert_false(cuda_is_device_ptr(heap.data()));
    assert_false(cuda_is_device_ptr(heap.data() + heap.size() - 1));
    assert_false(cuda_is_device_ptr(reinterpret_cast<const void *>(&given_missing_driver_when_classifying_expect_host)));
}

struct FakeLayout {
    uint64_t dev_lo, dev_size, many_lo, many_count, mgd_lo, mgd_size, pin_lo, pin_size, uninit_lo, uninit_size,
        norange_lo, norange_size;
};

/* The fake driver's address layout, or nullptr (and a skip) if it was not built. */
const FakeLayout *fake_layout(void **handle) {
    *handle = dlopen(COMPMPI_TEST_FAKEDRV, RTLD_NOW | RTLD_LOCAL);
    if (!*handle) return nullptr;
    auto fn = reinterpret_cast<const void *(*)()>(dlsym(*handle, "fake_cuda_layout"));
    return fn ? static_cast<const FakeLayout *>(fn()) : nullptr;
}

void given_fake_driver_when_classifying_expect_types(void **) {
    void *h = nullptr;
    const FakeLayout *L = fake_layout(&h);
    if (!L) SKIP_BECAUSE("fake driver %s not loadable: skipped", COMPMPI_TEST_FAKEDRV);
    CudaPtrClassifier c(COMPMPI_TEST_FAKEDRV);
    assert_true(c.driver_loaded());
    assert_true(c.is_device(addr(L->dev_lo + 100)));
    assert_true(c.is_device(addr(L->mgd_lo + 5)));  /* managed, reported as host memory */
    assert_false(c.is_device(addr(L->pin_lo + 5))); /* pinned host memory */
    assert_false(c.is_device(addr(L->dev_lo + L->dev_size)));
    assert_false(c.is_device(addr(0x1000)));
    assert_false(c.is_device(addr(L->uninit_lo)));   /* driver not initialised: host */
    assert_true(c.is_device(addr(L->norange_lo + 8))); /* device without a range: not cached */
    dlclose(h);
}

void given_fake_driver_when_repeating_expect_cache_hits(void **) {
    void *h = nullptr;
    const FakeLayout *L = fake_layout(&h);
    if (!L) SKIP_BECAUSE("fake driver %s not loadable: skipped", COMPMPI_TEST_FAKEDRV);
    CudaPtrClassifier c(COMPMPI_TEST_FAKEDRV);
    assert_true(c.is_device(addr(L->dev_lo + 4096)));
    const uint64_t q = c.driver_queries();
    assert_true(q > 0);
    for (uint64_t off : {uint64_t{0}, uint64_t{1}, L->dev_size / 2, L->dev_size - 1})
        assert_true(c.is_device(addr(L->dev_lo + off)));
    assert_int_equal(c.driver_queries(), q); /* all from the cache */
    assert_int_equal(c.cached_ranges(), 1);
    /* answers that must not be cached */
    for (int i = 0; i < 3; ++i) {
        const uint64_t before = c.driver_queries();
        assert_false(c.is_device(addr(L->uninit_lo + 64)));
        assert_false(c.is_device(addr(L->pin_lo + 64)));
        assert_true(c.is_device(addr(L->norange_lo + 64)));
        assert_true(c.driver_queries() > before);
    }
    assert_int_equal(c.cached_ranges(), 1);
    /* more allocations than slots: the cache stays bounded, answers stay right */
    for (uint64_t k = 0; k < L->many_count; ++k) assert_true(c.is_device(addr(L->many_lo + 4096 * k + 7)));
    assert_int_equal(c.cached_ranges(), CudaPtrClassifier::kCacheSlots);
    assert_true(c.is_device(addr(L->many_lo + 4096 * (L->many_count - 1)))); /* most recent: cached */
    c.clear_cache();
    assert_int_equal(c.cached_ranges(), 0);
    assert_true(c.is_device(addr(L->dev_lo)));
    dlclose(h);
}

void given_fake_driver_when_threads_classify_expect_consistent(void **) {
    void *h = nullptr;
    const FakeLayout *L = fake_layout(&h);
    if (!L) SKIP_BECAUSE("fake driver %s not loadable: skipped", COMPMPI_TEST_FAKEDRV);
    CudaPtrClassifier c(COMPMPI_TEST_FAKEDRV);
    std::atomic<int> wrong{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < 4; ++t)
        ts.emplace_back([&, t] {
            testutil::Rng r(t + 1);
            for (int i = 0; i < 20000; ++i) {
                const uint64_t k = r.next() % L->many_count, which = r.next() % 3;
                if (which == 0 && !c.is_device(addr(L->many_lo + 4096 * k + (r.next() & 4095)))) ++wrong;
                if (which == 1 && c.is_device(addr(L->pin_lo + (r.next() % L->pin_size)))) ++wrong;
                if (which == 2 && !c.is_device(addr(L->dev_lo + (r.next() % L->dev_size)))) ++wrong;
            }
        });
    for (auto &t : ts) t.join();
    assert_int_equal(wrong.load(), 0);
    assert_true(c.cached_ranges() <= static_cast<size_t>(CudaPtrClassifier::kCacheSlots));
    dlclose(h);
}

void given_missing_module_when_opening_expect_null_and_reason(void **) {
    void *h = nullptr;
    std::string err;
    assert_null(cuda_module_open("/nonexistent-dir/libcompmpi_cuda.so", &h, &err));
    assert_null(h);
    assert_true(err.find("cannot load") != std::string::npos);
}

void given_foreign_abi_module_when_opening_expect_null_and_reason(void **) {
    void *h = nullptr;
    std::string err;
    assert_null(cuda_module_open(COMPMPI_TEST_FAKEDRV, &h, &err));
    assert_null(h);
    if (err.find("cannot load") != std::string::npos) SKIP_BECAUSE("fake module not built (%s): skipped", err.c_str());
    print_message("expected refusal: %s\n", err.c_str());
    assert_true(err.find("ABI") != std::string::npos);
}

void given_core_symbol_when_default_module_path_expect_sibling_of_object(void **) {
    const std::string p = cuda_module_default_path();
    if (p.empty()) SKIP_BECAUSE("dladdr gave no directory (program started through PATH): skipped");
    const std::string name = "/libcompmpi_cuda.so";
    assert_true(p.size() > name.size() && p.compare(p.size() - name.size(), name.size(), name) == 0);
    /* the core is linked into this test program: the directory is the program's */
    char a[PATH_MAX], b[PATH_MAX], exe[PATH_MAX];
    const ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    assert_true(k > 0);
    exe[k] = 0;
    *std::strrchr(exe, '/') = 0;
    assert_non_null(realpath(p.substr(0, p.size() - name.size()).c_str(), a));
    assert_non_null(realpath(exe, b));
    assert_string_equal(a, b);
}

void given_process_module_when_loading_twice_expect_same_answer(void **) {
    /* No module sits beside this test program, so unless one is installed on the library
     * path the answer is nullptr (and one warning). Either way: stable, never a crash. */
    const CudaModule *m1 = cuda_module();
    const CudaModule *m2 = cuda_module();
    assert_ptr_equal(m1, m2);
    if (m1) assert_int_equal(m1->abi_version, kCudaModuleAbi);
}

void given_core_api_when_inspected_expect_complete(void **) {
    const CoreApi *c = cuda_core_api();
    assert_int_equal(c->abi_version, kCudaModuleAbi);
    assert_int_equal(c->size, sizeof(CoreApi));
    assert_non_null(c->blob_write_header);
    assert_non_null(c->blob_peek);
    assert_non_null(c->codec_by_id);
    assert_non_null(c->blob_encode);
    assert_non_null(c->blob_decode);
    assert_non_null(c->log_error);
    assert_non_null(c->log_warn);
    assert_non_null(c->status_str);
    assert_ptr_equal(c->codec_by_id(static_cast<int>(CodecId::bitpack)), codec_by_name("bitpack"));
}

/* ================================================================ module: shared helpers */

const CudaModule *g_mod = nullptr;
void *g_mod_handle = nullptr;
std::string g_mod_err = "CUDA module not built (no nvcc found, or configured --without-cuda)";

int module_setup(void **) {
#ifdef COMPMPI_TEST_CUDA_MODULE
    g_mod = cuda_module_open(COMPMPI_TEST_CUDA_MODULE, &g_mod_handle, &g_mod_err);
    if (g_mod) print_message("module: %s\n", g_mod->build_info);
#endif
    return 0;
}
int module_teardown(void **) {
    /* the module stays loaded: unloading a static CUDA runtime before exit gains nothing */
    return 0;
}

#define NEED_MODULE()                                                    \
    do {                                                                 \
        if (!g_mod) SKIP_BECAUSE("%s: skipped", g_mod_err.c_str());      \
    } while (0)

#define NEED_GPU()                                                                      \
    do {                                                                                \
        NEED_MODULE();                                                                  \
        if (g_mod->device_count() == 0) SKIP_BECAUSE("no CUDA device: skipped");        \
    } while (0)

/* Codecs with CUDA kernels and the parameter sets to hold them to. */
std::vector<CodecParams> kernel_params(const CodecOps &c) {
    std::vector<CodecParams> v;
    std::vector<int> bits;
    if (c.bits_step)
        for (int b = c.bits_min; b <= c.bits_max; b += c.bits_step) bits.push_back(b);
    else
        bits.push_back(c.bits_default);
    for (int b : bits)
        for (int variant = 0; variant < 8; ++variant) { /* q8 has 8 types */
            CodecParams p;
            p.bits = static_cast<uint8_t>(b);
            p.variant = static_cast<uint8_t>(variant);
            p.seed = 0x1234567ull;
            p.stream = 99;
            p.simd = simd_detect();
            p.threads = 1;
            if (c.check(p) == Status::ok) v.push_back(p);
        }
    /* the scaled stochastic codecs: levels widths, buckets (below, at and above a 32768-
     * element statistics segment), clipping, an agreed shared scale, and terngrad as the
     * allreduce calls it: the clip threshold decided for the whole contribution (clip_at),
     * alone and with the agreed scale (the CPU's no-statistics `given` path) */
    if (c.id == CodecId::terngrad || c.id == CodecId::qsgd) {
        std::vector<CodecParams> base = v;
        if (c.id == CodecId::terngrad)
            for (int b : {3, 5, 8, 9, 12, 16}) {
                CodecParams p = base.front();
                p.variant = 2; /* levels */
                p.bits = static_cast<uint8_t>(b);
                if (c.check(p) == Status::ok) base.push_back(p);
            }
        v.clear();
        for (const CodecParams &b0 : base)
            for (uint32_t param : {0u, 64u, 1000u, 40000u})
                for (int variant = 0; variant < (c.id == CodecId::terngrad ? 5 : 1); ++variant) {
                    CodecParams p = b0;
                    p.param = param;
                    if (variant == 1) p.clip = 2.5f;        /* c sigma clipping */
                    if (variant == 2) p.shared_scale = 0.7; /* an agreed scaler (used with one bucket) */
                    if (variant >= 3) {                     /* the collective's threshold */
                        p.clip = 2.5f;
                        p.clip_at = 0.3f;
                    }
                    if (variant == 4) p.shared_scale = 0.7;
                    if (c.check(p) == Status::ok) v.push_back(p);
                }
    }
    /* topk: every form (dense at theta 0 and 0.01, bitmap, index lists) and the boundary
     * between bitmap and list */
    if (c.id == CodecId::topk) {
        const CodecParams b0 = v.front();
        v.clear();
        for (float theta : {0.0f, 0.01f, 0.5f, 0.85f, 0.97f, 0.99f, 0.999f}) {
            CodecParams p = b0;
            p.theta = theta;
            v.push_back(p);
        }
    }
    return v;
}

std::vector<const CodecOps *> all_codecs() {
    std::vector<const CodecOps *> v;
    for (int id = 0; id < 256; ++id)
        if (const CodecOps *c = codec_by_id(id)) v.push_back(c);
    return v;
}

const size_t kSizes[] = {0, 1, 3, 4, 5, 15, 16, 17, 63, 100, 1000, 4097, 70001};

/* Scaled stochastic codecs refuse (nonfinite) a bucket whose scale or levels would
 * overflow: gradient_data's +-3.4e38 would make every bucket holding them refused, so the
 * byte comparisons use +-1e30 there (the refusal itself is compared where they stay). */
void tame(const CodecOps &c, std::vector<float> &x) {
    if (!(c.flags & CODEC_STOCHASTIC)) return;
    for (float &v : x)
        if (std::fabs(v) > 1e30f) v = std::copysign(1e30f, v);
}

/* Sparse codecs get sparse data: by n % 3, about 2 % (index list), 15 % (bitmap) or 60 %
 * (dense) of x[off..off+n) stay nonzero; a few zeros become -0.0 (a value, not a zero). */
void sparsify(const CodecOps &c, std::vector<float> &x, size_t off, size_t n) {
    if (!(c.flags & CODEC_SPARSE)) return;
    const uint32_t keep = n % 3 == 0 ? 2 : n % 3 == 1 ? 15 : 60;
    for (size_t i = 0; i < n; ++i) {
        const uint32_t h = static_cast<uint32_t>((i + 1) * 2654435761u) >> 8;
        if (h % 100 >= keep) x[off + i] = (h % 997 == 0) ? -0.0f : 0.0f;
    }
}

/* ================================================================ cuda_model (host) */

void given_host_model_when_encoding_expect_cpu_payload_bytes(void **) {
    NEED_MODULE();
    int checked = 0, fixed = 0;
    for (const CodecOps *c : all_codecs())
        for (const CodecParams &p0 : kernel_params(*c)) {
            if (!g_mod->has_kernels(static_cast<int>(c->id), &p0)) continue;
            for (size_t n : kSizes)
                for (size_t off : {size_t{0}, size_t{1}}) { /* aligned: vector path; off 1: element path */
                    auto x = gradient_data(n + off, 500 + n);
                    sparsify(*c, x, off, n);
                    /* NaN/Inf: every unaligned case, and aligned sizes n % 4 == 1 (vector path
                     * plus tail); the other aligned cases compare bytes of finite data */
                    if (n > 9 && (off == 1 || n % 4 == 1)) x[off + n / 2] = (n & 1) ? NAN : INFINITY;
                    else tame(*c, x);
                    /* and, for a codec with a whole-contribution scale (q8), this data as a
                     * segment of a larger contribution: a fixed scale 3x the data's own */
                    std::vector<CodecParams> ps{p0};
                    if (c->whole_scale) {
                        std::vector<float> big(x.begin() + static_cast<std::ptrdiff_t>(off), x.end());
                        for (float &f : big) f *= 3.0f;
                        float sc = 0;
                        if (c->whole_scale(big.data(), n, p0, &sc) == Status::ok && sc > 0) {
                            ps.push_back(p0);
                            ps.back().fixed_scale = sc;
                            ++fixed;
                        }
                    }
                    for (const CodecParams &p : ps) {
                        const size_t cap = c->max_payload(n, p) + 16;
                        std::vector<uint8_t> ref(cap + 1, 0xCD), got(cap + 1 + off, 0xCD);
                        size_t lr = 0, lg = 0;
                        const Status sr = c->encode(x.data() + off, n, p, ref.data(), cap, &lr);
                        const Status sg = g_mod->model->encode(*c, p, x.data() + off, n, got.data() + off, cap, &lg);
                        assert_int_equal(static_cast<int>(sg), static_cast<int>(sr));
                        if (sr != Status::ok) continue; /* NaN/Inf: the payload is unspecified */
                        assert_int_equal(lg, lr);
                        if (!testutil::same_bytes(ref.data(), got.data() + off, lr))
                            fail_msg("%s bits=%d variant=%d param=%u clip=%g clip_at=%g shared=%g fixed=%g theta=%g n=%zu off=%zu: payload "
                                     "differs",
                                     c->name, p.bits, p.variant, p.param, p.clip, p.clip_at, p.shared_scale, p.fixed_scale, p.theta, n, off);
                        ++checked;
                    }
                }
        }
    print_message("%d payloads compared (%d with a fixed scale)\n", checked, fixed);
    assert_true(checked > 0);
    assert_true(fixed > 0);
}

/* Values around every rounding decision: fp32 patterns in [0, 1] at a fixed stride, both
 * signs, denormals, and for q8 every magnitude and the exact midpoints between neighbouring
 * magnitudes (in value order) +-3 ulps (its ties and the paper search's boundaries); 1.0
 * first, so max-abs = 1 and the scaled value is the value itself. The offset types (static
 * tree, mantissa) pick 10^1 and 10^-1 for this max: the points are repeated times 10 and 0.1. */
std::vector<float> decision_sweep() {
    std::vector<float> v{1.0f};
    for (uint32_t u = 0; u <= 0x3F800000u; u += 4099) {
        float f;
        std::memcpy(&f, &u, 4);
        v.push_back(f);
        v.push_back(-f);
    }
    const CodecOps *q8c = codec_by_name("q8");
    for (int type = 0; q8c && type < q8::kNumTypes; ++type) {
        CodecParams p;
        p.bits = 8;
        p.variant = static_cast<uint8_t>(type);
        std::vector<uint8_t> pay(4 + 128);
        const float one = 1.0f;
        std::memcpy(pay.data(), &one, 4);
        for (int m = 0; m < 128; ++m) pay[4 + m] = static_cast<uint8_t>(m);
        std::vector<float> mag(128);
        if (q8c->decode(pay.data(), pay.size(), 128, p, mag.data()) != Status::ok) continue;
        std::sort(mag.begin(), mag.end());
        for (int m = 0; m < 127; ++m)
            for (double c : {static_cast<double>(mag[m]), (static_cast<double>(mag[m]) + mag[m + 1]) / 2})
                for (double scale : {1.0, 10.0, 0.1}) {
                    float t = static_cast<float>(c * scale);
                    if (!(t <= 1.0f)) continue;
                    for (int k = 0; k < 3; ++k) t = std::nextafter(t, 0.0f);
                    for (int k = 0; k < 7; ++k, t = std::nextafter(t, 2.0f)) v.push_back(t);
                }
    }
    return v;
}

void given_decision_sweep_when_host_model_encodes_expect_cpu_bytes(void **) {
    NEED_MODULE();
    const auto x = decision_sweep();
    int checked = 0;
    for (const CodecOps *c : all_codecs())
        for (const CodecParams &p : kernel_params(*c)) {
            if (!g_mod->has_kernels(static_cast<int>(c->id), &p)) continue;
            if ((c->flags & CODEC_STOCHASTIC) && (p.param != 0 || p.clip > 0)) continue; /* one set per width */
            const size_t n = x.size(), cap = c->max_payload(n, p);
            std::vector<uint8_t> ref(cap), got(cap);
            size_t lr = 0, lg = 0;
            assert_int_equal(static_cast<int>(c->encode(x.data(), n, p, ref.data(), cap, &lr)), 0);
            assert_int_equal(static_cast<int>(g_mod->model->encode(*c, p, x.data(), n, got.data(), cap, &lg)), 0);
            assert_int_equal(lg, lr);
            for (size_t i = 0; i < lr; ++i)
                if (ref[i] != got[i]) fail_msg("%s bits=%d variant=%d: byte %zu differs (%02x vs CPU %02x)", c->name, p.bits, p.variant, i, got[i], ref[i]);
            ++checked;
        }
    print_message("%d codec/parameter sets agree on %zu decision values\n", checked, x.size());
}

/* terngrad's prepare() (the shared statistic and the clip threshold it reports) as the
 * kernels compute it: the CPU's bits for every parameter set, size, and NaN/Inf. */
void given_host_model_when_preparing_expect_cpu_statistic(void **) {
    NEED_MODULE();
    int checked = 0, refused = 0;
    for (const CodecOps *c : all_codecs()) {
        if (!c->prepare) continue;
        for (const CodecParams &p : kernel_params(*c))
            for (size_t n : {size_t{1}, size_t{17}, size_t{4097}, size_t{70001}, size_t{300001}}) /* 300001: 10 segments of 32768, past the 8 partials a bucket loads at once */
                for (int nan = 0; nan <= 1; ++nan) {
                    if (n == 0 || (nan && n < 10)) continue;
                    auto x = gradient_data(n, 300 + n);
                    tame(*c, x);
                    if (nan) x[n / 3] = (n & 1) ? NAN : -INFINITY;
                    double ref = -1, got = -2;
                    float cr = -1, cg = -2;
                    CodecParams pr = p, pg = p;
                    pr.clip_out = &cr;
                    pg.clip_out = &cg;
                    const Status sr = c->prepare(x.data(), n, pr, &ref);
                    const Status sg = g_mod->model->prepare(*c, pg, x.data(), n, &got);
                    assert_int_equal(static_cast<int>(sg), static_cast<int>(sr));
                    if (sr != Status::ok) {
                        ++refused;
                        continue;
                    }
                    if (!testutil::same_bytes(&ref, &got, sizeof ref) || !testutil::same_bytes(&cr, &cg, sizeof cr))
                        fail_msg("%s variant=%d param=%u clip=%g clip_at=%g n=%zu: statistic %a/%a, clip %a/%a", c->name,
                                 p.variant, p.param, p.clip, p.clip_at, n, got, ref, cg, cr);
                    ++checked;
                }
    }
    print_message("%d prepare() statistics compared, %d NaN/Inf refusals\n", checked, refused);
    assert_true(checked > 0);
    assert_true(refused > 0);
}

/* terngrad's code bytes are validated word-wide on the host: a bad code anywhere (first
 * byte, inside a word, at a word edge, in the tail) is refused as the CPU refuses it. */
void given_bad_terngrad_codes_when_host_model_decodes_expect_cpu_status(void **) {
    NEED_MODULE();
    const CodecOps *c = codec_by_name("terngrad");
    assert_non_null(c);
    int checked = 0;
    for (int variant : {0, 1})
        for (size_t n : {size_t{37}, size_t{1000}, size_t{70001}}) {
            CodecParams p;
            p.bits = 2;
            p.variant = static_cast<uint8_t>(variant);
            p.seed = 5;
            auto x = gradient_data(n, 40 + n);
            tame(*c, x);
            std::vector<uint8_t> pay(c->max_payload(n, p));
            size_t len = 0;
            assert_int_equal(static_cast<int>(c->encode(x.data(), n, p, pay.data(), pay.size(), &len)), 0);
            const size_t codes = len - 4;
            for (size_t at : {size_t{0}, size_t{5}, size_t{7}, size_t{8}, codes / 2, codes - 1}) {
                if (at >= codes) continue;
                for (uint8_t bad : {uint8_t{0x02}, uint8_t{0x80}, uint8_t{243}, uint8_t{255}}) {
                    std::vector<uint8_t> b = pay;
                    b[4 + at] = bad;
                    std::vector<float> r(n), g(n);
                    const Status sr = c->decode(b.data(), len, n, p, r.data());
                    const Status sg = g_mod->model->decode(*c, p, b.data(), len, n, g.data(), false);
                    assert_int_equal(static_cast<int>(sg), static_cast<int>(sr));
                    ++checked;
                }
            }
        }
    print_message("%d corrupted terngrad payloads\n", checked);
    assert_true(checked > 0);
}

/* topk payloads broken in every way the CPU decoder checks (form, reserved bytes, k, length,
 * a bitmap bit past n or one too many, indices out of order or range, NaN/Inf values), in
 * each form: the host model's status is the CPU's and a refused payload writes nothing. */
void given_bad_topk_payloads_when_host_model_decodes_expect_cpu_status(void **) {
    NEED_MODULE();
    const CodecOps *c = codec_by_name("topk");
    assert_non_null(c);
    int checked = 0, refused = 0;
    for (float theta : {0.01f, 0.85f, 0.99f})
        for (size_t n : {size_t{100}, size_t{1000}, size_t{70001}}) {
            CodecParams p;
            p.theta = theta;
            p.simd = simd_detect();
            p.threads = 1;
            const auto x = gradient_data(n, 60 + n);
            std::vector<uint8_t> pay(c->max_payload(n, p) + 8);
            size_t len = 0;
            assert_int_equal(static_cast<int>(c->encode(x.data(), n, p, pay.data(), pay.size(), &len)), 0);
            const uint8_t form = pay[0];
            uint64_t k;
            std::memcpy(&k, pay.data() + 8, 8);
            const size_t nw = (n + 63) / 64;
            const size_t body = 16;
            /* each mutation: a changed copy of the payload and its length */
            std::vector<std::pair<std::vector<uint8_t>, size_t>> bad;
            auto flip = [&](size_t at, uint8_t mask, long dl = 0) {
                bad.push_back({pay, static_cast<size_t>(static_cast<long>(len) + dl)});
                bad.back().first[at] ^= mask;
            };
            auto inf_at = [&](size_t at) { /* the value at byte `at` becomes +Inf */
                bad.push_back({pay, len});
                const uint32_t inf = 0x7F800000u;
                std::memcpy(bad.back().first.data() + at, &inf, 4);
            };
            flip(0, 1);
            flip(0, 3);
            flip(3, 0x10);
            flip(8, 1);
            flip(15, 0x80);
            flip(0, 0, -1);
            flip(0, 0, 1);
            if (form == 1) { /* bitmap */
                const size_t last = body + 8 * (nw - 1);
                uint64_t w;
                std::memcpy(&w, pay.data() + last, 8);
                if (n % 64 && w) { /* a kept bit moved past n: same popcount */
                    bad.push_back({pay, len});
                    w = (w & (w - 1)) | (1ull << 63);
                    std::memcpy(bad.back().first.data() + last, &w, 8);
                }
                flip(body + 1, 0x04); /* one bit flipped: popcount != k */
                inf_at(body + 8 * nw);
                inf_at(len - 4);
            } else if (form == 0) { /* list */
                flip(body + 4 * (k - 1) + 3, 0x40); /* last index out of range */
                flip(body + 4, 0xFF);               /* second index: order */
                inf_at(body + 4 * k);
                inf_at(len - 4);
            } else { /* dense */
                inf_at(body + 4 * (n / 2));
                flip(body + 4 * (n / 2) + 2, 0x80); /* a value changed, still finite: accepted */
            }
            for (size_t m = 0; m < bad.size(); ++m)
                for (int add = 0; add <= 1; ++add) {
                    const std::vector<uint8_t> &b = bad[m].first;
                    const size_t blen = bad[m].second;
                    std::vector<float> r = gradient_data(n, 7), g = r;
                    const Status sr = add ? c->decode_add(b.data(), blen, n, p, r.data())
                                          : c->decode(b.data(), blen, n, p, r.data());
                    const Status sg = g_mod->model->decode(*c, p, b.data(), blen, n, g.data(), add);
                    if (sg != sr)
                        fail_msg("theta=%g n=%zu mutation %zu add=%d: status %d, CPU %d", theta, n, m, add,
                                 static_cast<int>(sg), static_cast<int>(sr));
                    assert_true(testutil::same_bytes(r.data(), g.data(), n * sizeof(float)));
                    refused += sr != Status::ok;
                    ++checked;
                }
        }
    print_message("%d broken topk payloads, %d refused\n", checked, refused);
    assert_true(refused > checked / 2);
}

/* rangefloat's paper mode fits m and eps on the host from a sample the kernels gather: sizes
 * on both sides of the sampled path (2^16) and past the stride of 8 (n >> 18 > 8), data of
 * one sign, with -0.0, and all zero: the CPU's bytes. */
void given_paper_rangefloat_when_host_model_encodes_expect_cpu_bytes(void **) {
    NEED_MODULE();
    const CodecOps *c = codec_by_name("rangefloat");
    assert_non_null(c);
    int checked = 0;
    for (size_t n : {size_t{65535}, size_t{65536}, size_t{3000001}})
        for (int shape = 0; shape < 4; ++shape)
            for (int bits : {4, 8, 11, 16}) {
                if (n > 100000 && bits != 8 && shape != 0) continue;
                auto x = gradient_data(n, 11 + n + static_cast<size_t>(shape));
                for (size_t i = 0; i < n; ++i) {
                    if (shape == 1) x[i] = std::fabs(x[i]);                  /* positive only */
                    if (shape == 2) x[i] = -std::fabs(x[i]) * (i % 7 ? 1.0f : 0.0f); /* negative and -0.0 */
                    if (shape == 3) x[i] = (i % 3) ? 0.0f : -0.0f;           /* zeros */
                }
                CodecParams p;
                p.bits = static_cast<uint8_t>(bits);
                p.variant = 1; /* paper */
                p.simd = simd_detect();
                p.threads = 1;
                const size_t cap = c->max_payload(n, p);
                std::vector<uint8_t> ref(cap), got(cap);
                size_t lr = 0, lg = 0;
                const Status sr = c->encode(x.data(), n, p, ref.data(), cap, &lr);
                const Status sg = g_mod->model->encode(*c, p, x.data(), n, got.data(), cap, &lg);
                assert_int_equal(static_cast<int>(sg), static_cast<int>(sr));
                if (sr != Status::ok) continue;
                assert_int_equal(lg, lr);
                if (!testutil::same_bytes(ref.data(), got.data(), lr))
                    fail_msg("paper rangefloat bits=%d n=%zu shape=%d: payload differs (header m %u/%u)", bits, n, shape,
                             got[0], ref[0]);
                std::vector<float> r(n, 1.0f), g(n, 1.0f);
                assert_int_equal(static_cast<int>(c->decode_add(ref.data(), lr, n, p, r.data())), 0);
                assert_int_equal(static_cast<int>(g_mod->model->decode(*c, p, ref.data(), lr, n, g.data(), true)), 0);
                assert_true(testutil::same_bytes(r.data(), g.data(), n * sizeof(float)));
                ++checked;
            }
    print_message("%d paper-mode payloads compared\n", checked);
    assert_true(checked >= 30);
}

void given_host_model_when_decoding_expect_cpu_floats(void **) {
    NEED_MODULE();
    for (const CodecOps *c : all_codecs())
        for (const CodecParams &p : kernel_params(*c)) {
            if (!g_mod->has_kernels(static_cast<int>(c->id), &p)) continue;
            for (size_t n : kSizes)
                for (size_t off : {size_t{0}, size_t{1}}) {
                    auto x = gradient_data(n, 900 + n);
                    sparsify(*c, x, 0, n);
                    tame(*c, x);
                    std::vector<uint8_t> payload(c->max_payload(n, p) + 1);
                    size_t len = 0;
                    const Status se = c->encode(x.data(), n, p, payload.data(), payload.size(), &len);
                    if (se != Status::ok)
                        fail_msg("%s bits=%d variant=%d param=%u shared=%g n=%zu: CPU encode status %d", c->name, p.bits,
                                 p.variant, p.param, p.shared_scale, n, static_cast<int>(se));
                    auto acc0 = gradient_data(n + off, 77 + n);
                    for (int add = 0; add <= 1; ++add) {
                        std::vector<float> ref = acc0, got = acc0;
                        const Status sr = add ? c->decode_add(payload.data(), len, n, p, ref.data() + off)
                                              : c->decode(payload.data(), len, n, p, ref.data() + off);
                        const Status sg = g_mod->model->decode(*c, p, payload.data(), len, n, got.data() + off, add);
                        assert_int_equal(static_cast<int>(sg), static_cast<int>(sr));
                        if (!testutil::same_bytes(ref.data(), got.data(), (n + off) * sizeof(float)))
                            fail_msg("%s bits=%d variant=%d param=%u n=%zu off=%zu add=%d: floats differ", c->name,
                                     p.bits, p.variant, p.param, n, off, add);
                    }
                    /* a wrong length is refused like the CPU refuses it */
                    std::vector<float> y(n + 1);
                    if (len) assert_int_equal(static_cast<int>(g_mod->model->decode(*c, p, payload.data(), len - 1, n, y.data(), false)),
                                              static_cast<int>(c->decode(payload.data(), len - 1, n, p, y.data())));
                }
        }
}

void given_host_model_when_l2norm_expect_cpu_bits(void **) {
    NEED_MODULE();
    const size_t sizes[] = {0, 1, 7, 8, 9, 16383, 16384, 16385, 3 * 16384 + 5, (1u << 20) + 13};
    for (size_t n : sizes)
        for (size_t off : {size_t{0}, size_t{3}}) {
            auto x = gradient_data(n + off, 4242 + n);
            const double ref = l2_norm_det(x.data() + off, n, 1), ref2 = l2_norm_det(x.data() + off, n, 2);
            const double got = g_mod->model->l2norm(x.data() + off, n);
            assert_true(testutil::same_bytes(&ref, &ref2, sizeof ref));
            if (!testutil::same_bytes(&ref, &got, sizeof ref)) fail_msg("n=%zu: l2 %.17g != CPU %.17g", n, got, ref);
        }
}

void given_no_gpu_when_backend_called_expect_clean_failures(void **) {
    NEED_MODULE();
    if (g_mod->device_count() > 0) SKIP_BECAUSE("a GPU is present: the no-GPU path is not exercised: skipped");
    void *ctx = g_mod->ctx_create(cuda_core_api());
    assert_non_null(ctx);
    const Backend &b = *g_mod->backend;
    const CodecOps &c = *codec_by_name("bitpack");
    CodecParams p;
    p.bits = 16;
    auto x = gradient_data(1000, 1);
    std::vector<uint8_t> blob(blob_max_bytes(c, 1000, p));
    size_t len = 0;
    print_message("expected: CUDA errors logged below (no device)\n");
    assert_int_equal(b.encode(ctx, c, p, x.data(), 1000, blob.data(), blob.size(), &len), BLOB_ABANDON);
    assert_int_equal(len, kBlobHeaderBytes);
    BlobInfo info;
    assert_int_equal(static_cast<int>(blob_peek(blob.data(), len, 1000, &info)), 0);
    assert_int_equal(info.flags, BLOB_ABANDON);
    assert_int_equal(static_cast<int>(blob_encode(c, p, x.data(), 1000, blob.data(), blob.size(), &len)), 0);
    std::vector<float> y(1000, 5.0f);
    assert_int_not_equal(static_cast<int>(b.decode(ctx, blob.data(), len, 1000, y.data(), false, p)), 0);
    assert_true(y[0] == 5.0f);
    assert_null(b.scratch(ctx, 0, 100));
    assert_null(b.scratch(ctx, 7, 100));
    assert_true(std::isnan(b.l2norm(ctx, x.data(), 1000)));
    float *ef_next = nullptr;
    assert_null(g_mod->ef_residual(ctx, x.data(), 1000, &ef_next)); /* no device: no residual */
    g_mod->ef_commit(ctx, x.data(), 1000);                          /* nothing to commit, no crash */
    b.copy(ctx, y.data(), x.data(), 1000); /* logged, no crash */
    assert_null(g_mod->mem_alloc(1024, kMemDevice));
    assert_null(g_mod->mem_alloc(1024, kMemPinned));
    g_mod->ctx_destroy(ctx);
    g_mod->ctx_destroy(nullptr);
    /* a context refuses a foreign core ABI */
    CoreApi foreign = *cuda_core_api();
    foreign.abi_version += 1;
    assert_null(g_mod->ctx_create(&foreign));
}

/* ================================================================ cuda_gpu (device) */

/* Device floats (or any kind) through the module's allocator. */
struct DevMem {
    void *p = nullptr;
    int kind;
    DevMem(size_t bytes, int k) : kind(k) { p = g_mod->mem_alloc(bytes ? bytes : 4, k); }
    ~DevMem() { g_mod->mem_free(p, kind); }
    float *f() const { return static_cast<float *>(p); }
};

struct Gpu {
    void *ctx = nullptr;
    const Backend *b = nullptr;
    Gpu() {
        ctx = g_mod->ctx_create(cuda_core_api());
        b = g_mod->backend;
    }
    ~Gpu() { g_mod->ctx_destroy(ctx); }
    void put(float *dev, const float *host, size_t n) { assert_int_equal(g_mod->memcpy_sync(dev, host, n * 4), 0); }
    std::vector<float> get(const float *dev, size_t n) {
        std::vector<float> h(n);
        assert_int_equal(g_mod->memcpy_sync(h.data(), dev, n * 4), 0);
        return h;
    }
};

/* Every codec (kernels or host fallback), its parameter sets, shared scale agreed like the
 * collectives do it (here: this rank's own statistic). */
std::vector<CodecParams> gpu_params(const CodecOps &c, const std::vector<float> &x, size_t n) {
    std::vector<CodecParams> v;
    for (CodecParams p : kernel_params(c)) {
        if ((c.flags & CODEC_SHARED_SCALE) && c.prepare) {
            double stat = 0;
            if (c.prepare(x.data(), n, p, &stat) != Status::ok) continue;
            p.shared_scale = stat;
        }
        p.nranks = 2;
        v.push_back(p);
        /* a segment of a larger contribution: the whole one's scale, fixed (q8: three times
         * this data's max, so the fixed scale differs from the one the data would give) */
        if (c.whole_scale) {
            std::vector<float> big(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(n));
            for (float &f : big) f *= 3.0f;
            float s = 0;
            if (c.whole_scale(big.data(), n, p, &s) == Status::ok && s > 0) {
                p.fixed_scale = s;
                v.push_back(p);
            }
        }
    }
    return v;
}

void given_gpu_when_encoding_expect_cpu_blob_bytes(void **) {
    NEED_GPU();
    Gpu g;
    int with_kernels = 0, fallback = 0;
    std::map<std::string, int> bad;
    for (const CodecOps *c : all_codecs())
        for (size_t n : kSizes)
            for (size_t off : {size_t{0}, size_t{1}}) {
                auto x = gradient_data(n + off, 31 * n + 5);
                if (n > 20 && (n & 1)) x[off + n - 3] = NAN;
                DevMem d((n + off) * 4, kMemDevice);
                g.put(d.f(), x.data(), n + off);
                std::vector<float> hx(x.begin() + off, x.end());
                for (const CodecParams &p : gpu_params(*c, hx, n)) {
                    const size_t cap = blob_max_bytes(*c, n, p);
                    std::vector<uint8_t> ref(cap), got(cap, 0xEE);
                    size_t lr = 0, lg = 0;
                    const Status sr = blob_encode(*c, p, hx.data(), n, ref.data(), cap, &lr);
                    const uint8_t fg = g.b->encode(g.ctx, *c, p, d.f() + off, n, got.data(), cap, &lg);
                    const uint8_t fr = sr == Status::ok ? 0 : sr == Status::nonfinite ? BLOB_NONFINITE : BLOB_ABANDON;
                    /* every codec is compared before the test fails: one GPU run reports all */
                    const bool kern = g_mod->has_kernels(static_cast<int>(c->id), &p);
                    if (fg != fr || (fr != BLOB_ABANDON && lg != lr)) {
                        if (++bad[c->name] <= 3)
                            print_error("%s bits=%d variant=%d param=%u n=%zu off=%zu (%s): flag %d (CPU %d), length %zu "
                                        "(CPU %zu)\n",
                                        c->name, p.bits, p.variant, p.param, n, off, kern ? "kernels" : "fallback", fg, fr,
                                        lg, lr);
                        continue;
                    }
                    if (fr == BLOB_ABANDON) continue; /* both refused these parameters */
                    if (!testutil::same_bytes(ref.data(), got.data(), lr)) {
                        size_t i = 0;
                        while (ref[i] == got[i]) ++i;
                        if (++bad[c->name] <= 3)
                            print_error("%s bits=%d variant=%d param=%u n=%zu off=%zu (%s): GPU blob differs from CPU "
                                        "blob at byte %zu of %zu: GPU %02x %02x %02x %02x, CPU %02x %02x %02x %02x\n",
                                        c->name, p.bits, p.variant, p.param, n, off, kern ? "kernels" : "fallback", i, lr,
                                        got[i], i + 1 < lr ? got[i + 1] : 0, i + 2 < lr ? got[i + 2] : 0,
                                        i + 3 < lr ? got[i + 3] : 0, ref[i], i + 1 < lr ? ref[i + 1] : 0,
                                        i + 2 < lr ? ref[i + 2] : 0, i + 3 < lr ? ref[i + 3] : 0);
                        continue;
                    }
                    (kern ? with_kernels : fallback)++;
                }
            }
    print_message("compared %d blobs from CUDA kernels, %d from the host fallback\n", with_kernels, fallback);
    for (const auto &[name, count] : bad) print_error("%s: %d blobs differ from the CPU's\n", name.c_str(), count);
    assert_true(bad.empty());
    assert_true(with_kernels > 0);
}

void given_blobs_when_decoding_on_gpu_expect_cpu_floats(void **) {
    NEED_GPU();
    Gpu g;
    for (const CodecOps *c : all_codecs())
        for (size_t n : kSizes)
            for (size_t off : {size_t{0}, size_t{1}}) {
                auto x = gradient_data(n, 7 * n + 1);
                auto acc0 = gradient_data(n + off, 13 * n + 2);
                DevMem d((n + off) * 4, kMemDevice);
                for (const CodecParams &p : gpu_params(*c, x, n)) {
                    const size_t cap = blob_max_bytes(*c, n, p);
                    std::vector<uint8_t> blob(cap);
                    size_t len = 0;
                    if (blob_encode(*c, p, x.data(), n, blob.data(), cap, &len) != Status::ok) continue;
                    for (int add = 0; add <= 1; ++add) {
                        std::vector<float> ref = acc0;
                        assert_int_equal(static_cast<int>(blob_decode(blob.data(), len, n, ref.data() + off, add,
                                                                      p.simd, 1)),
                                         0);
                        g.put(d.f(), acc0.data(), n + off);
                        assert_int_equal(static_cast<int>(g.b->decode(g.ctx, blob.data(), len, n, d.f() + off, add, p)),
                                         0);
                        const auto got = g.get(d.f(), n + off);
                        if (!testutil::same_bytes(ref.data(), got.data(), (n + off) * 4))
                            fail_msg("%s bits=%d variant=%d n=%zu off=%zu add=%d: GPU decode differs", c->name, p.bits,
                                     p.variant, n, off, add);
                    }
                }
            }
}

void given_bad_blobs_when_decoding_on_gpu_expect_cpu_status(void **) {
    NEED_GPU();
    Gpu g;
    const CodecOps &c = *codec_by_name("bitpack");
    CodecParams p;
    p.bits = 16;
    const size_t n = 1000;
    auto x = gradient_data(n, 3);
    std::vector<uint8_t> blob(blob_max_bytes(c, n, p));
    size_t len = 0;
    assert_int_equal(static_cast<int>(blob_encode(c, p, x.data(), n, blob.data(), blob.size(), &len)), 0);
    DevMem d(n * 4, kMemDevice);
    std::vector<float> sentinel(n, 3.0f);
    g.put(d.f(), sentinel.data(), n);
    assert_int_equal(static_cast<int>(g.b->decode(g.ctx, blob.data(), len - 1, n, d.f(), false, p)),
                     static_cast<int>(Status::corrupt));                              /* truncated */
    assert_int_equal(static_cast<int>(g.b->decode(g.ctx, blob.data(), len, n + 1, d.f(), false, p)),
                     static_cast<int>(Status::corrupt));                              /* other count */
    std::vector<uint8_t> flagged(kBlobHeaderBytes);
    blob_write_header(flagged.data(), BlobInfo{c.id, BLOB_NONFINITE, 16, 0, 0, n, 0});
    assert_int_equal(static_cast<int>(g.b->decode(g.ctx, flagged.data(), flagged.size(), n, d.f(), true, p)),
                     static_cast<int>(Status::nonfinite));
    blob_write_header(flagged.data(), BlobInfo{c.id, BLOB_ABANDON, 16, 0, 0, n, 0});
    assert_int_equal(static_cast<int>(g.b->decode(g.ctx, flagged.data(), flagged.size(), n, d.f(), true, p)),
                     static_cast<int>(Status::corrupt));
    const auto got = g.get(d.f(), n);
    assert_true(testutil::same_bytes(got.data(), sentinel.data(), n * 4)); /* untouched */
}

void given_large_buffers_when_staging_expect_exact_bytes(void **) {
    NEED_GPU();
    Gpu g;
    const size_t n = (5u << 20) + 7; /* 20 MiB of floats: several pieces of the pinned ring */
    auto x = gradient_data(n, 11);
    DevMem d(n * 4, kMemDevice), out(n * 4, kMemDevice);
    g.put(d.f(), x.data(), n);
    for (const char *name : {"none", "bitpack"}) {
        const CodecOps &c = *codec_by_name(name);
        CodecParams p;
        p.bits = static_cast<uint8_t>(c.bits_default);
        for (int pinned = 0; pinned <= 1; ++pinned) {
            const size_t cap = blob_max_bytes(c, n, p);
            std::vector<uint8_t> ref(cap);
            DevMem pin(cap, kMemPinned);
            std::vector<uint8_t> pageable(pinned ? 0 : cap);
            uint8_t *blob = pinned ? static_cast<uint8_t *>(pin.p) : pageable.data();
            size_t lr = 0, lg = 0;
            assert_int_equal(static_cast<int>(blob_encode(c, p, x.data(), n, ref.data(), cap, &lr)), 0);
            assert_int_equal(g.b->encode(g.ctx, c, p, d.f(), n, blob, cap, &lg), 0);
            assert_int_equal(lg, lr);
            assert_true(testutil::same_bytes(ref.data(), blob, lr));
            std::vector<float> y(n);
            assert_int_equal(static_cast<int>(blob_decode(ref.data(), lr, n, y.data(), false, simd_detect(), 1)), 0);
            assert_int_equal(static_cast<int>(g.b->decode(g.ctx, blob, lg, n, out.f(), false, p)), 0);
            const auto got = g.get(out.f(), n);
            assert_true(testutil::same_bytes(y.data(), got.data(), n * 4));
        }
    }
}

void given_gpu_when_l2norm_expect_cpu_bits(void **) {
    NEED_GPU();
    Gpu g;
    const size_t sizes[] = {0, 1, 7, 8, 9, 16383, 16384, 16385, 3 * 16384 + 5, (1u << 20) + 13, (1u << 24) + 1};
    for (size_t n : sizes)
        for (size_t off : {size_t{0}, size_t{3}}) {
            auto x = gradient_data(n + off, 4242 + n);
            DevMem d((n + off) * 4, kMemDevice);
            g.put(d.f(), x.data(), n + off);
            const double ref = l2_norm_det(x.data() + off, n, 2);
            const double got = g.b->l2norm(g.ctx, d.f() + off, n);
            if (!testutil::same_bytes(&ref, &got, sizeof ref)) fail_msg("n=%zu off=%zu: GPU l2 %.17g != CPU %.17g", n, off, got, ref);
        }
    auto x = gradient_data(1000, 1);
    x[500] = NAN;
    DevMem d(4000, kMemDevice);
    g.put(d.f(), x.data(), 1000);
    assert_true(std::isnan(g.b->l2norm(g.ctx, d.f(), 1000)));
}

void given_gpu_when_elementwise_expect_cpu_bits(void **) {
    NEED_GPU();
    Gpu g;
    for (size_t n : kSizes)
        for (size_t off : {size_t{0}, size_t{1}}) {
            auto a = gradient_data(n + off, 1 + n), b = gradient_data(n + off, 2 + n);
            DevMem da((n + off) * 4, kMemDevice), db((n + off) * 4, kMemDevice), dd((n + off) * 4, kMemDevice);
            g.put(da.f(), a.data(), n + off);
            g.put(db.f(), b.data(), n + off);
            std::vector<float> ref(n);
            for (int op = 0; op < 4; ++op) {
                for (size_t i = 0; i < n; ++i)
                    ref[i] = op == 0 ? a[off + i] + b[off + i] : op == 1 ? a[off + i] - b[off + i] : op == 2 ? a[off + i] + b[off + i] : b[off + i];
                if (op == 0) g.b->sum(g.ctx, dd.f() + off, da.f() + off, db.f() + off, n);
                if (op == 1) g.b->sub(g.ctx, dd.f() + off, da.f() + off, db.f() + off, n);
                if (op == 2) {
                    g.b->copy(g.ctx, dd.f() + off, da.f() + off, n);
                    g.b->add(g.ctx, dd.f() + off, db.f() + off, n);
                }
                if (op == 3) g.b->copy(g.ctx, dd.f() + off, db.f() + off, n);
                const auto got = g.get(dd.f() + off, n);
                if (!testutil::same_bytes(ref.data(), got.data(), n * 4)) fail_msg("op %d n=%zu off=%zu differs", op, n, off);
            }
        }
}

void given_gpu_scratch_when_growing_expect_reuse(void **) {
    NEED_GPU();
    Gpu g;
    float *a = g.b->scratch(g.ctx, 0, 1000);
    assert_non_null(a);
    assert_ptr_equal(g.b->scratch(g.ctx, 0, 10), a); /* grow-only */
    float *b = g.b->scratch(g.ctx, 1, 1000);
    assert_non_null(b);
    assert_ptr_not_equal(a, b);
    float *big = g.b->scratch(g.ctx, 0, 10u << 20);
    assert_non_null(big);
    assert_true(cuda_is_device_ptr(big));
    assert_null(g.b->scratch(g.ctx, 4, 10));
    assert_null(g.b->scratch(g.ctx, -1, 10));
    std::vector<float> ones(10u << 20, 1.0f);
    g.put(big, ones.data(), ones.size()); /* the whole size is usable */
}

void given_gpu_when_prepare_expect_cpu_statistic(void **) {
    NEED_GPU();
    Gpu g;
    int checked = 0;
    for (const CodecOps *c : all_codecs()) {
        const size_t n = 70001;
        auto x = gradient_data(n, 5);
        DevMem d(n * 4, kMemDevice);
        g.put(d.f(), x.data(), n);
        for (CodecParams p : kernel_params(*c)) {
            double ref = -1, got = -2;
            float cr = -1, cg = -2; /* the clip threshold prepare() reports (clip_out) */
            CodecParams pr = p, pg = p;
            pr.clip_out = &cr;
            pg.clip_out = &cg;
            const Status sr = c->prepare ? c->prepare(x.data(), n, pr, &ref) : Status::unsupported;
            const Status sg = g.b->prepare(g.ctx, *c, pg, d.f(), n, &got);
            assert_int_equal(static_cast<int>(sg), static_cast<int>(sr));
            if (sr == Status::ok) {
                assert_true(testutil::same_bytes(&ref, &got, sizeof ref));
                assert_true(testutil::same_bytes(&cr, &cg, sizeof cr));
                ++checked;
            }
        }
    }
    print_message("%d prepare() statistics compared\n", checked);
}

void given_real_allocations_when_classifying_expect_kinds(void **) {
    NEED_GPU();
    DevMem dev(1 << 20, kMemDevice), mgd(1 << 16, kMemManaged), pin(1 << 16, kMemPinned);
    assert_non_null(dev.p);
    std::vector<float> host(1000);
    CudaPtrClassifier c("libcuda.so.1", false);
    assert_true(c.is_device(dev.p));
    assert_true(c.is_device(static_cast<char *>(dev.p) + (1 << 20) - 1));
    const uint64_t q = c.driver_queries();
    for (int i = 0; i < 100; ++i) assert_true(c.is_device(static_cast<char *>(dev.p) + i * 1000));
    assert_int_equal(c.driver_queries(), q); /* cache */
    if (mgd.p) assert_true(c.is_device(mgd.p));
    assert_false(c.is_device(pin.p));
    assert_false(c.is_device(host.data()));
    assert_true(cuda_is_device_ptr(dev.p));
    assert_false(cuda_is_device_ptr(host.data()));
}

void given_managed_memory_when_encoding_expect_cpu_bytes(void **) {
    NEED_GPU();
    Gpu g;
    const size_t n = 100003;
    DevMem m(n * 4, kMemManaged);
    if (!m.p) SKIP_BECAUSE("managed memory unavailable on this device: skipped");
    auto x = gradient_data(n, 8);
    g.put(m.f(), x.data(), n);
    const CodecOps &c = *codec_by_name("bitpack");
    CodecParams p;
    p.bits = 24;
    p.variant = bitpack::kNearest;
    std::vector<uint8_t> ref(blob_max_bytes(c, n, p)), got(ref.size());
    size_t lr = 0, lg = 0;
    assert_int_equal(static_cast<int>(blob_encode(c, p, x.data(), n, ref.data(), ref.size(), &lr)), 0);
    assert_int_equal(g.b->encode(g.ctx, c, p, m.f(), n, got.data(), got.size(), &lg), 0);
    assert_int_equal(lg, lr);
    assert_true(testutil::same_bytes(ref.data(), got.data(), lr));
}

/* Device residuals: zero when first seen, the committed new residual comes back for the
 * same (buffer, n), another n is another residual, a failed call (no commit) keeps the old. */
void given_gpu_when_error_feedback_expect_residual_lifecycle(void **) {
    NEED_GPU();
    Gpu g;
    const size_t n = 100003;
    DevMem buf(n * 4, kMemDevice);
    float *next = nullptr;
    float *r = g_mod->ef_residual(g.ctx, buf.p, n, &next);
    assert_non_null(r);
    assert_non_null(next);
    assert_ptr_not_equal(r, next);
    for (float v : g.get(r, n)) assert_true(v == 0.0f && !std::signbit(v));
    auto x = gradient_data(n, 5);
    g.put(next, x.data(), n);
    g_mod->ef_commit(g.ctx, buf.p, n);
    float *next2 = nullptr;
    float *r2 = g_mod->ef_residual(g.ctx, buf.p, n, &next2);
    assert_ptr_equal(r2, next);
    assert_true(testutil::same_bytes(g.get(r2, n).data(), x.data(), n * 4));
    /* no commit: the residual stays */
    assert_ptr_equal(g_mod->ef_residual(g.ctx, buf.p, n, &next2), r2);
    /* another length of the same buffer: its own zeroed residual */
    float *r3 = g_mod->ef_residual(g.ctx, buf.p, n - 1, &next2);
    assert_non_null(r3);
    assert_ptr_not_equal(r3, r2);
    for (float v : g.get(r3, n - 1)) assert_true(v == 0.0f);
}

}  // namespace

int main(int argc, char **argv) {
    const bool cpu_only = argc > 1 && std::strcmp(argv[1], "--cpu-only") == 0;
    const struct CMUnitTest cpu[] = {
        cmocka_unit_test(given_missing_driver_when_classifying_expect_host),
        cmocka_unit_test(given_host_memory_when_classifying_globally_expect_false),
        cmocka_unit_test(given_fake_driver_when_classifying_expect_types),
        cmocka_unit_test(given_fake_driver_when_repeating_expect_cache_hits),
        cmocka_unit_test(given_fake_driver_when_threads_classify_expect_consistent),
        cmocka_unit_test(given_missing_module_when_opening_expect_null_and_reason),
        cmocka_unit_test(given_foreign_abi_module_when_opening_expect_null_and_reason),
        cmocka_unit_test(given_core_symbol_when_default_module_path_expect_sibling_of_object),
        cmocka_unit_test(given_process_module_when_loading_twice_expect_same_answer),
        cmocka_unit_test(given_core_api_when_inspected_expect_complete),
    };
    const struct CMUnitTest model[] = {
        cmocka_unit_test(given_host_model_when_encoding_expect_cpu_payload_bytes),
        cmocka_unit_test(given_decision_sweep_when_host_model_encodes_expect_cpu_bytes),
        cmocka_unit_test(given_host_model_when_preparing_expect_cpu_statistic),
        cmocka_unit_test(given_bad_terngrad_codes_when_host_model_decodes_expect_cpu_status),
        cmocka_unit_test(given_bad_topk_payloads_when_host_model_decodes_expect_cpu_status),
        cmocka_unit_test(given_paper_rangefloat_when_host_model_encodes_expect_cpu_bytes),
        cmocka_unit_test(given_host_model_when_decoding_expect_cpu_floats),
        cmocka_unit_test(given_host_model_when_l2norm_expect_cpu_bits),
        cmocka_unit_test(given_no_gpu_when_backend_called_expect_clean_failures),
    };
    const struct CMUnitTest gpu[] = {
        cmocka_unit_test(given_gpu_when_encoding_expect_cpu_blob_bytes),
        cmocka_unit_test(given_blobs_when_decoding_on_gpu_expect_cpu_floats),
        cmocka_unit_test(given_bad_blobs_when_decoding_on_gpu_expect_cpu_status),
        cmocka_unit_test(given_large_buffers_when_staging_expect_exact_bytes),
        cmocka_unit_test(given_gpu_when_l2norm_expect_cpu_bits),
        cmocka_unit_test(given_gpu_when_elementwise_expect_cpu_bits),
        cmocka_unit_test(given_gpu_scratch_when_growing_expect_reuse),
        cmocka_unit_test(given_gpu_when_prepare_expect_cpu_statistic),
        cmocka_unit_test(given_real_allocations_when_classifying_expect_kinds),
        cmocka_unit_test(given_managed_memory_when_encoding_expect_cpu_bytes),
        cmocka_unit_test(given_gpu_when_error_feedback_expect_residual_lifecycle),
    };
    /* valgrind: `--cpu-only` is clean with --leak-check=full; the full run adds one
     * "possibly lost" TLS vector of a cached thread stack inside glibc (clean with
     * --errors-for-leak-kinds=definite). */
    int failed = cmocka_run_group_tests_name("cuda_cpu", cpu, nullptr, nullptr);
    if (!cpu_only) {
        failed += cmocka_run_group_tests_name("cuda_model", model, module_setup, module_teardown);
        failed += cmocka_run_group_tests_name("cuda_gpu", gpu, nullptr, nullptr);
    }
    return failed;
}

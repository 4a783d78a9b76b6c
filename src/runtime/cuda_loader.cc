// SPDX-License-Identifier: BSD-3-Clause
/* Pointer classification through the CUDA driver API and the CUDA module loader; see
 * cuda_loader.h. No CUDA header: the few driver types and values are declared here. */
#include "runtime/cuda_loader.h"

#include <dlfcn.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/log.h"

namespace compmpi {
namespace {

/* From cuda.h (CUDA 13.0; stable since CUDA 4 for these values). */
constexpr int CUDA_SUCCESS = 0;
constexpr int CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2;  /* unsigned int: CUmemorytype */
constexpr int CU_POINTER_ATTRIBUTE_IS_MANAGED = 8;   /* boolean */
constexpr int CU_POINTER_ATTRIBUTE_RANGE_START_ADDR = 11; /* CUdeviceptr */
constexpr int CU_POINTER_ATTRIBUTE_RANGE_SIZE = 12;  /* size_t */
constexpr unsigned CU_MEMORYTYPE_DEVICE = 2;

}  // namespace

/* ---------------------------------------------------------------- CudaPtrClassifier */

CudaPtrClassifier::CudaPtrClassifier(const char *driver_lib, bool close_on_destroy)
    : lib_(driver_lib), close_(close_on_destroy) {}

CudaPtrClassifier::~CudaPtrClassifier() {
    if (handle_ && close_) dlclose(handle_);
}

void CudaPtrClassifier::open_driver() {
    /* RTLD_LOCAL: the driver's symbols stay out of the global namespace; if the application
     * already loaded libcuda this returns the same handle. Failing is normal (no GPU). */
    handle_ = dlopen(lib_.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_) {
        get_attr_ = reinterpret_cast<GetAttrFn>(dlsym(handle_, "cuPointerGetAttribute"));
        if (!get_attr_) {
            log_warn("%s has no cuPointerGetAttribute: device buffers will not be recognised", lib_.c_str());
            if (close_) dlclose(handle_);
            handle_ = nullptr;
        }
    }
    driver_.store(get_attr_ ? 2 : 1, std::memory_order_release);
}

bool CudaPtrClassifier::driver_loaded() {
    std::call_once(once_, [this] { open_driver(); });
    return get_attr_ != nullptr;
}

size_t CudaPtrClassifier::cached_ranges() {
    std::lock_guard<std::mutex> lk(mu_);
    size_t k = 0;
    for (const Range &r : cache_) k += r.hi > r.lo;
    return k;
}

void CudaPtrClassifier::clear_cache() {
    std::lock_guard<std::mutex> lk(mu_);
    for (Range &r : cache_) r = Range{};
}

bool CudaPtrClassifier::is_device(const void *p) {
    if (!p) return false;
    int d = driver_.load(std::memory_order_acquire);
    if (d == 0) {
        std::call_once(once_, [this] { open_driver(); });
        d = driver_.load(std::memory_order_acquire);
    }
    if (d != 2) return false;
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    {
        std::lock_guard<std::mutex> lk(mu_);
        for (Range &r : cache_)
            if (a >= r.lo && a < r.hi) {
                r.used = ++clock_;
                return true;
            }
    }
    /* Not a known device range: ask the driver (outside the lock; the driver is
     * thread-safe). Plain host memory answers CUDA_ERROR_INVALID_VALUE, an uninitialised
     * driver CUDA_ERROR_NOT_INITIALIZED: both "host", and neither is cached, so a buffer
     * the application allocates later is seen. Attributes are read into zeroed 64-bit
     * words, whatever width the driver writes. */
    const unsigned long long dp = a;
    uint64_t memtype = 0, managed = 0, start = 0, size = 0;
    queries_.fetch_add(1, std::memory_order_relaxed);
    if (get_attr_(&memtype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, dp) != CUDA_SUCCESS) return false;
    queries_.fetch_add(1, std::memory_order_relaxed);
    if (get_attr_(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, dp) != CUDA_SUCCESS) managed = 0;
    /* Managed memory may report either memory type wherever it resides: it counts as
     * device memory (see cuda_loader.h). Pinned/registered host memory stays host. */
    const bool dev = static_cast<uint32_t>(memtype) == CU_MEMORYTYPE_DEVICE || managed != 0;
    if (!dev) return false;
    queries_.fetch_add(2, std::memory_order_relaxed);
    if (get_attr_(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, dp) != CUDA_SUCCESS ||
        get_attr_(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, dp) != CUDA_SUCCESS || size == 0 || a < start ||
        a - start >= size)
        return true; /* device, but no usable range: answer without caching */
    /* Cached ranges are never invalidated: under unified addressing the driver keeps device
     * address ranges reserved, so a freed range is only ever handed out again as device
     * memory, and the answer stays right. */
    std::lock_guard<std::mutex> lk(mu_);
    Range *victim = &cache_[0];
    for (Range &r : cache_) {
        if (r.lo == start && r.hi == start + size) {
            r.used = ++clock_;
            return true;
        }
        if (r.used < victim->used) victim = &r;
    }
    *victim = Range{static_cast<uintptr_t>(start), static_cast<uintptr_t>(start + size), ++clock_};
    return true;
}

/* ---------------------------------------------------------------- process-wide entry points */

namespace {

/* Never destroyed: the driver stays loaded for the process (the application may still
 * be using it while static destructors run). */
CudaPtrClassifier &global_classifier() {
    static CudaPtrClassifier *c = new CudaPtrClassifier("libcuda.so.1", false);
    return *c;
}

void log_error_fn(const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    log_error("%s", msg);
}
void log_warn_fn(const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    log_warn("%s", msg);
}

const CoreApi kCoreApi = {
    kCudaModuleAbi, sizeof(CoreApi), blob_write_header, blob_peek, codec_by_id, blob_encode, blob_decode,
    log_error_fn,   log_warn_fn,     status_str,
};

const char kModuleName[] = "libcompmpi_cuda.so";

}  // namespace

bool cuda_is_device_ptr(const void *p) { return global_classifier().is_device(p); }

bool cuda_device_ptrs_possible() { return !global_classifier().driver_absent(); }

void cuda_ptr_cache_clear() { global_classifier().clear_cache(); }

const CoreApi *cuda_core_api() { return &kCoreApi; }

std::string cuda_module_default_path() {
    Dl_info info;
    if (!dladdr(reinterpret_cast<const void *>(&cuda_module_default_path), &info) || !info.dli_fname)
        return std::string();
    const char *slash = std::strrchr(info.dli_fname, '/');
    if (!slash) return std::string();
    /* absolute: messages name the real directory, whatever path the object was loaded by */
    std::string dir(info.dli_fname, static_cast<size_t>(slash - info.dli_fname));
    if (dir.empty()) dir = "/";
    if (char *abs = realpath(dir.c_str(), nullptr)) {
        dir = abs;
        std::free(abs);
    }
    return dir + (dir.back() == '/' ? "" : "/") + kModuleName;
}

const CudaModule *cuda_module_open(const char *path, void **handle, std::string *err) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        *err = std::string("cannot load ") + path + ": " + (e ? e : "unknown dlopen error");
        return nullptr;
    }
    auto fn = reinterpret_cast<compmpi_cuda_module_fn>(dlsym(h, COMPMPI_CUDA_MODULE_SYMBOL));
    const CudaModule *m = fn ? fn() : nullptr;
    if (!m) {
        *err = std::string(path) + " is not a libcompmpi CUDA module (no " COMPMPI_CUDA_MODULE_SYMBOL ")";
    } else if (m->abi_version != kCudaModuleAbi || m->size != sizeof(CudaModule)) {
        *err = std::string(path) + " has module ABI " + std::to_string(m->abi_version) + " (" +
               std::to_string(m->size) + " bytes), this libcompmpi needs ABI " + std::to_string(kCudaModuleAbi) +
               " (" + std::to_string(sizeof(CudaModule)) + " bytes): install the module built with this library";
        m = nullptr;
    } else if (!m->backend || !m->ctx_create || !m->ctx_destroy) {
        *err = std::string(path) + " is incomplete (no backend or context functions)";
        m = nullptr;
    }
    if (!m) {
        dlclose(h);
        return nullptr;
    }
    *handle = h;
    return m;
}

void cuda_module_close(void *handle) {
    if (handle) dlclose(handle);
}

const CudaModule *cuda_module() {
    static std::once_flag once;
    static const CudaModule *mod = nullptr;
    std::call_once(once, [] {
        void *h = nullptr;
        std::string err1, err2;
        const std::string path = cuda_module_default_path();
        if (!path.empty()) mod = cuda_module_open(path.c_str(), &h, &err1);
        if (!mod) mod = cuda_module_open(kModuleName, &h, &err2);
        if (!mod)
            log_warn("device buffers seen but the CUDA module is unavailable (%s%s%s); they pass through "
                     "uncompressed. Build libcompmpi with --with-cuda and install %s beside libcompmpi.so",
                     err1.c_str(), err1.empty() ? "" : "; ", err2.c_str(), kModuleName);
        /* h stays open for the life of the process: contexts may outlive any caller */
    });
    return mod;
}

}  // namespace compmpi

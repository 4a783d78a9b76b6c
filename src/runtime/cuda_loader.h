// SPDX-License-Identifier: BSD-3-Clause
/* The core's side of GPU support: pointer classification through the CUDA driver and the
 * loader of the CUDA module. Compiled into libcompmpi_core; it includes no CUDA header and
 * links no CUDA library: libcuda.so.1 and libcompmpi_cuda.so are dlopen()ed on demand, so
 * libcompmpi.so loads and works on machines without CUDA (everything here then says "host").
 *
 * ---- What the core calls, and when (the wiring of src/boundary/interpose.cc and coll/) ----------
 *
 *  1. Per compressed call, before choosing a Backend, for each user buffer (sendbuf unless
 *     MPI_IN_PLACE, recvbuf; the buffer for bcast):
 *         bool dev = cuda_is_device_ptr(buf);
 *     Cheap: a few ns without libcuda, a cache lookup for a known device allocation, one
 *     driver call otherwise. All user buffers of one call must agree (all host or all
 *     device); a mix is not eligible -> exact PMPI call (new eligibility reason).
 *     Ranks may differ (rank 0 on the GPU, rank 1 on the CPU): the blob format is the
 *     same, so no agreement is needed.
 *  2. If dev:
 *         const CudaModule *m = cuda_module();   // loads once; nullptr = unavailable
 *     nullptr (module not installed, ABI mismatch; logged once) -> exact PMPI call with the
 *     device buffers (works only if the MPI is CUDA-aware; that is the user's MPI's business).
 *  3. Per communicator, lazily on its first device call, keep in CommState:
 *         void *ctx = m->ctx_create(cuda_core_api());   // nullptr -> exact PMPI call
 *     and destroy it in the communicator's attribute delete callback:
 *         m->ctx_destroy(ctx);
 *     (ctx_create touches no CUDA state; the context binds to the data's device on first
 *     use. Never share a ctx between communicators: calls on one ctx must be serialised,
 *     which CommState::mu already does.)
 *  4. Run the collective algorithm with Backend = *m->backend and that ctx instead of
 *     backend_cpu() and the CommState: every data/scratch pointer is device memory, every
 *     blob host memory. awp observes the result with m->backend->l2norm(ctx, out, n),
 *     which gives the same bits as l2_norm_det() on the same data. Error-feedback
 *     residuals of device buffers must live in backend scratch/device memory too (the
 *     residual table of CommState holds host vectors: keep a separate device table, or
 *     pass ef through for device buffers).
 *  5. Optionally allocate the communicator's blob workspaces (ws_send/ws_recv) with
 *     m->mem_alloc(bytes, kMemPinned) for device calls: the module then DMAs compressed
 *     bytes straight into them instead of through its own staging buffers.
 *
 * CUDA-aware MPI: asked the way each MPI family offers it in src/mpi_family.* (Open MPI:
 * MPIX_Query_cuda_support from mpi-ext.h; MPICH: MPIX_GPU_query_support), once after
 * MPI_Init; mpi_cuda_aware() true lets exact fallbacks hand device buffers to MPI directly
 * instead of through host copies. Blobs always travel through host memory. */
#pragma once
#include <cstddef>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include "cuda/module_abi.h"

namespace compmpi {

/* ---------------------------------------------------------------- the core's entry points */

/* true if p lies in memory a CUDA kernel should process: device memory (cudaMalloc,
 * cudaMallocAsync pools, cuMemMap ranges) or managed memory (cudaMallocManaged, whatever
 * its current residence: managed buffers of ML frameworks live on the GPU, and the CUDA
 * backend reads them correctly wherever they are). Pinned or registered host memory and
 * plain host memory give false. Never fails: no libcuda.so.1, no GPU, a driver that is not
 * initialised yet (the application has not used CUDA so far) or any driver error -> false.
 * Thread-safe. */
bool cuda_is_device_ptr(const void *p);
/* False once the CUDA driver is known to be absent (no pointer can then be a device
 * pointer); true while unknown or present. One load: for hot paths that would otherwise ask
 * cuda_is_device_ptr about every buffer. */
bool cuda_device_ptrs_possible();

/* Forget the known device ranges. Only needed if the application returns device address
 * ranges to the OS (cuMemAddressFree of a cuMemAddressReserve range) and the OS may then
 * map host memory there; cudaFree/cudaFreeAsync never do. */
void cuda_ptr_cache_clear();

/* The CUDA module, dlopen()ed on the first call from the directory of the object that
 * holds libcompmpi (dladdr), then by plain name (LD_LIBRARY_PATH, rpath); nullptr if it is
 * missing or its ABI differs (logged once, with the path and what to do). Thread-safe;
 * the module stays loaded for the life of the process. */
const CudaModule *cuda_module();

/* The table the core hands to CudaModule::ctx_create. */
const CoreApi *cuda_core_api();

/* ---------------------------------------------------------------- building blocks (tests) */

/* Classifies pointers through one driver library. The process-wide instance behind
 * cuda_is_device_ptr uses "libcuda.so.1"; tests make their own with a fake driver.
 * The library is dlopen()ed once, on the first query; if that fails every later query
 * returns false at the cost of one atomic load. */
class CudaPtrClassifier {
  public:
    explicit CudaPtrClassifier(const char *driver_lib, bool close_on_destroy = true);
    ~CudaPtrClassifier();
    CudaPtrClassifier(const CudaPtrClassifier &) = delete;
    CudaPtrClassifier &operator=(const CudaPtrClassifier &) = delete;

    bool is_device(const void *p);
    bool driver_absent() const { return driver_.load(std::memory_order_acquire) == 1; }
    bool driver_loaded();                     /* after the first query */
    size_t cached_ranges();
    uint64_t driver_queries() const { return queries_.load(std::memory_order_relaxed); } /* driver calls made */
    void clear_cache();

    static constexpr int kCacheSlots = 64;

  private:
    using GetAttrFn = int (*)(void *data, int attribute, unsigned long long ptr);
    struct Range {
        uintptr_t lo = 0, hi = 0; /* [lo, hi); empty slot when lo == hi */
        uint64_t used = 0;        /* LRU stamp */
    };
    void open_driver();

    std::string lib_;
    bool close_;
    std::once_flag once_;
    /* 0: driver not looked for yet, 1: absent, 2: present. Every eligible call asks about
     * its buffers: without a driver the answer is one load (call_once costs a
     * pthread_once and TLS lookups per query). */
    std::atomic<int> driver_{0};
    void *handle_ = nullptr;
    GetAttrFn get_attr_ = nullptr;
    std::mutex mu_; /* guards the cache */
    Range cache_[kCacheSlots];
    uint64_t clock_ = 0;
    std::atomic<uint64_t> queries_{0};
};

/* Where cuda_module() looks first: "<dir of the object holding libcompmpi>/libcompmpi_cuda.so",
 * or "" if dladdr cannot tell. */
std::string cuda_module_default_path();

/* dlopen a module file and check its ABI. On success returns the module and the dlopen
 * handle in *handle (the caller may cuda_module_close it once no context is left); on
 * failure nullptr with a sentence in *err. */
const CudaModule *cuda_module_open(const char *path, void **handle, std::string *err);
void cuda_module_close(void *handle);

}  // namespace compmpi

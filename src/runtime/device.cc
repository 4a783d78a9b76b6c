// SPDX-License-Identifier: BSD-3-Clause
#include "runtime/device.h"

#include <cstdlib>
#include <vector>

#include "base/log.h"
#include "base/mpi_family.h"
#include "runtime/cuda_loader.h"
#include "runtime/exact.h"
#include "runtime/run.h"
#include "runtime/state.h"
#include "base/mpi_next.h"

namespace compmpi {
namespace {

/* Run fn on host copies of a's device buffers (copied in before, the result copied back
 * after): for a mix of host and device buffers, and for exact fallbacks when MPI is not
 * CUDA-aware (Debian's MPICH is not). */
template <class F> int with_host_copies(const CollArgs &a, const CommState &st, const CudaModule &m, F &&fn) {
    const size_t n_in = static_cast<size_t>(coll_elements(a));
    /* reduce-scatter in place: the receive buffer holds the whole input */
    const size_t n_out = coll_is_reduce_scatter(a.kind) && a.sendbuf == MPI_IN_PLACE
                             ? n_in
                             : coll_result_elements(a, st.rank, st.size);
    const bool send_dev = a.kind != Coll::bcast && a.sendbuf != MPI_IN_PLACE && cuda_is_device_ptr(a.sendbuf);
    const bool recv_dev = cuda_is_device_ptr(a.recvbuf);
    const size_t es = elem_bytes(a.elem);
    CollArgs b = a;
    std::vector<double> hin, hout; /* 8-byte aligned for either element type */
    if (send_dev) {
        hin.resize((n_in * es + 7) / 8);
        if (m.memcpy_sync(hin.data(), a.sendbuf, n_in * es)) return MPI_ERR_BUFFER;
        b.sendbuf = hin.data();
    }
    if (recv_dev) {
        hout.resize((n_out * es + 7) / 8);
        /* the receive buffer holds input too: in place, and at the bcast root */
        if (m.memcpy_sync(hout.data(), a.recvbuf, n_out * es)) return MPI_ERR_BUFFER;
        b.recvbuf = hout.data();
    }
    int rc = fn(b);
    if (recv_dev && m.memcpy_sync(a.recvbuf, hout.data(), n_out * es)) return MPI_ERR_BUFFER;
    return rc;
}

}  // namespace

[[noreturn]] void device_abort(const CollArgs &a, const char *why) {
    log_error("%s on a GPU buffer: %s. Aborting rather than leaving the other ranks waiting: install "
              "libcompmpi_cuda.so beside libcompmpi.so, or set COMPMPI_CODEC=none.", coll_name(a.kind), why);
    log_flush_pause();
    mpi_next::Abort(a.comm, 1);
    std::abort();
}

int device_run_exact(const CollArgs &a, const CommState &st, const CudaModule *m) {
    return m && !mpi_cuda_aware() ? with_host_copies(a, st, *m, passthrough) : passthrough(a);
}

int device_run_placed(const CollArgs &a, CommState &st) {
    const void *key = a.key ? a.key : a.recvbuf;
    const bool send_dev = a.kind != Coll::bcast && a.sendbuf != MPI_IN_PLACE && cuda_is_device_ptr(a.sendbuf);
    const bool recv_dev = cuda_is_device_ptr(a.recvbuf);
    if (!send_dev && !recv_dev) return run_on(a, st, backend_cpu(), &st.coll.cpu, nullptr, key, &st.coll.ws);
    const CudaModule *m = cuda_module();
    if (!m) device_abort(a, "the CUDA module is not available (see the message above)");
    const bool mixed = a.kind != Coll::bcast && a.sendbuf != MPI_IN_PLACE && send_dev != recv_dev;
    /* a backend without the element type's operations (the CUDA module has no fp64 kernels
     * yet) is staged through host memory like a mix of buffers */
    if (!mixed && backend_has_elem(*m->backend, a.elem)) {
        DeviceState &d = st.dev;
        if (!d.ctx) {
            d.ctx = m->ctx_create(cuda_core_api());
            d.destroy = m->ctx_destroy;
        }
        if (!d.ctx) device_abort(a, "the CUDA module could not create a context");
        /* blob workspaces in pinned memory: the backend's payload copies then go straight
         * between them and the GPU, without its staging ring (docs/gpu.md) */
        for (Buffer *b : {&d.ws_pinned.send, &d.ws_pinned.recv, &d.ws_pinned.aux_blob})
            if (!b->has_allocator()) b->use_allocator(m->mem_alloc, m->mem_free, kMemPinned);
        return run_on(a, st, *m->backend, d.ctx, m, key, &d.ws_pinned);
    }
    /* one buffer on the host, one on the device, or doubles: compress on the host */
    return with_host_copies(a, st, *m, [&](const CollArgs &b) {
        return run_on(b, st, backend_cpu(), &st.coll.cpu, m, key, &st.coll.ws);
    });
}

}  // namespace compmpi

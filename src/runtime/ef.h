// SPDX-License-Identifier: BSD-3-Clause
/* Error feedback (Seide et al.; Lin et al., DGC): each rank adds its own earlier compression
 * error (the residual) to its input before encoding and keeps what this call's encoding
 * failed to carry as the next residual. Residuals are rank-local, keyed by the rank's own
 * buffer (address, count) within one communicator: they never change what goes on the wire
 * (docs/design.md, "Whose state, whose norm"). The table lives in CommState (ef, ef_scratch,
 * ef_floats; state_ef_residual / state_ef_scratch in src/runtime/state.h); device buffers keep
 * theirs in the CUDA module's context. */
#pragma once
#include <cstddef>
#include <vector>

#include "coll.h"
#include "cuda/module_abi.h"
#include "runtime/args.h"
#include "runtime/policy.h"
#include "runtime/state.h"

namespace compmpi {

/* Error feedback for one compressed call on a backend: where it applies (allreduce and
 * reduce-scatter of a lossy codec; qsgd only with a variance bound below 1, else the settings
 * report error_feedback as having no effect), the residual goes to c.ef_res and the algorithm
 * writes the next one to c.ef_new; commit() keeps it once the call succeeded. */
class EfCall {
  public:
    /* m: the CUDA module for device buffers on its backend (be_ctx its context), else nullptr */
    EfCall(const CollArgs &a, CommState &st, const Plan &plan, const CudaModule *m, void *be_ctx, const void *key,
           CollCtx &c);
    EfCall(const EfCall &) = delete;
    EfCall &operator=(const EfCall &) = delete;
    /* this rank carries no residual in this call (a hierarchy's non-leader) */
    void drop(CollCtx &c);
    void commit();

  private:
    CommState &st_;
    std::vector<float> *host_ = nullptr; /* the host residual in st_.ef */
    const CudaModule *m_ = nullptr;      /* device residuals: the module's */
    void *be_ctx_ = nullptr;
    const void *key_ = nullptr;
    size_t n_ = 0;
    bool dev_ = false;
};

}  // namespace compmpi

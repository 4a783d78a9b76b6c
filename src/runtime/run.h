// SPDX-License-Identifier: BSD-3-Clause
/* One eligible call from plan to observation, on the backend its buffers chose
 * (src/runtime/device.h): the policy's plan, the cost model's choice between the plan and
 * MPI's exact collective (exploring on a shadow output), the compressed algorithm (coll/),
 * error feedback (src/runtime/ef.h), and what the policy observes of the result. */
#pragma once
#include "coll.h"
#include "cuda/module_abi.h"
#include "runtime/args.h"
#include "runtime/state.h"

namespace compmpi {

/* Plan the call, let the cost model choose between the plan and the exact collective, run
 * it. be/be_ctx: the backend of the data; m: the CUDA module where device buffers are
 * involved (else nullptr); key: the user's receive buffer, which keys this rank's
 * error-feedback residual whatever staging happened; ws: the call's blob workspaces. Caller
 * holds st.mu. */
int run_on(const CollArgs &a, CommState &st, const Backend &be, void *be_ctx, const CudaModule *m, const void *key,
           CollWorkspace *ws);

}  // namespace compmpi

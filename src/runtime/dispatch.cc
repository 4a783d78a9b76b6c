// SPDX-License-Identifier: BSD-3-Clause
#include "runtime/dispatch.h"

#include <exception>
#include <mutex>

#include "base/fault.h"
#include "base/log.h"
#include "base/stats.h"
#include "runtime/device.h"
#include "runtime/eligibility.h"
#include "runtime/exact.h"
#include "runtime/runtime.h"
#include "base/mpi_next.h"

namespace compmpi {

int dispatch(CollArgs a) noexcept {
    UpperClean upper;
    try {
        CollStats &cs = stats(a.kind);
        /* a verdict the full path reached before for this signature (src/runtime/verdict.h); it
         * is always a pass-through, so it may be looked up before the signature's own rules */
        const bool memo = runtime_active() && !ReentryGuard::active() && !stats_enabled() && !COMPMPI_FAULT_RECORDS_CALLS();
        int reason = -1;
        if (memo && verdict_lookup_call(a, &reason))
            return passthrough(a); /* not counted: with statistics off nothing reads the counters */
        VerdictKey vk;
        const bool store = memo && verdict_key(a, &vk);
        const uint64_t gen = store ? verdict_generation() : 0;
        CommState *st = nullptr;
        reason = eligibility_begin(a, &st);
        if (reason < 0) {
            std::lock_guard<std::mutex> lk(st->mu);
            reason = eligibility_entry(a, a.kind, *st);
            if (reason < 0) {
                ReentryGuard guard;
                verdict_take_final();
                const int rc = dispatch_float_view(a, *st);
                const int final_reason = verdict_take_final();
                if (store && final_reason >= 0) verdict_store(vk, final_reason, gen);
                return rc;
            }
            if (store) verdict_store(vk, reason, gen);
        }
        cs.passthrough++;
        cs.reason[reason]++;
        return passthrough(a);
    } catch (const std::exception &e) {
        log_error("internal error in %s: %s", coll_name(a.kind), e.what());
    } catch (...) {
        log_error("internal error in %s", coll_name(a.kind));
    }
    return abort_collective(a.comm, MPI_ERR_INTERN, coll_name(a.kind)); /* peers may be mid-collective */
}

/* The eligible call as MPI_FLOAT over dense buffers (packing derived-type layouts that are
 * not one dense run; src/runtime/eligibility.h), compressed, then unpacked. */
int dispatch_float_view(const CollArgs &a, CommState &st) {
    FloatView v;
    bool device = false;
    int rc = float_view_begin(a, st.rank, st.size, &v, &device);
    if (device) device_abort(a, "a derived datatype that is not one dense run of floats needs packing on the host");
    if (rc == MPI_SUCCESS) rc = device_run_placed(v.args, st);
    else { /* the peers are already inside the collective: do not leave them waiting */
        log_error("%s: packing the datatype failed (MPI error %d); aborting", coll_name(a.kind), rc);
        log_flush_pause();
        mpi_next::Abort(a.comm, 1);
    }
    int rc2 = float_view_end(a, v);
    return rc != MPI_SUCCESS ? rc : rc2 != MPI_SUCCESS ? raise_error(a.comm, rc2) : MPI_SUCCESS;
}

}  // namespace compmpi

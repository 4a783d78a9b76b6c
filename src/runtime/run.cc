// SPDX-License-Identifier: BSD-3-Clause
#include "runtime/run.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <vector>

#include "base/fault.h"
#include "base/log.h"
#include "base/mpi_family.h"
#include "base/stats.h"
#include "runtime/bound.h"
#include "runtime/costmodel.h"
#include "runtime/device.h"
#include "runtime/ef.h"
#include "runtime/eligibility.h"
#include "runtime/exact.h"
#include "runtime/policy.h"
#include "runtime/progress.h"
#include "runtime/runtime.h"
#include "runtime/verdict.h"
#include "simd.h"
#include "base/mpi_next.h"

namespace compmpi {
namespace {

/* The compressed algorithm on a given backend (run_on's plan; shadow_out below). */
int run_plan(const CollArgs &a, CommState &st, const Backend &be, void *be_ctx, const CudaModule *m, const void *key,
             CollWorkspace *ws, Plan &plan, void *shadow_out = nullptr);

/* CallClock: std::chrono::steady_clock; under SimGrid SMPI the simulated clock (src/base/mpi_family.h) */
double seconds_since(CallClock::time_point t0) {
    return std::chrono::duration<double>(CallClock::now() - t0).count();
}

/* The shadow output of an explored compressed call (run_plan's shadow_out): host memory
 * the state keeps while the class explores, or device memory for the device backend. */
struct ShadowOut {
    void *out = nullptr;
    const CudaModule *dev = nullptr;
    ShadowOut() = default;
    ShadowOut(const ShadowOut &) = delete;
    ShadowOut &operator=(const ShadowOut &) = delete;
    ~ShadowOut() {
        if (dev) dev->mem_free(out, kMemDevice);
    }
    bool get(CommState &st, const Backend &be, const CudaModule *m, size_t n, Elem e) {
        const size_t bytes = std::max<size_t>(n, 1) * elem_bytes(e);
        if (m && &be != &backend_cpu()) {
            out = m->mem_alloc(bytes, kMemDevice);
            if (out) dev = m;
        } else {
            out = st.ws_shadow.get(bytes);
        }
        return out != nullptr;
    }
};

}  // namespace

namespace {
/* entropy=auto: may the stage run on this call's plan? Collectives whose exchanges carry actual
 * lengths (allreduce, bcast, allgather, reduce-scatter), a codec the stage applies to, host
 * buffers. From the agreed settings, the plan and the call's kind: alike on every rank. */
bool entropy_auto_applies(const CollArgs &a, const CommState &st, const Plan &plan, const Backend &be) {
    if (st.settings.entropy != enum_value(SettingId::entropy, "auto") || &be != &backend_cpu()) return false;
    if (!entropy_applies(*plan.codec)) return false;
    if (plan.codec->id == CodecId::none) return false;
    return a.kind == Coll::allreduce || a.kind == Coll::bcast || a.kind == Coll::allgather ||
           coll_is_reduce_scatter(a.kind);
}
}  // namespace

/* Plan the call, let the cost model choose between the plan and the exact collective, run
 * it. Every input of the choice is shared by all ranks (the plan from agreed settings and
 * shared state, the model's agreed times), so all ranks take the same path. */
int run_on(const CollArgs &a, CommState &st, const Backend &be, void *be_ctx, const CudaModule *m, const void *key,
           CollWorkspace *ws) {
    CollStats &cs = stats(a.kind);
    const size_t n = static_cast<size_t>(coll_elements(a));
    Plan plan;
    if (policy_plan(st, a.kind, n, a.root, &plan, a.elem) != Status::ok) {
        /* settings were validated when set; reaching here is a bug, but stay exact */
        log_error("no valid plan for %s of %zu %s values; passing through", coll_name(a.kind), n, elem_name(a.elem));
        cs.fallback_error++;
        return device_run_exact(a, st, m);
    }
    if (!cost_gated(st.settings)) return run_plan(a, st, be, be_ctx, m, key, ws, plan);

    const size_t bytes = n * elem_bytes(a.elem);
    const int codec = cost_codec_key(plan.codec->id, a.elem), bits = plan.params.bits;
    double predicted = 0;
    bool final = false;
    const CostDecision d = cost_decide(st, a.kind, bytes, codec, bits, st.settings.cost_margin, &predicted, &final);
    cost_trace() = CostTrace{true, d, final};
    /* entropy=auto, a class decided compressed: the stage is a second decision of the model,
     * compressed with it (its "compressed" side) against compressed without it (its "exact"
     * side), by the same paired rule. Both sides give the same bits (the stage is lossless),
     * so its explored calls are the application's own compressed calls: no shadow output. */
    if (d == CostDecision::compress && entropy_auto_applies(a, st, plan, be)) {
        const int skey = codec | kCostStageKey;
        double spred = 0;
        bool sfinal = false;
        const CostDecision ds = cost_decide(st, a.kind, bytes, skey, bits, st.settings.cost_margin, &spred, &sfinal);
        plan.entropy = ds == CostDecision::compress || ds == CostDecision::explore_comp ? 1 : 0;
        if (cost_explores(ds)) {
            const int rcb = mpi_next::Barrier(a.comm);
            if (rcb != MPI_SUCCESS) return raise_error(a.comm, rcb);
            const auto ts = CallClock::now();
            int rc = run_plan(a, st, be, be_ctx, m, key, ws, plan);
            const int rc2 =
                cost_record(st, a.comm, a.kind, bytes, skey, bits, ds, seconds_since(ts), plan.nested_exploring);
            if (rc == MPI_SUCCESS && rc2 != MPI_SUCCESS) return raise_error(a.comm, rc2);
            return rc;
        }
    }
    /* a decided call is timed only for the statistics (predicted against measured): on the
     * exact path of a 4 KiB call the two clock reads are a measurable part of the cost */
    const bool timed = cost_explores(d) || stats_enabled();
    /* an explored call starts together on every rank: its sample is then the collective's
     * own time, not also the time the first rank to arrive waited for the last (in a
     * training job one late rank -- an evaluation pass, a garbage collection -- used to make
     * one compressed sample look slow, and the min/max rule then kept a class exact for
     * good: 82.5% of a demo run's gradient bytes). Collective, as cost_record after it. */
    if (cost_explores(d)) {
        const int rcb = mpi_next::Barrier(a.comm);
        if (rcb != MPI_SUCCESS) return raise_error(a.comm, rcb);
    }
    /* a result changes only in calls the model has decided to compress: an explored
     * compressed call writes a shadow output, then the exact collective gives the result */
    ShadowOut shadow;
    if (d == CostDecision::explore_comp) {
        if (!shadow.get(st, be, m, coll_result_elements(a, st.rank, st.size), a.elem)) {
            /* every rank is here for the same call: do not leave the others in the algorithm */
            log_error("%s of %zu values: no memory for the cost model's measurement; aborting rather than "
                      "hanging (set COMPMPI_COST_MODEL=off or lower the buffer size)", coll_name(a.kind), n);
            log_flush_pause();
            mpi_next::Abort(a.comm, 1);
            return MPI_ERR_NO_MEM;
        }
    } else if (st.ws_shadow.capacity()) {
        st.ws_shadow.release(); /* this call is decided: the class's exploring is over */
    }
    static const int kReason = eligibility_reason("cost_model"), kQueued = eligibility_reason("cost_model_queued"),
                     kExplore = eligibility_reason("cost_explore");
    const auto t0 = timed ? CallClock::now() : CallClock::time_point{};
    int rc;
    if (d == CostDecision::explore_plain && !m && nb_on_progress_thread()) {
        /* a non-blocking or persistent class decided exact runs MPI's non-blocking collective
         * (issued directly), whose algorithm is not the blocking one's (MPICH's 1 MiB
         * allgather on 2 ranks of shared memory: 0.095 ms non-blocking, ~0.15 ms blocking):
         * time that, or compression beats a baseline the decided calls never run */
        MPI_Request r;
        rc = passthrough_nb(a, &r);
        if (rc == MPI_SUCCESS) rc = mpi_next::Wait(&r, MPI_STATUS_IGNORE);
    } else if (cost_runs_plain(d)) {
        rc = device_run_exact(a, st, m);
        if (d == CostDecision::plain && final) verdict_mark_final(kReason); /* will not change */
    } else {
        rc = run_plan(a, st, be, be_ctx, m, key, ws, plan, shadow.out);
    }
    if (!cost_explores(d)) {
        if (timed) cost_stats_add(a.kind, bytes, d, predicted, seconds_since(t0));
        if (d == CostDecision::plain) cs.passthrough++, cs.reason[nb_on_progress_thread() ? kQueued : kReason]++;
        return rc;
    }
    const double dt = seconds_since(t0) + (d == CostDecision::explore_comp ? cost_handoff_s() : 0.0);
    /* the application's result, from MPI (not part of the compressed sample) */
    if (d == CostDecision::explore_comp && rc == MPI_SUCCESS) rc = device_run_exact(a, st, m);
    cs.passthrough++, cs.reason[kExplore]++;
    /* every rank reaches here for the same call (the decision is shared): agree on the time */
    int rc2 = cost_record(st, a.comm, a.kind, bytes, codec, bits, d, dt, plan.nested_exploring);
    if (rc == MPI_SUCCESS && rc2 != MPI_SUCCESS) return raise_error(a.comm, rc2);
    return rc;
}

namespace {

/* shadow_out (the cost model exploring, docs/design.md): the compressed algorithm reads the
 * caller's input but writes its result to shadow_out (result_elements values of backend
 * memory; a bcast root reads its own buffer as always), and leaves nothing behind -- no
 * error-feedback residual, no awp observation, no statistics of a compressed call; the
 * caller then runs the exact collective, whose result is the one the application gets. */
template <class T>
int run_plan_t(const CollArgs &a, CommState &st, const Backend &be, void *be_ctx, const CudaModule *m, const void *key,
               CollWorkspace *ws, Plan &plan, T *shadow_out) {
    const bool shadow = shadow_out != nullptr;
    CollStats shadow_stats;
    CollStats &cs = shadow ? shadow_stats : stats(a.kind);
    const size_t n = static_cast<size_t>(coll_elements(a));
    T *const user = static_cast<T *>(a.recvbuf);
    T *out = shadow && !(a.kind == Coll::bcast && st.rank == a.root) ? shadow_out : user;
    /* MPI_IN_PLACE: the input is in the caller's receive buffer (`user`), whatever `out` is */
    const bool in_place = a.sendbuf == MPI_IN_PLACE;
    const size_t result_n = coll_result_elements(a, st.rank, st.size);
    auto exact = [&]() { return device_run_exact(a, st, m); };
    if (error_bound_on(st.settings.error_bound)) { /* src/runtime/bound.h */
        const T *mine = in_place ? user : static_cast<const T *>(a.sendbuf);
        size_t n_in = n;
        if (a.kind == Coll::allgather && in_place) mine = user + n * static_cast<size_t>(st.rank);
        if (a.kind == Coll::bcast) mine = user, n_in = st.rank == a.root ? n : 0;
        if (coll_is_reduce_scatter(a.kind)) {
            n_in = 0;
            for (int j = 0; j < st.size; ++j) n_in += static_cast<size_t>(coll_block_count(a, j));
        }
        bool pass = false;
        const int rc = bound_apply(a, st, plan, mine, n_in, &pass);
        if (rc != MPI_SUCCESS) return raise_error(a.comm, rc);
        if (pass) {
            ++st.coll.calls;
            cs.passthrough++;
            return shadow ? MPI_SUCCESS : exact();
        }
    }
    plan.params.simd = simd_active();
    plan.params.threads = kernel_threads();
    plan.params.stream_out = !m && result_n * sizeof(T) >= stream_store_min_bytes();
    CollCtx c{a.comm, &st.coll, &st.settings, ws, st.rank, st.size, plan.codec, plan.params, &cs, &be, be_ctx};
    /* device data that MPI cannot read; or, test-only, host data (COMPMPI_FAULT=stage_mpi) */
    c.stage_mpi = (&be != &backend_cpu() && !mpi_cuda_aware()) || (COMPMPI_FAULT_ON() && fault_stage_mpi());
    /* the entropy stage: the exchanges follow the agreed setting; only host ranks code blobs */
    if (plan.entropy > 0 || (plan.entropy < 0 && st.settings.entropy == enum_value(SettingId::entropy, "zstd"))) {
        c.entropy.method = kEntropyZstd;
        c.entropy.level = static_cast<int>(st.settings.entropy_level);
        c.entropy_encode = &be == &backend_cpu();
    }
    if (COMPMPI_FAULT_ON()) fault_call_begin(coll_name(a.kind)); /* test-only (src/base/fault.h) */

    /* error feedback (src/runtime/ef.h); never while exploring: that result is discarded */
    std::optional<EfCall> ef;
    if (!shadow) ef.emplace(a, st, plan, m, be_ctx, key, c);

    Status s;
    double root_norm = 0;
    switch (a.kind) {
        case Coll::allreduce: {
            const T *in = in_place ? user : static_cast<const T *>(a.sendbuf);
            /* payloads of data-dependent size (sparse codecs, zfp's fixed accuracy): the
             * allgather of variable-size blobs */
            const bool sparse = codec_variable_payload(*plan.codec, plan.params);
            HierComms h;
            if (coll_hierarchy(st.coll, st.settings, a.comm, st.rank, &h)) { /* every rank of comm decides alike */
                /* hierarchical or flat (hierarchy=auto: timed, the same on every rank) */
                bool hier = false;
                s = coll_allreduce_nodes(c, in_place && !shadow ? MPI_IN_PLACE : in, in, out, n, h, sparse, &hier);
                if (hier && h.node_rank != 0 && ef) ef->drop(c); /* only leaders carry residuals */
            } else {
                s = sparse ? coll_allreduce_sparse(c, in, out, n) : coll_allreduce_dense(c, in, out, n, h.nodes);
            }
            break;
        }
        case Coll::allgather: {
            const T *in = in_place ? user + n * static_cast<size_t>(st.rank) : static_cast<const T *>(a.sendbuf);
            s = coll_allgather_encoded(c, in, out, n);
            break;
        }
        case Coll::bcast: s = coll_bcast_encoded(c, out, n, a.root, plan.awp ? &root_norm : nullptr); break;
        case Coll::reduce_scatter_block:
        case Coll::reduce_scatter: {
            /* awp observes the norm of the whole reduced vector (agreed in the collective):
             * each rank holds a different block, but the decision must be the same */
            const T *in = in_place ? user : static_cast<const T *>(a.sendbuf);
            std::vector<size_t> counts(static_cast<size_t>(st.size));
            for (int j = 0; j < st.size; ++j) counts[j] = static_cast<size_t>(coll_block_count(a, j));
            s = coll_reduce_scatter(c, in, out, counts.data(), plan.awp ? &root_norm : nullptr);
            /* the exchange does not fit this MPI's counts: decided alike on every rank before
             * anything was sent, so every rank runs the exact call */
            if (s == Status::unsupported) {
                ++st.coll.calls;
                cs.passthrough++;
                return shadow ? MPI_SUCCESS : exact();
            }
            break;
        }
        default: s = Status::unsupported;
    }
    ++st.coll.calls;
    plan.nested_exploring = c.exploring;
    if (shadow) stats(a.kind).explore_bytes_wire += shadow_stats.bytes_wire;
    /* exploring: the result is discarded whatever it was; failures that stop the job stop it.
     * The sample still pays what a compressed call pays after its exchange: awp's norm of the
     * result (below; 0.6 ms of a 1.5 ms 4 MiB allgather on 2 ranks of shared memory, which
     * without it sampled at 0.5 ms and beat the exact 0.8 ms), observed by no one. */
    /* whose norm awp observes (docs/design.md): bcast and reduce-scatter, the root's fp32 input
     * carried in the frame; allreduce/allgather, the result, bit-identical on every rank */
    auto awp_norm = [&] {
        return a.kind == Coll::bcast || coll_is_reduce_scatter(a.kind) ? root_norm : be_l2norm(c, out, result_n);
    };
    if (shadow && (s == Status::ok || s == Status::nonfinite || s == Status::corrupt)) {
        if (s == Status::ok && plan.awp) [[maybe_unused]] volatile double norm = awp_norm();
        return MPI_SUCCESS;
    }

    switch (s) {
        case Status::ok:
            if (ef) ef->commit();
            if (c.fallback_reason & BLOB_NONFINITE) cs.fallback_nonfinite++;
            else if (c.fallback_reason) cs.fallback_error++;
            cs.compressed++;
            cs.bytes_in += n * sizeof(T);
            if (plan.awp) policy_observe(st, plan, awp_norm());
            if (c.restore_n)
                be_copy(c, static_cast<T *>(c.restore_dst), static_cast<const T *>(c.restore_src), c.restore_n);
            return MPI_SUCCESS;
        case Status::nonfinite:
            cs.fallback_nonfinite++;
            return exact();
        case Status::corrupt:
            cs.fallback_error++;
            return exact();
        case Status::mpi_error:
            /* A PMPI call failed on this rank inside the algorithm: the communicator's error
             * handler sees it (the default one aborts). If the handler returns, the peers may
             * still wait in the algorithm's next exchange and nothing can tell them: abort
             * cleanly rather than leave the job hanging (docs/design.md, "Memory caps and
             * failures"). */
            raise_error(a.comm, c.mpi_err);
            log_error("%s of %zu values: MPI error %d inside the compressed algorithm; the other ranks cannot "
                      "learn of it, aborting the job rather than hanging", coll_name(a.kind), n, c.mpi_err);
            log_flush_pause();
            mpi_next::Abort(a.comm, c.mpi_err);
            return c.mpi_err;
        default:
            /* Failed locally before any exchange (e.g. out of memory): the peers are already
             * inside the compressed algorithm, so continuing alone would hang the job. */
            log_error("%s of %zu values: %s before the exchange; aborting rather than hanging the job "
                      "(lower the buffer size or set COMPMPI_CODEC=none)", coll_name(a.kind), n, status_str(s));
            log_flush_pause();
            mpi_next::Abort(a.comm, 1);
            return MPI_ERR_INTERN;
    }
}


int run_plan(const CollArgs &a, CommState &st, const Backend &be, void *be_ctx, const CudaModule *m, const void *key,
             CollWorkspace *ws, Plan &plan, void *shadow_out) {
    plan.params.elem = a.elem;
    if (a.elem == Elem::f64)
        return run_plan_t(a, st, be, be_ctx, m, key, ws, plan, static_cast<double *>(shadow_out));
    return run_plan_t(a, st, be, be_ctx, m, key, ws, plan, static_cast<float *>(shadow_out));
}

}  // namespace
}  // namespace compmpi

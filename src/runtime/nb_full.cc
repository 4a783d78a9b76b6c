// SPDX-License-Identifier: BSD-3-Clause
/* MPI_Iallreduce & co. beyond the direct path (src/runtime/progress.h, dispatch_nb_full):
 * eligibility, the channel, the cost model's direct classes, the hand-off. */
#include <mpi.h>

#include <exception>
#include <memory>
#include <mutex>

#include "base/fault.h"
#include "base/log.h"
#include "base/stats.h"
#include "runtime/channel.h"
#include "runtime/costmodel.h"
#include "runtime/eligibility.h"
#include "runtime/exact.h"
#include "runtime/progress.h"
#include "runtime/runtime.h"
#include "runtime/state.h"

namespace compmpi {

bool channel_take_direct(NbChannel *ch, const NbClass &cls, bool on_direct, uint64_t *from) {
    if (on_direct && ch->agreeing.load(std::memory_order_relaxed)) return false;
    const auto d = ch->direct_from.find(cls);
    if (d == ch->direct_from.end() || ch->issued.load(std::memory_order_relaxed) < d->second) return false;
    if (from) *from = d->second;
    ch->issued.fetch_add(1, std::memory_order_relaxed);
    return true;
}

int channel_issue_direct(NbChannel *ch, const CollArgs &a, Coll entry, MPI_Request *request) {
    int rc;
    {
        ReentryGuard guard;
        rc = passthrough_nb(a, ch->direct, request);
    }
    if (stats_enabled()) { /* read only to print them: two atomic adds saved per call otherwise */
        static const int kReason = eligibility_reason("cost_model");
        stats(entry).passthrough++;
        stats(entry).reason[kReason]++;
    }
    return rc;
}

static_assert(static_cast<int>(Coll::iallreduce) == coll_kind::iallreduce &&
                  static_cast<int>(Coll::iallgather) == coll_kind::iallgather &&
                  static_cast<int>(Coll::ibcast) == coll_kind::ibcast,
              "a Coll's value is its bit in the collectives setting");
static_assert(static_cast<int>(Coll::allreduce_init) == coll_kind::allreduce_init &&
                  static_cast<int>(Coll::allgather_init) == coll_kind::allgather_init &&
                  static_cast<int>(Coll::bcast_init) == coll_kind::bcast_init,
              "a Coll's value is its bit in the collectives setting");
static_assert(static_cast<int>(Coll::ireduce_scatter_block) == coll_kind::ireduce_scatter_block &&
                  static_cast<int>(Coll::ireduce_scatter) == coll_kind::ireduce_scatter &&
                  static_cast<int>(Coll::reduce_scatter_block_init) == coll_kind::reduce_scatter_block_init &&
                  static_cast<int>(Coll::reduce_scatter_init) == coll_kind::reduce_scatter_init,
              "a Coll's value is its bit in the collectives setting");

int dispatch_nb_full(const CollArgs &args, Coll entry, MPI_Request *request) noexcept {
    try {
        CollArgs a = args; /* the full path may rewrite it (eligibility_begin) */
        const bool memo = runtime_active() && !ReentryGuard::active() && !stats_enabled() && !COMPMPI_FAULT_RECORDS_CALLS();
        VerdictKey vk;
        const bool store = memo && nb_memo_key(a, entry, &vk);
        const uint64_t gen = store ? verdict_generation() : 0;
        CollStats &cs = stats(entry);
        CommState *st = nullptr;
        int reason = eligibility_begin(a, &st);
        NbChannel *ch = nullptr;
        std::shared_ptr<NbOp> op;
        if (reason < 0) {
            std::lock_guard<std::mutex> lk(st->mu);
            reason = eligibility_entry(a, entry, *st);
            if (reason < 0) {
                op = std::make_shared<NbOp>();
                op->a = a;
                op->counts.take(op->a, st->size);
                op->entry = entry;
                op->settings = st->settings;
                op->gated = cost_gated(st->settings);
                op->cls = NbClass{static_cast<int>(entry),
                                  cost_size_class(static_cast<size_t>(coll_elements(a)) * elem_bytes(a.elem)),
                                  st->settings_epoch, 0};
            }
        }
        if (op) {
            ReentryGuard guard;
            ch = channel_get(a.comm);
            if (!ch) {
                log_error("%s: could not set up the progress channel; passing through", coll_name(entry));
                reason = eligibility_reason("no_state");
            }
        }
        if (!ch) {
            cs.passthrough++;
            cs.reason[reason]++;
            return passthrough_nb(a, request);
        }
        if (op->gated) {
            std::unique_lock<std::mutex> lk(ch->mu);
            uint64_t from = 0;
            if (channel_take_direct(ch, op->cls, true, &from)) {
                /* decided exact and agreed: MPI's own non-blocking collective, no hand-off */
                if (store) nb_memo_store(vk, gen, ch, op->cls, from);
                const int rc = channel_issue_direct(ch, op->a, entry, request);
                lk.unlock();
                return rc == MPI_SUCCESS ? rc : raise_error(a.comm, rc);
            }
        }
        return channel_hand_off(ch, op, a.comm, request);
    } catch (const std::exception &e) {
        log_error("internal error in %s: %s", coll_name(entry), e.what());
    } catch (...) {
        log_error("internal error in %s", coll_name(entry));
    }
    return abort_collective(args.comm, MPI_ERR_INTERN, coll_name(entry)); /* the peers' operations wait for ours */
}

}  // namespace compmpi

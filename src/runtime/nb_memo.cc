// SPDX-License-Identifier: BSD-3-Clause
/* The direct path's memo of non-blocking calls (src/runtime/channel.h). */
#include <memory>

#include "runtime/channel.h"
#include "runtime/verdict.h"

namespace compmpi {

/* ---- The direct path's memo (the cheap path of a non-blocking call decided exact).
 * In a loop of the same call, the full path (dispatch_nb, src/runtime/progress.cc: communicator state and eligibility under
 * its lock, the cost model's lookup, a new NbOp, the channel's attribute) reaches the same
 * verdict every time once the call's class goes direct: "eligible, class cls of channel ch,
 * direct from index `from`". That verdict is a function of the call's signature and of state
 * that bumps the memo generation of src/runtime/verdict.h whenever it changes (settings and
 * their epoch, the blocking calls' cost table, awp widths, the communicator's state freed --
 * and with it its channel -- MPI_Finalize); `from` never changes once agreed. So a hit of the
 * current generation returns what the full path would, and only the channel's issue index
 * (taken without its lock: channel_take_memo) and MPI's call remain. Like the blocking memo:
 * predefined float types, host buffers, statistics and call-recording faults off; per
 * thread, no lock. */
namespace nb_memo_detail {
constinit thread_local NbMemoEntry *t_nbmemo __attribute__((tls_model("initial-exec"))) = nullptr;
}  // namespace nb_memo_detail

namespace {
/* the table itself is freed with its thread through the holder, which forgets it first */
struct Holder {
    std::unique_ptr<NbMemoEntry[]> table;
    ~Holder() { nb_memo_detail::t_nbmemo = nullptr; }
};
thread_local Holder t_holder;
}  // namespace

/* The key of a non-blocking call that may be memoised (src/runtime/verdict.h's rules, the
 * entry point in place of the collective). */
bool nb_memo_key(const CollArgs &a, Coll entry, VerdictKey *k) {
    if (!verdict_key(a, k)) return false;
    k->kind = static_cast<int>(entry);
    return true;
}

void nb_memo_store(const VerdictKey &k, uint64_t gen, NbChannel *ch, const NbClass &cls, uint64_t from) {
    using nb_memo_detail::t_nbmemo;
    if (!t_nbmemo) {
        t_holder.table.reset(new NbMemoEntry[nb_memo_detail::kEntries]);
        t_nbmemo = t_holder.table.get();
    }
    NbMemoEntry &e = t_nbmemo[verdict_detail::slot(k.comm, k.kind, k.count, k.root)];
    e.key = k;
    e.gen = gen;
    e.ch = ch;
    e.cls = cls;
    e.from = from;
}

}  // namespace compmpi

/* The direct path's memo of non-blocking calls (src/runtime/channel.h). */
#include <memory>

#include "runtime/channel.h"
#include "runtime/cuda_loader.h"
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
 * current generation returns what the full path would, and only the channel's lock, its
 * issue index and MPI's call remain. Like the blocking memo: predefined float types, host
 * buffers, statistics and fault injection off; per thread, no lock. */
namespace {
constexpr int kNbMemo = 16;
thread_local std::unique_ptr<NbMemoEntry[]> t_nbmemo;
}  // namespace

/* The key of a non-blocking call that may be memoised (src/runtime/verdict.h's rules, the
 * entry point in place of the collective). */
bool nb_memo_key(const CollArgs &a, Coll entry, VerdictKey *k) {
    if (!verdict_key(a, k)) return false;
    k->kind = static_cast<int>(entry);
    return true;
}

NbMemoEntry *nb_memo_find(const CollArgs &a, Coll entry) {
    NbMemoEntry *m = t_nbmemo.get();
    if (!m || a.kind == Coll::reduce_scatter) return nullptr;
    const int kind = static_cast<int>(entry), root = a.kind == Coll::bcast ? a.root : -1;
    NbMemoEntry &e = m[verdict_detail::slot(a.comm, kind, a.count, root)];
    const VerdictKey &k = e.key;
    if (e.gen != verdict_generation() || k.comm != a.comm || k.kind != kind || k.count != a.count ||
        k.root != root || k.datatype != a.datatype || k.op != a.op || k.inplace != (a.sendbuf == MPI_IN_PLACE) ||
        k.recvcount != a.recvcount || k.recvtype != (a.kind == Coll::allgather ? a.recvtype : MPI_DATATYPE_NULL))
        return nullptr;
    if (cuda_device_ptrs_possible() &&
        (cuda_is_device_ptr(a.recvbuf) ||
         (a.kind != Coll::bcast && a.sendbuf != MPI_IN_PLACE && cuda_is_device_ptr(a.sendbuf))))
        return nullptr;
    return &e;
}

void nb_memo_store(const VerdictKey &k, uint64_t gen, NbChannel *ch, const NbClass &cls, uint64_t from) {
    if (!t_nbmemo) t_nbmemo.reset(new NbMemoEntry[kNbMemo]);
    NbMemoEntry &e = t_nbmemo[verdict_detail::slot(k.comm, k.kind, k.count, k.root)];
    e.key = k;
    e.gen = gen;
    e.ch = ch;
    e.cls = cls;
    e.from = from;
}

}  // namespace compmpi

// SPDX-License-Identifier: BSD-3-Clause
#include "base/stats.h"

#include <cstdio>
#include <mutex>
#include <string>


namespace compmpi {

namespace {
CollStats g_stats[static_cast<int>(Coll::count_)];
/* read on every call: initial-exec, no __tls_get_addr (libcompmpi is loaded at start-up,
 * preloaded or linked) */
thread_local int t_entry __attribute__((tls_model("initial-exec"))) = -1;
bool g_enabled = false; /* set at MPI_Init before the library becomes active (release/acquire) */
}

bool stats_enabled() { return g_enabled; }
void stats_enable(bool on) { g_enabled = on; }

const char *coll_name(Coll c) {
    switch (c) {
        case Coll::allreduce: return "allreduce";
        case Coll::allgather: return "allgather";
        case Coll::bcast: return "bcast";
        case Coll::iallreduce: return "iallreduce";
        case Coll::iallgather: return "iallgather";
        case Coll::ibcast: return "ibcast";
        case Coll::allreduce_init: return "allreduce_init";
        case Coll::allgather_init: return "allgather_init";
        case Coll::bcast_init: return "bcast_init";
        case Coll::reduce_scatter_block: return "reduce_scatter_block";
        case Coll::reduce_scatter: return "reduce_scatter";
        case Coll::ireduce_scatter_block: return "ireduce_scatter_block";
        case Coll::ireduce_scatter: return "ireduce_scatter";
        case Coll::reduce_scatter_block_init: return "reduce_scatter_block_init";
        case Coll::reduce_scatter_init: return "reduce_scatter_init";
        default: return "?";
    }
}

CollStats &stats(Coll c) { return g_stats[t_entry >= 0 ? t_entry : static_cast<int>(c)]; }
CollStats &stats_counters(Coll c) { return g_stats[static_cast<int>(c)]; }

void stats_set_entry(Coll e) { t_entry = e == Coll::count_ ? -1 : static_cast<int>(e); }
int stats_entry_raw() { return t_entry; }
void stats_entry_raw_set(int e) { t_entry = e; }

namespace {
std::mutex g_notes_mu;
std::vector<std::string> g_notes;
}  // namespace

void stats_note(const std::string &line) {
    std::lock_guard<std::mutex> lk(g_notes_mu);
    g_notes.push_back(line);
}

std::vector<std::string> stats_notes() {
    std::lock_guard<std::mutex> lk(g_notes_mu);
    return g_notes;
}

}  // namespace compmpi

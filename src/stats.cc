#include "stats.h"

#include <mutex>
#include <vector>

#include <cstdio>
#include <string>

#include "costmodel.h"
#include "eligibility.h"

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

void stats_set_entry(Coll e) { t_entry = e == Coll::count_ ? -1 : static_cast<int>(e); }

void stats_reset() {
    for (CollStats &s : g_stats) {
        s.compressed = s.passthrough = s.bytes_in = s.bytes_wire = s.bytes_uncompressed_wire = 0;
        s.ns_encode = s.ns_decode = s.ns_comm = s.fallback_nonfinite = s.fallback_error = s.sparse_twophase = 0;
        s.hierarchical = s.halving = 0;
        s.decode_overlapped = 0;
        for (auto &r : s.reason) r = 0;
    }
    cost_stats_reset();
}

namespace {
std::mutex g_notes_mu;
std::vector<std::string> g_notes;
}  // namespace

void stats_note(const std::string &line) {
    std::lock_guard<std::mutex> lk(g_notes_mu);
    g_notes.push_back(line);
}

void stats_report(MPI_Comm world) {
    constexpr int kFields = 14 + kMaxReasons;
    constexpr int nc = static_cast<int>(Coll::count_);
    uint64_t local[nc][kFields], sum[nc][kFields];
    for (int c = 0; c < nc; ++c) {
        const CollStats &s = g_stats[c];
        uint64_t v[] = {s.compressed, s.passthrough, s.bytes_in, s.bytes_wire, s.bytes_uncompressed_wire,
                        s.ns_encode, s.ns_decode, s.ns_comm, s.fallback_nonfinite, s.fallback_error, s.sparse_twophase, s.decode_overlapped,
                        s.hierarchical, s.halving};
        for (int f = 0; f < 14; ++f) local[c][f] = v[f];
        for (int r = 0; r < kMaxReasons; ++r) local[c][14 + r] = s.reason[r];
    }
    int rank = 0;
    PMPI_Comm_rank(world, &rank);
    if (PMPI_Reduce(local, sum, nc * kFields, MPI_UINT64_T, MPI_SUM, 0, world) != MPI_SUCCESS) return;
    for (int c = 0; c < nc && rank == 0; ++c) {
        const uint64_t *v = sum[c];
        if (c > static_cast<int>(Coll::bcast) && v[0] == 0 && v[1] == 0) continue; /* unused entry point */
        double ratio = v[3] ? static_cast<double>(v[4]) / static_cast<double>(v[3]) : 0.0;
        std::fprintf(stderr,
                     "compmpi-stats: coll=%s compressed=%llu passthrough=%llu bytes_in=%llu bytes_wire=%llu "
                     "bytes_uncompressed_wire=%llu ratio=%.2f t_encode_s=%.3f t_decode_s=%.3f t_comm_s=%.3f "
                     "fallback_nonfinite=%llu fallback_error=%llu hierarchical=%llu halving=%llu sparse_twophase=%llu "
                     "decode_overlapped=%llu\n",
                     coll_name(static_cast<Coll>(c)), (unsigned long long)v[0], (unsigned long long)v[1],
                     (unsigned long long)v[2], (unsigned long long)v[3], (unsigned long long)v[4], ratio,
                     v[5] * 1e-9, v[6] * 1e-9, v[7] * 1e-9, (unsigned long long)v[8], (unsigned long long)v[9],
                     (unsigned long long)v[12], (unsigned long long)v[13], (unsigned long long)v[10], (unsigned long long)v[11]);
        std::string reasons;
        for (int r = 0; r < kMaxReasons; ++r)
            if (v[14 + r]) reasons += std::string(" ") + eligibility_reason_name(r) + "=" + std::to_string(v[14 + r]);
        if (!reasons.empty())
            std::fprintf(stderr, "compmpi-stats-passthrough: coll=%s%s\n", coll_name(static_cast<Coll>(c)), reasons.c_str());
    }
    if (rank == 0) {
        std::lock_guard<std::mutex> lk(g_notes_mu);
        for (const std::string &l : g_notes) std::fprintf(stderr, "%s\n", l.c_str());
    }
    std::fflush(stderr);
    cost_stats_report(world);
}

}  // namespace compmpi

// SPDX-License-Identifier: BSD-3-Clause
#include "runtime/report.h"

#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "base/stats.h"
#include "runtime/costmodel.h"
#include "runtime/eligibility.h"
#include "base/mpi_next.h"

namespace compmpi {

void stats_reset() {
    for (int c = 0; c < static_cast<int>(Coll::count_); ++c) {
        CollStats &s = stats_counters(static_cast<Coll>(c));
        s.compressed = s.passthrough = s.bytes_in = s.bytes_wire = s.bytes_uncompressed_wire = 0;
        s.ns_encode = s.ns_decode = s.ns_comm = s.fallback_nonfinite = s.fallback_error = s.sparse_twophase = 0;
        s.hierarchical = s.halving = 0;
        s.decode_overlapped = 0;
        s.explore_bytes_wire = 0;
        for (auto &r : s.reason) r = 0;
    }
    cost_stats_reset();
}

void stats_report(MPI_Comm world) {
    constexpr int kFields = 15 + kMaxReasons;
    constexpr int nc = static_cast<int>(Coll::count_);
    uint64_t local[nc][kFields], sum[nc][kFields];
    for (int c = 0; c < nc; ++c) {
        const CollStats &s = stats_counters(static_cast<Coll>(c));
        uint64_t v[] = {s.compressed, s.passthrough, s.bytes_in, s.bytes_wire, s.bytes_uncompressed_wire,
                        s.ns_encode, s.ns_decode, s.ns_comm, s.fallback_nonfinite, s.fallback_error, s.sparse_twophase, s.decode_overlapped,
                        s.explore_bytes_wire, s.hierarchical, s.halving};
        for (int f = 0; f < 15; ++f) local[c][f] = v[f];
        for (int r = 0; r < kMaxReasons; ++r) local[c][15 + r] = s.reason[r];
    }
    int rank = 0;
    mpi_next::Comm_rank(world, &rank);
    if (mpi_next::Reduce(local, sum, nc * kFields, MPI_UINT64_T, MPI_SUM, 0, world) != MPI_SUCCESS) return;
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
                     (unsigned long long)v[13], (unsigned long long)v[14], (unsigned long long)v[10], (unsigned long long)v[11]);
        std::string reasons;
        for (int r = 0; r < kMaxReasons; ++r)
            if (v[15 + r]) reasons += std::string(" ") + eligibility_reason_name(r) + "=" + std::to_string(v[15 + r]);
        if (!reasons.empty())
            std::fprintf(stderr, "compmpi-stats-passthrough: coll=%s%s\n", coll_name(static_cast<Coll>(c)), reasons.c_str());
        if (v[12])
            std::fprintf(stderr, "compmpi-stats-explore: coll=%s bytes_wire=%llu\n", coll_name(static_cast<Coll>(c)),
                         (unsigned long long)v[12]);
    }
    if (rank == 0) {
        for (const std::string &l : stats_notes()) std::fprintf(stderr, "%s\n", l.c_str());
    }
    std::fflush(stderr);
    cost_stats_report(world);
}

}  // namespace compmpi

// SPDX-License-Identifier: BSD-3-Clause
/* The statistics at MPI_Finalize (COMPMPI_STATS=1): the counters of src/base/stats.h summed
 * over ranks and printed by rank 0, one compmpi-stats line per collective, its pass-through
 * reasons by name (src/runtime/eligibility.h), the cost model's lines (src/runtime/costmodel.h)
 * and the notes the runtime left. */
#pragma once
#include <mpi.h>

#include <string>

namespace compmpi {

void stats_reset();
/* Collective over MPI_COMM_WORLD: sum over ranks, print on rank 0 to stderr. */
void stats_report(MPI_Comm world);

}  // namespace compmpi

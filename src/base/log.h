// SPDX-License-Identifier: BSD-3-Clause
/* Diagnostics. The first function that sees an error logs it, with what was wrong and what
 * to do; callers above it only propagate the Status. */
#pragma once
#include <cstdarg>

namespace compmpi {

[[gnu::format(printf, 1, 2)]] void log_error(const char *fmt, ...);
[[gnu::format(printf, 1, 2)]] void log_warn(const char *fmt, ...);
[[gnu::format(printf, 1, 2)]] void log_info(const char *fmt, ...);
/* An error every one of nranks ranks hit alike, printed once (by one rank, no rank prefix). */
[[gnu::format(printf, 2, 3)]] void log_error_all(int nranks, const char *fmt, ...);

/* Before this rank ends the job (MPI_Abort): flush stderr and pause briefly (200 ms), so the
 * launcher forwards the line naming the cause before it tears the other ranks down (without
 * the pause hydra lost it in about 1 run of 10 at 3 ranks on 2 cores). */
void log_flush_pause();

/* The rank in MPI_COMM_WORLD, or -1 before MPI_Init; used to prefix messages. */
void log_set_rank(int rank);

}  // namespace compmpi

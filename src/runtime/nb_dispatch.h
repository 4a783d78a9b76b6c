// SPDX-License-Identifier: BSD-3-Clause
/* MPI_Iallreduce & co.: the direct path inline in each entry point (docs/design.md, "The
 * direct path takes no lock"). A call whose signature the memo holds (a class decided exact
 * and agreed direct: src/runtime/channel.h) takes its issue index without a lock and goes to
 * MPI's own PMPI_I* on the channel's private duplicate `direct`; inlined into the entry
 * point, whose arguments are constants to the compiler where it has them (the collective,
 * MPI_OP_NULL for a bcast, no large counts), the key comparison folds into compares with
 * constants and no call is left but MPI's (and the CUDA driver check). Everything else:
 * dispatch_nb_full (src/runtime/progress.cc). Included by the entry points only
 * (src/boundary/interpose.cc). */
#pragma once
#include <mpi.h>

#include "runtime/args.h"
#include "runtime/channel.h"
#include "runtime/exact.h"
#include "runtime/progress.h"
#include "runtime/runtime.h"

namespace compmpi {

/* `args`: the call's arguments (args.kind is the blocking collective); `entry`: the
 * non-blocking kind, for statistics and settings. */
[[gnu::always_inline]] inline int dispatch_nb(const CollArgs &args, Coll entry, MPI_Request *request) noexcept {
    if (args.large_count && nb_above_int_max(args, entry)) return passthrough_nb(args, request);
    if (!ReentryGuard::active())
        if (NbMemoEntry *e = nb_memo_find(args, entry); e && channel_take_memo(e->ch, e->from)) {
            int rc; /* not counted: memo entries exist only with statistics off */
            {
                ReentryGuard guard;
                rc = passthrough_nb(args, e->ch->direct, request);
            }
            return rc == MPI_SUCCESS ? rc : raise_error(args.comm, rc);
        }
    return dispatch_nb_full(args, entry, request);
}

}  // namespace compmpi

/* The exact path: MPI's own collective with the caller's arguments, blocking or
 * non-blocking. Every fallback of libcompmpi ends here. */
#pragma once
#include <mpi.h>

#include "runtime/eligibility.h"

namespace compmpi {

/* The blocking PMPI collective of a.kind (the MPI-4 _c form where a.large_count). */
int passthrough(const CollArgs &a);
/* The non-blocking PMPI_I* collective of a.kind on a.comm (the _c form where a.large_count). */
int passthrough_nb(const CollArgs &a, MPI_Request *req);

}  // namespace compmpi

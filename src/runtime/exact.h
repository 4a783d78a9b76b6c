/* The exact path: MPI's own collective with the caller's arguments, blocking or
 * non-blocking. Every fallback of libcompmpi ends here. */
#pragma once
#include <mpi.h>

#include "runtime/eligibility.h"

namespace compmpi {

/* The blocking PMPI collective of a.kind (the MPI-4 _c form where a.large_count). */
int passthrough(const CollArgs &a);
/* The non-blocking PMPI_I* collective of a.kind on comm (the _c form where a.large_count); the
 * two-argument form on a.comm. */
int passthrough_nb(const CollArgs &a, MPI_Comm comm, MPI_Request *req);
inline int passthrough_nb(const CollArgs &a, MPI_Request *req) { return passthrough_nb(a, a.comm, req); }

}  // namespace compmpi

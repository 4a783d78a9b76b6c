// SPDX-License-Identifier: BSD-3-Clause
/* Hints (MPI_Info keys compmpi_*) on the MPI calls that create communicators or set their
 * info: validated before MPI sees the call, agreed across the communicator's ranks (a hint
 * refused on any rank is refused on all), applied to the communicator's settings. MPICH drops
 * keys it does not know, so ours are captured here and handed back by MPI_Comm_get_info. */
#pragma once
#include <mpi.h>

namespace compmpi {

int hints_comm_set_info(MPI_Comm comm, MPI_Info info);
int hints_comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm);
int hints_comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm *newcomm);
#if MPI_VERSION >= 4
int hints_comm_idup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm, MPI_Request *request);
int hints_comm_create_from_group(MPI_Group group, const char *stringtag, MPI_Info info, MPI_Errhandler errhandler,
                                 MPI_Comm *newcomm);
#endif
int hints_comm_get_info(MPI_Comm comm, MPI_Info *info_used);

}  // namespace compmpi

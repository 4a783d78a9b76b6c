// SPDX-License-Identifier: BSD-3-Clause
/* MPI_T control variables: every libcompmpi setting as a cvar named compmpi_<setting>, after
 * MPI's own (issue 33; README, "MPI_T control variables"). The boundary's MPI_T_cvar_* and
 * MPI_T_category_get_cvars call these; whatever is not ours goes to the PMPI_T_* call.
 *
 * Indices: ours follow the cvars MPI had the first time any of these asked it (base). MPI may
 * add cvars later (Open MPI registers more at MPI_Init); those come after ours, so every index
 * keeps its meaning for the life of the process, as MPI_T requires:
 *   [0, base) MPI's  |  [base, base + kNumSettings) ours  |  then MPI's index - kNumSettings
 * Values: INT settings as MPI_INT (or MPI_UNSIGNED_LONG_LONG where the range needs it), BOOL
 * as MPI_INT 0/1, SIZE as MPI_UNSIGNED_LONG_LONG (bytes), FLOAT as MPI_DOUBLE, ENUM, LIST
 * and CODEC as MPI_CHAR strings. A write goes through the environment's parser and rules
 * (state_process_set, src/runtime/state.h); they work before MPI_Init too (after
 * MPI_T_init_thread). Each returns an MPI or MPI_T error code. */
#pragma once
#include <mpi.h>

namespace compmpi {

int mpit_cvar_get_num(int *num_cvar);
int mpit_cvar_get_info(int cvar_index, char *name, int *name_len, int *verbosity, MPI_Datatype *datatype,
                       MPI_T_enum *enumtype, char *desc, int *desc_len, int *bind, int *scope);
int mpit_cvar_get_index(const char *name, int *cvar_index);
int mpit_cvar_handle_alloc(int cvar_index, void *obj_handle, MPI_T_cvar_handle *handle, int *count);
int mpit_cvar_handle_free(MPI_T_cvar_handle *handle);
int mpit_cvar_read(MPI_T_cvar_handle handle, void *buf);
int mpit_cvar_write(MPI_T_cvar_handle handle, const void *buf);
/* MPI's indices of a category's cvars, renumbered as above. */
int mpit_category_get_cvars(int cat_index, int len, int indices[]);

}  // namespace compmpi

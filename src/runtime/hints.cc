// SPDX-License-Identifier: BSD-3-Clause
#include "runtime/hints.h"

#include <atomic>
#include <string>

#include "base/log.h"
#include "runtime/runtime.h"
#include "runtime/state.h"
#include "base/mpi_next.h"

namespace compmpi {

int hints_comm_set_info(MPI_Comm comm, MPI_Info info) {
    if (!runtime_active()) return mpi_next::Comm_set_info(comm, info);
    ReentryGuard guard;
    int rc = state_apply_hints(comm, info, false, "MPI_Comm_set_info");
    if (rc != MPI_SUCCESS) return raise_error(comm, rc);
    rc = mpi_next::Comm_set_info(comm, info);
    if (rc != MPI_SUCCESS) return rc;
    if (CommState *st = state_get(comm)) state_agree(comm, st, "MPI_Comm_set_info");
    return MPI_SUCCESS;
}

int hints_comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm) {
    if (!runtime_active()) return mpi_next::Comm_dup_with_info(comm, info, newcomm);
    ReentryGuard guard;
    /* validate first, so a bad hint fails the call before a communicator exists */
    {
        SettingLayer probe;
        std::string err;
        Status s = state_parse_info(info, &probe, &err);
        if (state_agree_error(comm, "MPI_Comm_dup_with_info", s, err) != Status::ok)
            return raise_error(comm, MPI_ERR_INFO_VALUE);
    }
    int rc = mpi_next::Comm_dup_with_info(comm, info, newcomm);
    if (rc != MPI_SUCCESS) return rc;
    /* MPI-4: the new communicator's hints are those of info, not the parent's */
    rc = state_apply_hints(*newcomm, info, true, "MPI_Comm_dup_with_info");
    if (rc != MPI_SUCCESS) {
        mpi_next::Comm_free(newcomm);
        return raise_error(comm, rc);
    }
    if (CommState *st = state_get(*newcomm)) state_agree(*newcomm, st, "MPI_Comm_dup_with_info");
    return MPI_SUCCESS;
}

namespace {
/* Calls whose info argument cannot carry our hints (not agreed collectively on the new
 * communicator there): say so wherever compmpi_* keys are in it, instead of dropping them
 * in silence. Each process says it once per call name. */
void warn_hints_not_applied(MPI_Info info, const char *what, const char *instead, std::atomic<bool> *said) {
    if (info == MPI_INFO_NULL || said->load(std::memory_order_relaxed)) return;
    SettingLayer layer;
    std::string err;
    if (state_parse_info(info, &layer, &err) == Status::ok && layer.set.none()) return; /* none of ours */
    if (said->exchange(true)) return;
    log_warn("%s: compmpi_* hints in its info are not applied by libcompmpi; %s. Set them with "
             "MPI_Comm_set_info or MPI_Comm_dup_with_info on the new communicator.", what, instead);
}
}  // namespace

/* MPI_Comm_split_type's info holds hints for creating the communicator (MPICH), not for
 * its later collectives: ours there are warned about, not applied (the new communicator
 * starts from the environment's settings, as after MPI_Comm_split). */
int hints_comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm *newcomm) {
    static std::atomic<bool> said{false};
    if (runtime_active() && !ReentryGuard::active())
        warn_hints_not_applied(info, "MPI_Comm_split_type", "the new communicator starts from the environment's settings",
                               &said);
    return mpi_next::Comm_split_type(comm, split_type, key, info, newcomm);
}

#if MPI_VERSION >= 4
/* Non-blocking: agreeing on hints would need a collective the caller did not ask to wait
 * for; the new communicator keeps its parent's settings (the attribute is copied). */
int hints_comm_idup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm, MPI_Request *request) {
    static std::atomic<bool> said{false};
    if (runtime_active() && !ReentryGuard::active())
        warn_hints_not_applied(info, "MPI_Comm_idup_with_info", "the new communicator keeps its parent's settings",
                               &said);
    return mpi_next::Comm_idup_with_info(comm, info, newcomm, request);
}

/* A communicator from a group (MPI-4 sessions): its info's hints are applied as for
 * MPI_Comm_dup_with_info, agreed on the new communicator; a refused hint raises the error on
 * it (the error handler given here) and, if that returns, frees it. */
int hints_comm_create_from_group(MPI_Group group, const char *stringtag, MPI_Info info, MPI_Errhandler errhandler,
                                 MPI_Comm *newcomm) {
    int rc = mpi_next::Comm_create_from_group(group, stringtag, info, errhandler, newcomm);
    if (rc != MPI_SUCCESS || !runtime_active() || ReentryGuard::active() || *newcomm == MPI_COMM_NULL) return rc;
    ReentryGuard guard;
    rc = state_apply_hints(*newcomm, info, true, "MPI_Comm_create_from_group");
    if (rc != MPI_SUCCESS) {
        raise_error(*newcomm, rc);
        mpi_next::Comm_free(newcomm);
        return rc;
    }
    if (CommState *st = state_get(*newcomm)) state_agree(*newcomm, st, "MPI_Comm_create_from_group");
    return MPI_SUCCESS;
}
#endif

/* MPI_Comm_get_info: MPI's own hints, plus ours in effect (state_effective_hints): MPICH
 * drops keys it does not know, so compmpi_* keys would otherwise never come back. MPI-3.0
 * calls only (PMPI_Info_set), so this builds against MPI-3.1 libraries too. */
int hints_comm_get_info(MPI_Comm comm, MPI_Info *info_used) {
    int rc = mpi_next::Comm_get_info(comm, info_used);
    if (rc != MPI_SUCCESS || !runtime_active() || ReentryGuard::active()) return rc;
    ReentryGuard guard;
    CommState *st = state_get(comm);
    if (!st) return rc;
    for (const auto &[key, value] : state_effective_hints(st)) {
        rc = mpi_next::Info_set(*info_used, key.c_str(), value.c_str());
        if (rc != MPI_SUCCESS) {
            mpi_next::Info_free(info_used);
            return raise_error(comm, rc);
        }
    }
    return MPI_SUCCESS;
}

}  // namespace compmpi

// SPDX-License-Identifier: BSD-3-Clause
/* The public C API of include/compmpi.h. */
#include "compmpi.h"

#include <cstring>
#include <string>

#include "base/log.h"
#include "runtime/settings_rules.h"
#include "runtime/runtime.h"
#include "runtime/state.h"
#include "base/stats.h"
#include "runtime/verdict.h"

#define COMPMPI_EXPORT extern "C" __attribute__((visibility("default")))

using namespace compmpi;

namespace {
#define STR2(x) #x
#define STR(x) STR2(x)
constexpr const char kVersion[] = STR(COMPMPI_VERSION_MAJOR) "." STR(COMPMPI_VERSION_MINOR) "." STR(COMPMPI_VERSION_PATCH);

CommState *comm_state(MPI_Comm comm, const char *fn) {
    if (!runtime_active()) {
        log_error("%s: call it between MPI_Init and MPI_Finalize", fn);
        return nullptr;
    }
    if (comm == MPI_COMM_NULL) {
        log_error("%s: MPI_COMM_NULL is not a communicator", fn);
        return nullptr;
    }
    CommState *st = state_get(comm);
    if (!st) log_error("%s: invalid communicator", fn);
    return st;
}
}  // namespace

COMPMPI_EXPORT const char *compmpi_version(void) { return kVersion; }

COMPMPI_EXPORT int compmpi_comm_set(MPI_Comm comm, const char *key, const char *value) {
    ReentryGuard guard;
    CommState *st = comm_state(comm, "compmpi_comm_set");
    if (!st) return MPI_ERR_COMM;
    /* collective: every rank learns whether any rank refused, so none goes on alone and a
     * message shared by all ranks is printed once */
    SettingId id;
    std::string err;
    Status s = Status::ok;
    int code = MPI_ERR_INFO_VALUE;
    SettingLayer env, attr, hints;
    {
        std::lock_guard<std::mutex> lk(st->mu);
        env = st->env_layer;
        attr = st->attr_layer;
        hints = st->hint_layer;
    }
    if (!key || !setting_lookup(key, &id)) {
        err = std::string("unknown setting '") + (key ? key : "(null)") + "' (docs/configuration.md lists them)";
        s = Status::invalid_arg;
        code = MPI_ERR_INFO_KEY;
    } else {
        const int i = static_cast<int>(id);
        if (value) {
            s = setting_parse(id, value, &attr.values, &err);
            attr.set[i] = true;
        } else {
            attr.set[i] = false;
        }
        Settings probe;
        if (s == Status::ok) s = state_resolve_layers(env, attr, hints, &probe, nullptr, &err);
    }
    const Status local = s;
    s = state_agree_error(comm, "compmpi_comm_set", s, err);
    if (s != Status::ok) return local != Status::ok ? code : s == Status::mpi_error ? MPI_ERR_OTHER : MPI_ERR_INFO_VALUE;
    {
        std::lock_guard<std::mutex> lk(st->mu);
        if (state_resolve(st, attr, hints, &err) != Status::ok) return MPI_ERR_INTERN; /* resolved above */
    }
    if (st->rank == 0 && value) {
        SettingLayer mine;
        mine.set[static_cast<int>(id)] = true;
        mine.values = attr.values;
        state_warn_inapplicable(env, mine, SettingSource::api, attr, hints, "compmpi_comm_set");
    }
    return state_agree(comm, st, "compmpi_comm_set") == Status::mpi_error ? MPI_ERR_OTHER : MPI_SUCCESS;
}

COMPMPI_EXPORT int compmpi_comm_get(MPI_Comm comm, const char *key, char *value, int len) {
    CommState *st = comm_state(comm, "compmpi_comm_get");
    if (!st) return MPI_ERR_COMM;
    SettingId id;
    if (!key || !setting_lookup(key, &id)) {
        log_error("compmpi_comm_get: unknown setting '%s'", key ? key : "(null)");
        return MPI_ERR_INFO_KEY;
    }
    std::string v;
    {
        std::lock_guard<std::mutex> lk(st->mu);
        v = setting_format(id, st->settings);
    }
    if (!value || len < 1 || static_cast<size_t>(len) <= v.size()) return MPI_ERR_TRUNCATE;
    std::memcpy(value, v.c_str(), v.size() + 1);
    return MPI_SUCCESS;
}

COMPMPI_EXPORT int compmpi_comm_reset_state(MPI_Comm comm) {
    ReentryGuard guard;
    CommState *st = comm_state(comm, "compmpi_comm_reset_state");
    if (!st) return MPI_ERR_COMM;
    std::lock_guard<std::mutex> lk(st->mu);
    st->awp.clear();
    st->ef.clear();
    st->ef_floats = 0;
    verdict_invalidate(); /* awp widths restart: the cost model's keys may change */
    return MPI_SUCCESS;
}

COMPMPI_EXPORT int compmpi_comm_query_awp(MPI_Comm comm, const char *collective, MPI_Count count, int root,
                                          int *bits, long long *calls) {
    CommState *st = comm_state(comm, "compmpi_comm_query_awp");
    if (!st) return MPI_ERR_COMM;
    Coll kind;
    if (collective && std::strcmp(collective, "allreduce") == 0) kind = Coll::allreduce;
    else if (collective && std::strcmp(collective, "allgather") == 0) kind = Coll::allgather;
    else if (collective && std::strcmp(collective, "bcast") == 0) kind = Coll::bcast;
    else {
        log_error("compmpi_comm_query_awp: collective '%s' is not one of allreduce, allgather, bcast",
                  collective ? collective : "(null)");
        return MPI_ERR_ARG;
    }
    std::lock_guard<std::mutex> lk(st->mu);
    auto it = st->awp.find(
        AwpKey{static_cast<int>(kind), kind == Coll::bcast ? root : -1, static_cast<uint64_t>(count)});
    if (bits) *bits = it == st->awp.end() ? 0 : it->second.bits;
    if (calls) *calls = it == st->awp.end() ? 0 : static_cast<long long>(it->second.calls);
    return MPI_SUCCESS;
}

COMPMPI_EXPORT int compmpi_comm_query_buffer(MPI_Comm comm, const void *, MPI_Count count, int *bits,
                                             long long *calls) {
    return compmpi_comm_query_awp(comm, "allreduce", count, -1, bits, calls);
}

COMPMPI_EXPORT int compmpi_comm_print_config(MPI_Comm comm) {
    CommState *st = comm_state(comm, "compmpi_comm_print_config");
    if (!st) return MPI_ERR_COMM;
    std::lock_guard<std::mutex> lk(st->mu);
    if (st->rank != 0) return MPI_SUCCESS;
    Settings s;
    Resolution why;
    if (state_resolve_layers(st->env_layer, st->attr_layer, st->hint_layer, &s, &why, nullptr) != Status::ok)
        return MPI_ERR_INTERN; /* the layers were resolved when set */
    settings_print(stderr, s, why, "communicator");
    return MPI_SUCCESS;
}

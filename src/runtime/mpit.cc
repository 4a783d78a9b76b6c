// SPDX-License-Identifier: BSD-3-Clause
#include "runtime/mpit.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <unordered_set>

#include "base/log.h"
#include "base/settings.h"
#include "runtime/state.h"
#include "base/mpi_next.h"

namespace compmpi {

namespace {

/* How a setting's value travels through MPI_T_cvar_read/write. */
enum class Repr { int_, ull, dbl, str };

struct CvarType {
    Repr repr;
    int count; /* elements: 1, or the bytes a string needs with its terminator */
};

CvarType cvar_type(SettingId id) {
    const SettingDesc &d = kSettings[static_cast<int>(id)];
    switch (d.type) {
        case SettingType::BOOL: return {Repr::int_, 1};
        case SettingType::FLOAT: return {Repr::dbl, 1};
        case SettingType::SIZE: return {Repr::ull, 1};
        case SettingType::INT: { /* allowed "lo..hi"; every INT range of the table starts at 0 or above */
            const char *dots = std::strstr(d.allowed, "..");
            const double lo = std::strtod(d.allowed, nullptr), hi = dots ? std::strtod(dots + 2, nullptr) : 0;
            return {dots && lo >= INT_MIN && hi <= INT_MAX ? Repr::int_ : Repr::ull, 1};
        }
        case SettingType::PATH: return {Repr::str, 4096};
        default: break; /* ENUM, LIST, CODEC: text no longer than the list of what is allowed */
    }
    return {Repr::str, static_cast<int>(std::max<size_t>(setting_allowed(id).size(), 8)) + 1};
}

MPI_Datatype datatype_of(Repr r) {
    switch (r) {
        case Repr::int_: return MPI_INT;
        case Repr::ull: return MPI_UNSIGNED_LONG_LONG;
        case Repr::dbl: return MPI_DOUBLE;
        case Repr::str: break;
    }
    return MPI_CHAR;
}

/* The first count of MPI's cvars: where ours start (see mpit.h). Also the check that MPI_T is
 * initialised: every call on our cvars makes it, so they fail as MPI's would. */
std::atomic<int> g_base{-1};

int ready(int *base) {
    int n = 0;
    const int rc = mpi_next::T_cvar_get_num(&n);
    if (rc != MPI_SUCCESS) return rc;
    int expected = -1;
    g_base.compare_exchange_strong(expected, n);
    *base = g_base.load();
    return MPI_SUCCESS;
}

int to_ours(int mpi_index, int base) { return mpi_index < base ? mpi_index : mpi_index + kNumSettings; }

/* Where index v lies: *setting >= 0 for ours, else MPI's index in *mpi_index. */
int locate(int v, int *setting, int *mpi_index) {
    int base;
    const int rc = ready(&base);
    if (rc != MPI_SUCCESS) return rc;
    *setting = v >= base && v - base < kNumSettings ? v - base : -1;
    *mpi_index = v < base ? v : v - kNumSettings;
    return MPI_SUCCESS;
}

/* Our handles: a small struct each, known by address, so any other handle is MPI's. */
struct CvarHandle {
    SettingId id;
};
std::mutex g_handles_mu;
std::unordered_set<const void *> g_handles;

CvarHandle *ours(MPI_T_cvar_handle h) {
    std::lock_guard<std::mutex> lk(g_handles_mu);
    return g_handles.count(h) ? reinterpret_cast<CvarHandle *>(h) : nullptr;
}

/* MPI_T's string convention (as MPICH): *len in, the characters room; out, those written
 * with the terminator, or the length needed when there is no room at all. */
void copy_out(char *dst, int *len, const std::string &src) {
    if (!len) return;
    if (!dst || *len <= 0) {
        *len = static_cast<int>(src.size()) + 1;
        return;
    }
    const size_t n = std::min(src.size(), static_cast<size_t>(*len) - 1);
    std::memcpy(dst, src.data(), n);
    dst[n] = 0;
    *len = static_cast<int>(n) + 1;
}

std::string cvar_name(int setting) { return std::string("compmpi_") + kSettings[setting].name; }

int read_ours(const CvarHandle &h, void *buf) {
    Settings s;
    std::string err;
    if (state_process_settings(&s, &err) != Status::ok) {
        log_error("MPI_T_cvar_read(%s): %s", cvar_name(static_cast<int>(h.id)).c_str(), err.c_str());
        return MPI_T_ERR_INVALID;
    }
    const std::string text = setting_format(h.id, s); /* read back as the environment writes it */
    const CvarType t = cvar_type(h.id);
    switch (t.repr) {
        case Repr::int_: *static_cast<int *>(buf) = static_cast<int>(std::strtoll(text.c_str(), nullptr, 10)); break;
        case Repr::ull: *static_cast<unsigned long long *>(buf) = std::strtoull(text.c_str(), nullptr, 10); break;
        case Repr::dbl: *static_cast<double *>(buf) = std::strtod(text.c_str(), nullptr); break;
        case Repr::str: {
            int len = t.count;
            copy_out(static_cast<char *>(buf), &len, text);
            break;
        }
    }
    return MPI_SUCCESS;
}

int write_ours(const CvarHandle &h, const void *buf) {
    const CvarType t = cvar_type(h.id);
    std::string text;
    switch (t.repr) {
        case Repr::int_: text = std::to_string(*static_cast<const int *>(buf)); break;
        case Repr::ull: text = std::to_string(*static_cast<const unsigned long long *>(buf)); break;
        case Repr::dbl: {
            char b[64];
            std::snprintf(b, sizeof b, "%.17g", *static_cast<const double *>(buf));
            text = b;
            break;
        }
        case Repr::str: {
            const char *c = static_cast<const char *>(buf);
            text.assign(c, strnlen(c, static_cast<size_t>(t.count)));
            break;
        }
    }
    std::string err;
    const Status st = state_process_set(h.id, text, &err);
    if (st == Status::unsupported) return MPI_T_ERR_CVAR_SET_NEVER; /* GLOBAL, after MPI_Init: the code says it */
    if (st != Status::ok) {
        log_error("MPI_T_cvar_write(%s): %s", cvar_name(static_cast<int>(h.id)).c_str(), err.c_str());
        return MPI_T_ERR_INVALID;
    }
    return MPI_SUCCESS;
}

}  // namespace

int mpit_cvar_get_num(int *num_cvar) {
    int n = 0, base;
    int rc = mpi_next::T_cvar_get_num(&n);
    if (rc == MPI_SUCCESS) rc = ready(&base);
    if (rc == MPI_SUCCESS) *num_cvar = n + kNumSettings;
    return rc;
}

int mpit_cvar_get_info(int cvar_index, char *name, int *name_len, int *verbosity, MPI_Datatype *datatype,
                       MPI_T_enum *enumtype, char *desc, int *desc_len, int *bind, int *scope) {
    int setting, mpi_index;
    const int rc = locate(cvar_index, &setting, &mpi_index);
    if (rc != MPI_SUCCESS) return rc;
    if (setting < 0)
        return mpi_next::T_cvar_get_info(mpi_index, name, name_len, verbosity, datatype, enumtype, desc, desc_len, bind,
                                    scope);
    try {
        const SettingDesc &d = kSettings[setting];
        copy_out(name, name_len, cvar_name(setting));
        copy_out(desc, desc_len, d.doc);
    } catch (const std::bad_alloc &) {
        return MPI_T_ERR_MEMORY;
    }
    if (verbosity) *verbosity = MPI_T_VERBOSITY_USER_BASIC;
    if (datatype) *datatype = datatype_of(cvar_type(static_cast<SettingId>(setting)).repr);
    if (enumtype) *enumtype = MPI_T_ENUM_NULL;
    if (bind) *bind = MPI_T_BIND_NO_OBJECT;
    /* the same on every rank: COMM defaults are compared over each communicator's ranks, and
     * GLOBAL ones are read at MPI_Init (writable before it, MPI_T_ERR_CVAR_SET_NEVER after) */
    if (scope) *scope = MPI_T_SCOPE_ALL_EQ;
    return MPI_SUCCESS;
}

int mpit_cvar_get_index(const char *name, int *cvar_index) {
    int base, rc;
    if (name && std::strncmp(name, "compmpi_", 8) == 0)
        for (int i = 0; i < kNumSettings; ++i)
            if (std::strcmp(name + 8, kSettings[i].name) == 0) {
                if ((rc = ready(&base)) == MPI_SUCCESS) *cvar_index = base + i;
                return rc;
            }
    int j;
    rc = mpi_next::T_cvar_get_index(name, &j);
    if (rc == MPI_SUCCESS) rc = ready(&base);
    if (rc == MPI_SUCCESS) *cvar_index = to_ours(j, base);
    return rc;
}

int mpit_cvar_handle_alloc(int cvar_index, void *obj_handle, MPI_T_cvar_handle *handle, int *count) {
    int setting, mpi_index;
    const int rc = locate(cvar_index, &setting, &mpi_index);
    if (rc != MPI_SUCCESS) return rc;
    if (setting < 0) return mpi_next::T_cvar_handle_alloc(mpi_index, obj_handle, handle, count);
    if (!handle || !count) return MPI_T_ERR_INVALID;
    try {
        CvarHandle *h = new CvarHandle{static_cast<SettingId>(setting)};
        {
            std::lock_guard<std::mutex> lk(g_handles_mu);
            g_handles.insert(h);
        }
        *handle = reinterpret_cast<MPI_T_cvar_handle>(h);
        *count = cvar_type(h->id).count;
    } catch (const std::bad_alloc &) {
        return MPI_T_ERR_MEMORY;
    }
    return MPI_SUCCESS;
}

int mpit_cvar_handle_free(MPI_T_cvar_handle *handle) {
    CvarHandle *h = handle ? ours(*handle) : nullptr;
    if (!h) return mpi_next::T_cvar_handle_free(handle);
    int base;
    const int rc = ready(&base);
    if (rc != MPI_SUCCESS) return rc;
    {
        std::lock_guard<std::mutex> lk(g_handles_mu);
        g_handles.erase(h);
    }
    delete h;
    *handle = MPI_T_CVAR_HANDLE_NULL;
    return MPI_SUCCESS;
}

int mpit_cvar_read(MPI_T_cvar_handle handle, void *buf) {
    CvarHandle *h = ours(handle);
    if (!h) return mpi_next::T_cvar_read(handle, buf);
    int base;
    const int rc = ready(&base);
    if (rc != MPI_SUCCESS) return rc;
    if (!buf) return MPI_T_ERR_INVALID;
    try {
        return read_ours(*h, buf);
    } catch (const std::bad_alloc &) {
        return MPI_T_ERR_MEMORY;
    }
}

int mpit_cvar_write(MPI_T_cvar_handle handle, const void *buf) {
    CvarHandle *h = ours(handle);
    if (!h) return mpi_next::T_cvar_write(handle, buf);
    int base;
    const int rc = ready(&base);
    if (rc != MPI_SUCCESS) return rc;
    if (!buf) return MPI_T_ERR_INVALID;
    try {
        return write_ours(*h, buf);
    } catch (const std::bad_alloc &) {
        return MPI_T_ERR_MEMORY;
    }
}

int mpit_category_get_cvars(int cat_index, int len, int indices[]) {
    int rc = mpi_next::T_category_get_cvars(cat_index, len, indices);
    if (rc != MPI_SUCCESS || len <= 0 || !indices) return rc;
    int n = 0, base, np = 0, nc = 0, name_len = 1, desc_len = 1;
    char name[1], desc[1];
    /* how many MPI wrote: the category's count (the entries past it are the caller's); every
     * argument given (Open MPI 4.1 does not take NULL for all of them) */
    rc = mpi_next::T_category_get_info(cat_index, name, &name_len, desc, &desc_len, &n, &np, &nc);
    if (rc == MPI_SUCCESS) rc = ready(&base);
    if (rc != MPI_SUCCESS) return rc;
    for (int i = 0; i < std::min(n, len); ++i) indices[i] = to_ours(indices[i], base);
    return MPI_SUCCESS;
}

}  // namespace compmpi

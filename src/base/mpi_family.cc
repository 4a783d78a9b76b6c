// SPDX-License-Identifier: BSD-3-Clause
/* MPI-family specifics (see mpi_family.h). The only file of libcompmpi that asks which MPI
 * it is compiled against. */
#include "base/mpi_family.h"

#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "base/log.h"
#include "base/mpi_next.h"
#include "base/settings.h"

#if defined(OPEN_MPI) && OPEN_MPI
#define COMPMPI_FAMILY_OPENMPI 1
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h> /* MPIX_CUDA_AWARE_SUPPORT, MPIX_Query_cuda_support */
#endif
#elif defined(MPICH_VERSION)
#define COMPMPI_FAMILY_MPICH 1
#elif defined(SMPI_SHARED_MALLOC) && defined(COMPMPI_SMPI)
#define COMPMPI_FAMILY_SMPI 1 /* SimGrid's simulated MPI (configure --with-mpi=smpi) */
#include <simgrid/version.h>
#else
#error "libcompmpi builds for MPICH (mpi.h defines MPICH_VERSION), Open MPI (mpi.h defines OPEN_MPI) or SimGrid SMPI (--with-mpi=smpi)"
#endif

namespace compmpi {

MpiFamily mpi_family_built() {
#ifdef COMPMPI_FAMILY_OPENMPI
    return MpiFamily::openmpi;
#elif defined(COMPMPI_FAMILY_SMPI)
    return MpiFamily::smpi;
#else
    return MpiFamily::mpich;
#endif
}

const char *mpi_family_name(MpiFamily f) {
    switch (f) {
        case MpiFamily::mpich: return "MPICH";
        case MpiFamily::openmpi: return "Open MPI";
        case MpiFamily::smpi: return "SimGrid SMPI";
        default: return "unknown";
    }
}

const char *mpi_family_id(MpiFamily f) {
    switch (f) {
        case MpiFamily::mpich: return "mpich";
        case MpiFamily::openmpi: return "openmpi";
        case MpiFamily::smpi: return "smpi";
        default: return "unknown";
    }
}

const char *mpi_family_libcompmpi(MpiFamily f) {
    return f == MpiFamily::openmpi ? "libcompmpi_openmpi.so" : f == MpiFamily::smpi ? "libcompmpi_smpi.so" : "libcompmpi.so";
}

std::string mpi_family_describe() {
    char buf[256];
#ifdef COMPMPI_FAMILY_OPENMPI
    std::snprintf(buf, sizeof buf, "Open MPI %d.%d.%d (MPI %d.%d)", OMPI_MAJOR_VERSION, OMPI_MINOR_VERSION,
                  OMPI_RELEASE_VERSION, MPI_VERSION, MPI_SUBVERSION);
#elif defined(COMPMPI_FAMILY_SMPI)
    std::snprintf(buf, sizeof buf, "SimGrid SMPI %d.%d (MPI %d.%d, simulated)", SIMGRID_VERSION_MAJOR,
                  SIMGRID_VERSION_MINOR, MPI_VERSION, MPI_SUBVERSION);
#else
    std::snprintf(buf, sizeof buf, "MPICH %s (MPI %d.%d)", MPICH_VERSION, MPI_VERSION, MPI_SUBVERSION);
#endif
    std::string s = buf;
#ifdef HAVE_MPI_LARGE_COUNT
    s += ", large-count (_c) collectives: yes";
#else
    s += ", large-count (_c) collectives: no (MPI_Allreduce_c etc. not exported)";
#endif
    s += std::string(", 16-bit floats: ") + mpi_float16_describe();
    return s;
}

bool mpi_is_float16(MPI_Datatype t) {
#ifdef MPIX_C_FLOAT16
    return t != MPI_DATATYPE_NULL && t == MPIX_C_FLOAT16;
#else
    (void)t;
    return false;
#endif
}

const char *mpi_float16_describe() {
#ifdef MPIX_C_FLOAT16
    return "MPIX_C_FLOAT16 (moved, not reducible with MPI_SUM by MPICH 4.0.2: passed through)";
#else
    return "none in mpi.h / mpi-ext.h";
#endif
}

bool mpi_persistent_faithful(int coll) {
    if (coll == coll_kind::allreduce || coll == coll_kind::bcast) return mpi_family_built() == MpiFamily::mpich;
    if (coll != coll_kind::allgather || mpi_family_built() != MpiFamily::mpich) return false;
    /* MPICH's recursive-doubling allgather keeps its state between starts before 4.1 */
    static const bool ok = [] {
        char v[MPI_MAX_LIBRARY_VERSION_STRING] = {};
        int len = 0, major = 0, minor = 0;
        if (mpi_next::Get_library_version(v, &len) != MPI_SUCCESS) return false;
        if (std::sscanf(v, "MPICH Version: %d.%d", &major, &minor) != 2) return false;
        return major > 4 || (major == 4 && minor >= 1);
    }();
    return ok;
}

/* ---------------------------------------------------------------- family check */

namespace {

/* A symbol only the MPI library of one family defines (data, so never wrapped by a PMPI
 * tool): found through dlsym in the handle of every loaded object, the defining object
 * named by dladdr. */
struct Marker {
    const char *symbol;
    MpiFamily family;
};
constexpr Marker kMarkers[] = {
    {"ompi_mpi_comm_world", MpiFamily::openmpi}, /* MPI_COMM_WORLD is &ompi_mpi_comm_world */
    {"MPII_Version_string", MpiFamily::mpich},   /* MPICH 3.3+ (ch3 and ch4), its derivatives */
};

struct LoadedMpi {
    MpiFamily family;
    std::string path;
};

struct LoadedObject {
    std::string name;
    std::string build_id; /* GNU build-id bytes; empty if the object has none */
};

/* The GNU build-id note of a loaded object, read from its mapped PT_NOTE segments. */
std::string build_id_of(const struct dl_phdr_info *info) {
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr) &ph = info->dlpi_phdr[i];
        if (ph.p_type != PT_NOTE) continue;
        const char *p = reinterpret_cast<const char *>(info->dlpi_addr + ph.p_vaddr), *end = p + ph.p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const auto *nh = reinterpret_cast<const ElfW(Nhdr) *>(p);
            const size_t name_len = (nh->n_namesz + 3) & ~size_t{3}, desc_len = (nh->n_descsz + 3) & ~size_t{3};
            const char *name = p + sizeof(ElfW(Nhdr)), *desc = name + name_len;
            if (desc + desc_len > end) break;
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0)
                return std::string(desc, nh->n_descsz);
            p = desc + desc_len;
        }
    }
    return std::string();
}

int collect_objects(struct dl_phdr_info *info, size_t, void *data) {
    auto *objs = static_cast<std::vector<LoadedObject> *>(data);
    if (info->dlpi_name && info->dlpi_name[0]) objs->push_back(LoadedObject{info->dlpi_name, build_id_of(info)});
    return 0;
}

std::vector<LoadedMpi> loaded_mpis() {
    std::vector<LoadedObject> objs;
    dl_iterate_phdr(collect_objects, &objs); /* dlopen only after the iteration (loader lock) */
    std::vector<LoadedMpi> found;
    auto add = [&](MpiFamily fam, const char *path) {
        for (const LoadedMpi &m : found)
            if (m.family == fam && m.path == path) return;
        found.push_back(LoadedMpi{fam, path});
    };
    objs.insert(objs.begin(), LoadedObject{}); /* the program itself (a static MPI) */
    /* Each distinct file is asked once: objects with the same build-id are copies of one file
     * (SMPI loads a copy of the program and of libcompmpi per simulated rank) and define the
     * same symbols, and every library they depend on is in the list itself. Asking every copy
     * cost a dlopen and a dlclose each, both linear in the number of loaded objects, in every
     * copy's check: cubic in the ranks, the largest part of a 1,024-rank simulation's start
     * (docs/scale.md). */
    std::vector<std::string> asked;
    for (const LoadedObject &o : objs) {
        if (!o.build_id.empty()) {
            if (std::find(asked.begin(), asked.end(), o.build_id) != asked.end()) continue;
            asked.push_back(o.build_id);
        }
        const std::string &n = o.name;
        void *h = dlopen(n.empty() ? nullptr : n.c_str(), RTLD_LAZY | RTLD_NOLOAD);
        if (!h) continue;
        for (const Marker &mk : kMarkers) {
            void *sym = dlsym(h, mk.symbol);
            Dl_info di;
            if (sym && dladdr(sym, &di) && di.dli_fname) add(mk.family, di.dli_fname);
        }
        dlclose(h);
    }
    dlerror(); /* leave no error behind for the application's dlerror() */
    return found;
}

std::string self_path() {
    Dl_info di;
    if (dladdr(reinterpret_cast<const void *>(&mpi_family_check), &di) && di.dli_fname) return di.dli_fname;
    return mpi_family_libcompmpi(mpi_family_built());
}

}  // namespace

std::string mpi_family_conflict() {
    const MpiFamily mine = mpi_family_built();
    std::string ours, theirs;
    MpiFamily other = MpiFamily::unknown;
    for (const LoadedMpi &m : loaded_mpis()) {
        if (m.family == mine) {
            if (ours.empty()) ours = m.path;
        } else if (theirs.empty()) {
            theirs = m.path;
            other = m.family;
        }
    }
    if (theirs.empty()) return std::string();
    std::string msg = self_path() + " is built for " + mpi_family_name(mine);
    if (!ours.empty()) msg += " (" + ours + ")";
    msg += ", but " + std::string(mpi_family_name(other)) + " (" + theirs +
           ") is loaded in this process too: the program is built for " + mpi_family_name(other) +
           ", and two MPI libraries cannot share a process. Use the libcompmpi built for " +
           mpi_family_name(other) + ": " + mpi_family_libcompmpi(other) + " (configure --with-mpi=" +
           mpi_family_id(other) + ")";
    return msg;
}

void mpi_family_check(const char *when) {
    const std::string msg = mpi_family_conflict();
    if (msg.empty()) return;
    /* nothing of either MPI can be called safely: no MPI_Abort, no atexit handlers */
    std::fprintf(stderr, "libcompmpi error: %s. Stopping at %s (exit status 1).\n", msg.c_str(), when);
    std::fflush(stderr);
    _exit(1);
}

namespace {
/* A C program linked to the other MPI has both libraries loaded before main(): stop at once. */
__attribute__((constructor)) void family_check_at_load() { mpi_family_check("load"); }
}  // namespace

/* ---------------------------------------------------------------- SimGrid SMPI */

#ifdef COMPMPI_SMPI
bool mpi_attr_foreign(MPI_Comm comm, int owner_rank) {
    int me = -1;
    return mpi_next::Comm_rank(comm, &me) == MPI_SUCCESS && me != owner_rank;
}
#endif

/* ---------------------------------------------------------------- MPI-4 fallbacks */

int mpi_info_get_string(MPI_Info info, const char *key, int *buflen, char *value, int *flag) {
#if MPI_VERSION >= 4
    return mpi_next::Info_get_string(info, key, buflen, value, flag);
#else
    /* MPI-3.1: MPI_Info_get_valuelen (length without NUL), then MPI_Info_get (valuelen
     * characters at most, plus the NUL) */
    int len = 0;
    int rc = mpi_next::Info_get_valuelen(info, key, &len, flag);
    if (rc != MPI_SUCCESS || !*flag) return rc;
    const int room = *buflen;
    *buflen = len + 1;
    if (room <= 0 || !value) return MPI_SUCCESS;
    /* MPI_Info_get writes at most valuelen characters and the NUL: truncated like
     * MPI_Info_get_string when value is shorter than the value */
    return mpi_next::Info_get(info, key, room - 1 < len ? room - 1 : len, value, flag);
#endif
}

/* ---------------------------------------------------------------- CUDA-aware MPI */

namespace {
bool g_cuda_aware = false;
}

void mpi_cuda_aware_init() {
#if defined(COMPMPI_FAMILY_OPENMPI) && defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
    g_cuda_aware = MPIX_Query_cuda_support() == 1;
#elif defined(COMPMPI_FAMILY_MPICH) && defined(MPIX_GPU_SUPPORT_CUDA)
    int yes = 0;
    g_cuda_aware = MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, &yes) == MPI_SUCCESS && yes;
#else
    g_cuda_aware = false;
#endif
}

bool mpi_cuda_aware() { return g_cuda_aware; }

const char *mpi_cuda_aware_compiled() {
#if defined(COMPMPI_FAMILY_OPENMPI)
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
    return "yes at compile time (MPIX_CUDA_AWARE_SUPPORT); MPIX_Query_cuda_support() decides at run time";
#elif defined(MPIX_CUDA_AWARE_SUPPORT)
    return "no (mpi-ext.h: MPIX_CUDA_AWARE_SUPPORT 0)";
#else
    return "no (mpi-ext.h has no CUDA extension)";
#endif
#elif defined(MPIX_GPU_SUPPORT_CUDA)
    return "asked at run time (MPIX_GPU_query_support)";
#else
    return "no (no MPIX_GPU_query_support in mpi.h)";
#endif
}

}  // namespace compmpi

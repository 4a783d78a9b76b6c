// SPDX-License-Identifier: BSD-3-Clause
/* Everything that differs between the MPI families libcompmpi builds for, in one place.
 *
 * libcompmpi is built for ONE MPI family (configure --with-mpi=mpich|openmpi, or the family
 * of MPICC/MPICXX): MPICH 4.0 (MPI-4.0, libmpich.so.12; the library is libcompmpi.so) or
 * Open MPI 4.1 (MPI-3.1, libmpi.so.40; the library is libcompmpi_openmpi.so). The two have
 * different ABIs (MPICH handles are ints, Open MPI handles are pointers), so a build for one
 * cannot run in a program of the other: mpi_family_check() detects that and stops the
 * process with a message instead of letting it crash or hang.
 *
 * What lives here:
 *  - the family this build is for, and its names (family, MPI library, libcompmpi library);
 *  - MPI-3.1 fallbacks for the MPI-4 calls libcompmpi uses where the MPI lacks them
 *    (MPI_Info_get_string). The MPI-4 large-count collectives (_c forms) are guarded by
 *    HAVE_MPI_LARGE_COUNT from configure: without them the _c entry points are not exported
 *    (a program of an MPI without them cannot call them) and counts beyond INT_MAX bytes on
 *    the wire report Status::unsupported (the caller then passes the call through exactly);
 *  - CUDA-awareness of the MPI, asked the way each family offers it;
 *  - the load-time / MPI_Init check that no MPI of another family is in the process. */
#pragma once
#include <mpi.h>

#include <chrono>
#include <ratio>
#include <string>
#include <type_traits>

#include "base/mpi_next.h"

namespace compmpi {

enum class MpiFamily { unknown = 0, mpich = 1, openmpi = 2, smpi = 3 };

/* The family this build is for (from mpi.h: OPEN_MPI / MPICH_VERSION / SimGrid's
 * SMPI_SHARED_MALLOC). */
MpiFamily mpi_family_built();
const char *mpi_family_name(MpiFamily f);     /* "MPICH", "Open MPI", "SimGrid SMPI", "unknown" */
const char *mpi_family_id(MpiFamily f);       /* "mpich", "openmpi", "smpi", "unknown"  */
/* File name of this build's libcompmpi ("libcompmpi.so", "libcompmpi_openmpi.so" or
 * "libcompmpi_smpi.so"). */
const char *mpi_family_libcompmpi(MpiFamily f);

/* ---- SimGrid SMPI (configure --with-mpi=smpi; COMPMPI_SMPI). A simulated MPI: every rank
 * runs in one process (one thread), each with its own copy of libcompmpi
 * (smpirun --cfg=smpi/privatize-libs), and a program's time is SMPI's simulated clock. What
 * SMPI 3.32 does differently, and how libcompmpi copes (docs/scale.md, "Simulated with
 * SimGrid SMPI"); under MPICH and Open MPI none of this changes anything:
 *  - time: MPI_Wtime is the simulated clock, the host's steady clock times the simulator:
 *    the entry points time calls (cost model samples) on CallClock, MPI_Wtime under SMPI;
 *  - derived datatypes: their envelopes are wrong and MPI_Pack_external is missing:
 *    kMpiDerivedTypesKnown is false, such calls pass through;
 *  - MPI_COMM_WORLD's attributes are shared by all simulated ranks: mpi_attr_foreign();
 *  - inputs of some calls lack const in SMPI's mpi.h: mpi_in();
 *  - MPI_Init_thread provides MPI_THREAD_SINGLE only: the non-blocking collectives pass
 *    through (nb_progress needs MPI_THREAD_MULTIPLE), nothing to do here. */
#ifdef COMPMPI_SMPI
inline constexpr bool kMpiSimulated = true;
#else
inline constexpr bool kMpiSimulated = false;
#endif
/* Whether libcompmpi may read derived datatypes' layouts (MPI_Type_get_envelope/contents)
 * and pack them (MPI_Pack_external): under SMPI 3.32 neither can be trusted, so calls on
 * derived datatypes pass through to SMPI unchanged (eligibility reason `datatype`).
 * Measured there: a struct of two floats (or of a float and an int) is reported as
 * MPI_COMBINER_CONTIGUOUS of 8 bytes; a resized float as MPI_COMBINER_INDEXED with a
 * struct's arguments (count 3, three types, addresses an indexed type does not have); a
 * subarray as a contiguous type with its offset moved into a nonzero lower bound, which
 * a layout proof from the envelope would read from the wrong place; and MPI_Pack_external,
 * the fallback for layouts that are not dense, stops the simulation ("Not yet
 * implemented"). */
inline constexpr bool kMpiDerivedTypesKnown = !kMpiSimulated;

/* Whether an attribute found on comm belongs to another rank than the caller, owner_rank
 * being the owner's rank in comm. Only under SMPI, where MPI_COMM_WORLD is one object for
 * all simulated ranks: every rank's attribute of its own keyval sits on it, so
 * MPI_Comm_dup(MPI_COMM_WORLD) on one rank calls every rank's copy callback with every
 * rank's value (and later every delete callback on the duplicate). A copy callback that
 * locked another rank's state would wait, in SMPI's one thread, for a rank that may be
 * suspended inside a collective holding that lock: the simulation hangs. The copy
 * callback declines such attributes (flag 0). Elsewhere always false, at no cost. */
#ifdef COMPMPI_SMPI
bool mpi_attr_foreign(MPI_Comm comm, int owner_rank);
#else
constexpr bool mpi_attr_foreign(MPI_Comm, int) { return false; }
#endif

/* An input argument of an MPI call whose prototype lacks const in SMPI 3.32's mpi.h
 * (MPI_Pack_external, MPI_Unpack_external: MPI-2's prototypes); elsewhere p unchanged. */
template <class T>
constexpr auto mpi_in(T *p) {
    if constexpr (kMpiSimulated) return const_cast<std::remove_const_t<T> *>(p);
    else return p;
}

/* The clock the MPI's time runs on, for durations (std::chrono's clock interface):
 * MPI_Wtime, read through PMPI. CallClock is the one the entry points time calls with:
 * under SMPI this one, elsewhere std::chrono::steady_clock, as it always was. */
struct MpiClock {
    using rep = double;
    using period = std::ratio<1>;
    using duration = std::chrono::duration<double>;
    using time_point = std::chrono::time_point<MpiClock>;
    static constexpr bool is_steady = true;
    static time_point now() noexcept { return time_point(duration(mpi_next::Wtime())); }
};
#ifdef COMPMPI_SMPI
using CallClock = MpiClock;
#else
using CallClock = std::chrono::steady_clock;
#endif

/* One line: family, MPI version of mpi.h, MPI standard version, large-count support. */
std::string mpi_family_describe();

/* Scan the objects loaded in this process for MPI libraries (by marker symbols, not file
 * names: a private MPICH build names its library libmpi.so). If one of another family than
 * this build's is loaded, write a message naming both libraries and what to use instead to
 * stderr and end the process with exit status 1 (_exit: nothing of either MPI can run
 * safely any more). `when` names the moment ("load", "MPI_Init", ...). Called from a
 * constructor of libcompmpi (a C program linked to the other MPI: fails at load) and by
 * MPI_Init/MPI_Init_thread before PMPI (Python: mpi4py dlopen()s its MPI after start-up). */
void mpi_family_check(const char *when);
/* The same scan, without exiting: "" if fine, else the message. For tests and tools. */
std::string mpi_family_conflict();

/* 16-bit floats (issue 12, item 4), as the headers of the two families have them:
 *  - MPICH 4.0.2's mpi.h defines MPIX_C_FLOAT16 (size 2, IEEE binary16) and no bfloat16
 *    type. Moving it works (MPI_Bcast, MPI_Allgather), but MPICH cannot reduce it: MPI_SUM
 *    on MPIX_C_FLOAT16 (MPI_Allreduce, MPI_Reduce_scatter_block, even MPI_Reduce_local)
 *    stops the process with "Assertion failed in file .../typerep_yaksa_pack.c at line 568"
 *    (measured with Debian's mpich 4.0.2-3).
 *  - Open MPI 4.1.4's mpi.h and mpi-ext.h (extensions affinity, cuda, pcollreq) define no
 *    16-bit float type (its internal OPAL float2 is not an MPI datatype).
 * So no MPI here can MPI_SUM 16-bit floats, and libcompmpi compresses none of them: every
 * call on MPIX_C_FLOAT16 goes to the PMPI call unchanged (eligibility reason `datatype`),
 * bcast and allgather included (their only 16-bit codec would be bitpack's top byte of a half,
 * sign + 5 exponent + 2 mantissa bits, too coarse for weights). True when t is the MPI's
 * 16-bit float type (always false where the MPI has none). */
bool mpi_is_float16(MPI_Datatype t);
/* "MPIX_C_FLOAT16 (...)" or "none", for compmpi-info. */
const char *mpi_float16_describe();

/* Whether the MPI's own persistent collective of blocking kind `coll` (one of
 * coll_kind::allreduce, allgather, bcast, reduce_scatter_block, reduce_scatter) gives the
 * right result at every MPI_Start, so that libcompmpi may start the user's real persistent
 * request when the cost model decided a persistent class exact (src/runtime/persistent.cc).
 * Measured with Debian's MPICH 4.0.2 (2 ranks, 1,024-67,108,864 floats, 4 starts with new
 * data each, in place and not): allreduce and bcast right every time; allgather wrong from
 * the second start on below the size where MPICH switches to its ring algorithm (about
 * 512 KiB in all: 29,000 floats per rank wrong, 70,000 right) -- the peers' blocks and the
 * own block are left from the first start. That is MPICH's recursive-doubling schedule
 * keeping its state between starts (pmodels/mpich#6423, fixed in MPICH 4.1 by #6425). So:
 * allgather only on an MPICH whose run-time version (MPI_Get_library_version) is 4.1 or
 * later; reduce-scatter never (not measured); other families never (Open MPI 4.1 has no
 * persistent collectives). Any answer false keeps MPI's non-blocking collective instead. */
bool mpi_persistent_faithful(int coll);

/* Whether a communicator's MPI_Comm_idup may be completed by another thread than the one
 * issuing the communicator's other collectives. Not in Open MPI 4.1: the idup's context-id
 * rounds are libnbc allreduces on the parent communicator started from whichever thread
 * progresses the request, so they take libnbc tags in a different order on each rank than
 * the application thread's non-blocking collectives on the parent -- measured (2 ranks,
 * 300 idups each beside an MPI_Iallreduce on the parent): wrong data, MPI_ERR_TRUNCATE,
 * crashes and hangs in 3 of 8 runs when a second thread waited on the idup, none in 8 runs
 * with a blocking MPI_Comm_dup on the application thread, none under MPICH 4.0.2 either way
 * (docs/design.md, "Matching argument", 2; tests/mpi/t_nonblocking.c channels=K). */
inline bool mpi_idup_any_thread() { return mpi_family_built() != MpiFamily::openmpi; }

/* MPI_Info_get_string (MPI-4.0) with the same semantics; on an MPI-3.1 library through
 * MPI_Info_get_valuelen + MPI_Info_get. buflen in: size of value (with the terminating
 * NUL); out: length of the value + 1. */
int mpi_info_get_string(MPI_Info info, const char *key, int *buflen, char *value, int *flag);

/* Whether the MPI accepts CUDA device buffers: Open MPI through MPIX_Query_cuda_support
 * (mpi-ext.h; 0 when built without CUDA), MPICH through MPIX_GPU_query_support(CUDA).
 * Asked once, after MPI_Init (runtime_init calls mpi_cuda_aware_init()); false before. */
void mpi_cuda_aware_init();
bool mpi_cuda_aware();
/* What the MPI headers say at compile time: "yes", "no", "run-time query", "unknown". */
const char *mpi_cuda_aware_compiled();

}  // namespace compmpi

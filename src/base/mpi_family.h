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

#include <string>

namespace compmpi {

enum class MpiFamily { unknown = 0, mpich = 1, openmpi = 2 };

/* The family this build is for (from mpi.h: OPEN_MPI / MPICH_VERSION). */
MpiFamily mpi_family_built();
const char *mpi_family_name(MpiFamily f);     /* "MPICH", "Open MPI", "unknown" */
const char *mpi_family_id(MpiFamily f);       /* "mpich", "openmpi", "unknown"  */
/* File name of this build's libcompmpi ("libcompmpi.so" or "libcompmpi_openmpi.so"). */
const char *mpi_family_libcompmpi(MpiFamily f);
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

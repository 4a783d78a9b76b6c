/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libcompmpi -- transparent compression of MPI collectives.
 *
 * Linking -lcompmpi (or LD_PRELOAD=libcompmpi.so) replaces MPI_Allreduce, MPI_Allgather and
 * MPI_Bcast (and their MPI-4 _c forms) through the PMPI profiling interface. Eligible calls
 * (MPI_FLOAT or MPI_DOUBLE, MPI_SUM for allreduce, intracommunicator, buffer >= min_bytes) are compressed;
 * every other call goes to MPI unchanged. This header is the small explicit API; it is only
 * needed to change settings per communicator from code (MPI_Info hints named compmpi_<name>
 * do the same without it).
 *
 * Settings have three sources, later ones winning, per communicator:
 *   built-in default < COMPMPI_<NAME> environment variable < compmpi_comm_set() < MPI_Info hint
 * The settings, their defaults and allowed values are listed in docs/configuration.md.
 *
 * All functions return MPI_SUCCESS or an MPI error class and print a message naming the
 * problem to stderr. They do not call the communicator's error handler.
 */
#ifndef COMPMPI_H
#define COMPMPI_H

#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

#define COMPMPI_VERSION_MAJOR 0
#define COMPMPI_VERSION_MINOR 1
#define COMPMPI_VERSION_PATCH 0

/* Library version string, e.g. "0.1.0". */
const char *compmpi_version(void);

/*
 * Set one setting on a communicator. Collective over comm: every rank must call it with the
 * same key and value (ranks then check that they agree; if they do not, compression is
 * switched off for comm and rank 0 warns).
 *   comm   an intracommunicator
 *   key    a setting name ("codec", "bits", ...); "compmpi_codec" is accepted too
 *   value  its value as text ("bitpack", "16", ...); NULL removes the override
 * Returns MPI_ERR_INFO_KEY for an unknown key, MPI_ERR_INFO_VALUE for a value outside the
 * allowed ones (the message lists them) or one that conflicts with another explicit setting
 * (a nonzero "bits" with policy "awp" set explicitly; "bits" alone implies policy "static":
 * docs/configuration.md, "Explicit settings"), MPI_ERR_COMM for an invalid communicator.
 * A refusal on any rank is a refusal on every rank (the others return MPI_ERR_INFO_VALUE);
 * the communicator's settings are then unchanged everywhere.
 */
int compmpi_comm_set(MPI_Comm comm, const char *key, const char *value);

/*
 * Read the effective value of one setting on comm (local).
 *   value   buffer of len bytes that receives the NUL-terminated text
 * Returns MPI_ERR_INFO_KEY for an unknown key, MPI_ERR_TRUNCATE if len is too small.
 */
int compmpi_comm_get(MPI_Comm comm, const char *key, char *value, int len);

/*
 * Forget the adaptive state of comm (awp precision of every call key, and any per-buffer
 * residuals of lossy codecs), e.g. after restoring a checkpoint. Collective over comm.
 * Kept: the theta schedule's call counts (topk, fft_topk: theta follows the training step, which a
 * restored checkpoint continues), the cost model's measurements and the timed algorithm
 * choices of allreduce_algorithm=auto and hierarchy=auto (they describe the machine and the
 * link, not the training).
 */
int compmpi_comm_reset_state(MPI_Comm comm);

/*
 * awp state of one kind of call on comm (local). awp keys its state by what every rank
 * passes alike -- the collective, the count as passed to MPI (allgather: recvcount) and the
 * root (bcast) -- never by buffer address, so every rank decides the same width.
 *   collective  "allreduce", "allgather" or "bcast"
 *   root        bcast: the root; ignored otherwise
 *   bits        out: bit width the next such call will use, 0 if not tracked yet
 *   calls       out: compressed calls seen for this key
 * Either output may be NULL. Returns MPI_ERR_ARG for an unknown collective.
 */
int compmpi_comm_query_awp(MPI_Comm comm, const char *collective, MPI_Count count, int root, int *bits,
                           long long *calls);

/*
 * Kept for existing callers: the awp state of MPI_Allreduce calls of `count` floats on comm,
 * i.e. compmpi_comm_query_awp(comm, "allreduce", count, -1, bits, calls). buf is not used
 * (the state no longer depends on the buffer's address).
 */
int compmpi_comm_query_buffer(MPI_Comm comm, const void *buf, MPI_Count count, int *bits, long long *calls);

/* Print comm's effective settings to stderr from its rank 0; on other ranks it does nothing
 * (no communication). */
int compmpi_comm_print_config(MPI_Comm comm);

#ifdef __cplusplus
}
#endif

#endif /* COMPMPI_H */

// SPDX-License-Identifier: BSD-3-Clause
/*
 * ucx_finalize_fix.so — LD_PRELOAD workaround for the MPI_Finalize hang of
 * Debian 12's MPICH 4.0.2 (ch4:ucx) over UCX 1.13's TCP transport.
 *
 * The hang: MPIDI_UCX_mpi_finalize_hook() calls ucp_disconnect_nb() (= close
 * in FLUSH mode) on every endpoint, progresses until its own requests are done,
 * then blocks in a PMI barrier without progressing UCX.  A flush-close over TCP
 * needs a reply from the peer, so a rank that is still closing waits forever
 * for a peer that already sits in the PMI barrier (seen with 2 ranks after
 * large messages, and in most runs with >= 3 ranks).
 *
 * This shim turns that one call into a no-op that reports success.
 * It is only reached from MPI_Finalize, after all communication is done, so it
 * cannot change any measured result.  Use it as the FIRST entry of LD_PRELOAD
 * (mpirun.sh --finalize-fix does that).  Harmless for a non-UCX MPI (the
 * symbol is simply never called).
 *
 * Build: cc -O2 -shared -fPIC -o ucx_finalize_fix.so ucx_finalize_fix.c
 * (no UCX headers needed; the declarations below match UCX >= 1.6).
 */
#include <stddef.h>

typedef struct ucp_ep *ucp_ep_h;
typedef void *ucs_status_ptr_t;

/* Report the close as done (UCS_OK) without closing: the endpoints are then
 * released by ucp_worker_destroy(), which MPICH calls right after its PMI
 * barrier, without any network handshake.  (A FORCE close would be the obvious
 * fix, but UCX refuses it -- UCS_ERR_INVALID_PARAM -- for endpoints that MPICH
 * created without peer error handling.) */
ucs_status_ptr_t ucp_disconnect_nb(ucp_ep_h ep)
{
    (void)ep;
    return NULL; /* UCS_OK */
}

// SPDX-License-Identifier: BSD-3-Clause
/* Test-only LD_PRELOAD shim (testlist option `idle_sleep`): an MPICH rank that finds nothing
 * to do sleeps instead of spinning, so that 13-32 ranks oversubscribed on 2 cores finish in
 * seconds (t_scale).
 *
 * Debian's MPICH (ch4:ucx) waits by polling: every turn of its progress loop calls UCX's
 * ucp_worker_progress() (and its shared-memory queues). With 32 ranks on 2 cores each waiting
 * rank burns its whole time slice, and every step of a collective waits for the scheduler to
 * come round to the rank that holds the message: measured here (32 ranks, machine load ~30),
 * an 8-byte MPI_Allreduce took 210 ms, a barrier 280 ms; with this shim 0.6 ms and 0.7 ms.
 * MPICH 4.0's ch4 device has no yield or sleep setting (MPIR_CVAR_POLLS_BEFORE_YIELD is
 * ch3's), and MPI_THREAD_MULTIPLE, MPIR_CVAR_CH4_GLOBAL_PROGRESS=0 or UCX_TLS=self,sm made no
 * difference.
 *
 * The shim wraps ucp_worker_progress(): after SPINS consecutive calls that progressed nothing
 * it sleeps SLEEP_US microseconds (MPITEST_IDLE_SPINS, default 16; MPITEST_IDLE_SLEEP_US,
 * default 50). It changes only when a waiting rank polls again, never what is sent or
 * received: results are the same bits. It changes timing, so it is for tests only, never for
 * benchmarks. Harmless where UCX is not used (the symbol is never called). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>

typedef struct ucp_worker *ucp_worker_h;
typedef unsigned (*progress_fn)(ucp_worker_h);

static progress_fn real_progress;
static unsigned spins = 16;
static long sleep_ns = 50000;
static __thread unsigned idle;

__attribute__((constructor)) static void idle_sleep_init(void) {
    real_progress = (progress_fn)dlsym(RTLD_NEXT, "ucp_worker_progress");
    const char *s = getenv("MPITEST_IDLE_SPINS");
    if (s && *s) spins = (unsigned)strtoul(s, NULL, 10);
    s = getenv("MPITEST_IDLE_SLEEP_US");
    if (s && *s) sleep_ns = 1000 * strtol(s, NULL, 10);
}

unsigned ucp_worker_progress(ucp_worker_h worker) {
    if (!real_progress) real_progress = (progress_fn)dlsym(RTLD_NEXT, "ucp_worker_progress");
    const unsigned n = real_progress(worker);
    if (n) {
        idle = 0;
    } else if (++idle >= spins) {
        idle = 0;
        if (sleep_ns > 0) {
            struct timespec ts = {sleep_ns / 1000000000, sleep_ns % 1000000000};
            nanosleep(&ts, NULL);
        }
    }
    return n;
}

// SPDX-License-Identifier: BSD-3-Clause
/* Fibers: user-level contexts on the application's own thread, for the inline progress of
 * non-blocking collectives (src/runtime/progress.h, nb_progress=inline; docs/design.md,
 * "Inline progress").
 *
 * A fiber runs a function on its own stack (mmap'd, with a guard page) until the function
 * yields; resume() then returns to whoever resumed it, and the next resume() continues the
 * function after its yield. A fiber yields only inside libcompmpi's own MPI calls
 * (src/base/mpi_next.h): a blocking call made on a fiber is posted as its non-blocking form
 * and the fiber yields until MPI completes it, so the blocking algorithms of every compressed
 * collective run unchanged, a step per resume, while the application's thread -- the only
 * thread there is at MPI_THREAD_SINGLE -- does its own work between resumes.
 *
 * Rules that keep this sound: a fiber never yields while it holds a lock the application's
 * code may take (the channel's mutex is released before it waits for work); state kept per
 * thread that must follow the code rather than the thread (the re-entry depth, the statistics
 * entry, the cost model's trace) is swapped by the resumer (src/runtime/progress.cc). The
 * sanitizers are told about every switch (AddressSanitizer's and ThreadSanitizer's fiber
 * interfaces). Not under SimGrid SMPI, whose ranks are themselves contexts. */
#pragma once

#include <cstddef>

namespace compmpi {
namespace fiber {

struct Fiber;

/* A fiber that will run fn(arg) on a stack of `stack_bytes` (rounded up to pages, plus a
 * guard page); nullptr if the stack cannot be mapped. Not started: the first resume runs it. */
Fiber *create(void (*fn)(void *), void *arg, size_t stack_bytes);
/* Run f from where it stopped until it yields or its function returns; true once it returned
 * (then it is never resumed again). Only from outside any fiber. */
bool resume(Fiber *f);
/* From inside a fiber: back to its resumer. */
void yield();
/* Whether f's function returned. */
bool finished(const Fiber *f);
/* Free a fiber that finished or never started (its stack is unmapped). */
void destroy(Fiber *f);

namespace detail {
extern thread_local constinit Fiber *t_current __attribute__((tls_model("initial-exec")));
}
/* The fiber running on this thread, nullptr on a thread's own stack. */
inline Fiber *current() { return detail::t_current; }

}  // namespace fiber
}  // namespace compmpi

// SPDX-License-Identifier: BSD-3-Clause
/* Fibers on ucontext (src/base/fiber.h). */
#include "base/fiber.h"

#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstdint>
#include <new>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define COMPMPI_FIBER_ASAN 1
#endif
#if __has_feature(thread_sanitizer)
#define COMPMPI_FIBER_TSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(COMPMPI_FIBER_ASAN)
#define COMPMPI_FIBER_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__) && !defined(COMPMPI_FIBER_TSAN)
#define COMPMPI_FIBER_TSAN 1
#endif

#ifdef COMPMPI_FIBER_ASAN
extern "C" {
void __sanitizer_start_switch_fiber(void **fake_stack_save, const void *bottom, size_t size);
void __sanitizer_finish_switch_fiber(void *fake_stack_save, const void **bottom_old, size_t *size_old);
}
#endif
#ifdef COMPMPI_FIBER_TSAN
extern "C" {
void *__tsan_get_current_fiber(void);
void *__tsan_create_fiber(unsigned flags);
void __tsan_destroy_fiber(void *fiber);
void __tsan_switch_to_fiber(void *fiber, unsigned flags);
}
#endif

namespace compmpi {
namespace fiber {

namespace detail {
thread_local constinit Fiber *t_current __attribute__((tls_model("initial-exec"))) = nullptr;
}
using detail::t_current;

struct Fiber {
    ucontext_t ctx{};        /* the fiber's registers while it is not running */
    ucontext_t caller{};     /* the resumer's while the fiber runs */
    void (*fn)(void *) = nullptr;
    void *arg = nullptr;
    void *map = nullptr;     /* guard page + stack */
    size_t map_bytes = 0;
    char *stack = nullptr;   /* lowest usable address */
    size_t stack_bytes = 0;
    bool done = false;
#ifdef COMPMPI_FIBER_ASAN
    void *fake_caller = nullptr;       /* the resumer's fake stack while the fiber runs */
    const void *caller_bottom = nullptr;
    size_t caller_size = 0;
#endif
#ifdef COMPMPI_FIBER_TSAN
    void *tsan = nullptr, *tsan_caller = nullptr;
#endif
};

namespace {

/* makecontext passes ints: the pointer in two halves */
void trampoline(unsigned lo, unsigned hi) {
    Fiber *f = reinterpret_cast<Fiber *>((static_cast<uintptr_t>(hi) << 32) | lo);
#ifdef COMPMPI_FIBER_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &f->caller_bottom, &f->caller_size);
#endif
    f->fn(f->arg);
    f->done = true;
    /* back to the resumer for good: uc_link is not used, so that the sanitizers see this
     * switch like the others (a fiber that is destroyed passes nullptr: its fake stack goes) */
#ifdef COMPMPI_FIBER_ASAN
    __sanitizer_start_switch_fiber(nullptr, f->caller_bottom, f->caller_size);
#endif
#ifdef COMPMPI_FIBER_TSAN
    __tsan_switch_to_fiber(f->tsan_caller, 0);
#endif
    setcontext(&f->caller);
}

}  // namespace

Fiber *create(void (*fn)(void *), void *arg, size_t stack_bytes) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    stack_bytes = (stack_bytes + page - 1) / page * page;
    void *m = mmap(nullptr, stack_bytes + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (m == MAP_FAILED) return nullptr;
    if (mprotect(m, page, PROT_NONE) != 0) { /* the guard page below the stack */
        munmap(m, stack_bytes + page);
        return nullptr;
    }
    Fiber *f = new (std::nothrow) Fiber;
    if (!f) {
        munmap(m, stack_bytes + page);
        return nullptr;
    }
    f->fn = fn;
    f->arg = arg;
    f->map = m;
    f->map_bytes = stack_bytes + page;
    f->stack = static_cast<char *>(m) + page;
    f->stack_bytes = stack_bytes;
    if (getcontext(&f->ctx) != 0) {
        destroy(f);
        return nullptr;
    }
    f->ctx.uc_stack.ss_sp = f->stack;
    f->ctx.uc_stack.ss_size = f->stack_bytes;
    f->ctx.uc_link = nullptr;
    const uintptr_t p = reinterpret_cast<uintptr_t>(f);
    makecontext(&f->ctx, reinterpret_cast<void (*)()>(trampoline), 2, static_cast<unsigned>(p & 0xffffffffu),
                static_cast<unsigned>(p >> 32));
#ifdef COMPMPI_FIBER_TSAN
    f->tsan = __tsan_create_fiber(0);
#endif
    return f;
}

bool resume(Fiber *f) {
    if (f->done || t_current) return f->done;
    t_current = f;
#ifdef COMPMPI_FIBER_ASAN
    __sanitizer_start_switch_fiber(&f->fake_caller, f->stack, f->stack_bytes);
#endif
#ifdef COMPMPI_FIBER_TSAN
    f->tsan_caller = __tsan_get_current_fiber();
    __tsan_switch_to_fiber(f->tsan, 0);
#endif
    swapcontext(&f->caller, &f->ctx);
#ifdef COMPMPI_FIBER_ASAN
    __sanitizer_finish_switch_fiber(f->fake_caller, nullptr, nullptr);
#endif
    t_current = nullptr;
    return f->done;
}

void yield() {
    Fiber *f = t_current;
    if (!f) return;
#ifdef COMPMPI_FIBER_ASAN
    void *fake = nullptr;
    __sanitizer_start_switch_fiber(&fake, f->caller_bottom, f->caller_size);
#endif
#ifdef COMPMPI_FIBER_TSAN
    __tsan_switch_to_fiber(f->tsan_caller, 0);
#endif
    swapcontext(&f->ctx, &f->caller);
    /* resumed (resume() set t_current again) */
#ifdef COMPMPI_FIBER_ASAN
    __sanitizer_finish_switch_fiber(fake, &f->caller_bottom, &f->caller_size);
#endif
}

bool finished(const Fiber *f) { return f->done; }

void destroy(Fiber *f) {
    if (!f) return;
#ifdef COMPMPI_FIBER_TSAN
    if (f->tsan) __tsan_destroy_fiber(f->tsan);
#endif
    if (f->map) munmap(f->map, f->map_bytes);
    delete f;
}

}  // namespace fiber
}  // namespace compmpi

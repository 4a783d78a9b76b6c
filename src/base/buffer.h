// SPDX-License-Identifier: BSD-3-Clause
/* Grow-only host memory reused across calls (blob workspaces, scratch), with an optional
 * allocator of its own (the CUDA module's pinned memory). */
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

namespace compmpi {

/* Grow-only, uninitialised, 64-byte aligned scratch memory reused across calls. */
/* How a Buffer's block goes back: std::free, or the allocator's own free. (Outside Buffer:
 * a nested class with member initializers is not default-constructible inside it.) */
struct BufferFree {
    void (*fn)(void *p, int kind) = nullptr;
    int kind = 0;
    void operator()(uint8_t *p) const;
};

class Buffer {
  public:
    using AllocFn = void *(*)(size_t bytes, int kind);
    using FreeFn = void (*)(void *p, int kind);
    uint8_t *get(size_t bytes);
    size_t capacity() const { return cap_; }
    void release() { p_.reset(), cap_ = 0; }
    template <class T> T *as(size_t count) { return reinterpret_cast<T *>(get(count * sizeof(T))); }
    /* Memory from alloc(bytes, kind) / free(p, kind) instead of aligned_alloc (the CUDA
     * module's pinned host memory, which its backend DMAs directly); set before first use. */
    void use_allocator(AllocFn alloc, FreeFn free, int kind) {
        alloc_ = alloc, free_ = free, kind_ = kind;
    }
    bool has_allocator() const { return alloc_ != nullptr; }

  private:
    std::unique_ptr<uint8_t, BufferFree> p_;
    size_t cap_ = 0;
    AllocFn alloc_ = nullptr;
    FreeFn free_ = nullptr;
    int kind_ = 0;
};

}  // namespace compmpi

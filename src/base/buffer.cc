// SPDX-License-Identifier: BSD-3-Clause
#include "base/buffer.h"

#include <cstdlib>

#include "base/fault.h"

namespace compmpi {

void BufferFree::operator()(uint8_t *p) const {
    if (fn) fn(p, kind);
    else std::free(p);
}

uint8_t *Buffer::get(size_t bytes) {
    if (COMPMPI_FAULT_ON() && fault_alloc_fail()) return nullptr; /* test-only (src/base/fault.h) */
    if (bytes <= cap_ && p_) return p_.get();
    size_t want = bytes + bytes / 8 + 64;
    want = (want + 63) / 64 * 64;
    void *m = nullptr;
    if (alloc_) {
        p_.reset(); /* the old block first: pinned memory is not cheap to hold twice */
        cap_ = 0;
        m = alloc_(want, kind_);
    }
    const bool custom = m != nullptr; /* the allocator failed (pinned memory exhausted): plain memory still works */
    /* plain memory: the new block before the old one is freed, as before session 10 (freeing
     * first measurably slowed the PyTorch demo: scripts/demo.sh, bitpack 6.1 -> 10.8 s/epoch) */
    if (!m) m = std::aligned_alloc(64, want);
    if (!m) return nullptr;
    p_ = std::unique_ptr<uint8_t, BufferFree>(static_cast<uint8_t *>(m), BufferFree{custom ? free_ : nullptr, kind_});
    cap_ = want;
    return p_.get();
}

}  // namespace compmpi

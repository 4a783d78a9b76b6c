// SPDX-License-Identifier: BSD-3-Clause
#include "runtime/ef.h"

#include "qsgd/qsgd.h"

namespace compmpi {

std::vector<float> *state_ef_residual(CommState &st, const void *key, size_t n, Elem elem, size_t max_bytes) {
    /* doubles: 2 words an element, and their own key (a buffer's floats and doubles differ) */
    const size_t w = elem == Elem::f64 ? 2 : 1;
    const BufferKey k{reinterpret_cast<uintptr_t>(key), n | (w == 2 ? size_t{1} << (sizeof(size_t) * 8 - 1) : 0)};
    n *= w;
    auto it = st.ef.find(k);
    if (it != st.ef.end()) return &it->second;
    /* a new residual: restart the table if it would pass either cap (rank-local state) */
    if (st.ef.size() >= kMaxTrackedBuffers || (st.ef_floats + n) * sizeof(float) > max_bytes) {
        st.ef.clear();
        st.ef_floats = 0;
    }
    std::vector<float> *r = &st.ef[k];
    r->assign(n, 0.0f);
    st.ef_floats += n;
    return r;
}

float *state_ef_scratch(CommState &st, size_t n) {
    if (st.ef_scratch.capacity() != n) {
        std::vector<float> v;
        v.reserve(n);
        st.ef_scratch.swap(v);
    }
    st.ef_scratch.resize(n);
    return st.ef_scratch.data();
}

EfCall::EfCall(const CollArgs &a, CommState &st, const Plan &plan, const CudaModule *m, void *be_ctx, const void *key,
               CollCtx &c)
    : st_(st), m_(m), be_ctx_(be_ctx), key_(key) {
    const bool on = st.settings.error_feedback && !(plan.codec->flags & CODEC_LOSSLESS) &&
                    (plan.codec->id != CodecId::qsgd || qsgd::variance_bound(plan.params.bits, plan.params.param) < 1);
    /* allreduce: n floats; reduce-scatter: the whole input (every block this rank sends) */
    const bool coll = a.kind == Coll::allreduce || coll_is_reduce_scatter(a.kind);
    if (!on || !coll) return;
    n_ = static_cast<size_t>(coll_elements(a));
    if (coll_is_reduce_scatter(a.kind)) {
        n_ = 0;
        for (int j = 0; j < st.size; ++j) n_ += static_cast<size_t>(coll_block_count(a, j));
    }
    /* host buffers, and device buffers staged through host memory (compressed on the CPU
     * backend): the residual in host memory */
    if (!m || !st.dev.ctx || be_ctx != st.dev.ctx) {
        host_ = state_ef_residual(st, key, n_, a.elem); /* caps: src/runtime/state.h */
        c.ef_res = host_->data();
        c.ef_new = state_ef_scratch(st, host_->size());
        return;
    }
    /* device buffers on the device backend: residuals in device memory, owned by the
     * module's context (docs/gpu.md); none if they cannot be allocated */
    dev_ = a.elem == Elem::f32; /* the module's residuals are floats (doubles are staged) */
    if (!dev_) return;
    float *next = nullptr;
    if (const float *r = m->ef_residual(be_ctx, key, n_, &next)) c.ef_res = r, c.ef_new = next;
    else dev_ = false;
}

void EfCall::drop(CollCtx &c) {
    c.ef_res = nullptr, c.ef_new = nullptr;
    host_ = nullptr, dev_ = false;
}

void EfCall::commit() {
    if (host_) host_->swap(st_.ef_scratch);
    if (dev_) m_->ef_commit(be_ctx_, key_, n_);
}

}  // namespace compmpi

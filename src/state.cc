#include "state.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "fault.h"
#include "fft_topk/fft_topk.h"
#include "log.h"
#include "mpi_family.h"
#include "policy.h"
#include "verdict.h"

namespace compmpi {

namespace {
int g_keyval = MPI_KEYVAL_INVALID;
Settings g_settings{};
SettingLayer g_env;
std::mutex g_create_mu;
bool g_env_mismatch = false; /* serialises first-use creation of a communicator's state */
int g_env_fft = 0;           /* the world's fft probe at MPI_Init (CommState::fft) */

int copy_cb(MPI_Comm, int, void *, void *in, void *out, int *flag) {
    const CommState *old = static_cast<const CommState *>(in);
    CommState *n = new (std::nothrow) CommState;
    if (!n) return MPI_ERR_NO_MEM;
    {
        std::lock_guard<std::mutex> lk(const_cast<CommState *>(old)->mu);
        n->rank = old->rank;
        n->size = old->size;
        n->inter = old->inter;
        n->attr_layer = old->attr_layer;
        n->hint_layer = old->hint_layer;
        n->settings = old->settings;
        n->mismatch = old->mismatch;
        n->fft = old->fft;
    }
    *static_cast<void **>(out) = n;
    *flag = 1;
    return MPI_SUCCESS;
}

}  // namespace

namespace {
std::atomic<long long> g_live_states{0};
}

CommState::CommState() { g_live_states.fetch_add(1, std::memory_order_relaxed); }

CommState::~CommState() {
    g_live_states.fetch_sub(1, std::memory_order_relaxed);
    if (gpu_ctx && gpu_destroy) gpu_destroy(gpu_ctx);
    int finalized = 0;
    PMPI_Finalized(&finalized);
    if (finalized) return;
    if (hier_leaders != MPI_COMM_NULL) PMPI_Comm_free(&hier_leaders);
    if (hier_node != MPI_COMM_NULL) PMPI_Comm_free(&hier_node);
    for (auto &pr : p2p)
        if (pr.second != MPI_COMM_NULL) PMPI_Comm_free(&pr.second);
}

namespace {

int delete_cb(MPI_Comm, int, void *attr, void *) {
    verdict_invalidate(); /* the handle may be reused for another communicator */
    delete static_cast<CommState *>(attr);
    return MPI_SUCCESS;
}
}  // namespace

void BufferFree::operator()(uint8_t *p) const {
    if (fn) fn(p, kind);
    else std::free(p);
}

uint8_t *Buffer::get(size_t bytes) {
    if (COMPMPI_FAULT_ON() && fault_alloc_fail()) return nullptr; /* test-only (src/fault.h) */
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

void state_set_env_mismatch() { g_env_mismatch = true; }
void state_set_env_fft(int verdict) { g_env_fft = verdict; }

std::vector<float> *state_ef_residual(CommState &st, const void *key, size_t n, size_t max_bytes) {
    const BufferKey k{reinterpret_cast<uintptr_t>(key), n};
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

const Settings &global_settings() { return g_settings; }
const SettingLayer &env_layer() { return g_env; }

Status state_resolve_layers(const SettingLayer &env, const SettingLayer &attr, const SettingLayer &hints, Settings *out,
                            Resolution *why, std::string *err) {
    Settings s;
    CMPI_CHECK(settings_resolve(env, attr, hints, &s, why, err));
    std::bitset<kNumSettings> named = env.set | attr.set | hints.set;
    CMPI_CHECK(policy_check_settings(s, named, err));
    *out = s;
    return Status::ok;
}

Status state_global_init(std::string *err) {
    SettingLayer env;
    CMPI_CHECK(settings_read_env(&env, err));
    Settings s;
    CMPI_CHECK(state_resolve_layers(env, SettingLayer{}, SettingLayer{}, &s, nullptr, err));
    g_env = env;
    g_settings = s;
    return Status::ok;
}

Status state_keyval_create() {
    if (g_keyval != MPI_KEYVAL_INVALID) return Status::ok;
    return PMPI_Comm_create_keyval(copy_cb, delete_cb, &g_keyval, nullptr) == MPI_SUCCESS ? Status::ok
                                                                                         : Status::mpi_error;
}

void state_keyval_free() {
    if (g_keyval != MPI_KEYVAL_INVALID) PMPI_Comm_free_keyval(&g_keyval);
    g_keyval = MPI_KEYVAL_INVALID;
}

CommState *state_get(MPI_Comm comm) {
    if (g_keyval == MPI_KEYVAL_INVALID) return nullptr;
    void *v = nullptr;
    int flag = 0;
    if (PMPI_Comm_get_attr(comm, g_keyval, &v, &flag) != MPI_SUCCESS) return nullptr;
    if (flag) return static_cast<CommState *>(v);
    std::lock_guard<std::mutex> lk(g_create_mu);
    if (PMPI_Comm_get_attr(comm, g_keyval, &v, &flag) != MPI_SUCCESS) return nullptr;
    if (flag) return static_cast<CommState *>(v);
    auto st = std::make_unique<CommState>();
    int inter = 0;
    PMPI_Comm_test_inter(comm, &inter);
    st->inter = inter != 0;
    PMPI_Comm_rank(comm, &st->rank);
    PMPI_Comm_size(comm, &st->size);
    st->settings = g_settings;
    st->mismatch = g_env_mismatch;
    st->fft = g_env_fft;
    if (PMPI_Comm_set_attr(comm, g_keyval, st.get()) != MPI_SUCCESS) return nullptr;
    return st.release();
}

Status state_resolve(CommState *st, const SettingLayer &attr, const SettingLayer &hints, std::string *err) {
    Settings s;
    CMPI_CHECK(state_resolve_layers(g_env, attr, hints, &s, nullptr, err));
    st->attr_layer = attr;
    st->hint_layer = hints;
    st->settings = s;
    verdict_invalidate();
    return Status::ok;
}

namespace {
/* Collective over comm: whether every rank holds h (false, with *rc, if MPI fails). */
bool all_hold(MPI_Comm comm, uint64_t h, int *rc) {
    uint64_t v[2] = {h, ~h}, r[2];
    *rc = PMPI_Allreduce(v, r, 2, MPI_UINT64_T, MPI_MAX, comm);
    return *rc == MPI_SUCCESS && r[0] == h && r[1] == ~h;
}

uint64_t fnv(const std::string &v) {
    uint64_t h = 1469598103934665603ull;
    for (unsigned char ch : v) h = (h ^ ch) * 1099511628211ull;
    return h | 1; /* never 0: 0 means "no error" */
}
}  // namespace

Status state_agree_error(MPI_Comm comm, const char *what, Status local, const std::string &err) {
    const std::string msg = std::string(what) + ": " + (err.empty() ? status_str(local) : err);
    const uint64_t h = local == Status::ok ? 0 : fnv(msg);
    int rc;
    const bool same = all_hold(comm, h, &rc);
    if (rc != MPI_SUCCESS) {
        if (local != Status::ok) log_error("%s", msg.c_str());
        return local != Status::ok ? local : Status::mpi_error;
    }
    if (same && h == 0) return Status::ok;
    int rank = 0, size = 1;
    PMPI_Comm_rank(comm, &rank);
    PMPI_Comm_size(comm, &size);
    if (same) {
        if (rank == 0) log_error_all(size, "%s", msg.c_str());
    } else if (h != 0) {
        log_error("%s", msg.c_str());
    }
    return local != Status::ok ? local : Status::invalid_arg;
}

void state_warn_inapplicable(const SettingLayer &layer, SettingSource src, const SettingLayer &attr,
                             const SettingLayer &hints, const char *what) {
    Settings s;
    Resolution why;
    if (state_resolve_layers(g_env, attr, hints, &s, &why, nullptr) != Status::ok) return;
    for (int i = 0; i < kNumSettings; ++i) {
        if (!layer.set[i]) continue;
        const SettingId id = static_cast<SettingId>(i);
        const std::string given = std::string(kSettings[i].name) + "=" + setting_format(id, layer.values) + " (" +
                                  setting_source_name(id, src) + ")";
        if (why.source[i] != src)
            log_warn("%s: %s is overridden by %s=%s (%s) on this communicator", what, given.c_str(), kSettings[i].name,
                     setting_format(id, s).c_str(), setting_source_name(id, why.source[i]).c_str());
        else if (why.inapplicable[i])
            log_warn("%s: %s has %s", what, given.c_str(), why.note[i].c_str());
    }
}

int state_apply_hints(MPI_Comm comm, MPI_Info info, bool replace, const char *what) {
    CommState *st = state_get(comm);
    if (!st) return MPI_SUCCESS;
    std::string err;
    SettingLayer mine, hints, attr;
    Status s = state_parse_info(info, &mine, &err);
    {
        std::lock_guard<std::mutex> lk(st->mu);
        attr = st->attr_layer;
        hints = replace ? SettingLayer{} : st->hint_layer;
    }
    if (s == Status::ok) {
        mine.apply_to(&hints.values);
        hints.set |= mine.set;
    }
    Settings probe;
    if (s == Status::ok) s = state_resolve_layers(g_env, attr, hints, &probe, nullptr, &err);
    const Status local = s;
    /* collective: a hint refused on any rank is refused on all (no rank goes on alone) */
    s = state_agree_error(comm, what, s, err);
    if (s != Status::ok)
        return local == Status::mpi_error ? MPI_ERR_INFO : s == Status::mpi_error ? MPI_ERR_OTHER : MPI_ERR_INFO_VALUE;
    {
        std::lock_guard<std::mutex> lk(st->mu);
        if (state_resolve(st, attr, hints, &err) != Status::ok) return MPI_ERR_INTERN; /* resolved above */
    }
    if (st->rank == 0) state_warn_inapplicable(mine, SettingSource::hint, attr, hints, what);
    return MPI_SUCCESS;
}

Status state_agree(MPI_Comm comm, CommState *st, const char *what) {
    uint64_t h;
    {
        std::lock_guard<std::mutex> lk(st->mu);
        h = settings_comm_hash(st->settings);
    }
    int rc;
    const bool same = all_hold(comm, h, &rc);
    if (rc != MPI_SUCCESS) return Status::mpi_error;
    {
        std::lock_guard<std::mutex> lk(st->mu);
        if (st->mismatch != !same) verdict_invalidate();
        st->mismatch = !same;
        if (!same) {
            if (st->rank == 0)
                log_warn("%s: libcompmpi settings differ across the ranks of a communicator; compression is off "
                         "for it (every call passes through to MPI exactly). Give every rank the same COMPMPI_* "
                         "variables and hints (COMPMPI_PRINT_CONFIG=1 shows them).", what);
            return Status::mismatch;
        }
    }
    state_agree_fft(comm, st, what);
    return Status::ok;
}

void state_agree_fft(MPI_Comm comm, CommState *st, const char *what) {
    uint32_t block;
    {
        std::lock_guard<std::mutex> lk(st->mu);
        if (st->fft != 0 || st->inter || st->settings.codec != static_cast<int>(CodecId::fft_topk)) return;
        block = static_cast<uint32_t>(st->settings.fft_block);
    }
    uint64_t h = fft_topk::probe(block);
    if (COMPMPI_FAULT_ON() && fault_fire(FaultKind::fft_differ, FaultWhere::any)) h ^= 1;
    int rc;
    const bool same = all_hold(comm, h, &rc);
    if (rc != MPI_SUCCESS) return; /* not probed: not eligible */
    std::lock_guard<std::mutex> lk(st->mu);
    st->fft = same ? 1 : -1;
    verdict_invalidate();
    if (!same && st->rank == 0)
        log_warn("%s: fft_topk: FFTW computes different bits on the ranks of this communicator (different CPU "
                 "types or FFTW builds), so its ranks would decode different results; fft_topk calls on it pass "
                 "through to MPI exactly (reason fft_ranks_differ). Run on one CPU type and FFTW build, or "
                 "choose another codec.", what);
}

std::vector<std::pair<std::string, std::string>> state_effective_hints(CommState *st) {
    std::vector<std::pair<std::string, std::string>> kv;
    Settings s;
    Resolution why;
    {
        std::lock_guard<std::mutex> lk(st->mu);
        if (state_resolve_layers(g_env, st->attr_layer, st->hint_layer, &s, &why, nullptr) != Status::ok) return kv;
    }
    for (int i = 0; i < kNumSettings; ++i)
        if (kSettings[i].scope == SettingScope::COMM && why.source[i] != SettingSource::builtin)
            kv.emplace_back(std::string("compmpi_") + kSettings[i].name, setting_format(static_cast<SettingId>(i), s));
    return kv;
}

Status state_parse_info(MPI_Info info, SettingLayer *layer, std::string *err) {
    if (info == MPI_INFO_NULL) return Status::ok;
    int nkeys = 0;
    if (PMPI_Info_get_nkeys(info, &nkeys) != MPI_SUCCESS) return Status::mpi_error;
    for (int i = 0; i < nkeys; ++i) {
        char key[MPI_MAX_INFO_KEY + 1];
        if (PMPI_Info_get_nthkey(info, i, key) != MPI_SUCCESS) return Status::mpi_error;
        if (strncasecmp(key, "compmpi_", 8) != 0) continue;
        SettingId id;
        if (!setting_lookup(key, &id)) {
            if (err) {
                *err = std::string("unknown hint '") + key + "'; known: ";
                bool first = true;
                for (int k = 0; k < kNumSettings; ++k)
                    if (kSettings[k].scope == SettingScope::COMM) {
                        *err += (first ? "compmpi_" : ", compmpi_") + std::string(kSettings[k].name);
                        first = false;
                    }
            }
            return Status::invalid_arg;
        }
        int len = 0, flag = 0;
        char dummy[1];
        if (mpi_info_get_string(info, key, &len, dummy, &flag) != MPI_SUCCESS || !flag) return Status::mpi_error;
        std::vector<char> val(static_cast<size_t>(len) + 1);
        if (mpi_info_get_string(info, key, &len, val.data(), &flag) != MPI_SUCCESS) return Status::mpi_error;
        CMPI_CHECK(setting_parse(id, val.data(), &layer->values, err));
        layer->set[static_cast<int>(id)] = true;
    }
    return Status::ok;
}

}  // namespace compmpi

extern "C" __attribute__((visibility("default"))) int compmpi_test_state_sizes(MPI_Comm comm, long long *v, int nv) {
    using namespace compmpi;
    long long all[kSizeCount] = {};
    all[kSizeLiveStates] = g_live_states.load(std::memory_order_relaxed);
    if (comm != MPI_COMM_NULL) {
        CommState *st = state_get(comm);
        if (!st) return MPI_ERR_COMM;
        std::lock_guard<std::mutex> lk(st->mu);
        all[kSizeAwp] = static_cast<long long>(st->awp.size());
        all[kSizeEf] = static_cast<long long>(st->ef.size());
        size_t bytes = 0;
        for (const auto &e : st->ef) bytes += e.second.capacity() * sizeof(float);
        all[kSizeEfBytes] = static_cast<long long>(bytes);
        all[kSizeSched] = static_cast<long long>(st->sched.calls.size());
        all[kSizeCost] = st->cost ? static_cast<long long>(st->cost->entries.size()) : 0;
        size_t ws = st->ws_send.capacity() + st->ws_recv.capacity() + st->ws_aux_blob.capacity() +
                    st->ws_pin_send.capacity() + st->ws_pin_recv.capacity() + st->ws_pin_aux_blob.capacity() +
                    st->ef_scratch.capacity() * sizeof(float);
        for (const Buffer &b : st->ws_f) ws += b.capacity();
        all[kSizeWorkspace] = static_cast<long long>(ws);
    }
    for (int i = 0; i < nv && i < kSizeCount; ++i) v[i] = all[i];
    return MPI_SUCCESS;
}

// SPDX-License-Identifier: BSD-3-Clause
#include "runtime/settings_rules.h"
#include "runtime/state.h"

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "base/fault.h"
#include "fft_topk/fft_topk.h"
#include "base/log.h"
#include "base/mpi_family.h"
#include "runtime/policy.h"
#include "runtime/verdict.h"
#include "base/mpi_next.h"

namespace compmpi {

namespace {
int g_keyval = MPI_KEYVAL_INVALID;
Settings g_settings{};
SettingLayer g_env;
SettingLayer g_mpit;          /* MPI_T writes before MPI_Init: MPI_Init lays them over the environment */
bool g_global_done = false;   /* MPI_Init resolved the process settings: GLOBAL ones are fixed */
/* serialises first-use creation of a communicator's state, and guards g_env, g_settings,
 * g_mpit and g_global_done (MPI_T writes may come from any thread) */
std::mutex g_create_mu;
bool g_env_mismatch = false;
int g_env_fft = 0;           /* the world's fft probe at MPI_Init (CommState::fft) */

int copy_cb(MPI_Comm oldcomm, int, void *, void *in, void *out, int *flag) {
    const CommState *old = static_cast<const CommState *>(in);
    if (mpi_attr_foreign(oldcomm, old->rank)) { /* SimGrid SMPI only (src/mpi_family.h) */
        *flag = 0;
        return MPI_SUCCESS;
    }
    CommState *n = new (std::nothrow) CommState;
    if (!n) return MPI_ERR_NO_MEM;
    {
        std::lock_guard<std::mutex> lk(const_cast<CommState *>(old)->mu);
        n->rank = old->rank;
        n->size = old->size;
        n->inter = old->inter;
        n->env_layer = old->env_layer;
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

CommState::~CommState() { g_live_states.fetch_sub(1, std::memory_order_relaxed); }

namespace {

int delete_cb(MPI_Comm, int, void *attr, void *) {
    verdict_invalidate(); /* the handle may be reused for another communicator */
    delete static_cast<CommState *>(attr);
    return MPI_SUCCESS;
}
}  // namespace

void state_set_env_mismatch() { g_env_mismatch = true; }
void state_set_env_fft(int verdict) { g_env_fft = verdict; }

const Settings &global_settings() { return g_settings; }
SettingLayer env_layer() {
    std::lock_guard<std::mutex> lk(g_create_mu);
    return g_env;
}

namespace {
void overlay(SettingLayer *under, const SettingLayer &over) {
    over.apply_to(&under->values);
    under->set |= over.set;
}
}  // namespace

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
    std::lock_guard<std::mutex> lk(g_create_mu);
    overlay(&env, g_mpit);
    Settings s;
    CMPI_CHECK(state_resolve_layers(env, SettingLayer{}, SettingLayer{}, &s, nullptr, err));
    g_env = env;
    g_settings = s;
    g_global_done = true;
    return Status::ok;
}

Status state_process_settings(Settings *out, std::string *err) {
    std::lock_guard<std::mutex> lk(g_create_mu);
    if (g_global_done) return *out = g_settings, Status::ok;
    SettingLayer env;
    CMPI_CHECK(settings_read_env(&env, err));
    overlay(&env, g_mpit);
    return state_resolve_layers(env, SettingLayer{}, SettingLayer{}, out, nullptr, err);
}

Status state_process_set(SettingId id, std::string_view text, std::string *err) {
    const int i = static_cast<int>(id);
    std::lock_guard<std::mutex> lk(g_create_mu);
    if (g_global_done && kSettings[i].scope == SettingScope::GLOBAL) {
        if (err) {
            std::string var = std::string("COMPMPI_") + kSettings[i].name;
            for (char &c : var) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
            *err = std::string(kSettings[i].name) + " is read at MPI_Init only: set it before MPI_Init (after "
                   "MPI_T_init_thread) or with " + var;
        }
        return Status::unsupported;
    }
    SettingLayer one;
    CMPI_CHECK(setting_parse(id, text, &one.values, err));
    one.set[i] = true;
    SettingLayer env = g_env;
    if (!g_global_done) {
        env = SettingLayer{};
        CMPI_CHECK(settings_read_env(&env, err));
        overlay(&env, g_mpit);
    }
    overlay(&env, one);
    Settings s;
    CMPI_CHECK(state_resolve_layers(env, SettingLayer{}, SettingLayer{}, &s, nullptr, err));
    if (!g_global_done) return overlay(&g_mpit, one), Status::ok;
    g_env = env;
    g_settings = s;
    return Status::ok;
}

Status state_keyval_create() {
    if (g_keyval != MPI_KEYVAL_INVALID) return Status::ok;
    return mpi_next::Comm_create_keyval(copy_cb, delete_cb, &g_keyval, nullptr) == MPI_SUCCESS ? Status::ok
                                                                                         : Status::mpi_error;
}

void state_keyval_free() {
    if (g_keyval != MPI_KEYVAL_INVALID) mpi_next::Comm_free_keyval(&g_keyval);
    g_keyval = MPI_KEYVAL_INVALID;
}

CommState *state_get(MPI_Comm comm) {
    if (g_keyval == MPI_KEYVAL_INVALID) return nullptr;
    void *v = nullptr;
    int flag = 0;
    if (mpi_next::Comm_get_attr(comm, g_keyval, &v, &flag) != MPI_SUCCESS) return nullptr;
    if (flag) return static_cast<CommState *>(v);
    std::lock_guard<std::mutex> lk(g_create_mu);
    if (mpi_next::Comm_get_attr(comm, g_keyval, &v, &flag) != MPI_SUCCESS) return nullptr;
    if (flag) return static_cast<CommState *>(v);
    auto st = std::make_unique<CommState>();
    int inter = 0;
    mpi_next::Comm_test_inter(comm, &inter);
    st->inter = inter != 0;
    mpi_next::Comm_rank(comm, &st->rank);
    mpi_next::Comm_size(comm, &st->size);
    st->env_layer = g_env;
    st->settings = g_settings;
    st->mismatch = g_env_mismatch;
    st->fft = g_env_fft;
    if (mpi_next::Comm_set_attr(comm, g_keyval, st.get()) != MPI_SUCCESS) return nullptr;
    return st.release();
}

Status state_resolve(CommState *st, const SettingLayer &attr, const SettingLayer &hints, std::string *err) {
    Settings s;
    CMPI_CHECK(state_resolve_layers(st->env_layer, attr, hints, &s, nullptr, err));
    st->attr_layer = attr;
    st->hint_layer = hints;
    st->settings = s;
    ++st->settings_epoch;
    verdict_invalidate();
    return Status::ok;
}

namespace {
/* Collective over comm: whether every rank holds h (false, with *rc, if MPI fails). */
bool all_hold(MPI_Comm comm, uint64_t h, int *rc) {
    uint64_t v[2] = {h, ~h}, r[2];
    *rc = mpi_next::Allreduce(v, r, 2, MPI_UINT64_T, MPI_MAX, comm);
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
    mpi_next::Comm_rank(comm, &rank);
    mpi_next::Comm_size(comm, &size);
    if (same) {
        if (rank == 0) log_error_all(size, "%s", msg.c_str());
    } else if (h != 0) {
        log_error("%s", msg.c_str());
    }
    return local != Status::ok ? local : Status::invalid_arg;
}

void state_warn_inapplicable(const SettingLayer &env, const SettingLayer &layer, SettingSource src,
                             const SettingLayer &attr, const SettingLayer &hints, const char *what) {
    Settings s;
    Resolution why;
    if (state_resolve_layers(env, attr, hints, &s, &why, nullptr) != Status::ok) return;
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
    SettingLayer mine, hints, attr, env;
    Status s = state_parse_info(info, &mine, &err);
    {
        std::lock_guard<std::mutex> lk(st->mu);
        env = st->env_layer;
        attr = st->attr_layer;
        hints = replace ? SettingLayer{} : st->hint_layer;
    }
    if (s == Status::ok) {
        mine.apply_to(&hints.values);
        hints.set |= mine.set;
    }
    Settings probe;
    if (s == Status::ok) s = state_resolve_layers(env, attr, hints, &probe, nullptr, &err);
    const Status local = s;
    /* collective: a hint refused on any rank is refused on all (no rank goes on alone) */
    s = state_agree_error(comm, what, s, err);
    if (s != Status::ok)
        return local == Status::mpi_error ? MPI_ERR_INFO : s == Status::mpi_error ? MPI_ERR_OTHER : MPI_ERR_INFO_VALUE;
    {
        std::lock_guard<std::mutex> lk(st->mu);
        if (state_resolve(st, attr, hints, &err) != Status::ok) return MPI_ERR_INTERN; /* resolved above */
    }
    if (st->rank == 0) state_warn_inapplicable(env, mine, SettingSource::hint, attr, hints, what);
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
        if (state_resolve_layers(st->env_layer, st->attr_layer, st->hint_layer, &s, &why, nullptr) != Status::ok)
            return kv;
    }
    for (int i = 0; i < kNumSettings; ++i)
        if (kSettings[i].scope == SettingScope::COMM && why.source[i] != SettingSource::builtin)
            kv.emplace_back(std::string("compmpi_") + kSettings[i].name, setting_format(static_cast<SettingId>(i), s));
    return kv;
}

Status state_parse_info(MPI_Info info, SettingLayer *layer, std::string *err) {
    if (info == MPI_INFO_NULL) return Status::ok;
    int nkeys = 0;
    if (mpi_next::Info_get_nkeys(info, &nkeys) != MPI_SUCCESS) return Status::mpi_error;
    for (int i = 0; i < nkeys; ++i) {
        char key[MPI_MAX_INFO_KEY + 1];
        if (mpi_next::Info_get_nthkey(info, i, key) != MPI_SUCCESS) return Status::mpi_error;
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
        const size_t ws = st->coll.ws.capacity() + st->dev.ws_pinned.capacity() + st->coll.cpu.capacity() +
                          st->ws_shadow.capacity() + st->ef_scratch.capacity() * sizeof(float);
        all[kSizeWorkspace] = static_cast<long long>(ws);
    }
    for (int i = 0; i < nv && i < kSizeCount; ++i) v[i] = all[i];
    return MPI_SUCCESS;
}

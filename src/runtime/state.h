// SPDX-License-Identifier: BSD-3-Clause
/* Per-communicator state, cached as an MPI attribute (delete callback frees it with the
 * communicator; copy callback gives MPI_Comm_dup the same settings and fresh buffer state). */
#pragma once
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/buffer.h"
#include "base/settings.h"
#include "base/status.h"
#include "coll.h"
#include "runtime/costmodel.h"
#include "runtime/device.h"
#include "runtime/schedule.h"

namespace compmpi {

/* Error-feedback residuals are keyed by the rank's own buffer (address, count) within one
 * communicator: a residual is this rank's own compression error, it never changes what any
 * rank puts on the wire, so rank-local keys are safe (docs/design.md, "whose state"). */
struct BufferKey {
    uintptr_t addr;
    uint64_t count;
    bool operator==(const BufferKey &o) const { return addr == o.addr && count == o.count; }
};
struct BufferKeyHash {
    size_t operator()(const BufferKey &k) const { return std::hash<uint64_t>()(k.addr * 0x9E3779B97F4A7C15ull ^ k.count); }
};

/* awp state decides the bit width, i.e. the bytes on the wire, so it is keyed only by what
 * every rank of the communicator shares for a call: the collective, the element count as
 * passed to MPI (allgather: recvcount) and the root (bcast; -1 otherwise). Never an address:
 * ranks may pass different buffers to the same call (issue 14). */
struct AwpKey {
    int kind;   /* Coll */
    int root;   /* bcast root, -1 for allreduce/allgather */
    uint64_t count;
    bool operator==(const AwpKey &o) const { return kind == o.kind && root == o.root && count == o.count; }
};
struct AwpKeyHash {
    size_t operator()(const AwpKey &k) const {
        return std::hash<uint64_t>()(k.count * 0x9E3779B97F4A7C15ull ^ (static_cast<uint64_t>(k.kind) << 32) ^
                                     static_cast<uint32_t>(k.root));
    }
};
/* Zhuang et al., Algorithm 1, for one key: BitsPerLayer and IntervalCounter of the paper. */
struct AwpState {
    int bits = 0;
    int counter = 0;     /* IntervalCounter: calls with delta < T (paper rule: cumulative) */
    double last_norm = 0; /* |W_(b-1)| */
    bool have_norm = false;
    uint64_t calls = 0;
    uint64_t raises = 0;
};

/* Per-communicator cap on tracked buffers (awp, error feedback); beyond it a table restarts.
 * The awp table sees the same key sequence on every rank, so it restarts on every rank at
 * the same call. */
inline constexpr size_t kMaxTrackedBuffers = 4096;
/* Per-communicator cap on the bytes of error-feedback residuals (host): a residual that would
 * take the table past it restarts the table first (rank-local state: nothing on the wire
 * depends on it). Without it, buffers freed and allocated at new addresses would leave up to
 * kMaxTrackedBuffers stale residuals of any size behind (docs/design.md, "Memory caps"). */
inline constexpr size_t kMaxResidualBytes = size_t{1} << 30;

struct CommState {
    std::mutex mu; /* guards everything below (MPI_THREAD_MULTIPLE) */
    int rank = 0, size = 1;
    bool inter = false;
    SettingLayer env_layer;  /* the process layer when this state was created: environment and MPI_T
                              * writes (src/runtime/mpit.h); later writes do not reach it */
    SettingLayer attr_layer; /* compmpi_comm_set() */
    SettingLayer hint_layer; /* MPI_Info hints */
    Settings settings{};     /* resolved: defaults < env < attr < hints */
    bool mismatch = false;   /* ranks disagree: this communicator passes everything through */
    uint64_t settings_epoch = 0; /* settings resolved so far (collective calls: alike on every rank) */
    int fft = 0;             /* fft_topk's transforms, probed on every rank (state_agree_fft):
                              * 1 the same bits, -1 different, 0 not probed (not eligible) */
    uint32_t bound_warned = 0; /* error_bound: collectives already warned of (bit per Coll) */
    ScheduleState sched; /* θ schedule: calls per collective shape (src/runtime/schedule.h) */
    std::unordered_map<AwpKey, AwpState, AwpKeyHash> awp;
    /* error-feedback residuals (src/runtime/ef.h) */
    std::unordered_map<BufferKey, std::vector<float>, BufferKeyHash> ef;
    std::vector<float> ef_scratch; /* the next residual */
    size_t ef_floats = 0;          /* sum of the residuals' sizes in ef, in 4-byte words (kMaxResidualBytes) */
    /* the output of compressed runs while the cost model explores (host buffers; released
     * once a call is decided): src/runtime/run.cc */
    Buffer ws_shadow;
    std::unique_ptr<CostModel> cost; /* measured times (src/runtime/costmodel.h), created on first use */
    CollState coll;  /* the compressed algorithms' own: call count, workspaces, node split (coll/coll.h) */
    DeviceState dev; /* device buffers: the CUDA module's context, pinned workspaces (src/runtime/device.h) */
    CommState();
    ~CommState();
};

/* The residual of (key, n elements of elem) in st.ef, zero-filled when new, after applying the
 * caps kMaxTrackedBuffers and kMaxResidualBytes. Doubles are stored two 4-byte words each (the
 * vector's storage is 8-byte aligned). Caller holds st.mu. */
std::vector<float> *state_ef_residual(CommState &st, const void *key, size_t n, Elem elem = Elem::f32,
                                      size_t max_bytes = kMaxResidualBytes /* tests pass a smaller cap */);
/* st.ef_scratch sized n words with capacity n: it is swapped into the table when the call
 * succeeds, so every residual's memory is its own size (kMaxResidualBytes counts it). */
float *state_ef_scratch(CommState &st, size_t n);

/* Test-only introspection (tests/mpi/t_soak.c): the sizes of a communicator's tables and
 * workspaces, and the number of live communicator states in the process. Exported as
 *   extern "C" int compmpi_test_state_sizes(MPI_Comm comm, long long *v, int nv)
 * (not in include/compmpi.h); v[i] for i < nv in the order of StateSize. */
enum StateSize : int {
    kSizeAwp,          /* awp entries (cap kMaxTrackedBuffers) */
    kSizeEf,           /* error-feedback residuals (cap kMaxTrackedBuffers) */
    kSizeEfBytes,      /* bytes of those residuals (cap kMaxResidualBytes) */
    kSizeSched,        /* theta-schedule shapes (cap ScheduleState::kMaxShapes) */
    kSizeCost,         /* cost-model entries (bounded by construction, src/runtime/costmodel.h) */
    kSizeWorkspace,    /* bytes of host workspaces (grow-only: the largest call's needs) */
    kSizeLiveStates,   /* communicator states alive in this process */
    kSizeCount
};

/* Process-wide: defaults + environment (+ MPI_T writes), resolved at MPI_Init. */
const Settings &global_settings();
/* A copy of the process layer (environment and MPI_T writes) communicators start from. */
SettingLayer env_layer();
/* Read the environment, with the MPI_T writes made before MPI_Init over it; false (with
 * *err) on an invalid or unknown COMPMPI_* variable. */
Status state_global_init(std::string *err);

/* MPI_T control variables (src/runtime/mpit.h). The process-wide settings: before MPI_Init
 * the environment read now with the MPI_T writes so far over it, after it those MPI_Init
 * resolved with the writes since. */
Status state_process_settings(Settings *out, std::string *err);
/* Set one process-wide setting as COMPMPI_<NAME>=text would: the same parser and the same
 * rules across settings. Before MPI_Init it joins the environment MPI_Init reads; after it,
 * GLOBAL settings are fixed (Status::unsupported) and a COMM setting's new default reaches
 * the communicators whose state is created afterwards (MPI_Comm_dup copies its parent's). On
 * error (invalid_arg, *err says why) nothing changes. */
Status state_process_set(SettingId id, std::string_view text, std::string *err);

/* After ranks found different environments: every communicator's state starts mismatched. */
void state_set_env_mismatch();
/* The probe of MPI_COMM_WORLD at MPI_Init (CommState::fft): where a communicator's state is
 * created from the environment, it starts with this verdict (a subset of agreeing ranks
 * agrees; where the world's ranks differ, a new communicator is not trusted). */
void state_set_env_fft(int verdict);

/* Create the keyval (after MPI_Init) and free it (before MPI_Finalize). */
Status state_keyval_create();
void state_keyval_free();

/* The state of comm, created on first use with env settings. nullptr only if MPI failed. */
CommState *state_get(MPI_Comm comm);

/* The one resolution every path uses (environment at MPI_Init, compmpi_comm_set, hints,
 * printing): settings_resolve (src/base/settings.h: layers and the rules across settings) then
 * the policy's checks (policy_check_settings). On error *out is untouched. */
Status state_resolve_layers(const SettingLayer &env, const SettingLayer &attr, const SettingLayer &hints, Settings *out,
                            Resolution *why, std::string *err);

/* Re-resolve st->settings from the layers; on an invalid combination leaves the settings
 * unchanged and returns invalid_arg with *err. Caller holds st->mu. */
Status state_resolve(CommState *st, const SettingLayer &attr, const SettingLayer &hints, std::string *err);

/* Collective over comm: ranks compare a hash of the resolved settings; on a difference
 * every rank marks the communicator mismatched (exact passthrough) and rank 0 warns. */
Status state_agree(MPI_Comm comm, CommState *st, const char *what);

/* Collective over comm: where its codec is fft_topk and its ranks were not probed yet, every
 * rank runs the codec's transforms on the same probe input (fft_probe) and the ranks compare
 * the hash of the output. fft_topk decodes every rank's payloads on every rank with FFTW,
 * whose codelets depend on the CPU and the FFTW build: on ranks that differ they would end
 * with different bits, so the communicator's fft_topk calls pass through (reason
 * fft_ranks_differ) and rank 0 says why. Called by state_agree. */
void state_agree_fft(MPI_Comm comm, CommState *st, const char *what);

/* Collective over comm, after a step that may fail on some ranks (hints, compmpi_comm_set,
 * the environment at MPI_Init): every rank learns whether any rank failed. The message is
 * printed once, by rank 0, when every rank failed with the same message, else by each
 * failing rank (prefixed with its rank). Returns ok when no rank failed, else local's error
 * on a failing rank and invalid_arg on the others (mpi_error if the exchange failed). */
Status state_agree_error(MPI_Comm comm, const char *what, Status local, const std::string &err);

/* MPI_Comm_set_info / MPI_Comm_dup_with_info (replace: the hints are exactly those of info):
 * parse and resolve, agree on the outcome (collective), apply. Returns an MPI error code;
 * on error the communicator keeps its settings on every rank. */
int state_apply_hints(MPI_Comm comm, MPI_Info info, bool replace, const char *what);

/* Warn (caller: one rank) about the settings of layer (set from src by `what`) that have no
 * effect with the communicator's other settings, or that a higher layer overrides. */
void state_warn_inapplicable(const SettingLayer &env, const SettingLayer &layer, SettingSource src,
                             const SettingLayer &attr, const SettingLayer &hints, const char *what);

/* The compmpi_<name> hints in effect on a communicator (MPI_Comm_get_info): every
 * communicator setting not at its built-in default by choice (environment, compmpi_comm_set,
 * hints, or implied by another setting), with its effective value. */
std::vector<std::pair<std::string, std::string>> state_effective_hints(CommState *st);

/* Parse our compmpi_* keys out of an info object into layer; unknown compmpi_* keys and bad
 * values are errors. Other keys are ignored (they belong to MPI). */
Status state_parse_info(MPI_Info info, SettingLayer *layer, std::string *err);

}  // namespace compmpi

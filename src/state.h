/* Per-communicator state, cached as an MPI attribute (delete callback frees it with the
 * communicator; copy callback gives MPI_Comm_dup the same settings and fresh buffer state). */
#pragma once
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "costmodel.h"
#include "schedule.h"
#include "settings.h"
#include "status.h"

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
    SettingLayer attr_layer; /* compmpi_comm_set() */
    SettingLayer hint_layer; /* MPI_Info hints */
    Settings settings{};     /* resolved: defaults < env < attr < hints */
    bool mismatch = false;   /* ranks disagree: this communicator passes everything through */
    int fft = 0;             /* fft_topk's transforms, probed on every rank (state_agree_fft):
                              * 1 the same bits, -1 different, 0 not probed (not eligible) */
    uint64_t calls = 0;      /* compressed calls so far (RNG streams, statistics) */
    ScheduleState sched; /* θ schedule: calls per collective shape (src/schedule.h) */
    std::unordered_map<AwpKey, AwpState, AwpKeyHash> awp;
    std::unordered_map<BufferKey, std::vector<float>, BufferKeyHash> ef; /* error-feedback residuals */
    std::vector<float> ef_scratch;                                        /* the next residual */
    size_t ef_floats = 0; /* sum of the residuals' sizes in ef (kMaxResidualBytes) */
    Buffer ws_send, ws_recv, ws_aux_blob; /* host blob workspaces */
    /* the same three in pinned host memory, swapped in for calls on device buffers (the CUDA
     * backend copies payloads straight between them and the GPU: src/interpose.cc) */
    Buffer ws_pin_send, ws_pin_recv, ws_pin_aux_blob;
    std::unique_ptr<CostModel> cost;      /* measured times (src/costmodel.h), created on first use */
    /* hierarchy (created on first use, freed with the state) */
    int hier_known = 0;                    /* 0 = not yet split */
    MPI_Comm hier_node = MPI_COMM_NULL, hier_leaders = MPI_COMM_NULL;
    int hier_node_rank = 0, hier_nodes = 1, hier_max_per_node = 1;
    /* private duplicates for point-to-point messages of compressed algorithms (halving-
     * doubling), per communicator they serve (this one, its node leaders); freed with the state */
    std::vector<std::pair<MPI_Comm, MPI_Comm>> p2p;
    /* the links between the ranks of a communicator (this one, its node leaders), measured
     * once for allreduce_algorithm=auto and agreed over its ranks (allreduce_choice.cc) */
    struct LinkProbe {
        MPI_Comm comm;
        double alpha, beta; /* seconds per message, bytes per second */
    };
    std::vector<LinkProbe> links;
    /* allreduce_algorithm=auto where the alpha-beta model is not clear: both algorithms timed
     * on the first calls of a (communicator, n, codec parameters), then the faster one
     * (coll/allreduce/allreduce_choice.cc); at most kMaxAutoChoices entries */
    struct AutoChoice {
        MPI_Comm comm;
        size_t n;
        uint64_t codec;        /* codec id, bits, variant, param, bucket */
        int explored = 0;      /* calls run so far */
        double best[2] = {0, 0}; /* fastest agreed time (0: none yet): two-phase, halving-doubling */
        int decided = -1;      /* -1 exploring, 0 two-phase, 1 halving-doubling */
    };
    std::vector<AutoChoice> auto_choices;
    /* CUDA module context for device buffers (created on the first device call) */
    void *gpu_ctx = nullptr;
    void (*gpu_destroy)(void *) = nullptr;
    CommState();
    ~CommState();
    Buffer ws_f[4];          /* fp32 scratch of the CPU backend (coll/backend.h) */
};

/* The residual of (key, n) in st.ef, zero-filled when new, after applying the caps
 * kMaxTrackedBuffers and kMaxResidualBytes. Caller holds st.mu. */
std::vector<float> *state_ef_residual(CommState &st, const void *key, size_t n,
                                      size_t max_bytes = kMaxResidualBytes /* tests pass a smaller cap */);
/* st.ef_scratch sized n with capacity n: it is swapped into the table when the call succeeds,
 * so every residual's memory is its own size (kMaxResidualBytes counts it). */
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
    kSizeCost,         /* cost-model entries (bounded by construction, src/costmodel.h) */
    kSizeWorkspace,    /* bytes of host workspaces (grow-only: the largest call's needs) */
    kSizeLiveStates,   /* communicator states alive in this process */
    kSizeCount
};

/* Process-wide: defaults + environment, resolved at MPI_Init. */
const Settings &global_settings();
const SettingLayer &env_layer();
/* Read the environment; false (with *err) on an invalid or unknown COMPMPI_* variable. */
Status state_global_init(std::string *err);

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
 * printing): settings_resolve (src/settings.h: layers and the rules across settings) then
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
void state_warn_inapplicable(const SettingLayer &layer, SettingSource src, const SettingLayer &attr,
                             const SettingLayer &hints, const char *what);

/* The compmpi_<name> hints in effect on a communicator (MPI_Comm_get_info): every
 * communicator setting not at its built-in default by choice (environment, compmpi_comm_set,
 * hints, or implied by another setting), with its effective value. */
std::vector<std::pair<std::string, std::string>> state_effective_hints(CommState *st);

/* Parse our compmpi_* keys out of an info object into layer; unknown compmpi_* keys and bad
 * values are errors. Other keys are ignored (they belong to MPI). */
Status state_parse_info(MPI_Info info, SettingLayer *layer, std::string *err);

}  // namespace compmpi

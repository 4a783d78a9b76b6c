// SPDX-License-Identifier: BSD-3-Clause
/* Test-only fault injection (src/base/fault.h). */
#include "base/fault.h"

#include <mpi.h>
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "base/log.h"
#include "base/mpi_next.h"

namespace compmpi {

std::atomic<int> g_fault_armed{0};

namespace {

struct Spec {
    FaultKind kind = FaultKind::none;
    int rank = -1;
    uint64_t call = 0;
    FaultWhere where = FaultWhere::any;
    uint64_t seed = 1;      /* cost_noise */
    double amp = 0.65;      /* cost_noise */
    bool toward_comp = true; /* cost_skew */
    double factor = 100;    /* cost_skew, hier_skew */
    int toward_hier = 0;    /* hier_skew: 0 flat, 1 hierarchical, 2 tie */
    bool hier_model = false; /* hier_skew: skew the stage model's predictions (model=1), not the samples */
};
Spec g_spec;
std::mutex g_mu;
std::atomic<uint64_t> g_calls{0}; /* compressed collectives begun on this rank */
thread_local const char *t_coll __attribute__((tls_model("initial-exec"))) = "";
int g_world_rank = -2;            /* -2: not known yet */
bool g_fired = false;

constexpr const char *kKinds[] = {"none",          "encode_fail", "corrupt_blob",  "mpi_error",
                                  "fft_differ",    "stage_mpi",   "fft_adopt",     "cost_plain",
                                  "cost_compress", "link_skew",   "truncate_blob", "corrupt_payload",
                                  "rank_abort",    "rank_kill",   "alloc_fail",    "alloc_throw",
                                  "cost_noise",    "cost_skew",   "hier_skew"};
constexpr int kNKinds = static_cast<int>(sizeof kKinds / sizeof *kKinds);
static_assert(kNKinds == static_cast<int>(FaultKind::hier_skew) + 1, "one name per FaultKind");
/* the kinds that fire at a PMPI call of an algorithm (where= applies) */
bool at_mpi_call(FaultKind k) {
    return k == FaultKind::mpi_error || k == FaultKind::rank_abort || k == FaultKind::rank_kill;
}
std::string kind_list() {
    std::string l;
    for (int k = 1; k < kNKinds; ++k) l += (k > 1 ? ", " : "") + std::string(kKinds[k]);
    return l;
}
constexpr const char *kWheres[] = {"any", "alltoall", "allgather", "bcast", "allreduce", "reduce",
                                   "ialltoall", "iallgather", "wait"};

bool parse(const char *text, Spec *s, std::string *err) {
    std::string v(text);
    size_t pos = 0;
    bool first = true, have_rank = false, have_call = false;
    while (pos <= v.size()) {
        size_t end = v.find(':', pos);
        if (end == std::string::npos) end = v.size();
        const std::string tok = v.substr(pos, end - pos);
        pos = end + 1;
        if (first) {
            first = false;
            for (int k = 1; k < kNKinds; ++k)
                if (tok == kKinds[k]) s->kind = static_cast<FaultKind>(k);
            if (s->kind == FaultKind::none) {
                *err = "unknown fault '" + tok + "' (" + kind_list() + ")";
                return false;
            }
            continue;
        }
        const size_t eq = tok.find('=');
        const std::string key = tok.substr(0, eq), val = eq == std::string::npos ? "" : tok.substr(eq + 1);
        char *e = nullptr;
        if (key == "rank") {
            long r = std::strtol(val.c_str(), &e, 10);
            if (val.empty() || *e || r < 0) return *err = "rank= needs a rank >= 0", false;
            s->rank = static_cast<int>(r);
            have_rank = true;
        } else if (key == "call") {
            unsigned long long c = std::strtoull(val.c_str(), &e, 10);
            if (val.empty() || *e || c < 1) return *err = "call= needs a call number >= 1", false;
            s->call = c;
            have_call = true;
        } else if (key == "where") {
            bool ok = false;
            for (int w = 0; w < 9; ++w)
                if (val == kWheres[w]) s->where = static_cast<FaultWhere>(w), ok = true;
            if (!ok) return *err = "unknown where='" + val + "'", false;
            if (!at_mpi_call(s->kind)) return *err = "where= applies to mpi_error, rank_abort and rank_kill only", false;
        } else if (key == "seed" && s->kind == FaultKind::cost_noise) {
            const unsigned long long v2 = std::strtoull(val.c_str(), &e, 10);
            if (val.empty() || *e) return *err = "seed= needs an integer >= 0", false;
            s->seed = v2;
        } else if (key == "amp" && s->kind == FaultKind::cost_noise) {
            const double a = std::strtod(val.c_str(), &e);
            if (val.empty() || *e || !(a >= 0 && a < 1)) return *err = "amp= needs a number in [0, 1)", false;
            s->amp = a;
        } else if (key == "toward" && s->kind == FaultKind::cost_skew) {
            if (val != "compressed" && val != "exact") return *err = "toward= is compressed or exact", false;
            s->toward_comp = val == "compressed";
        } else if (key == "toward" && s->kind == FaultKind::hier_skew) {
            if (val != "flat" && val != "hierarchical" && val != "tie")
                return *err = "toward= is flat, hierarchical or tie", false;
            s->toward_hier = val == "flat" ? 0 : val == "hierarchical" ? 1 : 2;
        } else if (key == "model" && s->kind == FaultKind::hier_skew) {
            if (val != "0" && val != "1") return *err = "model= is 0 or 1", false;
            s->hier_model = val == "1";
        } else if (key == "factor" && (s->kind == FaultKind::cost_skew || s->kind == FaultKind::hier_skew)) {
            const double f = std::strtod(val.c_str(), &e);
            if (val.empty() || *e || !(f > 0 && f < 1e9)) return *err = "factor= needs a number above 0", false;
            s->factor = f;
        } else {
            return *err = "unknown field '" + tok + "' (rank=R, call=N, where=W)", false;
        }
    }
    if (s->kind == FaultKind::fft_differ || s->kind == FaultKind::fft_adopt || s->kind == FaultKind::link_skew)
        have_call = true, s->call = 0; /* the first probe / MPI_Init */
    if (s->kind == FaultKind::stage_mpi || s->kind == FaultKind::cost_plain ||
        s->kind == FaultKind::cost_compress || s->kind == FaultKind::cost_noise || s->kind == FaultKind::cost_skew ||
        s->kind == FaultKind::hier_skew) { /* a mode of every rank and call, not an event */
        if (have_rank || have_call) return *err = std::string(kKinds[static_cast<int>(s->kind)]) + " takes no rank= or call=", false;
        have_rank = have_call = true;
    }
    if (!have_rank || !have_call) return *err = "rank= and call= are required", false;
    return true;
}

/* Read COMPMPI_FAULT when the library loads: the hooks then cost one branch on a global. */
struct Init {
    Init() {
        const char *v = std::getenv("COMPMPI_FAULT");
        if (!v || !*v || std::strcmp(v, "none") == 0) return;
        std::string err;
        if (!parse(v, &g_spec, &err)) {
            std::fprintf(stderr, "libcompmpi error: COMPMPI_FAULT=%s (test-only fault injection): %s\n", v,
                         err.c_str());
            std::fflush(stderr);
            std::_Exit(2);
        }
        g_fault_armed.store(1, std::memory_order_relaxed);
    }
} g_init;

int world_rank() {
    if (g_world_rank == -2) {
        int init = 0, fin = 0;
        mpi_next::Initialized(&init);
        mpi_next::Finalized(&fin);
        if (!init || fin) return -1;
        mpi_next::Comm_rank(MPI_COMM_WORLD, &g_world_rank);
    }
    return g_world_rank;
}

}  // namespace

void fault_call_begin(const char *coll) {
    g_calls.fetch_add(1, std::memory_order_relaxed);
    t_coll = coll;
}

bool fault_fire(FaultKind kind, FaultWhere where) {
    std::lock_guard<std::mutex> lk(g_mu);
    if (g_fired || kind != g_spec.kind) return false;
    if (g_spec.where != FaultWhere::any && where != g_spec.where) return false;
    const uint64_t call = g_calls.load(std::memory_order_relaxed);
    if (call < g_spec.call || world_rank() != g_spec.rank) return false;
    g_fired = true;
    g_fault_armed.store(0, std::memory_order_relaxed);
    if (kind == FaultKind::fft_differ) {
        log_warn("COMPMPI_FAULT (test-only): injected fft_differ: this rank's fft_topk probe hash is changed");
        return true;
    }
    if (kind == FaultKind::fft_adopt) {
        log_warn("COMPMPI_FAULT (test-only): injected fft_adopt: this rank does not adopt rank 0's FFTW wisdom");
        return true;
    }
    if (kind == FaultKind::link_skew) {
        log_warn("COMPMPI_FAULT (test-only): injected link_skew: this rank's link probe measures 1000x its alpha, its explored two-phase calls 1000x their time");
        return true;
    }
    const bool mpi = at_mpi_call(kind);
    const char *text = kind == FaultKind::rank_abort  ? "rank_abort (MPI_Abort) after PMPI "
                       : kind == FaultKind::rank_kill ? "rank_kill (SIGKILL) after PMPI "
                       : mpi                          ? "mpi_error in PMPI "
                                                      : kKinds[static_cast<int>(kind)];
    log_warn("COMPMPI_FAULT (test-only): injected %s%s in compressed call %llu (%s) on this rank", text,
             mpi ? kWheres[static_cast<int>(where)] : "", static_cast<unsigned long long>(call), t_coll);
    return true;
}

int fault_mpi_rc(FaultWhere where, int rc) {
    if (rc != MPI_SUCCESS) return rc;
    /* the peers are inside the collective: the launcher must end them. The pause lets it
     * forward this rank's warning line before it tears the job down. */
    if (fault_fire(FaultKind::rank_abort, where)) {
        log_flush_pause();
        mpi_next::Abort(MPI_COMM_WORLD, 71);
    }
    if (fault_fire(FaultKind::rank_kill, where)) {
        log_flush_pause();
        raise(SIGKILL);
    }
    return fault_fire(FaultKind::mpi_error, where) ? MPI_ERR_OTHER : rc;
}

bool fault_alloc_fail() { return fault_fire(FaultKind::alloc_fail, FaultWhere::any); }

bool fault_stage_mpi() { return g_spec.kind == FaultKind::stage_mpi; }

int fault_cost_force() {
    return g_spec.kind == FaultKind::cost_plain ? -1 : g_spec.kind == FaultKind::cost_compress ? 1 : 0;
}

double fault_noise_factor(uint64_t seed, double amp, uint64_t n) {
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + n * 0xBF58476D1CE4E5B9ull + 0x94D049BB133111EBull; /* splitmix64 */
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    x ^= x >> 31;
    const double u = static_cast<double>(x >> 11) * (1.0 / 9007199254740992.0); /* [0, 1) */
    return 1.0 - amp + 2.0 * amp * u;
}

bool fault_cost_mode() {
    return g_spec.kind == FaultKind::cost_plain || g_spec.kind == FaultKind::cost_compress ||
           g_spec.kind == FaultKind::cost_noise || g_spec.kind == FaultKind::cost_skew ||
           g_spec.kind == FaultKind::hier_skew;
}

double fault_hier_sample(bool hierarchical, double t) {
    if (g_spec.kind != FaultKind::hier_skew || g_spec.hier_model) return t;
    if (g_spec.toward_hier == 2) return 1e-3;
    /* toward flat: the hierarchical samples slow down, and the reverse */
    return hierarchical == (g_spec.toward_hier == 0) ? t * g_spec.factor : t;
}

int fault_hier_predicted(bool hierarchical, double *t) {
    if (g_spec.kind != FaultKind::hier_skew) return 1;
    if (!g_spec.hier_model) return 0;
    if (g_spec.toward_hier == 2) *t = 1e-3;
    else if (hierarchical == (g_spec.toward_hier == 0)) *t *= g_spec.factor;
    return 2;
}

double fault_cost_factor(bool plain, uint64_t n) {
    if (g_spec.kind == FaultKind::cost_skew) return plain == g_spec.toward_comp ? g_spec.factor : 1.0;
    if (g_spec.kind != FaultKind::cost_noise) return 1.0;
    /* one stream per side: the n-th exact and the n-th compressed sample draw apart */
    return fault_noise_factor(g_spec.seed, g_spec.amp, 2 * n + (plain ? 0 : 1));
}

int fault_state() { return g_spec.kind == FaultKind::none ? -1 : g_fired ? 1 : 0; }

}  // namespace compmpi

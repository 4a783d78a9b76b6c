// SPDX-License-Identifier: BSD-3-Clause
#include "runtime/settings_rules.h"
#include "runtime/runtime.h"

#include "runtime/costmodel.h"

#include <hwloc.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <thread>
#include <cstdio>
#include <cstring>
#include <string>

#include "base/fault.h"
#include "fft_topk/fft_topk.h"
#include "base/log.h"
#include "base/mpi_family.h"
#include "simd.h"
#include "runtime/state.h"
#include "base/stats.h"
#include "runtime/dispatch.h"
#include "runtime/progress.h"
#include "runtime/report.h"
#include "runtime/verdict.h"
#include "base/mpi_next.h"

namespace compmpi {

namespace runtime_detail {
constinit thread_local int t_depth __attribute__((tls_model("initial-exec"))) = 0;
}  // namespace runtime_detail

namespace {
std::atomic<bool> g_active{false};

/* Ranks of MPI_COMM_WORLD on this node. Collective over MPI_COMM_WORLD: every rank calls it,
 * whatever its own COMPMPI_THREADS says (MPMD ranks may set it differently; a rank that
 * skipped the split would leave the others waiting in it). */
int node_local_ranks() {
    int local = 1;
    MPI_Comm node;
    if (mpi_next::Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        mpi_next::Comm_size(node, &local);
        mpi_next::Comm_free(&node);
    }
    return local;
}

/* Cores this rank may use for codec kernels: its binding if it is bound to part of the
 * machine, else the node's cores divided among the `local` ranks sharing the node. */
int auto_threads(int local) {
    hwloc_topology_t topo;
    if (hwloc_topology_init(&topo) != 0) return 1;
    int threads = 1;
    if (hwloc_topology_load(topo) == 0) {
        int total = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
        int mine = total;
        hwloc_bitmap_t set = hwloc_bitmap_alloc();
        if (set && hwloc_get_cpubind(topo, set, HWLOC_CPUBIND_PROCESS) == 0)
            mine = hwloc_get_nbobjs_inside_cpuset_by_type(topo, set, HWLOC_OBJ_CORE);
        hwloc_bitmap_free(set);
        if (total < 1) total = 1;
        threads = (mine > 0 && mine < total) ? mine : total / local;
    }
    hwloc_topology_destroy(topo);
    return threads < 1 ? 1 : threads;
}

/* fft_plan=measure|patient: rank 0 of MPI_COMM_WORLD times the plans of the environment's
 * fft_block length and every rank plans from its wisdom, so that all run the same plans (and
 * decode the same bits; the fft probe of state_agree_fft, which runs after this, checks it).
 * Collective over MPI_COMM_WORLD on every rank, whatever its own settings say; every branch
 * is taken alike on all ranks (decided from agreed values only). */
void agree_fft_plans(const Settings &s, int rank) {
    const int64_t rigor = s.fft_plan, block = s.fft_block;
    int64_t v[4] = {rigor, -rigor, block, -block}, m[4];
    if (mpi_next::Allreduce(v, m, 4, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD) != MPI_SUCCESS) return;
    if (m[0] == fft_plan_kind::estimate && m[1] == -fft_plan_kind::estimate) return; /* all estimate */
    if (m[0] != -m[1] || m[2] != -m[3]) {
        if (rank == 0)
            log_warn("MPI_Init: fft_plan (or fft_block) differs across ranks; fft_topk plans with FFTW_ESTIMATE "
                     "everywhere. Give every rank the same COMPMPI_FFT_PLAN and COMPMPI_FFT_BLOCK.");
        return;
    }
    const std::string rname = rigor == fft_plan_kind::patient ? "patient" : "measure";
    if (block <= 0) {
        if (rank == 0)
            log_warn("MPI_Init: fft_plan=%s has no effect: fft_block=0 (one transform per buffer, a length per "
                     "buffer size) is planned with FFTW_ESTIMATE", rname.c_str());
        return;
    }
    const auto rig = rigor == fft_plan_kind::patient ? fft_topk::PlanRigor::patient : fft_topk::PlanRigor::measure;
    const auto t0 = std::chrono::steady_clock::now();
    std::string wisdom;
    if (rank == 0) wisdom = fft_topk::tune_plans(static_cast<size_t>(block), rig);
    uint64_t size = wisdom.size();
    int ok = 0, all = 0;
    if (mpi_next::Bcast(&size, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD) == MPI_SUCCESS && size > 0 && size < (1u << 30)) {
        wisdom.resize(size);
        if (mpi_next::Bcast(&wisdom[0], static_cast<int>(size), MPI_CHAR, 0, MPI_COMM_WORLD) == MPI_SUCCESS)
            ok = rank == 0 ? 1
                 : COMPMPI_FAULT_ON() && fault_fire(FaultKind::fft_adopt, FaultWhere::any)
                     ? 0 /* test-only: as if this rank's FFTW could not plan from the wisdom */
                 : fft_topk::adopt_plans(static_cast<size_t>(block), rig, wisdom) ? 1 : 0;
    }
    if (mpi_next::Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD) != MPI_SUCCESS) all = 0;
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!all) {
        fft_topk::reset_plans(static_cast<size_t>(block)); /* every rank: back to FFTW_ESTIMATE, no wisdom */
        if (rank == 0)
            log_warn("MPI_Init: fft_plan=%s: %s; fft_topk plans with FFTW_ESTIMATE everywhere", rname.c_str(),
                     size == 0 ? "FFTW could not plan the block length" : "a rank could not plan from rank 0's wisdom");
    }
    if (rank == 0) {
        char line[200];
        std::snprintf(line, sizeof line, "compmpi-stats-fft-plan: fft_plan=%s length=%lld plan_s=%.3f wisdom_bytes=%llu shared=%s",
                      rname.c_str(), static_cast<long long>(block), secs, static_cast<unsigned long long>(size),
                      all ? "yes" : "no");
        stats_note(line);
    }
}
}  // namespace


bool runtime_active() { return g_active.load(std::memory_order_acquire); }

int raise_error(MPI_Comm comm, int code) {
    mpi_next::Comm_call_errhandler(comm, code);
    return code;
}

int abort_collective(MPI_Comm comm, int code, const char *what) {
    raise_error(comm, code);
    log_error("%s: this rank failed inside the collective and the other ranks cannot learn of it: aborting the job "
              "rather than hanging", what);
    log_flush_pause();
    mpi_next::Abort(comm, code);
    return code;
}

void runtime_init() {
    ReentryGuard guard;
    int rank = 0;
    mpi_next::Comm_rank(MPI_COMM_WORLD, &rank);
    log_set_rank(rank);
    std::string err;
    Status st = state_global_init(&err);
    if (st != Status::ok)
        err += ". libcompmpi stops the job at MPI_Init on an invalid configuration: fix or unset the variable";
    /* every rank parsed its own environment: print a message shared by all ranks once */
    if (state_agree_error(MPI_COMM_WORLD, "MPI_Init", st, err) != Status::ok) {
        /* give the launcher a moment to forward the message before the abort tears the job down */
        std::fflush(stderr);
        mpi_next::Barrier(MPI_COMM_WORLD);
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        /* rank 0 tears the job down (one abort notice, not one per rank); the others wait
         * for it and abort themselves only if it did not happen */
        if (rank != 0) std::this_thread::sleep_for(std::chrono::seconds(10));
        mpi_next::Abort(MPI_COMM_WORLD, 1);
    }
    const Settings &s = global_settings();
    if (s.simd != simd_kind::auto_)
        simd_force(s.simd == simd_kind::scalar ? SimdLevel::scalar
                   : s.simd == simd_kind::avx2 ? SimdLevel::avx2 : SimdLevel::avx512);
    const int local = node_local_ranks(); /* collective: on every rank, before any local choice */
    /* statistics on if any rank asked (MPMD ranks may differ); progress threads only if every
     * rank has them (ranks that asked for different thread levels, or set nb_progress
     * differently, would otherwise compress a non-blocking call on some ranks and pass it
     * through on others: a hang). One collective, agreed before use. */
    /* 1: progress threads, 2: inline (fibers); every rank the same, else none (a fiber's
     * exchanges poll their non-blocking forms, a thread's block: MPI would not match them) */
    const NbMode nbm = nb_mode();
    const int threads = nbm == NbMode::thread ? 1 : nbm == NbMode::inline_ ? 2 : 0;
    int mine[3] = {s.stats ? 1 : 0, -threads, threads}, all[3] = {0, 0, 0};
    mpi_next::Allreduce(mine, all, 3, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    stats_enable(all[0] != 0);
    nb_threads_agree(/*every rank the same mode: min = max > 0*/ -all[1] == all[2] && all[2] > 0,
                     /*some rank*/ all[2] != 0, rank);
    if (nb_inline_refused() && rank == 0)
        log_warn("nb_progress=inline needs MPI_THREAD_SINGLE or MPI_THREAD_FUNNELED (this program runs at %s): "
                 "non-blocking and persistent collectives pass through; nb_progress=thread compresses them on "
                 "progress threads", nb_thread_level_name());
    kernel_threads_set(s.threads > 0 ? static_cast<int>(s.threads) : auto_threads(local));
    mpi_cuda_aware_init();
    agree_fft_plans(s, rank); /* before the world's fft probe (state_agree) */
    cost_decisions_init(s, MPI_COMM_WORLD); /* collective on every rank: cost_replay, agreed */
    if (state_keyval_create() != Status::ok) {
        log_error("could not create the communicator attribute; libcompmpi passes every call through");
        return;
    }
    CommState *world = state_get(MPI_COMM_WORLD);
    if (world && state_agree(MPI_COMM_WORLD, world, "MPI_Init") == Status::mismatch) state_set_env_mismatch();
    if (world) state_set_env_fft(world->fft); /* (probed there where the environment chose fft_topk) */
    const SettingLayer env = env_layer(); /* COMPMPI_* variables and MPI_T writes before MPI_Init */
    if (rank == 0) state_warn_inapplicable(env, env, SettingSource::env, SettingLayer{}, SettingLayer{}, "MPI_Init");
    if (s.print_config && rank == 0) {
        Settings r;
        Resolution why;
        state_resolve_layers(env, SettingLayer{}, SettingLayer{}, &r, &why, nullptr);
        settings_print(stderr, r, why, "process, from defaults and COMPMPI_* variables");
        std::fprintf(stderr, "  (kernel threads per rank: %d, SIMD: %s)\n", kernel_threads(), simd_name(simd_active()));
        std::fprintf(stderr, "  (built for %s: %s; CUDA-aware MPI: %s)\n", mpi_family_name(mpi_family_built()),
                     mpi_family_describe().c_str(), mpi_cuda_aware() ? "yes" : "no");
        const NbMode mode = nb_mode();
        std::fprintf(stderr, "  (thread level: %s; non-blocking and persistent collectives: %s)\n", nb_thread_level_name(),
                     mode == NbMode::thread    ? "compressed by progress threads"
                     : mode == NbMode::inline_ ? "compressed inline, on the application's thread"
                                               : "passed through");
    }
    g_active.store(true, std::memory_order_release);
    mpi_next_order_warn(rank, "MPI_Init"); /* another library's MPI_Allreduce & co. before ours */
}

void runtime_bypassed(const char *what) {
    if (!*mpi_next_preceded_by()) return;
    int init = 0, fin = 0;
    mpi_next::Initialized(&init);
    mpi_next::Finalized(&fin);
    if (!init || fin) return;
    int rank = -1;
    mpi_next::Comm_rank(MPI_COMM_WORLD, &rank);
    std::string call = std::string("MPI_") + what; /* "allreduce" -> "MPI_Allreduce" */
    call[4] = static_cast<char>(std::toupper(static_cast<unsigned char>(call[4])));
    mpi_next_order_warn(rank, call.c_str());
}

void runtime_finalize() {
    if (!g_active.exchange(false)) return;
    verdict_invalidate(); /* no memoised verdict outlives the library's activity */
    ReentryGuard guard;
    /* stats_report is collective: ranks launched with different COMPMPI_STATS (MPMD) agreed
     * at MPI_Init, else a rank without it would leave the others waiting in the report */
    if (stats_enabled()) stats_report(MPI_COMM_WORLD);
    cost_decisions_finalize(global_settings(), MPI_COMM_WORLD); /* rank 0: cost_record, decision lines */
    state_keyval_free();
}

int runtime_mpi_init(int *argc, char ***argv, int required, int *provided, const char *what) {
    mpi_family_check(what); /* before anything reaches an MPI of the wrong family (mpi4py: its
                             * MPI was dlopen()ed after our load-time check) */
    UpperClean upper;
    /* the MPI calls from here on go where pmpi_chain says, as MPI_Init reads it (an MPI_T
     * write before MPI_Init included; an invalid value keeps the load's choice, and
     * runtime_init then stops the job naming it) */
    Settings s;
    if (state_process_settings(&s, nullptr) == Status::ok && s.pmpi_chain != mpi_next_chained())
        mpi_next_resolve(s.pmpi_chain);
    const int level = nb_init_level(required);
    /* the program's own call where libcompmpi does not raise the level (MPI_Init keeps MPI's
     * default level: MPIR_CVAR_DEFAULT_THREAD_LEVEL, OMPI_MPI_THREAD_LEVEL) */
    int rc;
    if (level <= required && std::strcmp(what, "MPI_Init") == 0) {
        rc = mpi_next::Init(argc, argv);
        if (rc == MPI_SUCCESS) rc = mpi_next::Query_thread(provided);
    } else {
        rc = mpi_next::Init_thread(argc, argv, level > required ? level : required, provided);
    }
    if (rc == MPI_SUCCESS) nb_init_done(*provided), runtime_init();
    return rc;
}

int runtime_mpi_finalize() {
    UpperClean upper;
    nb_finalize();
    runtime_finalize();
    return mpi_next::Finalize();
}

}  // namespace compmpi

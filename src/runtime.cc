#include "runtime.h"

#include <hwloc.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <cstdio>
#include <string>

#include "log.h"
#include "mpi_family.h"
#include "simd.h"
#include "state.h"
#include "stats.h"
#include "verdict.h"

namespace compmpi {

namespace {
std::atomic<bool> g_active{false};
/* read on every call: initial-exec, no __tls_get_addr (libcompmpi is loaded at start-up,
 * preloaded or linked) */
thread_local int t_depth __attribute__((tls_model("initial-exec"))) = 0;

/* Ranks of MPI_COMM_WORLD on this node. Collective over MPI_COMM_WORLD: every rank calls it,
 * whatever its own COMPMPI_THREADS says (MPMD ranks may set it differently; a rank that
 * skipped the split would leave the others waiting in it). */
int node_local_ranks() {
    int local = 1;
    MPI_Comm node;
    if (PMPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        PMPI_Comm_size(node, &local);
        PMPI_Comm_free(&node);
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
}  // namespace

ReentryGuard::ReentryGuard() { ++t_depth; }
ReentryGuard::~ReentryGuard() { --t_depth; }
bool ReentryGuard::active() { return t_depth > 0; }

bool runtime_active() { return g_active.load(std::memory_order_acquire); }

int raise_error(MPI_Comm comm, int code) {
    PMPI_Comm_call_errhandler(comm, code);
    return code;
}

void runtime_init() {
    ReentryGuard guard;
    int rank = 0;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    log_set_rank(rank);
    std::string err;
    Status st = state_global_init(&err);
    if (st != Status::ok)
        err += ". libcompmpi stops the job at MPI_Init on an invalid configuration: fix or unset the variable";
    /* every rank parsed its own environment: print a message shared by all ranks once */
    if (state_agree_error(MPI_COMM_WORLD, "MPI_Init", st, err) != Status::ok) {
        /* give the launcher a moment to forward the message before the abort tears the job down */
        std::fflush(stderr);
        PMPI_Barrier(MPI_COMM_WORLD);
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        /* rank 0 tears the job down (one abort notice, not one per rank); the others wait
         * for it and abort themselves only if it did not happen */
        if (rank != 0) std::this_thread::sleep_for(std::chrono::seconds(10));
        PMPI_Abort(MPI_COMM_WORLD, 1);
    }
    const Settings &s = global_settings();
    if (s.simd != simd_kind::auto_)
        simd_force(s.simd == simd_kind::scalar ? SimdLevel::scalar
                   : s.simd == simd_kind::avx2 ? SimdLevel::avx2 : SimdLevel::avx512);
    const int local = node_local_ranks(); /* collective: on every rank, before any local choice */
    /* statistics on if any rank asked (MPMD ranks may differ): collective, agreed before use */
    int want = s.stats ? 1 : 0, any = want;
    PMPI_Allreduce(&want, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    stats_enable(any != 0);
    kernel_threads_set(s.threads > 0 ? static_cast<int>(s.threads) : auto_threads(local));
    mpi_cuda_aware_init();
    if (state_keyval_create() != Status::ok) {
        log_error("could not create the communicator attribute; libcompmpi passes every call through");
        return;
    }
    CommState *world = state_get(MPI_COMM_WORLD);
    if (world && state_agree(MPI_COMM_WORLD, world, "MPI_Init") == Status::mismatch) state_set_env_mismatch();
    if (world) state_set_env_fft(world->fft); /* (probed there where the environment chose fft_topk) */
    if (rank == 0) state_warn_inapplicable(env_layer(), SettingSource::env, SettingLayer{}, SettingLayer{}, "MPI_Init");
    if (s.print_config && rank == 0) {
        Settings r;
        Resolution why;
        state_resolve_layers(env_layer(), SettingLayer{}, SettingLayer{}, &r, &why, nullptr);
        settings_print(stderr, r, why, "process, from defaults and COMPMPI_* variables");
        std::fprintf(stderr, "  (kernel threads per rank: %d, SIMD: %s)\n", kernel_threads(), simd_name(simd_active()));
        std::fprintf(stderr, "  (built for %s: %s; CUDA-aware MPI: %s)\n", mpi_family_name(mpi_family_built()),
                     mpi_family_describe().c_str(), mpi_cuda_aware() ? "yes" : "no");
    }
    g_active.store(true, std::memory_order_release);
}

void runtime_finalize() {
    if (!g_active.exchange(false)) return;
    verdict_invalidate(); /* no memoised verdict outlives the library's activity */
    ReentryGuard guard;
    /* stats_report is collective: ranks launched with different COMPMPI_STATS (MPMD) agreed
     * at MPI_Init, else a rank without it would leave the others waiting in the report */
    if (stats_enabled()) stats_report(MPI_COMM_WORLD);
    state_keyval_free();
}

}  // namespace compmpi

// SPDX-License-Identifier: BSD-3-Clause
/* Compressed collective algorithms. They move self-describing blobs (kernels/codec.h) with
 * PMPI calls and know nothing of which codec they carry. Each returns:
 *   Status::ok         the output buffer holds the result, bit-identical on every rank
 *                      (a pipelined algorithm may have run some segments exactly: see
 *                      CollCtx::segments_fallback);
 *   Status::nonfinite  some rank's data held NaN/Inf: every rank knows it (the flag travels
 *                      in the blobs), nothing was written to the output, and the caller
 *                      runs the exact PMPI call instead;
 *   Status::corrupt    some rank hit a local error or a blob failed validation: as with
 *                      nonfinite, every rank knows, `out` is untouched, caller falls back;
 *   Status::mpi_error  a PMPI call failed (ctx.mpi_err holds its code);
 *   Status::no_memory  workspace allocation failed before any communication.
 * An algorithm never returns between two of its exchanges except on an MPI error.      */
#pragma once
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <utility>
#include <vector>

#include "backend.h"
#include "base/buffer.h"
#include "base/settings.h"
#include "base/stats.h"
#include "codec.h"
#include "entropy.h"

namespace compmpi {

/* Host blob workspaces of one call (what MPI sends and receives): plain host memory, or for
 * calls on device buffers pinned host memory that the CUDA backend DMAs directly
 * (src/runtime/device.h). Grow-only, reused across calls. */
struct CollWorkspace {
    Buffer send, recv, aux_blob;
    size_t capacity() const { return send.capacity() + recv.capacity() + aux_blob.capacity(); }
};

/* The node structure of a communicator for the hierarchical allreduce, found once
 * (coll_hierarchy, collective) and freed with the state. */
struct HierState {
    int known = 0; /* 0 = not yet split */
    MPI_Comm node = MPI_COMM_NULL, leaders = MPI_COMM_NULL;
    int node_rank = 0, nodes = 1, max_per_node = 1;
};

/* What the compressed algorithms keep per communicator. The runtime's communicator state
 * owns one (src/runtime/state.h); its communicators are freed with it. */
struct CollState {
    uint64_t calls = 0; /* compressed calls so far (RNG streams: every rank counts alike) */
    CollWorkspace ws;   /* host blob workspaces */
    CpuBackendState cpu; /* the host backend's scratch (backend_cpu's ctx) */
    HierState hier;
    /* private duplicates for point-to-point messages of compressed algorithms (halving-
     * doubling), per communicator they serve (this one, its node leaders) */
    std::vector<std::pair<MPI_Comm, MPI_Comm>> p2p;
    /* the links between the ranks of a communicator (this one, its node leaders), measured
     * once for allreduce_algorithm=auto and agreed over its ranks (allreduce_choice.cc) */
    struct LinkProbe {
        MPI_Comm comm;
        double alpha, beta; /* seconds per message, bytes per second */
    };
    std::vector<LinkProbe> links;
    /* what the stage model of the hierarchy (allreduce_model.cc) measured once per
     * communicator where the hierarchy applies, agreed over its ranks */
    struct NodeModel {
        MPI_Comm comm;
        double alpha, beta, alpha_node, beta_node; /* between nodes (leaders), inside a node */
        int host_ranks, host_leaders, cores;
    };
    std::vector<NodeModel> node_models;
    /* The timed choices of allreduce_algorithm=auto (coll/allreduce/allreduce_choice.cc): two
     * candidates timed alternately on the first calls of a (communicator, kind, n, codec
     * parameters), then the faster one for every later call; at most kMaxAutoChoices entries.
     *   kind 0 (dense): two-phase (candidate 0) against halving-doubling (1), where the
     *          alpha-beta model is not clear;
     *   kind 1 (nodes): hierarchical (0) against flat (1, what coll_allreduce_dense runs),
     *          hierarchy=auto where the hierarchy applies. */
    struct AutoChoice {
        MPI_Comm comm;
        int kind;
        size_t n;
        uint64_t codec;           /* codec id, bits, variant, param, bucket */
        int explored = 0;         /* calls run so far */
        int warm[2] = {0, 0};     /* warm-up calls each candidate has had */
        int samples[2] = {0, 0};  /* agreed samples taken, per candidate */
        double best[2] = {0, 0};  /* fastest agreed sample (0: none yet) */
        double worst[2] = {0, 0}; /* slowest agreed sample */
        int extra = 0;            /* extra rounds taken because the samples overlapped */
        int decided = -1;         /* -1 exploring, else the candidate chosen */
        bool modelled = false;    /* kind 1: the stage model's prediction was made */
        double predicted[2] = {0, 0}; /* kind 1: its seconds per candidate (0: none) */
    };
    /* a deque: an entry stays where it is while a choice nested in it adds another */
    std::deque<AutoChoice> auto_choices;
    CollState() = default;
    CollState(const CollState &) = delete;
    CollState &operator=(const CollState &) = delete;
    ~CollState();
};

struct CollCtx {
    MPI_Comm comm;
    CollState *st;
    const Settings *settings; /* the communicator's, resolved */
    CollWorkspace *ws;        /* this call's blob workspaces */
    int rank, size;
    const CodecOps *codec;
    CodecParams params;
    CollStats *stats;
    const Backend *be;  /* where the data lives (host or device) */
    void *be_ctx;
    int mpi_err = MPI_SUCCESS;
    /* set by an algorithm when some timed choice it holds (allreduce_algorithm=auto) ran one of
     * its exploring calls on this rank: a caller timing this call as a sample of its own choice
     * does not count it (the nested choice is not settled yet) */
    bool exploring = false;
    /* error feedback (allreduce, reduce-scatter): ef_res = the buffer's residual, added to the input
     * before encoding; the algorithm writes the new residual to ef_new (n elements of the call's
     * type, params.elem) and the caller keeps it only if the call succeeds. Both nullptr when off. */
    const void *ef_res = nullptr;
    void *ef_new = nullptr;
    /* set by algorithms that fall back per segment (pipelined allreduce): how many
     * segments ran the exact path, and why (BLOB_NONFINITE / BLOB_ABANDON) */
    int segments_fallback = 0;
    uint8_t fallback_reason = 0;
    /* set by an algorithm whose result on this rank differs from the agreed one
     * (allgather_own=exact): `out` holds the agreed result, which the policy observes (its
     * decisions must be the same on every rank); then the caller copies restore_n elements
     * from restore_src to restore_dst (backend memory) */
    void *restore_dst = nullptr;
    const void *restore_src = nullptr;
    size_t restore_n = 0;
    /* the backend's memory is not the host's and MPI cannot read it (device data, an MPI
     * that is not CUDA-aware): MPI calls on the data go through host copies
     * (coll_mpi_elems), host-only codec steps through coll_stage_down/up */
    bool stage_mpi = false;
    /* the entropy stage (setting entropy; kernels/entropy.h). entropy.method != none: the
     * exchanges carry the blobs' actual lengths (alike on every rank: from the agreed
     * settings); entropy_encode: this rank codes the blobs it encodes (host backend) -- any
     * rank decodes coded and plain blobs alike */
    EntropyParams entropy;
    bool entropy_encode = false;
};

/* ---- the element type: every algorithm runs on T = float (MPI_FLOAT data) or T = double
 * (MPI_DOUBLE), decided by the call (CodecParams::elem); the backend's and MPI's operations
 * for T are these overloads. */
template <class T> constexpr Elem elem_of() { return sizeof(T) == 8 ? Elem::f64 : Elem::f32; }
template <class T> inline MPI_Datatype mpi_elem() { return sizeof(T) == 8 ? MPI_DOUBLE : MPI_FLOAT; }
inline uint8_t be_encode(const CollCtx &c, const CodecOps &codec, const CodecParams &p, const float *d, size_t n,
                         uint8_t *blob, size_t cap, size_t *len) {
    return c.be->encode(c.be_ctx, codec, p, d, n, blob, cap, len);
}
inline uint8_t be_encode(const CollCtx &c, const CodecOps &codec, const CodecParams &p, const double *d, size_t n,
                         uint8_t *blob, size_t cap, size_t *len) {
    return c.be->encode64(c.be_ctx, codec, p, d, n, blob, cap, len);
}
/* A blob the entropy stage coded is undone on the host first (blob_entropy_decode into a
 * per-thread buffer), so every backend's decoder sees the codec's own bytes. */
inline std::vector<uint8_t> &coll_entropy_scratch() {
    thread_local std::vector<uint8_t> v;
    return v;
}
inline Status be_decode(const CollCtx &c, const uint8_t *blob, size_t avail, size_t n, float *d, bool acc,
                        const CodecParams &p) {
    if (blob_entropy_coded(blob, avail))
        CMPI_CHECK(blob_entropy_decode(blob, avail, n, coll_entropy_scratch(), &blob, &avail));
    return c.be->decode(c.be_ctx, blob, avail, n, d, acc, p);
}
inline Status be_decode(const CollCtx &c, const uint8_t *blob, size_t avail, size_t n, double *d, bool acc,
                        const CodecParams &p) {
    if (blob_entropy_coded(blob, avail))
        CMPI_CHECK(blob_entropy_decode(blob, avail, n, coll_entropy_scratch(), &blob, &avail));
    return c.be->decode64(c.be_ctx, blob, avail, n, d, acc, p);
}
template <class T> inline T *be_scratch(const CollCtx &c, int slot, size_t n) {
    if constexpr (sizeof(T) == 8) return c.be->scratch64(c.be_ctx, slot, n);
    else return c.be->scratch(c.be_ctx, slot, n);
}
inline void be_copy(const CollCtx &c, float *dst, const float *src, size_t n) { c.be->copy(c.be_ctx, dst, src, n); }
inline void be_copy(const CollCtx &c, double *dst, const double *src, size_t n) { c.be->copy64(c.be_ctx, dst, src, n); }
inline void be_add(const CollCtx &c, float *dst, const float *src, size_t n) { c.be->add(c.be_ctx, dst, src, n); }
inline void be_add(const CollCtx &c, double *dst, const double *src, size_t n) { c.be->add64(c.be_ctx, dst, src, n); }
inline void be_sum(const CollCtx &c, float *d, const float *a, const float *b, size_t n) { c.be->sum(c.be_ctx, d, a, b, n); }
inline void be_sum(const CollCtx &c, double *d, const double *a, const double *b, size_t n) {
    c.be->sum64(c.be_ctx, d, a, b, n);
}
inline void be_sub(const CollCtx &c, float *d, const float *a, const float *b, size_t n) { c.be->sub(c.be_ctx, d, a, b, n); }
inline void be_sub(const CollCtx &c, double *d, const double *a, const double *b, size_t n) {
    c.be->sub64(c.be_ctx, d, a, b, n);
}
inline Status be_prepare(const CollCtx &c, const CodecParams &p, const float *d, size_t n, double *stat) {
    return c.be->prepare(c.be_ctx, *c.codec, p, d, n, stat);
}
inline Status be_prepare(const CollCtx &c, const CodecParams &p, const double *d, size_t n, double *stat) {
    return c.be->prepare64(c.be_ctx, *c.codec, p, d, n, stat);
}
inline double be_l2norm(const CollCtx &c, const float *d, size_t n) { return c.be->l2norm(c.be_ctx, d, n); }
inline double be_l2norm(const CollCtx &c, const double *d, size_t n) { return c.be->l2norm64(c.be_ctx, d, n); }

/* The call's error-feedback residuals as T (CollCtx::ef_res / ef_new). */
template <class T> inline const T *ef_res_t(const CollCtx &c) { return static_cast<const T *>(c.ef_res); }
template <class T> inline T *ef_new_t(const CollCtx &c) { return static_cast<T *>(c.ef_new); }

/* Host copies of backend memory, through the `none` codec's verbatim blob (the backend's own
 * encode/decode, so any backend works): blob = header + n elements. */
struct HostStage {
    std::vector<uint8_t> blob;
    size_t len = 0;
    template <class T> T *data() { return reinterpret_cast<T *>(blob.data() + kBlobHeaderBytes); }
};
/* h = n elements of backend memory src (CPU backend: a plain copy). */
template <class T> Status coll_stage_down(CollCtx &c, const T *src, size_t n, HostStage &h);
/* backend memory dst = h's n elements (h from coll_stage_down of n elements). */
template <class T> Status coll_stage_up(CollCtx &c, HostStage &h, T *dst, size_t n);
/* backend memory dst = n host elements. */
template <class T> Status coll_upload(CollCtx &c, const T *h, size_t n, T *dst);
/* An MPI call fn(in, io) on data in backend memory: in = n elements MPI reads (or
 * MPI_IN_PLACE / nullptr, passed as they are), io = n elements MPI reads and/or writes. With
 * c.stage_mpi, on host copies (io written back when fn succeeds); else on the pointers. */
template <class T>
int coll_mpi_elems(CollCtx &c, const void *in, T *io, size_t n, const std::function<int(const void *, T *)> &fn);

/* Dense codecs: reduce-scatter + allgather of blobs. */
template <class T> Status coll_allreduce_twophase(CollCtx &c, const T *in, T *out, size_t n);
/* Dense codecs: recursive-halving reduce-scatter + recursive-doubling allgather of blobs
 * (Rabenseifner's order), log2 P steps; non-power-of-two P by folding (allreduce_halving.cc). */
template <class T> Status coll_allreduce_halving(CollCtx &c, const T *in, T *out, size_t n);
/* Dense codecs: the algorithm setting allreduce_algorithm names (auto: see
 * allreduce_use_halving); `nodes` = nodes the communicator spans (1 if unknown).
 * (coll/allreduce/allreduce_choice.cc) */
template <class T> Status coll_allreduce_dense(CollCtx &c, const T *in, T *out, size_t n, int nodes);
/* allreduce_algorithm=auto: *halving = true for halving-doubling, only across nodes
 * (nodes > 1) and from 4 ranks, when the alpha-beta prediction messages * alpha_beta + bytes
 * (per rank, this call's exact blob sizes) is kAutoMargin below the two-phase one. alpha_beta
 * = allreduce_alpha_beta(): the same on every rank, so is the choice. Fails only on an MPI
 * error of the probe (every rank of c.comm calls this for the same call). */
Status allreduce_use_halving(CollCtx &c, size_t n, int nodes, bool *halving);
struct AllreduceCost {
    double messages = 0; /* sequential messages on the busiest rank */
    double bytes = 0;    /* bytes that rank sends */
};
AllreduceCost allreduce_cost(const CollCtx &c, size_t n, bool halving);
AllreduceCost allreduce_halving_cost(const CollCtx &c, size_t n); /* (allreduce_halving.cc) */
/* alpha * beta of the links between the ranks of c.comm in bytes (a message's latency in
 * bytes' transfer time): the setting link_alpha_beta, or 0 there: measured at the first call
 * on c.comm (collective over it: pairs of ranks exchange 8 B and 1 MiB, alpha and 1/beta
 * agreed by MAX over the ranks, kept per communicator in c.st->links), identical on every rank. */
Status allreduce_alpha_beta(CollCtx &c, double *alpha_beta);
inline constexpr double kAutoMargin = 0.10;
/* A probe of c.comm's links (collective over it): pairs 2i <-> 2i+1 exchange 8 B and 1 MiB at
 * once; alpha (s) and beta (bytes/s) agreed by MAX over the ranks (allreduce_choice.cc). */
Status coll_link_probe(CollCtx &c, double *alpha, double *beta);

/* ---- The alpha-beta stage model of one allreduce (coll/allreduce/allreduce_model.cc; the
 * same formula as tools/scale_model.py's hier_stages / flat_stages, docs/scale.md "The model").
 * Hierarchical, N nodes of R ranks, M bytes per rank:
 *   node reduce = node bcast = ceil(log2 R) (alpha_node + M / beta_node)   (binomial trees)
 *   link  = the leaders' algorithm: messages alpha + bytes / beta          (allreduce_cost)
 *   codec = (E / enc + D / dec) share(host_leaders) + clip M / enc share(host_ranks)
 *           two-phase E = M (1 + 1/N), D = M (2 - 1/N); halving E = M (1 + 1/N), D = 2 M;
 *           clip: a clipping codec's clamped copy of every rank's contribution before the
 *           node reduce (terngrad, allreduce_hierarchical.cc), a pass the flat one does not make
 * Flat, P ranks, R per node: link = messages alpha + R bytes (P - R) / (P - 1) / beta (the
 *   share of a rank's bytes that leaves its node, R ranks on the node's link), node = bytes
 *   (R - 1) / (P - 1) / beta_node, codec as above over P ranks (no clip), share(host_ranks).
 * share(x) = max(1, x / cores): x ranks coding at once on a host's cores. beta_node is what the
 * probe measures with every node's pairs exchanging at once, both directions' bytes (shared
 * memory is not full duplex). enc/dec 0: codec time left out. */
struct StageLinks {
    double alpha = 0, beta = 0;           /* between nodes: s per message, bytes/s */
    double alpha_node = 0, beta_node = 0; /* inside a node (shared memory) */
};
struct StageShare {
    int cores = 1, host_ranks = 1, host_leaders = 1; /* a host's cores, ranks and node leaders */
};
struct StageCodec {
    double enc_Bps = 0, dec_Bps = 0; /* one thread, bytes of input per second */
    bool clip = false;
};
struct StagePrediction {
    double node_reduce = 0, link = 0, node_bcast = 0, codec = 0, total = 0; /* seconds */
};
StagePrediction allreduce_hier_predict(const StageLinks &l, const StageShare &s, const StageCodec &k, int nodes,
                                       int per_node, double bytes, const AllreduceCost &leaders, bool halving);
StagePrediction allreduce_flat_predict(const StageLinks &l, const StageShare &s, const StageCodec &k, int ranks,
                                       int per_node, double bytes, const AllreduceCost &flat, bool halving);
/* Sparse codecs (CODEC_SPARSE): allgather of variable-size blobs, sum in rank order. */
template <class T> Status coll_allreduce_sparse(CollCtx &c, const T *in, T *out, size_t n);

/* Node structure of a communicator for the hierarchical allreduce. */
struct HierComms {
    MPI_Comm node = MPI_COMM_NULL;    /* ranks of this node */
    MPI_Comm leaders = MPI_COMM_NULL; /* rank 0 of every node; MPI_COMM_NULL elsewhere */
    int node_rank = 0;
    int nodes = 1, max_per_node = 1;
};
/* Exact reduce to node leaders, compressed allreduce among leaders (two-phase, or sparse
 * when `sparse`), exact broadcast within nodes. sendbuf may be MPI_IN_PLACE. */
template <class T>
Status coll_allreduce_hierarchical(CollCtx &c, const void *sendbuf, T *out, size_t n, const HierComms &h, bool sparse);
/* The allreduce of a communicator where the hierarchy applies (coll_hierarchy true): the
 * hierarchical algorithm, or the flat one (coll_allreduce_sparse when `sparse`, else
 * coll_allreduce_dense). hierarchy=on, an explicit allreduce_algorithm, or a sparse codec:
 * hierarchical. hierarchy=auto with allreduce_algorithm=auto, dense codecs: a timed choice
 * (allreduce_choice.cc), the same on every rank. sendbuf (may be MPI_IN_PLACE) is the
 * hierarchical algorithm's, `in` the flat one's. *hierarchical: what this call ran (a
 * hierarchy's non-leaders carry no error-feedback residual in it: c.ef_res and c.ef_new are
 * not used there). */
/* The stage model's seconds for the hierarchical (pred[0]) and the flat (pred[1]) allreduce
 * of n elements of `in` (the cheaper of two-phase and halving-doubling each, as auto picks;
 * 0: no prediction), from links, hosts and the codec measured on c.comm (collective over it:
 * every rank calls it for the same call; the numbers are agreed, so are the predictions).
 * *one_host: every rank of c.comm runs on one host (agreed too). (allreduce_model.cc) */
template <class T>
Status allreduce_nodes_predict(CollCtx &c, const T *in, size_t n, const HierComms &h, double pred[2],
                               bool *one_host);
template <class T>
Status coll_allreduce_nodes(CollCtx &c, const void *sendbuf, const T *in, T *out, size_t n, const HierComms &h,
                            bool sparse, bool *hierarchical);
/* The root's buf is read only; receivers' buf gets the decoded data. root_norm (nullptr on
 * every rank, or on none): receives the l2-norm of the root's input, carried in the frame. */
template <class T> Status coll_bcast_encoded(CollCtx &c, T *buf, size_t n, int root, double *root_norm = nullptr);
template <class T> Status coll_allgather_encoded(CollCtx &c, const T *in, T *out, size_t n);
/* Reduce-scatter of encoded blocks (coll/reduce_scatter/reduce_scatter_encoded.cc): in holds
 * every rank's block, block j = counts[j] floats (zero allowed) after blocks 0..j-1; out
 * (counts[rank] floats) gets the sum over ranks of this rank's block, accumulated exactly as
 * phase 1 of the two-phase allreduce does (coll_accumulate). `in` may overlap `out`
 * (MPI_IN_PLACE): out is written only after every rank agreed the call succeeded.
 * result_norm (optional): the l2-norm of the whole reduced vector, identical on every rank.
 * Status::unsupported (on every rank alike, before any exchange): the exchange does not fit
 * this MPI's counts; the caller runs the exact call. */
template <class T>
Status coll_reduce_scatter(CollCtx &c, const T *in, T *out, const size_t *counts, double *result_norm);

/* ---- helpers shared by the algorithms (coll/coll_util.cc) ---- */

/* Does the hierarchical allreduce apply to comm (several nodes, one with several ranks)?
 * Splits comm by node once (collective: every rank reaches it for the same call), with
 * settings.node_size emulating nodes where set. h gets the split. */
bool coll_hierarchy(CollState &st, const Settings &s, MPI_Comm comm, int rank, HierComms *h);

/* Test-only (src/base/fault.h), a blob just encoded into out (cap bytes; plen: its length, where
 * the caller asked for it): corrupt_blob changes the header's element count, truncate_blob makes
 * the header claim more payload than the slot holds, corrupt_payload flips one payload bit. The
 * blob layout is coll's to know, so these live here and not in base/fault.cc. */
void coll_fault_encoded(uint8_t *out, size_t cap, size_t *plen);

/* Elements [lo, lo+len) of chunk j when n elements are split over p ranks; chunks are
 * multiples of 16 elements (64 bytes) except the last. */
void chunk_range(size_t n, int p, int j, size_t *lo, size_t *len);

/* The exchange stride of a blob of n elements: its largest size rounded up to 64 bytes, so
 * that every blob of a buffer set starts 64-byte aligned. From n and the agreed parameters
 * only, hence the same on every rank. */
inline size_t coll_blob_stride(const CodecOps &codec, size_t n, const CodecParams &p) {
    return (blob_max_bytes(codec, n, p) + 63) / 64 * 64;
}

/* Wait for a non-blocking exchange (timed as communication; the mpi_error fault's `wait`).
 * coll_poke: let MPI progress an outstanding one while we compute (MPICH progresses
 * non-blocking collectives only inside MPI calls); nothing for MPI_REQUEST_NULL. */
Status coll_wait(CollCtx &c, MPI_Request *req);
void coll_poke(MPI_Request *req);

/* The private duplicate of c.comm for point-to-point messages of compressed algorithms
 * (collective on first use: every rank of c.comm reaches here in the same call; freed with
 * the state). */
Status coll_p2p_comm(CollCtx &c, MPI_Comm *out);

/* Byte collectives with counts beyond INT_MAX handled (MPI-4 _c calls). */
Status mpi_alltoall_bytes(CollCtx &c, const void *send, void *recv, size_t stride);
Status mpi_allgather_inplace_bytes(CollCtx &c, void *buf, size_t stride);
Status mpi_bcast_bytes(CollCtx &c, void *buf, size_t bytes, int root);

/* Encode in[0..n) into a blob at out (capacity cap). Never fails: on NaN/Inf the blob is
 * flagged BLOB_NONFINITE, on any other error BLOB_ABANDON (logged), so the algorithm still
 * takes part in every exchange and all ranks learn the outcome together. Returns the flag. */
template <class T>
uint8_t coll_encode(CollCtx &c, const CodecParams &p, const T *in, size_t n, uint8_t *out, size_t cap,
                    size_t *len = nullptr);
void coll_write_flag(CollCtx &c, const CodecParams &p, size_t n, uint8_t flag, uint8_t *out);
/* Codecs with CODEC_SHARED_SCALE: every rank computes prepare() on its whole contribution,
 * the ranks MAX-reduce it, and c.params.shared_scale takes the result; a clip threshold
 * prepare() reports (terngrad: c sigma of the whole buffer) goes to c.params.clip_at, so
 * that every chunk and segment is clipped alike. Returns nonfinite on every rank if any
 * rank's data held NaN/Inf (nothing was sent yet, the caller falls back). */
template <class T> Status coll_shared_scale(CollCtx &c, const T *in, size_t n);
/* The input the codec should see: in + residual when error feedback is on (written to a
 * workspace), else in itself. */
template <class T> const T *coll_ef_input(CollCtx &c, const T *in, size_t n);
/* ef_new[0..n) = src - decode(blob): the part of src this blob failed to carry. */
template <class T> void coll_ef_update(CollCtx &c, const uint8_t *blob, size_t cap, const T *src, size_t n, T *ef_new);

/* Parameters for the exact transport of a phase (the `none` codec's verbatim sums, the sparse
 * codec's packed partial sums) of a call whose codec parameters are p: the call's element
 * type and kernel context, nothing of its codec. A default CodecParams{} says fp32, and a
 * call on doubles then failed to encode every such blob (issue 42). */
inline CodecParams coll_exact_params(const CodecParams &p) {
    CodecParams q{};
    q.elem = p.elem;
    q.simd = p.simd;
    q.threads = p.threads;
    return q;
}

/* Codecs whose paper quantises each contribution exactly once and sums the decoded
 * contributions exactly (q8: Dettmers; qsgd: Alistarh et al., Alg. 1). */
bool coll_quantise_once(const CodecOps &codec);
/* Codecs whose allreduce may allgather the encoded contributions and sum them decoded (the
 * papers' "quantise, send, decode, sum"), where that moves fewer bytes than two phases: those
 * quantised once per contribution, and terngrad (its ternaries on the shared grid sum to the
 * very levels two phases would carry; every contribution is still ternarised once). */
bool coll_gather_may_sum(const CodecOps &codec);
/* Does the owner's own contribution to the chunk (block) it reduces go through the codec
 * like every other rank's? Yes for stochastic codecs (terngrad, qsgd: every worker's
 * gradient is quantised, so the sum stays unbiased) and codecs quantised once per
 * contribution; other codecs (bitpack, fp16, bf16, rangefloat) add it exact. One rule for
 * every reduction of encoded chunks (two-phase allreduce, reduce-scatter). */
bool coll_own_encoded(const CodecOps &codec);
/* acc[0..len) = sum over ranks j = 0..P-1, in rank order, of rank j's contribution to the
 * chunk this rank owns: the decoded blob(j) (capacity cap), or for j == c.rank with
 * !own_encoded the exact `own`. Stops at the first blob that fails; returns the flags
 * (BLOB_NONFINITE / BLOB_ABANDON), 0 when acc holds the sum. */
template <class T>
uint8_t coll_accumulate(CollCtx &c, bool own_encoded, const T *own, size_t len, T *acc, size_t cap,
                        const std::function<const uint8_t *(int)> &blob);

/* ---- the entropy stage in the exchanges (setting entropy; docs/codecs/entropy.md) ---- */
/* Do this call's exchanges carry actual blob lengths (the stage is on)? The same on every rank. */
inline bool coll_entropy_on(const CollCtx &c) { return c.entropy.method != kEntropyNone; }
/* Code the blob just encoded at blob (*len bytes; codec, p: its codec and parameters) when this
 * rank codes (c.entropy_encode) and the stage shortens it; *len becomes its length. */
void coll_entropy(CollCtx &c, const CodecOps &codec, const CodecParams &p, uint8_t *blob, size_t *len);
/* The length of the blob at blob (its header's payload + header; a header's bytes when it is
 * not a valid header: the receiver's check refuses it). */
size_t coll_blob_len(const uint8_t *blob, size_t cap);
/* The exchange stride of this call's blobs when the stage is on: the longest of every rank's
 * `mine` (a MAX-allreduce of one u64 on c.comm), rounded up to 64 bytes, at most cap. */
Status coll_agree_stride(CollCtx &c, size_t mine, size_t cap, size_t *stride);
/* cnt blobs at base + cap * j, moved to base + stride * j (stride <= cap), in order. */
void coll_compact(uint8_t *base, int cnt, size_t cap, size_t stride);

/* Turn the union of flags seen by every rank into the collective's Status. */
Status coll_flag_status(uint8_t flags);

/* Distinct RNG stream per (rank, call, phase, chunk) for stochastic codecs. */
uint64_t rng_stream(int rank, uint64_t call, int phase, int chunk);

}  // namespace compmpi

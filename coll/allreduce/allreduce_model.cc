// SPDX-License-Identifier: BSD-3-Clause
/* The alpha-beta stage model of the allreduce where the hierarchy applies (issue 40, part 2;
 * the formula in coll.h, "The alpha-beta stage model"; tools/scale_model.py holds the same
 * formula, docs/scale.md its error against the emulated clusters).
 *
 *   node A: r0 r1 ── reduce (exact, shared memory) ──► leader a ─┐
 *   node B: r2 r3 ── reduce ─────────────────────────► leader b ─┤ leaders' algorithm (link)
 *   every node: leader ── bcast (exact, shared memory) ──► ranks ◄┘
 *   hierarchical = node reduce + link + node bcast + codec (at the leaders' core share)
 *   flat         = link (a node's R ranks on its link) + node traffic + codec (all ranks' share)
 *
 * What it measures, once per communicator (collective over it; every number agreed by MAX
 * over the ranks, so every rank predicts alike):
 *   the links between nodes: coll_link_probe over the leaders' communicator (what the leaders'
 *     own allreduce_algorithm=auto measures: kept in CollState::links for them);
 *   the links inside a node: coll_link_probe over the node communicators, every node's pairs
 *     at once (the node stages run on all nodes at the same time), beta_node counting both
 *     directions of the exchange (shared memory is not full duplex);
 *   the hosts: ranks sharing a host's cores (grouped by host name: the emulated nodes of
 *     docs/scale.md are namespaces of one host), the node leaders among them, the host's
 *     cores (fewest over the ranks);
 * and per (size, codec parameters) the codec's speed on one rank: encode, then decode-and-add,
 * of up to kCodecProbe elements of the caller's input into private buffers, fastest of 3, the
 * slowest rank's (host data only: for device data the codec time is left out). Nothing here
 * writes the caller's buffers or any state an algorithm reads. */
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <thread>
#include <vector>

#include "coll.h"
#include "base/mpi_next.h"
#include "base/stats.h"

namespace compmpi {

namespace {

constexpr size_t kCodecProbe = size_t{1} << 16; /* elements */

double share(const StageShare &s, int x) { return std::max(1.0, static_cast<double>(x) / std::max(1, s.cores)); }

double tree_steps(int r) { return r > 1 ? std::ceil(std::log2(static_cast<double>(r))) : 0.0; }

/* bytes encoded (E) and decoded (D) per rank by the algorithm over p ranks (coll.h) */
double codec_secs(const StageCodec &k, int p, double m, bool halving) {
    const double e = m * (1 + 1.0 / p), d = halving ? 2 * m : m * (2 - 1.0 / p);
    return (k.enc_Bps > 0 ? e / k.enc_Bps : 0) + (k.dec_Bps > 0 ? d / k.dec_Bps : 0);
}

double clip_secs(const StageCodec &k, double m) { return k.clip && k.enc_Bps > 0 ? m / k.enc_Bps : 0; }

}  // namespace

StagePrediction allreduce_hier_predict(const StageLinks &l, const StageShare &s, const StageCodec &k, int nodes,
                                       int per_node, double bytes, const AllreduceCost &leaders, bool halving) {
    StagePrediction p;
    p.node_reduce = tree_steps(per_node) * (l.alpha_node + (l.beta_node > 0 ? bytes / l.beta_node : 0));
    p.node_bcast = p.node_reduce;
    p.link = leaders.messages * l.alpha + (l.beta > 0 ? leaders.bytes / l.beta : 0);
    p.codec = codec_secs(k, std::max(nodes, 1), bytes, halving) * share(s, s.host_leaders) +
              clip_secs(k, bytes) * share(s, s.host_ranks);
    p.total = p.node_reduce + p.link + p.node_bcast + p.codec;
    return p;
}

StagePrediction allreduce_flat_predict(const StageLinks &l, const StageShare &s, const StageCodec &k, int ranks,
                                       int per_node, double bytes, const AllreduceCost &flat, bool halving) {
    StagePrediction p;
    if (ranks < 2) return p;
    const double P = ranks, R = std::clamp(per_node, 1, ranks);
    p.link = flat.messages * l.alpha + (l.beta > 0 ? R * flat.bytes * (P - R) / (P - 1) / l.beta : 0);
    p.node_reduce = l.beta_node > 0 ? flat.bytes * (R - 1) / (P - 1) / l.beta_node : 0;
    p.codec = codec_secs(k, ranks, bytes, halving) * share(s, s.host_ranks);
    p.total = p.node_reduce + p.link + p.codec;
    return p;
}

namespace {

Status agree_max(CollCtx &c, double *v, int k) {
    MPI_Comm comm;
    CMPI_CHECK(coll_p2p_comm(c, &comm));
    const int rc = mpi_next::Allreduce(MPI_IN_PLACE, v, k, MPI_DOUBLE, MPI_MAX, comm);
    if (rc != MPI_SUCCESS) return c.mpi_err = rc, Status::mpi_error;
    return Status::ok;
}

/* v[0] = ranks on this host, v[1] = node leaders on it (grouped by a hash of the host name) */
Status host_counts(CollCtx &c, const HierComms &h, double v[2]) {
    char name[256] = {0};
    if (gethostname(name, sizeof name - 1) != 0) name[0] = 0;
    uint32_t hash = 2166136261u; /* FNV-1a */
    for (const char *p = name; *p; ++p) hash = (hash ^ static_cast<uint8_t>(*p)) * 16777619u;
    MPI_Comm comm, host;
    CMPI_CHECK(coll_p2p_comm(c, &comm));
    int rc = mpi_next::Comm_split(comm, static_cast<int>(hash & 0x3fffffff), c.rank, &host);
    if (rc != MPI_SUCCESS) return c.mpi_err = rc, Status::mpi_error;
    int in[2] = {1, h.node_rank == 0 ? 1 : 0}, out[2] = {0, 0};
    rc = mpi_next::Allreduce(in, out, 2, MPI_INT, MPI_SUM, host);
    mpi_next::Comm_free(&host);
    if (rc != MPI_SUCCESS) return c.mpi_err = rc, Status::mpi_error;
    v[0] = out[0];
    v[1] = out[1];
    return Status::ok;
}

/* Links, hosts and cores of c.comm (the top), measured once and agreed. */
Status node_model(CollCtx &c, const HierComms &h, const CollState::NodeModel **out) {
    for (const auto &m : c.st->node_models)
        if (m.comm == c.comm) return *out = &m, Status::ok;
    double an = 0, bn = 0, a = 0, b = 0;
    {
        CollCtx nc = c;
        nc.comm = h.node;
        mpi_next::Comm_rank(h.node, &nc.rank);
        mpi_next::Comm_size(h.node, &nc.size);
        CMPI_CHECK(coll_link_probe(nc, &an, &bn));
    }
    if (h.node_rank == 0) {
        bool known = false;
        for (const auto &l : c.st->links)
            if (l.comm == h.leaders) a = l.alpha, b = l.beta, known = true;
        if (!known) {
            CollCtx lc = c;
            lc.comm = h.leaders;
            mpi_next::Comm_rank(h.leaders, &lc.rank);
            mpi_next::Comm_size(h.leaders, &lc.size);
            CMPI_CHECK(coll_link_probe(lc, &a, &b));
            c.st->links.push_back({h.leaders, a, b});
        }
    }
    double hc[2];
    CMPI_CHECK(host_counts(c, h, hc));
    const double cores = std::max(1u, std::thread::hardware_concurrency());
    /* inside a node both directions of the probe's exchange count (2 x its beta): shared memory
     * is not full duplex, the two copies share the cores and the memory; between nodes the
     * link is, and beta is one direction's */
    double v[7] = {an, 1 / (2 * bn), a, b > 0 ? 1 / b : 0, hc[0], hc[1], -cores};
    CMPI_CHECK(agree_max(c, v, 7));
    c.st->node_models.push_back({c.comm, v[2], v[3] > 0 ? 1 / v[3] : 0, v[0], v[1] > 0 ? 1 / v[1] : 0,
                                 static_cast<int>(v[4]), static_cast<int>(v[5]), static_cast<int>(-v[6])});
    const auto &m = c.st->node_models.back();
    if (stats_enabled()) {
        char line[280];
        std::snprintf(line, sizeof line,
                      "compmpi-stats-nodes: ranks=%d nodes=%d alpha_s=%.3e beta_Bps=%.3e alpha_node_s=%.3e "
                      "beta_node_Bps=%.3e host_ranks=%d host_leaders=%d cores=%d (measured)",
                      c.size, h.nodes, m.alpha, m.beta, m.alpha_node, m.beta_node, m.host_ranks, m.host_leaders,
                      m.cores);
        stats_note(line);
    }
    *out = &m;
    return Status::ok;
}

/* The codec's speed on this call's data (the top); 0 where not measured. */
template <class T>
Status codec_speed(CollCtx &c, const T *in, size_t n, StageCodec *k) {
    double v[3] = {0, 0, 0}; /* s per byte encode, decode; 1: not measured on some rank */
    const size_t m = std::min(n, kCodecProbe);
    if (c.be == &backend_cpu() && !c.stage_mpi && in && m > 0) {
        std::vector<uint8_t> blob(blob_max_bytes(*c.codec, m, c.params));
        std::vector<T> acc(m, T(0));
        double te = HUGE_VAL, td = HUGE_VAL;
        for (int r = 0; r < 3 && v[2] == 0; ++r) {
            size_t len = 0;
            const double t0 = mpi_next::Wtime();
            be_encode(c, *c.codec, c.params, in, m, blob.data(), blob.size(), &len);
            const double t1 = mpi_next::Wtime();
            const Status s = len ? be_decode(c, blob.data(), len, m, acc.data(), true, c.params) : Status::corrupt;
            const double t2 = mpi_next::Wtime();
            if (s != Status::ok) v[2] = 1;
            te = std::min(te, t1 - t0);
            td = std::min(td, t2 - t1);
        }
        const double bytes = static_cast<double>(m * sizeof(T));
        v[0] = te / bytes;
        v[1] = td / bytes;
    } else {
        v[2] = 1;
    }
    CMPI_CHECK(agree_max(c, v, 3));
    if (v[2] == 0 && v[0] > 0 && v[1] > 0) k->enc_Bps = 1 / v[0], k->dec_Bps = 1 / v[1];
    return Status::ok;
}

}  // namespace

template <class T>
Status allreduce_nodes_predict(CollCtx &c, const T *in, size_t n, const HierComms &h, double pred[2],
                               bool *one_host) {
    pred[0] = pred[1] = 0;
    const CollState::NodeModel *m = nullptr;
    CMPI_CHECK(node_model(c, h, &m));
    *one_host = m->host_ranks >= c.size;
    StageCodec k;
    CMPI_CHECK(codec_speed(c, in, n, &k));
    k.clip = c.codec->prepare && c.params.clip > 0;
    const StageLinks l{m->alpha, m->beta, m->alpha_node, m->beta_node};
    const StageShare s{m->cores, m->host_ranks, m->host_leaders};
    const double bytes = static_cast<double>(n * sizeof(T));
    CollCtx lc = c; /* the leaders' costs: arithmetic on their count (every rank computes them) */
    lc.size = h.nodes;
    lc.rank = 0;
    double hier = HUGE_VAL, flat = HUGE_VAL;
    for (int halving = 0; halving < 2; ++halving) { /* auto runs two-phase below 4 ranks */
        if (!halving || h.nodes >= 4)
            hier = std::min(hier, allreduce_hier_predict(l, s, k, h.nodes, h.max_per_node, bytes,
                                                         allreduce_cost(lc, n, halving), halving).total);
        if (!halving || c.size >= 4)
            flat = std::min(flat, allreduce_flat_predict(l, s, k, c.size, h.max_per_node, bytes,
                                                         allreduce_cost(c, n, halving), halving).total);
    }
    pred[0] = hier;
    pred[1] = flat;
    return Status::ok;
}

template Status allreduce_nodes_predict(CollCtx &, const float *, size_t, const HierComms &, double *, bool *);
template Status allreduce_nodes_predict(CollCtx &, const double *, size_t, const HierComms &, double *, bool *);

}  // namespace compmpi

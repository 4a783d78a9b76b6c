#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Tables and a plot from bench/netem/run_scale.sh results (docs/scale.md, "Emulated clusters").

    scale_report.py DIR [DIR2 ...] [--plot PNG] [--size BYTES] [--auto-rerun DIR] [--node-links DIR]

Reads DIR/raw.tsv and DIR/alphabeta.tsv (rows of later DIRs replace earlier ones with the same
topology, codec, algorithm, collective and size: a rerun of some jobs), and prints markdown:

  * the links as measured (pingpong): alpha, beta, alpha*beta per topology;
  * allreduce, per topology, codec and size: speedup of every algorithm over plain MPICH in
    the same job (1 / median of the per-iteration ratio lib/plain), the best one, what auto
    ran (from the job's hierarchical=/halving= counters) and how far auto is from the best;
  * per configuration: speedup, the fraction of the alpha-beta ideal (the algorithm's own
    communication time at the measured alpha, beta and wire ratio, codecs free, over the
    measured time) and the model's error ((predicted - measured) / measured; predicted =
    alpha-beta communication + codec time at this machine's one-thread codec speeds shared by
    the ranks of the 2 cores); plain MPICH's model error too;
  * bcast and allgather speedups;
  * CPU: the job's CPU share and run-queue wait; a row whose run-queue wait is above 0.25 or
    whose CPU share is above 0.8 is marked core-limited (*).
  * --auto-rerun DIR[,DIR2]: auto's rows of other runs (a later library; later DIRs win) against the best algorithm
    of the main runs and the main runs' auto: what each ran and how far from the best.

The model (comm: messages on the busiest rank's path x alpha + bytes over the busiest node
link / beta) per algorithm, P = N x R ranks, block placement (ranks kR..kR+R-1 on node k):
  plain (MPICH's Rabenseifner, distance 1 first): 2 log2(P/R) inter-node messages,
      2 M (1 - R/P) bytes per link;
  twophase (flat): S segments (chunk_bytes 4 MiB) x 2 (P - 1) messages; the alltoall puts
      R (P - R) M / (P k1) on a link, the ring allgather (P - 1) M / (P k2);
  halving_doubling (flat): 2 log2 P messages, of which those with partner distance >= R
      leave the node, carrying R x the rank's blob;
  hier_*: the algorithm among N leaders (R = 1); the stage model (issue 40, model_stages:
      tools/scale_model.py hier_stages / flat_stages) adds the node reduce and bcast over
      shared memory (binomial trees at the intra-node alpha and beta of alphabeta.tsv, or of
      --node-links DIR: a bench/netem/node_links.sh run), the leaders' codec at their core
      share and terngrad's clamped copy on every rank; the flat algorithms get their bytes
      inside a node, plain MPICH its steps inside a node;
  q8's allgather path (P <= 5, two-phase): P - 1 messages of whole blobs.
"""
import csv
import math
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import scale_model  # noqa: E402  (k_sum: the width of a payload that carries a sum)

# one-thread codec speeds on this machine, GB/s of fp32 (docs/benchmarks.md section 6, quiet
# machine, session 6): encode, decode(+add)
CODEC_GBPS = {"bitpack:16": (18.3, 18.35), "q8": (6.1, 20.3), "terngrad": (7.6, 21.7), "default": (21.8, 21.9)}
CORES = 2
CHUNK = 4 << 20
CPU_LIMIT_WAIT, CPU_LIMIT_SHARE = 0.25, 0.8


def fnum(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def load(dirs, node_only=False):
    """raw.tsv and alphabeta.tsv of the runs (later ones win); node_only: the intra-node columns
    of a links-only run (node_links.sh: no raw.tsv, no link columns)."""
    rows, ab = {}, {}
    for d in dirs:
        if not node_only:
            with open(os.path.join(d, "raw.tsv")) as f:
                for r in csv.DictReader(f, delimiter="\t"):
                    if fnum(r["ratio_med"]) is None:
                        continue
                    rows[(r["topo"], r["codec"], r["alg"], r["coll"], int(r["bytes"]))] = r
        with open(os.path.join(d, "alphabeta.tsv")) as f:
            for r in csv.DictReader(f, delimiter="\t"):
                if fnum(r.get("alpha_node_s" if node_only else "alpha_s")) is not None:
                    ab[r["topo"]] = r
    return rows, ab


def log2(x):
    return math.log2(x) if x > 1 else 0.0


CODEC_K = {"bitpack:16": (2.0, "bitpack16"), "q8": (4.0, "q8"), "terngrad": (16.0, "terngrad")}


def ksum(codec, c):
    """wire ratio of a payload carrying a sum of c contributions (scale_model.k_sum)."""
    k, name = CODEC_K.get(codec, (1.0, "none"))
    return scale_model.k_sum(name, c, k)


def comm_time(alg, P, R, M, codec, alpha, beta):
    """alpha-beta communication time of one allreduce (see the module doc); codec None: exact."""
    N = P // R
    if alg == "plain":
        return 2 * log2(N) * alpha + 2 * M * (1 - R / P) / beta
    if alg.startswith("hier_"):
        return comm_time(alg[5:].replace("halving", "halving_doubling"), N, 1, M, codec, alpha, beta)
    k1 = ksum(codec, 1)
    if alg == "twophase":
        if codec == "q8" and P <= 5:  # q8's allgather path: P - 1 whole blobs
            return (P - 1) * alpha + (P - 1) * M / k1 / beta
        S = max(1, math.ceil(M / CHUNK))
        return S * 2 * (P - 1) * alpha + (R * (P - R) * M / (P * k1) + (P - 1) * M / (P * ksum(codec, P))) / beta
    if alg == "halving_doubling":
        Q = 1 << int(log2(P))
        steps = int(log2(Q))
        t = 0.0
        for s in range(steps):  # reduce-scatter: distance Q >> (s + 1), half the range, sums of 2^s
            if Q >> (s + 1) >= R:
                t += alpha + R * M / 2 ** (s + 1) / ksum(codec, 1 << s) / beta
        for s in range(steps):  # allgather: distance 1 << s, (1 << s) final blobs (sums of P)
            if (1 << s) >= R:
                t += alpha + R * (1 << s) * M / Q / ksum(codec, P) / beta
        return t
    raise ValueError(alg)


def wire_bytes(alg, P, M, codec):
    """bytes one rank sends in the flat algorithm (the node traffic of flat_stages)."""
    k1 = ksum(codec, 1)
    if alg == "twophase":
        if codec == "q8" and P <= 5:
            return (P - 1) * M / k1
        return (P - 1) / P * M / k1 + (P - 1) / P * M / ksum(codec, P)
    Q = 1 << int(log2(P))
    steps = int(log2(Q))
    return sum(M / 2 ** (s + 1) / ksum(codec, 1 << s) for s in range(steps)) + (Q - 1) / Q * M / ksum(codec, P)


def node_link(ab, t, node_ab):
    """alpha and beta inside a node for topology t (every node's pairs at once): its own alphabeta
    row, else the --node-links run's; None where neither measured it."""
    for src in (ab, node_ab or {}):
        a = src.get(t)
        if a and fnum(a.get("alpha_node_s")) is not None and (fnum(a.get("beta_node_loaded_Bps")) or 0) > 0:
            return float(a["alpha_node_s"]), float(a["beta_node_loaded_Bps"]), src is ab
    return None


def model_stages(alg, codec, P, R, M, alpha, beta, nl):
    """The stage model (tools/scale_model.py hier_stages / flat_stages; coll/coll.h) of one
    allreduce; nl = node_link(...) or None (node stages left out). Plain MPICH: its alpha-beta
    time plus its steps inside a node (Rabenseifner, distance 1 first: log2 R steps each way,
    2 M (1 - 1/R) bytes over shared memory)."""
    tc = comm_time(alg, P, R, M, codec, alpha, beta)
    an, bn = (nl[0], nl[1]) if nl else (0.0, 0.0)
    if alg == "plain":
        node = 2 * log2(R) * an + (2 * M * (1 - 1 / R) / bn if bn else 0.0)
        return {"node": node, "link": tc, "codec": 0.0, "total": node + tc}
    enc, dec = CODEC_GBPS.get(codec, (10.0, 10.0))
    halving = alg.endswith("halving") or alg == "halving_doubling"
    if alg.startswith("hier_"):
        N = P // R
        st = scale_model.hier_stages(N, R, M, tc, an, bn if bn else float("inf"), enc * 1e9, dec * 1e9, halving,
                                     share_leaders=max(1.0, N / CORES), share_all=max(1.0, P / CORES),
                                     clip=codec == "terngrad")
        st["node"] = st["node_reduce"] + st["node_bcast"]
        return st
    return scale_model.flat_stages(P, R, M, tc, wire_bytes(alg, P, M, codec), bn, enc * 1e9, dec * 1e9, halving,
                                   share_all=max(1.0, P / CORES))


def codec_time(alg, codec, P, R, M):
    """The model before issue 40 (kept to show the change): every algorithm's codec at every
    rank's core share, the hierarchy's node stages left out."""
    enc, dec = CODEC_GBPS.get(codec, (10.0, 10.0))
    share = max(1.0, P / CORES)  # every rank encodes at once on the machine's cores
    if alg.startswith("hier_"):
        P = P // R
    if alg == "halving_doubling" or alg == "hier_halving":
        e, d = M + M / P, 2 * M
    else:
        e, d = M * (1 + 1 / P), M * (2 - 1 / P)
    return share * (e / (enc * 1e9) + d / (dec * 1e9))


def core_limited(r, arm=""):
    w, c = fnum(r["rq_wait" + arm]), fnum(r["cpu" + arm])
    return (w is not None and w > CPU_LIMIT_WAIT) or (c is not None and c > CPU_LIMIT_SHARE)


def auto_pick(r):
    P, R = int(r["ranks"]), int(r["ppn"])
    notes = r.get("auto_decisions") or "-"
    if notes != "-":  # timed choices of the measured auto: floats@ranks:algorithm;...
        fl = int(r["bytes"]) // 4
        for item in notes.strip(";").split(";"):
            f, _, alg = item.partition(":")
            if int(f.split("@")[0]) == fl:
                return ("hier_" if (fnum(r["hierarchical"]) or 0) > 0 else "") + alg.replace("halving_doubling", "halving") + " (timed)"
        return auto_pick_counters(r, explored=notes.count(";") + (0 if notes.endswith(";") else 1))
    return auto_pick_counters(r, 0)


def auto_pick_counters(r, explored):
    """From the job's counters; explored = sizes of the job the measured auto timed (3 halving
    calls per leader each)."""
    P, R = int(r["ranks"]), int(r["ppn"])
    calls = fnum(r["calls"]) or 0
    hier, halv = fnum(r["hierarchical"]) or 0, fnum(r["halving"]) or 0
    if calls == 0:
        return "exact"
    h = hier > 0
    if explored:  # several sizes in one job: the untimed (model) sizes share the counters
        leaders = P // R if h else P
        rest = halv - 3 * explored * leaders
        return "hier_" * h + ("twophase" if rest <= 0 else "halving (model)" if rest > 0 else "?")
    if h:
        leaders_calls = calls / R
        name = "hier_halving" if halv >= 0.5 * leaders_calls and halv > 0 else "hier_twophase"
        if 0 < halv < 0.5 * leaders_calls:
            name += "(mixed)"
        return name
    if halv == 0:
        return "twophase"
    return "halving_doubling" if halv >= calls else "halving_doubling(mixed)"


def sz(b):
    return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"


def main():
    args = sys.argv[1:]
    plot, md_size, rerun, node_dir = None, 16 << 20, None, None
    dirs = []
    i = 0
    while i < len(args):
        if args[i] == "--plot":
            plot = args[i + 1]; i += 2
        elif args[i] == "--auto-rerun":
            rerun = args[i + 1]; i += 2
        elif args[i] == "--node-links":
            node_dir = args[i + 1]; i += 2
        elif args[i] == "--size":
            md_size = int(args[i + 1]); i += 2
        else:
            dirs.append(args[i]); i += 1
    rows, ab = load(dirs)
    node_ab = load([node_dir], node_only=True)[1] if node_dir else None
    topos = sorted({k[0] for k in rows}, key=lambda t: (int(t.split("x")[1]), int(t.split("x")[0])))
    out = []
    p = out.append
    p("### The links (pingpong between two nodes; loaded: every rank exchanging with another node at once)\n")
    p("| topology | ranks | alpha (ms) | beta (MB/s) | beta loaded (MB/s) | alpha x beta (KB) | "
      "node alpha (ms) | node beta (MB/s) | node beta, all pairs (MB/s) |")
    p("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for t in topos:
        a = ab.get(t)
        if not a:
            continue
        n, rr = map(int, t.split("x"))
        al, be, bl = float(a["alpha_s"]), float(a["beta_Bps"]), fnum(a["beta_loaded_Bps"]) or float("nan")
        na, nb, nbl = fnum(a.get("alpha_node_s")), fnum(a.get("beta_node_Bps")), fnum(a.get("beta_node_loaded_Bps"))
        node = (f" | {na * 1e3:.3f} | {nb / 1e6:.0f} | {nbl / 1e6:.0f}" if na is not None and nb is not None and nbl
                else " | | |")
        p(f"| {t} | {n * rr} | {al * 1e3:.3f} | {be / 1e6:.1f} | {bl / 1e6:.1f} | {al * be / 1e3:.1f}{node} |")
    p("")

    if node_ab:
        p("### Inside a node (--node-links run: bench/netem/node_links.sh)\n")
        spread = {}
        sp = os.path.join(node_dir, "spread.tsv")
        if os.path.exists(sp):
            with open(sp) as f:
                for r in csv.DictReader(f, delimiter="\t"):
                    if fnum(r["beta_node_loaded_Bps"]):
                        spread.setdefault(r["topo"], []).append(float(r["beta_node_loaded_Bps"]))
        p("| topology | ranks | node alpha (ms) | node beta, one pair (MB/s) | node beta, all pairs at once (MB/s) | all pairs: rounds, min-max (MB/s) |")
        p("| --- | ---: | ---: | ---: | ---: | --- |")
        for t in sorted(node_ab, key=lambda t: (int(t.split("x")[1]), int(t.split("x")[0]))):
            a = node_ab[t]
            n, rr = map(int, t.split("x"))
            v = sorted(spread.get(t, []))
            rng = f"{len(v)}, {v[0] / 1e6:.0f}-{v[-1] / 1e6:.0f}" if v else ""
            p(f"| {t} | {n * rr} | {float(a['alpha_node_s']) * 1e3:.3f} | {float(a['beta_node_Bps']) / 1e6:.0f} | "
              f"{float(a['beta_node_loaded_Bps']) / 1e6:.0f} | {rng} |")
        p("")

    algs_all = ["twophase", "halving_doubling", "hier_twophase", "hier_halving", "auto"]
    codecs = [c for c in ["bitpack:16", "q8", "terngrad"] if any(k[1] == c for k in rows)]
    sizes = sorted({k[4] for k in rows if k[3] == "allreduce" and k[2] != "auto"})
    p("### Allreduce: speedup over plain MPICH in the same job, per algorithm (* = core-limited run)\n")
    p("auto ran: what the job's counters say; gap = auto's time over the best algorithm's (same-job "
      "ratios), > +10% in bold.\n")
    p("| topology | codec | size | " + " | ".join(a for a in algs_all) + " | best | auto ran | auto gap |")
    p("| --- | --- | --- | " + " | ".join("---:" for _ in algs_all) + " | --- | --- | ---: |")
    gaps = []
    for t in topos:
        for c in codecs:
            for s in sizes:
                cells, best = [], None
                for a in algs_all:
                    r = rows.get((t, c, a, "allreduce", s))
                    if not r:
                        cells.append("")
                        continue
                    rm = float(r["ratio_med"])
                    cells.append(f"{1 / rm:.2f}{'*' if core_limited(r) else ''}")
                    if a != "auto" and (best is None or rm < best[1]):
                        best = (a, rm)
                ra = rows.get((t, c, "auto", "allreduce", s))
                pick, gap = "", ""
                if ra and best:
                    pick = auto_pick(ra)
                    g = float(ra["ratio_med"]) / best[1] - 1
                    gaps.append((t, c, s, g, pick, best[0]))
                    gap = f"**{g:+.0%}**" if g > 0.10 else f"{g:+.0%}"
                if any(cells):
                    p(f"| {t} | {c} | {sz(s)} | " + " | ".join(cells) + f" | {best[0] if best else ''} | {pick} | {gap} |")
    p("")
    big = [k for k in rows if k[3] == "allreduce" and k[2] == "auto" and k[4] not in sizes]
    if big:
        p("### Allreduce with auto at the other sizes (speedup, what auto ran)\n")
        p("| topology | codec | size | speedup | auto ran | CPU share | run-queue wait |")
        p("| --- | --- | --- | ---: | --- | ---: | ---: |")
        for k in sorted(big, key=lambda k: (topos.index(k[0]), k[1], k[4])):
            r = rows[k]
            p(f"| {k[0]} | {k[1]} | {sz(k[4])} | {1 / float(r['ratio_med']):.2f}{'*' if core_limited(r) else ''} | "
              f"{auto_pick(r)} | {float(r['cpu']):.2f} | {float(r['rq_wait']):.2f} |")
        p("")
    dflt = sorted([k for k in rows if k[1] == "default" and k[3] == "allreduce"], key=lambda k: (topos.index(k[0]), k[4]))
    if dflt:
        p("### Allreduce, default settings (awp bitpack with the cost model, auto)\n")
        p("| topology | size | speedup | 95% CI | wire ratio | auto ran |")
        p("| --- | --- | ---: | --- | ---: | --- |")
        for k in dflt:
            r = rows[k]
            p(f"| {k[0]} | {sz(k[4])} | {1 / float(r['ratio_med']):.2f}{'*' if core_limited(r) else ''} | "
              f"{1 / float(r['ratio_hi']):.2f}-{1 / float(r['ratio_lo']):.2f} | {r['wire_ratio']} | {auto_pick(r)} |")
        p("")

    p("### Allreduce per configuration: speedup / fraction of the alpha-beta ideal / model error\n")
    p("Ideal: the algorithm's alpha-beta communication time at the measured alpha, loaded beta and wire "
      "ratio, codecs free. Model error: (model - measured) / measured, before -> after issue 40. Before: "
      "that communication time plus codec time at one-thread speeds, every rank's core share "
      "(ranks / 2 cores), the hierarchy's node stages left out. After: the stage model (tools/scale_model.py "
      "hier_stages / flat_stages; coll/coll.h): plus the node reduce and bcast (binomial trees at the "
      "measured intra-node alpha and beta, every node's pairs at once), the hierarchy's codec at the "
      "leaders' core share (nodes / 2 cores) and terngrad's clamped copy on every rank, the flat "
      "algorithms' and plain MPICH's bytes inside a node. Plain: MPICH's measured time against its own "
      "alpha-beta model.\n")
    p("| topology | codec | algorithm | " + " | ".join(sz(s) for s in sizes) + " |")
    p("| --- | --- | --- | " + " | ".join("---" for _ in sizes) + " |")
    errs = []  # (algorithm, topology, before, after)
    stages = []
    for t in topos:
        a = ab.get(t)
        if not a:
            continue
        n, R = map(int, t.split("x"))
        P = n * R
        alpha = float(a["alpha_s"])
        beta = fnum(a["beta_loaded_Bps"]) or float(a["beta_Bps"])
        nl = node_link(ab, t, node_ab) if R > 1 else None
        # plain MPICH
        cells = []
        for s in sizes:
            rs = [r for k, r in rows.items() if k[0] == t and k[3] == "allreduce" and k[4] == s and k[1] != "default"]
            if not rs:
                cells.append("")
                continue
            tp = sorted(float(r["t_plain_med_s"]) for r in rs)[len(rs) // 2]
            m0 = comm_time("plain", P, R, s, None, alpha, beta)
            m1 = model_stages("plain", None, P, R, s, alpha, beta, nl)["total"]
            errs.append(("plain", t, (m0 - tp) / tp, (m1 - tp) / tp))
            cells.append(f"{tp * 1e3:.0f} ms / {m0 / tp:.2f} / {(m0 - tp) / tp:+.0%} -> {(m1 - tp) / tp:+.0%}")
        p(f"| {t} | (none) | plain MPICH | " + " | ".join(cells) + " |")
        for c in codecs:
            for al in algs_all[:-1]:
                cells = []
                for s in sizes:
                    r = rows.get((t, c, al, "allreduce", s))
                    if not r:
                        cells.append("")
                        continue
                    tc = comm_time(al, P, R, s, c, alpha, beta)
                    tm = float(r["t_lib_med_s"])
                    m0 = tc + codec_time(al, c, P, R, s)
                    st = model_stages(al, c, P, R, s, alpha, beta, nl)
                    m1 = st["total"]
                    errs.append((al, t, (m0 - tm) / tm, (m1 - tm) / tm))
                    if al.startswith("hier_"):
                        stages.append((t, c, al, s, tm, st))
                    cells.append(f"{1 / float(r['ratio_med']):.2f}{'*' if core_limited(r) else ''} / "
                                 f"{tc / tm:.2f} / {(m0 - tm) / tm:+.0%} -> {(m1 - tm) / tm:+.0%}")
                if any(cells):
                    p(f"| {t} | {c} | {al} | " + " | ".join(cells) + " |")
    p("")
    if errs:
        def med(v):
            v = sorted(v)
            return v[len(v) // 2] if v else float("nan")
        p("#### Model error per algorithm (median |error| over configurations, before -> after)\n")
        src = {t: ("own run" if node_link(ab, t, node_ab)[2] else "--node-links run") for t in topos
               if int(t.split("x")[1]) > 1 and ab.get(t) and node_link(ab, t, node_ab)}
        if src:
            p("Intra-node alpha and beta from: " + ", ".join(f"{t} {w}" for t, w in src.items()) + ".\n")
        p("| algorithm | configurations | median abs error before | after | after, within 20% | after, median error (signed) |")
        p("| --- | ---: | ---: | ---: | ---: | ---: |")
        for al in ["plain"] + algs_all[:-1]:
            e = [x for x in errs if x[0] == al]
            if not e:
                continue
            inside = sum(1 for x in e if abs(x[3]) <= 0.20)
            p(f"| {al} | {len(e)} | {med([abs(x[2]) for x in e]):.0%} | {med([abs(x[3]) for x in e]):.0%} | "
              f"{inside} of {len(e)} | {med([x[3] for x in e]):+.0%} |")
        p("")
        tps = [t for t in topos if any(x[1] == t for x in errs)]
        p("| algorithm | " + " | ".join(tps) + " |")
        p("| --- | " + " | ".join("---:" for _ in tps) + " |")
        for al in ["plain"] + algs_all[:-1]:
            cells = []
            for t in tps:
                e = [x for x in errs if x[0] == al and x[1] == t]
                cells.append(f"{med([abs(x[2]) for x in e]):.0%} -> {med([abs(x[3]) for x in e]):.0%}" if e else "")
            if any(cells):
                p(f"| {al} | " + " | ".join(cells) + " |")
        p("")
        if node_ab and node_dir and os.path.exists(os.path.join(node_dir, "spread.tsv")):
            # how much the hierarchy's error moves with beta_n: every topology at its slowest and
            # at its fastest round of node_links.sh
            spread = {}
            with open(os.path.join(node_dir, "spread.tsv")) as f:
                for r in csv.DictReader(f, delimiter="\t"):
                    if fnum(r["beta_node_loaded_Bps"]):
                        spread.setdefault(r["topo"], []).append(float(r["beta_node_loaded_Bps"]))
            parts = []
            for name, pick in (("slowest", min), ("fastest", max)):
                ev = {}
                for (t, c, al, coll, sz_), r in rows.items():
                    if coll != "allreduce" or not al.startswith("hier_") or t not in spread or not ab.get(t):
                        continue
                    n, R = map(int, t.split("x"))
                    a = ab[t]
                    nl = (float(node_ab[t]["alpha_node_s"]), pick(spread[t]), False)
                    tm = float(r["t_lib_med_s"])
                    m1 = model_stages(al, c, n * R, R, sz_, float(a["alpha_s"]),
                                      fnum(a["beta_loaded_Bps"]) or float(a["beta_Bps"]), nl)["total"]
                    ev.setdefault(al, []).append(abs(m1 - tm) / tm)
                parts.append(f"{name} round's beta_n: " + ", ".join(f"{al} {med(v):.0%}" for al, v in sorted(ev.items())))
            p("Median abs error of the hierarchy with every topology's " + "; ".join(parts) + ".\n")
    if stages:
        big = max(s for *_, s, _, _ in [(x[0], x[1], x[2], x[3], x[4], x[5]) for x in stages])
        p(f"#### The hierarchy stage by stage at {sz(big)} (model, ms; measured beside it)\n")
        p("| topology | codec | algorithm | node reduce + bcast | link | codec | model | measured | node stages' share |")
        p("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        for t, c, al, s, tm, st in stages:
            if s != big:
                continue
            p(f"| {t} | {c} | {al} | {st['node'] * 1e3:.0f} | {st['link'] * 1e3:.0f} | {st['codec'] * 1e3:.0f} | "
              f"{st['total'] * 1e3:.0f} | {tm * 1e3:.0f} | {st['node'] / st['total']:.0%} |")
        p("")

    others = sorted([k for k in rows if k[3] in ("bcast", "allgather")], key=lambda k: (topos.index(k[0]), k[3], k[1], k[4]))
    if others:
        p("### Bcast and allgather: speedup over plain MPICH (same job)\n")
        osz = sorted({k[4] for k in others})
        ocod = [c for c in ["default", "bitpack:16", "q8", "terngrad"] if any(k[1] == c for k in others)]
        p("| topology | collective | " + " | ".join(f"{c} {sz(s)}" for c in ocod for s in osz) + " |")
        p("| --- | --- | " + " | ".join("---:" for _ in ocod for _ in osz) + " |")
        for t in topos:
            for coll in ("bcast", "allgather"):
                cells = []
                for c in ocod:
                    for s in osz:
                        r = rows.get((t, c, "-", coll, s))
                        cells.append(f"{1 / float(r['ratio_med']):.2f}{'*' if core_limited(r) else ''}" if r else "")
                if any(cells):
                    p(f"| {t} | {coll} | " + " | ".join(cells) + " |")
        p("")

    if rerun:
        rrows, _ = load(rerun.split(","))
        p("### auto before and after: fixed alpha*beta vs measured alpha, beta and timed choices\n")
        p("Gaps: auto's same-job ratio over the best algorithm's (main runs), > +10% in bold.\n")
        p("| topology | codec | size | best (speedup) | fixed: ran | fixed: gap | measured: ran | measured: speedup | measured: gap |")
        p("| --- | --- | --- | --- | --- | ---: | --- | ---: | ---: |")
        for k in sorted([k for k in rrows if k[2] == "auto" and k[3] == "allreduce"],
                        key=lambda k: (topos.index(k[0]) if k[0] in topos else 99, k[1], k[4])):
            t, c, _, _, s = k
            best = None
            for a in algs_all[:-1]:
                r = rows.get((t, c, a, "allreduce", s))
                if r and (best is None or float(r["ratio_med"]) < best[1]):
                    best = (a, float(r["ratio_med"]))
            rn, ro = rrows[k], rows.get((t, c, "auto", "allreduce", s))
            def g(r):
                if not r or not best:
                    return ""
                x = float(r["ratio_med"]) / best[1] - 1
                return f"**{x:+.0%}**" if x > 0.10 else f"{x:+.0%}"
            p(f"| {t} | {c} | {sz(s)} | {best[0] + f' ({1 / best[1]:.2f})' if best else ''} | "
              f"{auto_pick(ro) if ro else ''} | {g(ro)} | {auto_pick(rn)} | "
              f"{1 / float(rn['ratio_med']):.2f}{'*' if core_limited(rn) else ''} | {g(rn)} |")
        p("")
    p("### CPU (per job, the library's arm / plain arm)\n")
    lim = [r for r in rows.values() if core_limited(r)]
    liml = [r for r in rows.values() if core_limited(r, "_plain")]
    p(f"{len(lim)} of {len(rows)} rows core-limited in the library's arm, {len(liml)} in plain MPICH's "
      f"(run-queue wait > {CPU_LIMIT_WAIT} or CPU share > {CPU_LIMIT_SHARE}).\n")
    p("| topology | CPU share lib (median, max) | run-queue wait lib (median, max) | CPU share plain (median) | run-queue wait plain (median) |")
    p("| --- | --- | --- | ---: | ---: |")
    for t in topos:
        rs = [r for k, r in rows.items() if k[0] == t]
        def med(key):
            v = sorted(fnum(r[key]) for r in rs if fnum(r[key]) is not None)
            return (v[len(v) // 2], v[-1]) if v else (float("nan"), float("nan"))
        c1, w1, c2, w2 = med("cpu"), med("rq_wait"), med("cpu_plain"), med("rq_wait_plain")
        p(f"| {t} | {c1[0]:.2f}, {c1[1]:.2f} | {w1[0]:.2f}, {w1[1]:.2f} | {c2[0]:.2f} | {w2[0]:.2f} |")
    p("")
    text = "\n".join(out)
    print(text)

    if plot:
        make_plot(rows, plot, md_size, codecs, load(rerun.split(","))[0] if rerun else None)


def make_plot(rows, png, size, codecs, extra_auto=None):
    """speedup vs ranks per algorithm at one size: columns = codecs, rows = ranks per node (1;
    2, with the 4x4 cluster's points). extra_auto: rows of a rerun whose auto is drawn as
    'auto (measured)'."""
    tmp = tempfile.mkdtemp(prefix="scale_plot.")
    series = {}
    for src, tag in ((rows, ""), (extra_auto or {}, " (measured)")):
        for (t, c, a, coll, s), r in src.items():
            if coll != "allreduce" or s != size or c not in codecs or (tag and a != "auto"):
                continue
            n, R = map(int, t.split("x"))
            series.setdefault((c, a + tag, 2 if R >= 2 else 1, R), []).append((n * R, 1 / float(r["ratio_med"])))
    gp = [f"set terminal pngcairo size {430 * len(codecs)},760 font ',10'", f"set output '{png}'",
          f"set multiplot layout 2,{len(codecs)} title 'Allreduce {sz(size)} per rank on the emulated cluster "
          "(200 Mbit/s + 1 ms per node link): speedup over plain MPICH in the same job' noenhanced",
          "set logscale x 2; set grid; set key top right noenhanced font ',7' samplen 2 spacing 0.8",
          "set xrange [3.5:18]; set xtics (4,8,16); set ylabel 'speedup'; set yrange [0:*]"]
    colors = {"twophase": 1, "halving_doubling": 2, "hier_twophase": 3, "hier_halving": 4, "auto": 7,
              "auto (measured)": 6}
    for row in (1, 2):
        for c in codecs:
            gp.append(f"set title '{c}, {'1 rank per node' if row == 1 else '2 ranks per node (triangles: 4x4)'}' noenhanced")
            gp.append(f"set xlabel 'ranks ({'N x 1' if row == 1 else 'N x 2, 4 x 4'})'")
            cmds = []
            for (cc, a, rr, R), pts in sorted(series.items()):
                if cc != c or rr != row:
                    continue
                f = os.path.join(tmp, f"{c.replace(':', '')}_{a.replace(' ', '_').replace('(', '').replace(')', '')}_{R}.dat")
                with open(f, "w") as fh:
                    for x, y in sorted(pts):
                        fh.write(f"{x} {y}\n")
                lc = colors.get(a, 8)
                label = "auto (fixed)" if a == "auto" else a
                if R <= 2:
                    dt = " dt 2" if "measured" in a else ""
                    cmds.append(f"'{f}' using 1:2 with linespoints lw 2{dt} lc {lc} pt 7 title '{label}'")
                else:
                    cmds.append(f"'{f}' using 1:2 with points lc {lc} pt 9 ps 1.6 notitle")
            gp.append("plot " + ", ".join(cmds) if cmds else "plot 0 notitle")
    gp.append("unset multiplot")
    with open(os.path.join(tmp, "plot.gp"), "w") as f:
        f.write("\n".join(gp) + "\n")
    subprocess.run(["gnuplot", os.path.join(tmp, "plot.gp")], check=True)
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()

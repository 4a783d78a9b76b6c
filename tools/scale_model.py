#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Predicted allreduce times at scale (docs/design.md, "Scale on paper").

The same reasoning as the cost model and the FFT paper's eq. 4 (Wang et al., Section 3.3):
time = latency terms + bytes on the busiest link / link bandwidth + codec time. Nothing here is
measured on a cluster: link figures are the nominal rates named below, codec throughputs are
this project's H100 kernel figures, published or assumed figures, each labelled where it is used. Run:  python3 tools/scale_model.py
"""
import math

ALPHA = 2e-6  # s per message: a typical InfiniBand/RoCE MPI latency (assumed, not measured here)

# Codec throughputs on a GPU, bytes of fp32 input per second.
#  - 'measured': this project's kernels on an NVIDIA H100 80GB HBM3 (bench/cuda_bench -n 67108864
#    -r 20, docs/benchmarks.md section 4): bitpack 16 encode 1951.9 GB/s and decode-and-add
#    1150.0 GB/s (session 10); terngrad as the allreduce calls it (agreed scale, clip_at) encode
#    815.5 GB/s, base4 decode 285 GB/s (session 13, host validation of the codes included);
#  - 'published': the FFT paper's top-k selection on a V100, 34 GB/s (Section 3.1);
#  - 'assumed': q8 at 50% of an H100's published 3.35 TB/s HBM3 bandwidth, the target of
#    issue 13 (q8's kernels are timed only inside the allreduce, not alone).
CODECS = {
    # name: (compression ratio k, encode B/s, decode B/s, label)
    "bitpack16": (2.0, 1951.9e9, 1150.0e9, "measured on an H100: encode 1952, decode-and-add 1150 GB/s"),
    "q8": (4.0, 0.5 * 3.35e12, 0.5 * 3.35e12, "assumed: 50% of H100 HBM3 3.35 TB/s"),
    "terngrad": (16.0, 815.5e9, 285e9, "measured on an H100: encode 816 (the allreduce's case), decode 285 GB/s"),
    "topk(15%)": (3.3, 34e9, 0.5 * 3.35e12, "published: top-k selection 34 GB/s on V100 (Wang et al.)"),
}


def ring_plain(P, M, B):
    """MPI's ring / Rabenseifner allreduce: reduce-scatter + allgather, 2(P-1) steps."""
    return 2 * (P - 1) * ALPHA + 2 * (P - 1) / P * M / B


def recdbl_plain(P, M, B):
    """Recursive doubling: log2 P steps, the whole buffer each step (small messages)."""
    return math.ceil(math.log2(P)) * (ALPHA + M / B)


def halving_doubling_plain(P, M, B):
    """Rabenseifner: recursive-halving reduce-scatter + recursive-doubling allgather."""
    return 2 * math.ceil(math.log2(P)) * ALPHA + 2 * (P - 1) / P * M / B


def codec_time(P, M, enc, dec):
    # two-phase: encode everything once, decode P-1 chunks, re-encode the owned chunk, decode P chunks
    return M * (1 + 1 / P) / enc + M * (2 - 1 / P) / dec


CHUNK = 4 << 20  # chunk_bytes' default: the two-phase allreduce runs in segments of this size


def twophase_alltoall(P, M, B, k, enc, dec, k2=None, chunk=CHUNK):
    """libcompmpi's two-phase allreduce: alltoall of compressed chunks, sum, allgather of compressed
    sums (ratio k2), pipelined in S = ceil(M / chunk) segments (chunk_bytes). Latency: (P-1) messages
    per segment. It was 2(P-1) per call whatever the segments until the SimGrid SMPI simulation of
    issue 28 with codecs free (docs/scale.md: alpha 2 us, the link's beta) measured (P-1)/2 to
    (P-1) message latencies for one segment and S(P-1) for S segments (the alltoall of segment k+1
    overlaps the allgather of segment k, one chain of P-1 latencies stays exposed per segment):
    the old term was off by +46% (bitpack 16) to +92% (terngrad) at 64 ranks and 1 MiB, and for
    100 MiB buffers it left out 24 of 25 segments' latencies."""
    k2 = k2 or k
    segments = max(1, math.ceil(M / chunk))
    comm = segments * (P - 1) * ALPHA
    comm += (P - 1) / P * M / (k * B)   # alltoall
    comm += (P - 1) / P * M / (k2 * B)  # allgather
    return comm + codec_time(P, M, enc, dec)


def ring_compressed(P, M, B, k, enc, dec):
    """Ring reduce-scatter with a quantised payload per step (decode-add-encode each of the P-1
    steps: P-1 extra quantisations unless the sum travels exactly) + compressed ring allgather."""
    comm = 2 * (P - 1) * ALPHA + 2 * (P - 1) / P * M / (k * B)
    codec = M / enc + (P - 1) / P * M * (1 / enc + 1 / dec) + M / dec
    return comm + codec


def halving_doubling_compressed(P, M, B, k, enc, dec, c=None):
    """Rabenseifner's order with compressed payloads, as coll/allreduce/allreduce_halving.cc
    runs it (P a power of two): reduce-scatter by recursive halving, log2 P steps; step s sends
    half of the remaining buffer (M / 2^(s+1)) carrying sums of 2^s contributions at the codec's
    width for such sums (k_sum(c, 2^s, k): terngrad's levels grow with the step, q8's sums travel
    in fp32), decode-add; then the owner encodes its chunk (a sum of P) once more and the final
    blobs are allgathered by recursive doubling, forwarded unchanged (log2 P steps).
    Codec work: step 0 encodes the sent half (stochastic codecs and q8 also the kept half,
    decoded locally: every contribution quantised), later steps M (1/2 - 1/P) each way, the
    final chunk M/P, and every rank decodes all M of the final blobs."""
    steps = math.ceil(math.log2(P))
    comm = 2 * steps * ALPHA
    for s in range(steps):
        comm += M / 2 ** (s + 1) / (k_sum(c, 2 ** s, k) * B)
    comm += (P - 1) / P * M / (k_sum(c, P, k) * B)
    own = c in ("terngrad", "q8")
    e = (M if own else M / 2) + M * (0.5 - 1 / P) + M / P
    d = (M if own else M / 2) + M * (0.5 - 1 / P) + M
    return comm + e / enc + d / dec


def sparse_allgather(P, M, B, k, enc, dec):
    """Allgather of every rank's compressed buffer (sparsifiers): P-1 buffers arrive at each rank."""
    return (P - 1) * ALPHA + (P - 1) * M / (k * B) + M / enc + (P - 1) * M / dec


def k_sum(c, P, k):
    """Compression ratio of a payload carrying a sum over P ranks: terngrad's sum of P ternaries
    travels exactly in ceil(log2(2P+1)) bits; q8's sums travel in fp32 (each contribution is
    quantised once, docs/codecs/q8.md); the other codecs re-encode the sum at their width."""
    if P <= 1:
        return k
    if c == "terngrad":
        return 32.0 / math.ceil(math.log2(2 * P + 1))
    if c == "q8":
        return 1.0
    return k


def tree_steps(R):
    """Steps of a binomial tree over R ranks (MPI's reduce and bcast inside a node)."""
    return math.ceil(math.log2(R)) if R > 1 else 0


def stage_codec(p, M, enc, dec, halving=False):
    """Codec seconds per rank of the dense allreduce over p ranks at one thread's speeds (bytes of
    input per second): encode M (1 + 1/p); decode M (2 - 1/p) (two-phase) or 2 M (halving-doubling)."""
    e = M * (1 + 1 / p)
    d = 2 * M if halving else M * (2 - 1 / p)
    return e / enc + d / dec


def hier_stages(N, R, M, link, alpha_n, beta_n, enc, dec, halving=False, share_leaders=1.0, share_all=1.0,
                clip=False):
    """The hierarchical allreduce stage by stage (issue 40; the in-library model is the same formula:
    coll/coll.h "The alpha-beta stage model", allreduce_hier_predict), N nodes of R ranks, M bytes:
      node reduce = node bcast = ceil(log2 R) (alpha_n + M / beta_n)   (binomial trees; beta_n the
          shared-memory bandwidth with every node's pairs exchanging at once)
      link  = the leaders' algorithm among N ranks (given: its alpha-beta time)
      codec = the leaders' codec work at their core share (share_leaders = max(1, leaders on a
          host / its cores)), plus for clipping codecs (terngrad) the clamped copy of every rank's
          contribution before the node reduce, M / enc at every rank's share (share_all)."""
    node = tree_steps(R) * (alpha_n + M / beta_n)
    codec = stage_codec(N, M, enc, dec, halving) * share_leaders + (M / enc * share_all if clip else 0)
    return {"node_reduce": node, "link": link, "node_bcast": node, "codec": codec,
            "total": 2 * node + link + codec}


def flat_stages(P, R, M, link, wire_bytes, beta_n, enc, dec, halving=False, share_all=1.0):
    """The flat allreduce over P ranks, R per node (same formula as allreduce_flat_predict): link
    (given: the algorithm's alpha-beta time on the node links), the bytes that stay inside a node
    (wire_bytes (R - 1) / (P - 1) over beta_n), the codec at every rank's core share."""
    node = wire_bytes * (R - 1) / (P - 1) / beta_n if P > 1 and beta_n else 0.0
    codec = stage_codec(P, M, enc, dec, halving) * share_all
    return {"node": node, "link": link, "codec": codec, "total": node + link + codec}


def auto_picks(c, P, M, k):
    """What allreduce_algorithm=auto chooses across nodes with link_alpha_beta fixed at ALPHA * AUTO_B
    (coll/allreduce/allreduce_choice.cc: the model alone): messages * ALPHA * AUTO_B + bytes sent
    per rank, communication only, halving-doubling when 10% below two-phase (blob headers left
    out here). By default auto measures alpha and beta and times both algorithms where the
    model is not clear (docs/design.md)."""
    L = ALPHA * AUTO_B
    two = 2 * (P - 1) * L + (P - 1) / P * M * (1 / k + 1 / k_sum(c, P, k))
    steps = int(math.log2(P))
    hd = 2 * steps * L + sum(M / 2 ** (s + 1) / k_sum(c, 2 ** s, k) for s in range(steps))
    hd += (P - 1) / P * M / k_sum(c, P, k)
    return "halving-doubling" if hd < 0.9 * two else "two-phase"


AUTO_B = 100e9 / 8  # link_alpha_beta=25000: 2 us x 100 Gbit/s (auto measures it by default)


def main():
    sizes = [("4 MiB", 4 << 20), ("100 MiB", 100 << 20)]
    links = [("100 Gbit/s", 100e9 / 8), ("400 Gbit/s", 400e9 / 8)]
    ranks = [16, 64, 256, 1024]
    print("Predicted allreduce time (ms); speedup over the best uncompressed algorithm in brackets.")
    print("Codec throughputs: " + "; ".join(f"{n}: {lab}" for n, (_, _, _, lab) in CODECS.items()) + ".")
    print(f"Latency per message {ALPHA * 1e6:.0f} us (assumed). Payloads that carry partial sums (phase 2 of "
          "two-phase, every step of ring and halving-doubling) use the codec's width for sums: terngrad's "
          "exact sum of P ternaries needs ceil(log2(2P+1)) bits, q8's sums travel in fp32.\n")
    for lname, B in links:
        for sname, M in sizes:
            print(f"#### {sname} per rank, {lname}\n")
            print("| ranks | exact: ring / rec. doubling / halving-doubling | " + " | ".join(
                f"{c}: two-phase / ring / halving-doubling / allgather" for c in CODECS) + " | best |")
            print("| --- | --- | " + " | ".join("---" for _ in CODECS) + " | --- |")
            for P in ranks:
                plain = {"ring": ring_plain(P, M, B), "recursive doubling": recdbl_plain(P, M, B),
                         "halving-doubling": halving_doubling_plain(P, M, B)}
                bname = min(plain, key=plain.get)
                base = plain[bname]
                best = ("exact, " + bname, base)
                cells = []
                for c, (k, enc, dec, _) in CODECS.items():
                    ks = k_sum(c, P, k)
                    a = twophase_alltoall(P, M, B, k, enc, dec, ks)
                    r = ring_compressed(P, M, B, ks, enc, dec)
                    h = halving_doubling_compressed(P, M, B, k, enc, dec, c)
                    g = sparse_allgather(P, M, B, k, enc, dec)
                    cells.append(" / ".join(f"{t * 1e3:.2f} ({base / t:.1f}x)" for t in (a, r, h, g)))
                    for name, t in (("two-phase", a), ("ring", r), ("halving-doubling", h), ("allgather", g)):
                        if t < best[1]:
                            best = (f"{c} {name}", t)
                print(f"| {P} | " + " / ".join(f"{t * 1e3:.2f}" for t in plain.values()) + " | " + " | ".join(cells) +
                      f" | {best[0]} ({base / best[1]:.1f}x) |")
            print()
    print("#### allreduce_algorithm=auto across nodes (dense codecs)\n")
    print("| per rank | " + " | ".join(f"{c}: " + " / ".join(str(P) for P in ranks) + " ranks"
                                      for c in CODECS if not c.startswith("topk")) + " |")
    print("| --- | " + " | ".join("---" for c in CODECS if not c.startswith("topk")) + " |")
    for sname, M in sizes:
        print(f"| {sname} | " + " | ".join(" / ".join(auto_picks(c, P, M, k) for P in ranks)
                                          for c, (k, _, _, _) in CODECS.items() if not c.startswith("topk")) + " |")
    print()


if __name__ == "__main__":
    main()

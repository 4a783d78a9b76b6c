#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Tables and the speedup plot of docs/scale.md ("Simulated with SimGrid SMPI") from the lines
bench/smpi/run.sh wrote (results.txt).

  bench/smpi/summarize.py RESULTS... [--plot PNG --plot-mib 4 [--plot-model]]
  bench/smpi/summarize.py RESULTS... --model [--rates bp16=E,D,q8=E,D,tg=E,D]

Speedup = SMPI's own allreduce's time / the configuration's time, both the faster of the timed
calls (t_min_s), simulated seconds. One markdown table per (platform, Gbit/s, ranks per host,
computation simulated or not), rows P x MiB. A configuration whose relative error is 0 ran
exactly (the cost model kept it exact); 'auto' is shown as the algorithm it ran, recognised by
its result's error, which differs between the two algorithms (same bits as that algorithm).

--model: tools/scale_model.py against the simulation (one rank per host). For every simulated
(P, MiB/rank, link rate): SMPI's own allreduce against the model's best exact algorithm (ring,
recursive doubling, halving-doubling), bitpack 16 / q8 /
terngrad two-phase against twophase_alltoall and halving-doubling against
halving_doubling_compressed, at the simulation's alpha (2 us per message) and beta (the link
rate); error = model / simulation - 1. Codec times: none where computation was not simulated
(comp=off); otherwise the throughputs of --rates, GB/s of fp32 (encode, decode-and-add).
"""
import argparse
import collections
import math
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import scale_model as sm  # noqa: E402

CODECS = [("bp16", "bitpack 16"), ("q8", "q8"), ("tg", "terngrad")]
ALGOS = [("tp", "two-phase"), ("hd", "halving-doubling"), ("hier", "hierarchical")]


def parse(paths):
    rows = []
    for path in paths:
        with open(path) as f:
            for line in f:
                if " sim " not in line:
                    continue
                kv = {}
                for tok in line.split():
                    if "=" in tok:
                        k, v = tok.split("=", 1)
                        kv[k] = v
                rows.append(kv)
    return rows


def key_of(r):
    return (r["topo"], int(r["gbit"]), int(r["R"]), r["comp"], r.get("a2a", ""))


def a2a_text(a2a):
    return f", SMPI alltoall {a2a}" if a2a else ""


def fmt_x(x):
    return f"{x:.2f}×"


def table(rows, group):
    """One markdown table for a (topo, gbit, R, comp) group."""
    by = collections.defaultdict(dict)
    for r in rows:
        by[(int(r["P"]), float(r["MiB"]))][r["config"]] = r
    configs = {c for d in by.values() for c in d}
    cols = [(f"{c}.{a}", f"{cn} {an}") for c, cn in CODECS for a, an in ALGOS if f"{c}.{a}" in configs]
    has_default = "default" in configs
    has_auto = any(f"{c}.auto" in configs for c, _ in CODECS)
    head = ["P", "MiB/rank", "SMPI allreduce (ms)"]
    if has_default:
        head.append("defaults")
    head += [n for _, n in cols]
    head.append("best")
    if has_auto:
        head.append("auto: ran, speedup (bp16 / q8 / tg)")
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (P, mib) in sorted(by):
        d = by[(P, mib)]
        if "plain" not in d:
            continue
        base = float(d["plain"]["t_min_s"])
        cells = [str(P), f"{mib:g}", f"{base * 1e3:.3f}"]
        bad = [c for c, r in d.items() if r.get("identical") != "yes" or r.get("finite") != "yes"]
        best = ("SMPI", 1.0)
        if has_default:
            r = d.get("default")
            if r:
                sp = base / float(r["t_min_s"])
                how = "exact" if float(r["relerr"]) == 0 else f"{r['bits']} bits"
                cells.append(f"{fmt_x(sp)} ({how})")
                if sp > best[1]:
                    best = ("default", sp)
            else:
                cells.append("–")
        for c, _ in cols:
            r = d.get(c)
            if not r:
                cells.append("–")
                continue
            sp = base / float(r["t_min_s"])
            cells.append(fmt_x(sp))
            if sp > best[1]:
                best = (c, sp)
        cells.append(f"{best[0]} {fmt_x(best[1])}" if best[0] != "SMPI" else "SMPI")
        if has_auto:
            picks = []
            for c, _ in CODECS:
                a = d.get(f"{c}.auto")
                if not a:
                    picks.append("–")
                    continue
                e = float(a["relerr"])
                cand = [(abs(e - float(d[f"{c}.{x}"]["relerr"])), x) for x in ("tp", "hd") if f"{c}.{x}" in d]
                picks.append(f"{min(cand)[1] if cand else '?'} {fmt_x(base / float(a['t_min_s']))}")
            cells.append(" / ".join(picks))
        if bad:
            cells[-1] += " (NOT identical: " + ",".join(bad) + ")"
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


MODEL_CODECS = {"bp16": ("bitpack16", 2.0), "q8": ("q8", 4.0), "tg": ("terngrad", 16.0)}


def predict(cfg, P, M, B, rates):
    """Seconds the model predicts for configuration cfg, or None if it has no formula for it."""
    if cfg == "plain":  # the model's best exact algorithm, as its tables take it
        return min(sm.ring_plain(P, M, B), sm.recdbl_plain(P, M, B), sm.halving_doubling_plain(P, M, B))
    if "." not in cfg:
        return None
    c, alg = cfg.split(".", 1)
    if c not in MODEL_CODECS or alg not in ("tp", "hd"):
        return None
    name, k = MODEL_CODECS[c]
    enc, dec = rates.get(c, (math.inf, math.inf))
    if alg == "tp":
        return sm.twophase_alltoall(P, M, B, k, enc, dec, sm.k_sum(name, P, k))
    return sm.halving_doubling_compressed(P, M, B, k, enc, dec, name)


def model_tables(rows, rates, rates_text):
    """tools/scale_model.py against the simulation, per (platform, Gbit/s, computation)."""
    rows = [r for r in rows if int(r["R"]) == 1]
    groups = collections.defaultdict(list)
    for r in rows:
        groups[(r["topo"], int(r["gbit"]), r["comp"], r.get("a2a", ""))].append(r)
    errs = collections.defaultdict(list)
    for (topo, gbit, comp, a2a), rs in sorted(groups.items()):
        B = gbit * 1e9 / 8
        use = rates if comp == "on" else {}
        cfgs = ["plain"] + [f"{c}.{x}" for c in MODEL_CODECS for x in ("tp", "hd")]
        print(f"#### {topo}, {gbit} Gbit/s, computation {'simulated (codec rates: ' + (rates_text or 'none') + ' GB/s)' if comp == 'on' else 'not simulated (codecs free)'}{a2a_text(a2a)}\n")
        print("| P | MiB | " + " | ".join(f"{c}: sim / model (err)" for c in cfgs) + " |")
        print("|" + "---|" * (len(cfgs) + 2))
        by = collections.defaultdict(dict)
        for r in rs:
            by[(int(r["P"]), float(r["MiB"]))][r["config"]] = r
        for (P, mib) in sorted(by):
            M = mib * 1048576
            cells = [str(P), f"{mib:g}"]
            for cfg in cfgs:
                r = by[(P, mib)].get(cfg)
                m = predict(cfg, P, M, B, use)
                if not r or m is None:
                    cells.append("–")
                    continue
                s = float(r["t_min_s"])
                e = m / s - 1
                errs[(topo + a2a_text(a2a), comp, cfg)].append(e)
                cells.append(f"{s * 1e3:.3g} / {m * 1e3:.3g} ms ({e * 100:+.0f}%)")
            print("| " + " | ".join(cells) + " |")
        print()
    print("#### Model error per configuration (model / simulation - 1)\n")
    print("| platform | computation | configuration | cases | median | worst | within 25% |")
    print("|---|---|---|---:|---:|---:|---:|")
    for (topo, comp, cfg), es in sorted(errs.items()):
        worst = max(es, key=abs)
        ok = sum(abs(e) <= 0.25 for e in es)
        print(f"| {topo} | {comp} | {cfg} | {len(es)} | {statistics.median(es) * 100:+.0f}% | {worst * 100:+.0f}% | {ok}/{len(es)} |")



def plot(rows, png, mib, with_model=False):
    """Speedup against P per algorithm: one panel per (platform, Gbit/s, computation simulated
    or not) with one rank per host, buffers of `mib` MiB per rank. with_model: beside each
    two-phase / halving-doubling line of a codecs-free panel, the speedup tools/scale_model.py
    predicts at the same P, size and link rate (thin, dotted)."""
    groups = sorted({key_of(r) for r in rows if int(r["R"]) == 1}, key=lambda g: (g[3] == "off", g[0], g[1]))
    if not groups:
        return
    tmp = tempfile.mkdtemp()
    series = [("bp16.tp", "bitpack16 two-phase", 1, 1), ("bp16.hd", "bitpack16 halving-doubling", 1, 2),
              ("q8.tp", "q8 two-phase", 2, 1), ("q8.hd", "q8 halving-doubling", 2, 2),
              ("tg.tp", "terngrad two-phase", 3, 1), ("tg.hd", "terngrad halving-doubling", 3, 2),
              ("default", "defaults (awp + cost model)", 7, 3)]
    panels = []
    for g in groups:
        sel = [r for r in rows if key_of(r) == g and abs(float(r["MiB"]) - mib) < 1e-9]
        base = {int(r["P"]): float(r["t_min_s"]) for r in sel if r["config"] == "plain"}
        files = []
        for cfg, title, color, dash in series:
            pts = sorted((int(r["P"]), base[int(r["P"])] / float(r["t_min_s"])) for r in sel
                         if r["config"] == cfg and int(r["P"]) in base)
            if not pts:
                continue
            fn = os.path.join(tmp, f"{g[0]}_{g[1]}_{g[3]}_{g[4]}_{cfg}.dat")
            with open(fn, "w") as f:
                f.writelines(f"{p} {s:.4f}\n" for p, s in pts)
            files.append((fn, title, color, dash))
            if with_model and g[3] == "off" and cfg != "default":
                B = g[1] * 1e9 / 8
                M = mib * 1048576
                mp = [(p, predict("plain", p, M, B, {}) / predict(cfg, p, M, B, {})) for p, _ in pts]
                fn = os.path.join(tmp, f"{g[0]}_{g[1]}_{g[3]}_{g[4]}_{cfg}.model.dat")
                with open(fn, "w") as f:
                    f.writelines(f"{p} {s:.4f}\n" for p, s in mp)
                files.append((fn, "model: " + title, color, -1))
        if files:
            panels.append((g, files))
    if not panels:
        return
    cols = 3
    nrows = math.ceil(len(panels) / cols)
    ps = sorted({int(r["P"]) for r in rows})
    xtics = ", ".join(str(p) for p in ps)
    gp = [f"set terminal pngcairo size {420 * cols},{340 * nrows} font 'sans,9'", f"set output '{png}'",
          f"set multiplot layout {nrows},{cols} title 'libcompmpi under SimGrid SMPI: allreduce of {mib:g} MiB per rank, "
          "speedup over SMPI (Open MPI rules: ring), 1 rank per host'",
          "set logscale x 2", f"set xtics ({xtics})", f"set xrange [{ps[0] * 0.75:g}:{ps[-1] * 1.33:g}]", "set grid",
          "set xlabel 'simulated ranks P'", "set ylabel 'speedup'", "set key top right font 'sans,7'",
          "set yrange [0:*]"]
    for i, (g, files) in enumerate(panels):
        gp.append(f"set title '{g[0]} {g[1]} Gbit/s{', codecs free' if g[3] == 'off' else ''}{a2a_text(g[4])}'")
        gp.append("unset key" if i else "set key top right font 'sans,7'")
        parts = [f"1 with lines lc rgb 'gray' dt 2 notitle"]
        for fn, title, color, dash in files:
            if dash < 0:  # the model's prediction
                parts.append(f"'{fn}' using 1:2 with lines lc {color} dt 3 lw 1 title '{title}'")
            else:
                parts.append(f"'{fn}' using 1:2 with linespoints lc {color} dt {dash} pt {color + 4} title '{title}'")
        gp.append("plot " + ", ".join(parts))
    gp.append("unset multiplot")
    subprocess.run(["gnuplot"], input="\n".join(gp), text=True, check=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="+")
    ap.add_argument("--plot", help="write the speedup-vs-P figure to this PNG")
    ap.add_argument("--plot-mib", type=float, default=4)
    ap.add_argument("--plot-model", action="store_true", help="--plot: the model's speedup beside codecs-free lines")
    ap.add_argument("--model", action="store_true", help="compare with tools/scale_model.py instead of the tables")
    ap.add_argument("--rates", default="", help="--model: codec GB/s, bp16=ENC,DEC,q8=ENC,DEC,tg=ENC,DEC")
    a = ap.parse_args()
    rows = parse(a.results)
    if not rows:
        sys.exit("summarize.py: no result lines")
    if a.model:
        toks = [t for t in a.rates.split(",") if t]
        rates = {toks[i].split("=")[0]: (float(toks[i].split("=")[1]) * 1e9, float(toks[i + 1]) * 1e9)
                 for i in range(0, len(toks), 2)}
        model_tables(rows, rates, a.rates)
        return
    for g in sorted({key_of(r) for r in rows}):
        topo, gbit, R, comp, a2a = g
        print(f"#### {topo}, {gbit} Gbit/s, {R} rank{'s' if R > 1 else ''} per host"
              f"{', computation not simulated' if comp == 'off' else ''}{a2a_text(a2a)}\n")
        print(table([r for r in rows if key_of(r) == g], g))
        print()
    if a.plot:
        plot(rows, a.plot, a.plot_mib, a.plot_model)


if __name__ == "__main__":
    main()

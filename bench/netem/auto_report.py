#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""allreduce_algorithm=auto with hierarchy=auto against every algorithm, from run_scale.sh runs
(docs/scale.md, issue 40: "auto within 10% of the best measured algorithm").

    auto_report.py --algs DIR[,DIR2] --auto DIR[,DIR2] [--repeat DIR[,DIR2]] [--defaults DIR[,DIR2]]
                   [--plot PNG [--size BYTES]]

--algs: runs of the explicit algorithms (twophase, halving_doubling, hier_twophase,
hier_halving; later DIRs replace earlier rows of the same cell). --auto: runs of `auto`
(--algs auto --auto-one-job, with --warmup-lib: the library explores in untimed calls).
--repeat: a second measurement of some cells (their auto and explicit rows), shown beside the
first: how far the gap moves between runs of the same cell.

Per topology, codec and size (codecs with explicit rows only; `default`, the cost model's,
has none and is listed apart): every algorithm's speedup over plain MPI in its own job
(1 / median of the per-iteration ratio lib/plain), the best, what auto ran (per size, from
the job's notes: compmpi-stats-hier gives flat or hierarchical, compmpi-stats-auto at that
rank count the algorithm) and auto's gap = its ratio over the best's - 1 (different jobs).
The library's own time (median of its arm) over the best algorithm's: what remains of the gap
without the plain arm, whose time differs between jobs too. Exploration: t_warmlib_s (the library-only warm-up calls, where auto decides) against as many
calls at auto's settled median. * = core-limited (run-queue wait > 0.25 or CPU share > 0.8).
--defaults: a later run of the `default` codec (the defaults: awp bitpack, cost model), shown
beside the --auto run's default rows: what ran (compressed calls or exact) and the speedup.
--plot: speedup against ranks at --size (default 16 MiB), every algorithm and auto, drawn by
scale_report.py's plot.
"""
import csv
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scale_report import core_limited, fnum, load as load_scale, make_plot  # noqa: E402  (the same rules)

ALGS = ["twophase", "halving_doubling", "hier_twophase", "hier_halving"]
SHORT = {"twophase": "twophase", "halving_doubling": "halving", "hier_twophase": "hier_twophase",
         "hier_halving": "hier_halving"}
TOPOS = ["4x1", "8x1", "16x1", "2x2", "4x2", "8x2", "4x4"]


def load(dirs):
    rows, meta = {}, {}
    for d in dirs.split(","):
        with open(os.path.join(d, "raw.tsv")) as f:
            for r in csv.DictReader(f, delimiter="\t"):
                if r["coll"] != "allreduce" or fnum(r["ratio_med"]) is None:
                    continue
                rows[(r["topo"], r["codec"], r["alg"], int(r["bytes"]))] = r
        mp = os.path.join(d, "meta.txt")
        if os.path.exists(mp):
            meta[d] = open(mp).read()
    return rows, meta


def notes(s):
    """floats@ranks:choice;... -> {(floats, ranks): choice}"""
    out = {}
    for item in (s or "-").strip(";").split(";"):
        if not item or item == "-" or ":" not in item:
            continue
        f, _, ch = item.partition(":")
        fl, _, rk = f.partition("@")
        out[(int(fl), int(rk))] = ch
    return out


def auto_ran(r):
    """What auto ran at this row's size: the hierarchy's decision, then the dense choice at the
    rank count it runs on (all ranks flat, the N leaders hierarchical)."""
    P, R = int(r["ranks"]), int(r["ppn"])
    fl = int(r["bytes"]) // 4
    hier = None
    if R >= 2:
        h = notes(r.get("hier_decisions")).get((fl, P))
        if h is None:
            return "?", "no hierarchy decision"
        hier = h.startswith("hierarchical")
        how = ("hier " if hier else "flat ") + (h[h.index("("):].replace(",", ", ").replace(")", " calls)")
                                                if "(" in h else "")
    ranks = P // R if hier else P
    d = notes(r.get("auto_decisions")).get((fl, ranks))
    # no note: the alpha-beta model decided alone (or 2 ranks, where both algorithms are one exchange)
    name = ("hier_" if hier else "") + (SHORT.get(d, d) if d else "(α–β)")
    return name, (how if R >= 2 else "")


def main():
    a = sys.argv[1:]
    opt = {}
    while a:
        if a[0] in ("--algs", "--auto", "--repeat", "--defaults", "--plot", "--size") and len(a) > 1:
            opt[a[0][2:]] = a[1]
            a = a[2:]
        else:
            sys.exit(f"auto_report.py: unknown argument '{a[0]}' (see the docstring)")
    if "algs" not in opt or "auto" not in opt:
        sys.exit("auto_report.py: --algs DIR and --auto DIR are required")
    rows, _ = load(opt["algs"])
    arows, _ = load(opt["auto"])
    rep = load(opt["repeat"])[0] if "repeat" in opt else {}
    p = print
    p("| topology | codec | size | " + " | ".join(SHORT[x] for x in ALGS) +
      " | best | hierarchy=auto | auto ran | auto | gap | libcompmpi's time over the best's | exploration: warm-up calls' time / settled |")
    p("| --- | --- | --- | " + " | ".join("---:" for _ in ALGS) + " | --- | --- | --- | ---: | ---: | ---: | ---: |")
    n_in = n_all = 0
    far = []
    for k in sorted([k for k in arows if k[2] == "auto" and any(x[1] == k[1] for x in rows)],
                    key=lambda k: (TOPOS.index(k[0]) if k[0] in TOPOS else 99, k[1], k[3])):
        t, c, _, s = k
        r = arows[k]
        cells, best = [], None
        for al in ALGS:
            x = rows.get((t, c, al, s))
            if not x:
                cells.append("")
                continue
            q = float(x["ratio_med"])
            cells.append(f"{1 / q:.2f}{'*' if core_limited(x) else ''}")
            if best is None or q < best[1]:
                best = (al, q)
        ran, how = auto_ran(r)
        q = float(r["ratio_med"])
        gap, lt = "", ""
        if best:
            bt = float(rows[(t, c, best[0], s)]["t_lib_med_s"])
            lt = f"{float(r['t_lib_med_s']) / bt - 1:+.0%}"
            g = q / best[1] - 1
            n_all += 1
            if g <= 0.10:
                n_in += 1
            else:
                far.append((t, c, s, g))
            gap = f"**{g:+.0%}**" if g > 0.10 else f"{g:+.0%}"
            rr = [rep.get((t, c, "auto", s)), rep.get((t, c, best[0], s))]
            if rr[0] or rr[1]:
                bq = float(rr[1]["ratio_med"]) if rr[1] else best[1]
                aq = float(rr[0]["ratio_med"]) if rr[0] else q
                gap += f" (repeat {aq / bq - 1:+.0%})"
        w = fnum(r.get("t_warmlib_s"))
        m = meta_wlib(opt["auto"])
        expl = ""
        if w and m:
            expl = f"{w / (m * float(r['t_lib_med_s'])):.2f}"
        size = f"{s >> 20} MiB"
        p(f"| {t} | {c} | {size} | " + " | ".join(cells) +
          f" | {SHORT[best[0]] + f' ({1 / best[1]:.2f})' if best else ''} | {how or '—'} | {ran} | "
          f"{1 / q:.2f}{'*' if core_limited(r) else ''} | {gap} | {lt} | {expl} |")
    p("")
    if n_all:
        p(f"auto within 10% of the best algorithm: {n_in} of {n_all} configurations ({n_in / n_all:.0%}).")
    for t, c, s, g in far:
        p(f"  more than 10% from the best: {t} {c} {s >> 20} MiB ({g:+.0%})")
    defaults = sorted([k for k in arows if k[2] == "auto" and k[1] == "default"],
                      key=lambda k: (TOPOS.index(k[0]) if k[0] in TOPOS else 99, k[3]))
    if defaults:
        later = load(opt["defaults"])[0] if "defaults" in opt else {}
        p("")
        p("| topology | size | " + ("--auto run: ran | speedup | " if later else "ran | speedup | ") +
          ("--defaults run: ran | speedup | wire ÷ |" if later else "wire ÷ |"))
        p("| --- | --- | " + ("--- | ---: | " * (2 if later else 1)) + "---: |")
        for k in defaults:
            cells = []
            for src in ([arows, later] if later else [arows]):
                r = src.get(k)
                if not r:
                    cells += ["", ""]
                    continue
                if (fnum(r.get("calls")) or 0) == 0:
                    ran = "exact (cost model)"
                else:
                    name, how = auto_ran(r)
                    ran = f"{name}{', ' + how if how else ''}"
                cells += [ran, f"{1 / float(r['ratio_med']):.2f}{'*' if core_limited(r) else ''}"]
            r = (later or arows).get(k) or arows[k]
            p(f"| {k[0]} | {k[3] >> 20} MiB | " + " | ".join(cells) + f" | {r.get('wire_ratio', '')} |")
    if "plot" in opt:
        make_plot(load_scale(opt["algs"].split(","))[0], opt["plot"], int(opt.get("size", 16 << 20)),
                  ["bitpack:16", "q8", "terngrad"], load_scale(opt["auto"].split(","))[0])

_wl = {}


def meta_wlib(dirs):
    """--warmup-lib of the auto run (meta.txt's warmup_lib=); None if absent"""
    if dirs not in _wl:
        v = None
        for d in dirs.split(","):
            mp = os.path.join(d, "meta.txt")
            if os.path.exists(mp):
                for tok in open(mp).read().split():
                    if tok.startswith("warmup_lib="):
                        v = int(tok.split("=")[1])
        _wl[dirs] = v
    return _wl[dirs]


if __name__ == "__main__":
    main()

#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Run examples/torch_fmnist.py under plain Open MPI and under libcompmpi codecs; compare.

    examples/torch_codecs.py --lib _build/.libs/libcompmpi.so --ranks "2 4" \\
        --codecs "bitpack:awp q8 terngrad topk+COMPMPI_ERROR_FEEDBACK=1 fft_topk" \\
        [--netem 1gbit] --out DIR [trainer flags: --epochs 2 --train-limit 12800 ...]

Every run starts the same unmodified trainer with Open MPI's mpiexec.openmpi; a codec run
only adds LD_PRELOAD=libcompmpi.so and COMPMPI_* variables for the ranks.  With --netem RATE
each rank lives in its own network namespace on links shaped to RATE (bench/netem, root);
without it all ranks share this machine's memory (Open MPI's shared-memory transport).

Codec spec (same syntax as examples/run_codecs.sh):  NAME[:POLICY|:BITS][+VAR=VALUE]...
    plain            no LD_PRELOAD at all: Open MPI's own MPI_Allreduce (always run first)
    q8               COMPMPI_CODEC=q8 COMPMPI_POLICY=static
    bitpack:awp      COMPMPI_CODEC=bitpack COMPMPI_POLICY=awp
    bitpack:16       COMPMPI_CODEC=bitpack COMPMPI_POLICY=static COMPMPI_BITS=16
    topk+COMPMPI_ERROR_FEEDBACK=1   extra variables for the ranks, repeatable

Bytes on the wire per step (all ranks together):
    codec runs: bytes_wire of the library's `compmpi-stats:` lines (COMPMPI_STATS=1, printed by
                rank 0 at MPI_Finalize, already summed over ranks) and of its cost model's
                measuring runs (`compmpi-stats-explore:`), divided by the steps;
    plain runs: computed from the allreduce sizes the trainer reports, for the bandwidth-optimal
                reduce-scatter + allgather that MPI uses for large messages: every rank sends
                2 (P-1)/P of each buffer, P ranks together 2 (P-1) x buffer bytes.
    Gradient calls a codec run passed through unchanged (the library's cost model may keep
    calls exact; its bytes_wire counts compressed calls only) are added as plain MPI sends them:
    their payload is the trainer's total minus the library's allreduce bytes_in.  The library's
                own `bytes_uncompressed_wire` counts the same quantity for its runs; the table
                shows both, so the model can be checked against the library.

Outputs in DIR: runs/P<P>_<spec>.{cmd,out,err,dat,link}, results.csv, results.json, table.md,
accuracy.gp and accuracy.png (test accuracy against training wall time, gnuplot),
accuracy.txt (the same plot as text).  The table is printed at the end.  Exit status 0 if
every run succeeded, 1 otherwise (the others still run and are tabulated), 2 on bad arguments.
"""
import argparse
import csv
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
NETEM = os.path.join(ROOT, "bench", "netem")
TRAINER = os.path.join(HERE, "torch_fmnist.py")
PY = "/usr/bin/python3"     # Debian's interpreter: python3-torch and python3-mpi4py live there


def die(msg, code=2):
    print(f"torch_codecs: error: {msg}", file=sys.stderr)
    sys.exit(code)


def parse_spec(spec):
    head, _, rest = spec.partition("+")
    codec, _, policy = head.partition(":")
    if not codec:
        die(f"spec '{spec}': empty codec name")
    env = []
    if rest:
        for kv in rest.split("+"):
            if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", kv):
                die(f"spec '{spec}': '+{kv}' is not VAR=VALUE")
            env.append(tuple(kv.split("=", 1)))
    if codec in ("plain", "baseline"):
        return {"spec": spec, "codec": "plain", "policy": "", "env": env}
    if policy.isdigit():  # a bit width, as in bench/netem/run_bench.sh
        env.insert(0, ("COMPMPI_BITS", policy))
        policy = "static"
    return {"spec": spec, "codec": codec, "policy": policy or "static", "env": env}


def safe(s):
    return re.sub(r"[^A-Za-z0-9._-]", "_", s)


STATS_RE = re.compile(r"compmpi-stats:\s+coll=(\w+)\s+(.*)")
# the cost model's measuring compressed runs (their results are discarded): real traffic too
EXPLORE_RE = re.compile(r"compmpi-stats-explore:\s+coll=(\w+)\s+bytes_wire=(\d+)")


def parse_stats(text):
    """{coll: {field: float}} from the library's compmpi-stats lines."""
    out = {}
    for line in text.splitlines():
        m = STATS_RE.search(line)
        if not m:
            continue
        fields = {}
        for kv in m.group(2).split():
            k, _, v = kv.partition("=")
            try:
                fields[k] = float(v)
            except ValueError:
                pass
        out[m.group(1)] = fields
    for line in text.splitlines():
        m = EXPLORE_RE.search(line)
        if m and m.group(1) in out:
            out[m.group(1)]["explore_bytes_wire"] = float(m.group(2))
    return out


def parse_summary(text):
    for line in reversed(text.splitlines()):
        if line.startswith("summary "):
            try:
                return json.loads(line[len("summary "):])
            except json.JSONDecodeError:
                return None
    return None


def link_tx_bytes(nhosts):
    """Bytes sent so far by the emulated hosts: the 'Sent' counters of the tbf qdisc on eth0
    in every namespace cmpi0..cmpi{n-1} (everything that left a host: headers, evaluation
    and start-up traffic included)."""
    total = 0
    for k in range(nhosts):
        r = subprocess.run(["tc", "-n", f"cmpi{k}", "-s", "qdisc", "show", "dev", "eth0"],
                           capture_output=True, text=True)
        m = re.search(r"Sent (\d+) bytes", r.stdout)
        if r.returncode != 0 or not m:
            return None
        total += int(m.group(1))
    return total


def fmt(v, f="{:.2f}"):
    return "n/a" if v is None else f.format(v)


LATE_EVALS = 5


def main():
    ap = argparse.ArgumentParser(description="PyTorch Fashion-MNIST under plain Open MPI and libcompmpi codecs",
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--lib", help="libcompmpi.so built against Open MPI (needed for codec specs)")
    ap.add_argument("--ranks", default="2", help='rank counts, e.g. "2 4" (default 2)')
    ap.add_argument("--codecs", default="bitpack:awp q8 terngrad topk+COMPMPI_ERROR_FEEDBACK=1 fft_topk",
                    help="codec specs; 'plain' is added first unless --no-plain")
    ap.add_argument("--no-plain", action="store_true")
    ap.add_argument("--netem", metavar="RATE", help="emulated cluster, links shaped to RATE (e.g. 1gbit); root")
    ap.add_argument("--loopback", action="store_true",
                    help="one machine, but ranks talk TCP over the loopback interface (Open MPI ob1/tcp "
                         "on lo) instead of shared memory")
    ap.add_argument("--out", default="codec-runs/torch")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per run (default 600)")
    ap.add_argument("--threads", type=int, default=1, help="COMPMPI_THREADS and torch threads per rank")
    ap.add_argument("--title", default="", help="extra text for the plot title")
    ap.add_argument("--report-only", action="store_true",
                    help="run nothing: rebuild the table and plot from DIR/runs/ of an earlier (or cut-short) "
                         "invocation with the same arguments; runs without output are reported as missing")
    # trainer flags, passed through
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--train-limit", type=int, default=12800)
    ap.add_argument("--test-limit", type=int, default=2000)
    ap.add_argument("--eval-every", type=int, default=25)
    ap.add_argument("--target", type=float, default=0.82)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--train-args", default="", help="more trainer flags, e.g. '--buckets 4'")
    args = ap.parse_args()

    ranks = []
    for r in args.ranks.split():
        if not r.isdigit() or int(r) < 1:
            die(f"--ranks: bad rank count '{r}'")
        ranks.append(int(r))
    specs = [parse_spec(s) for s in args.codecs.split()]
    if not args.no_plain and not any(s["codec"] == "plain" for s in specs):
        specs.insert(0, parse_spec("plain"))
    if any(s["codec"] != "plain" for s in specs):
        if not args.lib:
            die("codec specs other than 'plain' need --lib PATH/libcompmpi.so")
        if not os.path.isfile(args.lib):
            die(f"--lib {args.lib}: no such file (build libcompmpi against Open MPI first)")
        args.lib = os.path.abspath(args.lib)
    mpiexec = shutil.which("mpiexec.openmpi")
    if not mpiexec:
        die("mpiexec.openmpi not found (apt-get install openmpi-bin python3-mpi4py)")
    if not os.access(PY, os.X_OK):
        die(f"{PY} not found (Debian's python3 with python3-torch and python3-mpi4py)")

    os.makedirs(os.path.join(args.out, "runs"), exist_ok=True)
    out = os.path.abspath(args.out)

    cluster_up = False

    def teardown(*_):
        if cluster_up:
            subprocess.run([os.path.join(NETEM, "cluster.sh"), "down"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)

    def on_signal(signum, _frame):
        teardown()
        sys.exit(128 + signum)

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)

    if args.netem and not args.report_only:
        rc = subprocess.run([os.path.join(NETEM, "cluster.sh"), "up", str(max(ranks)), args.netem]).returncode
        if rc != 0:
            die("could not bring up the emulated cluster (bench/netem/cluster.sh up); see above", 1)
        cluster_up = True

    train = [PY, TRAINER, "--epochs", str(args.epochs), "--train-limit", str(args.train_limit),
             "--test-limit", str(args.test_limit), "--eval-every", str(args.eval_every),
             "--target", str(args.target), "--batch", str(args.batch), "--lr", str(args.lr),
             "--threads", str(args.threads)] + shlex.split(args.train_args)
    if args.netem and args.loopback:
        die("--netem and --loopback exclude each other")
    if args.netem:
        where = f"emulated cluster, {args.netem} links, one network namespace per rank"
    elif args.loopback:
        where = "one machine, TCP over loopback (unshaped)"
    else:
        where = "one machine, shared memory (Open MPI vader)"
    print(f"torch_codecs: {len(specs)} run(s) x ranks {ranks}: {where}; epochs={args.epochs} "
          f"train={args.train_limit} test={args.test_limit} eval_every={args.eval_every} -> {out}",
          file=sys.stderr)

    results = []
    try:
        for P in ranks:
            for s in specs:
                env = []
                if s["codec"] != "plain":
                    env += [("LD_PRELOAD", args.lib), ("COMPMPI_STATS", "1"), ("COMPMPI_CODEC", s["codec"]),
                            ("COMPMPI_POLICY", s["policy"])]
                env += [("COMPMPI_THREADS", str(args.threads))] if s["codec"] != "plain" else []
                env += s["env"]
                if args.netem:
                    cmd = [os.path.join(NETEM, "mpirun.sh"), "-n", str(P), "--openmpi", "--timeout", str(args.timeout)]
                    for k, v in env:
                        cmd += ["-genv", k, v]
                    cmd += ["--"] + train
                else:
                    cmd = ["timeout", "-k", "10", str(args.timeout), mpiexec, "-n", str(P), "--bind-to", "none"]
                    if os.geteuid() == 0:
                        cmd.insert(5, "--allow-run-as-root")
                    if P > (os.cpu_count() or 1):
                        cmd.insert(5, "--oversubscribe")
                    if args.loopback:
                        cmd += ["--mca", "pml", "ob1", "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", "lo",
                                "--mca", "oob_tcp_if_include", "lo"]
                    for k, v in env:
                        cmd += ["-x", f"{k}={v}"]
                    cmd += train
                name = f"P{P}_{safe(s['spec'])}"
                base = os.path.join(out, "runs", name)
                if args.report_only:
                    try:
                        text_out = open(base + ".out", errors="replace").read()
                        text_err = open(base + ".err", errors="replace").read()
                    except OSError:
                        text_out = text_err = ""
                    rc = 0 if parse_summary(text_out) else -1
                    wall, tx0, tx1 = 0.0, None, None
                    if os.path.exists(base + ".link"):
                        tx0, tx1 = 0, int(open(base + ".link").read().split()[0])
                else:
                    with open(base + ".cmd", "w") as f:
                        f.write(" ".join(shlex.quote(c) for c in cmd) + "\n")
                    print(f"torch_codecs: [{name}] {' '.join(shlex.quote(c) for c in cmd)}", file=sys.stderr)
                    # nothing of the caller's own LD_PRELOAD/COMPMPI_* may leak into a run
                    penv = {k: v for k, v in os.environ.items()
                            if k != "LD_PRELOAD" and not k.startswith("COMPMPI_")}
                    tx0 = link_tx_bytes(P) if args.netem else None
                    t0 = time.time()
                    with open(base + ".out", "w") as fo, open(base + ".err", "w") as fe:
                        rc = subprocess.run(cmd, stdout=fo, stderr=fe, stdin=subprocess.DEVNULL, env=penv).returncode
                    wall = time.time() - t0
                    tx1 = link_tx_bytes(P) if args.netem else None
                    if tx0 is not None and tx1 is not None:
                        with open(base + ".link", "w") as f:
                            f.write(f"{tx1 - tx0} bytes sent through the shaped links (tc counters)\n")
                    text_out = open(base + ".out", errors="replace").read()
                    text_err = open(base + ".err", errors="replace").read()
                summ = parse_summary(text_out)
                stats = parse_stats(text_err)
                r = {"spec": s["spec"], "codec": s["codec"], "policy": s["policy"], "ranks": P, "rc": rc,
                     "job_wall_s": round(wall, 1), "summary": summ, "stats": stats,
                     "link_tx_bytes": tx1 - tx0 if tx0 is not None and tx1 is not None else None}
                if rc == -1:
                    r["status"] = "MISSING"
                elif rc in (124, 137):
                    r["status"] = "TIMEOUT"
                elif rc != 0 or summ is None:
                    r["status"] = f"FAILED(rc={rc})"
                elif not summ.get("replicas_identical"):
                    r["status"] = "REPLICAS_DIFFER"
                elif s["codec"] != "plain" and "allreduce" not in stats:
                    r["status"] = "NO_STATS"        # preload did not take (wrong MPI family?)
                else:
                    r["status"] = "ok"
                if summ:
                    with open(base + ".dat", "w") as f:
                        for e in summ["evals"]:
                            f.write(f"{e['elapsed_s']} {e['test_acc']}\n")
                results.append(r)
                if r["status"] != "ok":
                    print(f"torch_codecs: [{name}] {r['status']}; last lines of {base}.err:", file=sys.stderr)
                    print("\n".join(text_err.splitlines()[-6:]), file=sys.stderr)
                else:
                    print(f"torch_codecs: [{name}] ok: test_acc={summ['final_test_acc']:.4f} "
                          f"train_time_s={summ['train_time_s']:.1f} time_to_target_s={summ['time_to_target_s']}",
                          file=sys.stderr)
    finally:
        teardown()

    # ---- derived figures ----------------------------------------------------------------
    for r in results:
        s, st, P = r["summary"], r["stats"], r["ranks"]
        r.update(final_acc=None, late_acc=None, time_to_target_s=None, steps_to_target=None, time_per_epoch_s=None,
                 comm_per_epoch_s=None, wire_bytes_per_step=None, model_bytes_per_step=None,
                 unc_bytes_per_step=None, ratio=None, link_bytes_per_step=None, exact_fraction=None)
        if not s:
            continue
        steps = s["steps"]
        r["final_acc"] = s["final_test_acc"]
        # the mean of the last LATE_EVALS evaluations (the final one included): one evaluation
        # moves by up to ~1 point from the next at this learning rate (no decay), so a
        # difference of finals is mostly that noise; the late mean shows less of it
        late = [e["test_acc"] for e in s["evals"] if e["step"] > 0][-LATE_EVALS:]
        r["late_acc"] = sum(late) / len(late) if late else None
        r["time_to_target_s"] = s["time_to_target_s"]
        r["steps_to_target"] = s["steps_to_target"]
        ep = s["epoch_records"]
        r["time_per_epoch_s"] = sum(e["time_s"] for e in ep) / len(ep)
        r["comm_per_epoch_s"] = sum(e["comm_s"] for e in ep) / len(ep)
        # plain model: P ranks x 2 (P-1)/P x payload = 2 (P-1) x payload per allreduce
        r["model_bytes_per_step"] = 2 * (P - 1) * s["allreduce_bytes_per_rank"] / steps
        if r["link_tx_bytes"] is not None:
            r["link_bytes_per_step"] = r["link_tx_bytes"] / steps
        if r["codec"] == "plain":
            r["wire_bytes_per_step"] = r["model_bytes_per_step"]
        elif st:
            # gradient allreduces the library passed to MPI unchanged (e.g. its cost model kept
            # them exact) are not in its bytes_wire: add them as plain MPI sends them
            grad_payload = P * s["allreduce_bytes_per_rank"]
            exact = max(0.0, grad_payload - st.get("allreduce", {}).get("bytes_in", 0))
            r["exact_fraction"] = exact / grad_payload if grad_payload else None
            passthrough = 2 * (P - 1) / P * exact
            r["wire_bytes_per_step"] = (sum(c.get("bytes_wire", 0) + c.get("explore_bytes_wire", 0)
                                            for c in st.values()) + passthrough) / steps
            r["unc_bytes_per_step"] = (sum(c.get("bytes_uncompressed_wire", 0) for c in st.values())
                                       + passthrough) / steps
            r["ratio"] = st.get("allreduce", {}).get("ratio")
    for r in results:
        base = next((b for b in results if b["ranks"] == r["ranks"] and b["codec"] == "plain"), None)
        r["acc_gap_pt"] = r["late_gap_pt"] = r["speedup_epoch"] = r["bytes_reduction"] = None
        if base and base["final_acc"] is not None and r["final_acc"] is not None:
            r["acc_gap_pt"] = 100 * (r["final_acc"] - base["final_acc"])
        if base and base["late_acc"] is not None and r["late_acc"] is not None:
            r["late_gap_pt"] = 100 * (r["late_acc"] - base["late_acc"])
        if base and base["time_per_epoch_s"] and r["time_per_epoch_s"]:
            r["speedup_epoch"] = base["time_per_epoch_s"] / r["time_per_epoch_s"]
        if base and base["wire_bytes_per_step"] and r["wire_bytes_per_step"]:
            r["bytes_reduction"] = base["wire_bytes_per_step"] / r["wire_bytes_per_step"]

    cols = ["spec", "codec", "policy", "ranks", "status", "final_acc", "acc_gap_pt", "late_acc", "late_gap_pt", "time_to_target_s",
            "steps_to_target", "time_per_epoch_s", "comm_per_epoch_s", "speedup_epoch", "wire_bytes_per_step",
            "unc_bytes_per_step", "model_bytes_per_step", "link_bytes_per_step", "bytes_reduction", "ratio",
            "exact_fraction", "job_wall_s"]
    with open(os.path.join(out, "results.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for r in results:
            w.writerow(["" if r.get(c) is None else r.get(c) for c in cols])
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"where": where, "args": vars(args), "runs": results}, f, indent=1)

    s0 = next((r["summary"] for r in results if r["summary"]), None)
    tgt = f"{100 * args.target:.0f}%"
    lines = [f"Fashion-MNIST, LeNet-like CNN ({s0['params'] if s0 else '?'} parameters, "
             f"{s0['grad_bytes'] / 1e6 if s0 else 0:.1f} MB of gradients per step), {where}; "
             f"{args.epochs} epochs on {args.train_limit or 60000} training images, accuracy on "
             f"{args.test_limit or 10000} test images every {args.eval_every} steps; global batch {args.batch}.",
             "",
             f"| run | ranks | final test acc | vs plain (points) | last {LATE_EVALS} evals | vs plain (points) "
             f"| time to {tgt} (s) | time/epoch (s) "
             f"| in allreduce/epoch (s) | epoch speedup | wire MB/step | bytes ÷ |"
             + (" link MB/step (tc) |" if args.netem else "") + " status |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|" + ("---:|" if args.netem else "") + "---|"]
    for r in results:
        tt = fmt(r["time_to_target_s"], "{:.1f}") if r["summary"] else "n/a"
        if r["summary"] and r["time_to_target_s"] is None:
            tt = "not reached"
        lines.append(
            f"| `{r['spec']}` | {r['ranks']} | {fmt(r['final_acc'] and 100 * r['final_acc'], '{:.2f}%')} | "
            f"{fmt(r['acc_gap_pt'], '{:+.2f}')} | {fmt(r['late_acc'] and 100 * r['late_acc'], '{:.2f}%')} | "
            f"{fmt(r['late_gap_pt'], '{:+.2f}')} | {tt} | {fmt(r['time_per_epoch_s'])} | "
            f"{fmt(r['comm_per_epoch_s'])} | {fmt(r['speedup_epoch'], '{:.2f}×')} | "
            f"{fmt(r['wire_bytes_per_step'] and r['wire_bytes_per_step'] / 1e6)} | "
            f"{fmt(r['bytes_reduction'], '{:.1f}')} |"
            + (f" {fmt(r['link_bytes_per_step'] and r['link_bytes_per_step'] / 1e6)} |" if args.netem else "")
            + f" {r['status']} |")
    lines += ["",
              "wire MB/step: bytes all ranks sent per optimizer step. Codec runs: libcompmpi's own count "
              "(COMPMPI_STATS=1); plain: 2 (P-1) × the allreduce payload (reduce-scatter + allgather), "
              "which is also what the library counts as the uncompressed volume: "
              + ", ".join(f"`{r['spec']}` P={r['ranks']}: {r['unc_bytes_per_step'] / 1e6:.2f} vs "
                          f"{r['model_bytes_per_step'] / 1e6:.2f} MB"
                          for r in results if r["unc_bytes_per_step"]) + ".",
              "time/epoch and time to target: training wall time on rank 0, evaluation passes excluded.",
              f"last {LATE_EVALS} evals: the mean test accuracy of the last {LATE_EVALS} evaluations (every "
              f"{args.eval_every} steps, the final one included); one evaluation differs from the next by up "
              "to about a point at this constant learning rate, so this mean is the steadier comparison."]
    kept = [r for r in results if r.get("exact_fraction")]
    if kept:
        lines.append("Gradient bytes the library passed to MPI unchanged (its cost model or eligibility kept "
                     "them exact; counted in wire MB/step as plain MPI sends them): "
                     + ", ".join(f"`{r['spec']}` P={r['ranks']}: {100 * r['exact_fraction']:.1f} %" for r in kept)
                     + ".")
    if args.netem:
        lines.append("link MB/step (tc): bytes that left all hosts through their shaped links (tc counters), "
                     "over the whole job (TCP/IP headers, start-up and evaluation traffic included) / steps.")
    table = "\n".join(lines) + "\n"
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write(table)

    # ---- plot -----------------------------------------------------------------------------
    plots = []
    for r in results:
        dat = os.path.join(out, "runs", f"P{r['ranks']}_{safe(r['spec'])}.dat")
        if r["summary"] and os.path.getsize(dat) > 0:
            lw = 3 if r["codec"] == "plain" else 2
            plots.append(f"'{dat}' using 1:($2*100) with linespoints lw {lw} pt 7 ps 0.6 "
                         f"title '{r['spec'].replace(chr(39), '')} (P={r['ranks']})'")
    if plots and shutil.which("gnuplot"):
        title = f"Fashion-MNIST LeNet, {where}{(' ' + args.title) if args.title else ''}"
        gp = os.path.join(out, "accuracy.gp")
        common = ["set termoption noenhanced", f"set title '{title}'", "set xlabel 'training wall time (s)'",
                  "set ylabel 'test accuracy (%)'", "set grid", "set key bottom right",
                  f"set arrow from graph 0, first {100 * args.target} to graph 1, first {100 * args.target} "
                  "nohead dt 2 lc rgb 'gray'", "set xrange [0:*]", "set yrange [60:*]"]
        with open(gp, "w") as f:
            f.write("set terminal pngcairo size 1100,650 font ',10'\n")
            f.write(f"set output '{os.path.join(out, 'accuracy.png')}'\n")
            f.write("\n".join(common) + "\n")
            f.write("plot " + ", \\\n     ".join(plots) + "\n")
        subprocess.run(["gnuplot", gp], stderr=subprocess.DEVNULL)
        txt = os.path.join(out, "accuracy.txt")
        dumb = os.path.join(out, "accuracy_txt.gp")
        with open(dumb, "w") as f:
            f.write("set terminal dumb size 100,30\n")
            f.write(f"set output '{txt}'\n")
            f.write("\n".join(c for c in common if not c.startswith(("set arrow", "set grid"))) + "\n")
            f.write("plot " + ", \\\n     ".join(p.replace("linespoints", "lines") for p in plots) + "\n")
        subprocess.run(["gnuplot", dumb], stderr=subprocess.DEVNULL)

    print(table)
    return 0 if all(r["status"] == "ok" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())

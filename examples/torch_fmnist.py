#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Data-parallel PyTorch training on Fashion-MNIST, gradients averaged with mpi4py.

This is an ordinary Horovod-style script: every rank holds a full replica of a small
LeNet-like CNN, computes gradients on its shard of each global batch, packs them into one
float32 buffer (or a few buckets) and averages them with

    comm.Allreduce(MPI.IN_PLACE, buf)          # MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD

It knows nothing of libcompmpi; libcompmpi can be slipped underneath it with LD_PRELOAD
(see examples/README.md).  Run it with Debian's interpreter (python3-torch, python3-mpi4py):

    mpiexec.openmpi --allow-run-as-root -n 2 /usr/bin/python3 examples/torch_fmnist.py

Rank 0 prints, one `key=value` record per line:
    config ...                         once, at the start
    eval epoch= step= elapsed_s= test_acc=   at step 0, every --eval-every steps, epoch ends
    epoch=E steps= time_s= elapsed_s= train_loss= train_acc= test_acc= comm_s= step_ms= eval_s=
    target test_acc>=T reached step= elapsed_s=   the first time an evaluation reaches --target
    final test_acc= total_s= steps= ...
    summary {JSON}                     everything above in one machine-readable line
Times (time_s, elapsed_s, time to target) are training wall time measured on rank 0 and leave
out the evaluation passes; comm_s is the time rank 0 spent inside MPI_Allreduce of gradients.
"""
import argparse
import gzip
import hashlib
import json
import os
import struct
import sys
import time

import numpy as np


def _threads_from_argv(argv):
    for i, a in enumerate(argv):
        if a == "--threads" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--threads="):
            return a.split("=", 1)[1]
    return "1"


# One compute thread per rank unless asked otherwise: torch's OpenMP pool is set below with
# torch.set_num_threads, but Debian's torch calls the system BLAS (OpenBLAS, pthreads), which
# reads its thread count from the environment before torch is imported.
os.environ.setdefault("OPENBLAS_NUM_THREADS", _threads_from_argv(sys.argv))
os.environ.setdefault("OMP_NUM_THREADS", _threads_from_argv(sys.argv))

from mpi4py import MPI  # noqa: E402  (initialises MPI on import)
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

DEFAULT_DATA = "/usr/share/datasets/fashion-mnist"
FILES = {
    "train_images": "train-images-idx3-ubyte.gz",
    "train_labels": "train-labels-idx1-ubyte.gz",
    "test_images": "t10k-images-idx3-ubyte.gz",
    "test_labels": "t10k-labels-idx1-ubyte.gz",
}


def read_idx(path, magic_expected, ndim):
    """Read a gzip IDX file (LeCun's format), checking the magic number and sizes."""
    if not os.path.exists(path):
        raise SystemExit(f"torch_fmnist: missing data file {path} "
                         "(apt-get install dataset-fashion-mnist, or --data DIR)")
    with gzip.open(path, "rb") as f:
        raw = f.read()
    magic = struct.unpack(">I", raw[:4])[0]
    if magic != magic_expected:
        raise SystemExit(f"torch_fmnist: {path}: bad IDX magic 0x{magic:x}, expected 0x{magic_expected:x}")
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(dims)):
        raise SystemExit(f"torch_fmnist: {path}: {data.size} bytes of data, header says {dims}")
    return data.reshape(dims)


def load(data_dir, split, limit):
    img = read_idx(os.path.join(data_dir, FILES[split + "_images"]), 0x803, 3)
    lab = read_idx(os.path.join(data_dir, FILES[split + "_labels"]), 0x801, 1)
    if img.shape[0] != lab.shape[0] or img.shape[1:] != (28, 28):
        raise SystemExit(f"torch_fmnist: {split}: {img.shape} images vs {lab.shape} labels")
    if lab.max() > 9:
        raise SystemExit(f"torch_fmnist: {split}: label {lab.max()} out of range")
    if limit:
        img, lab = img[:limit], lab[:limit]
    # Normalise with the training set's mean/std of Fashion-MNIST (0.2860, 0.3530).
    x = torch.from_numpy((img.astype(np.float32) / 255.0 - 0.2860) / 0.3530).unsqueeze(1)
    y = torch.from_numpy(lab.astype(np.int64))
    return x, y


class LeNet(nn.Module):
    """Caffe's LeNet (conv5x5 20 + pool, conv5x5 50 + pool, fc, fc 10) with a wider fully
    connected layer: hidden=2048 gives 1,686,508 parameters (6.7 MB of float gradients per
    step), enough for a 1 Gbit/s link to matter next to the compute of a small CNN."""

    def __init__(self, hidden=2048):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 20, 5)              # 28x28 -> 24x24 -> pool 12x12
        self.conv2 = nn.Conv2d(20, 50, 5)             # 12x12 -> 8x8 -> pool 4x4
        self.fc1 = nn.Linear(50 * 4 * 4, hidden)
        self.fc2 = nn.Linear(hidden, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(torch.flatten(x, 1)))
        return self.fc2(x)


class GradientAverager:
    """Horovod-style fusion: copy all gradients into preallocated float32 buckets (one by
    default), MPI_Allreduce each in place, divide by the world size, copy back.  The
    buckets are allocated once, so every step hands MPI the same buffers."""

    def __init__(self, comm, params, buckets):
        self.comm = comm
        self.size = comm.Get_size()
        self.params = [p for p in params if p.requires_grad]
        total = sum(p.numel() for p in self.params)
        buckets = max(1, min(buckets, len(self.params)))
        # split the parameter list (in backward order, as frameworks do) into buckets of
        # roughly equal size, never splitting a tensor
        order = list(reversed(self.params))
        target = total / buckets
        self.groups, cur, cur_n = [], [], 0
        for p in order:
            cur.append(p)
            cur_n += p.numel()
            if cur_n >= target and len(self.groups) < buckets - 1:
                self.groups.append(cur)
                cur, cur_n = [], 0
        if cur:
            self.groups.append(cur)
        self.bufs = [np.empty(sum(p.numel() for p in g), dtype=np.float32) for g in self.groups]
        self.views = [torch.from_numpy(b) for b in self.bufs]
        self.calls = 0          # MPI_Allreduce calls on gradients
        self.bytes = 0          # payload bytes handed to those calls (per rank)
        self.comm_s = 0.0

    def sizes(self):
        return [b.nbytes for b in self.bufs]

    def average(self):
        for g, buf, view in zip(self.groups, self.bufs, self.views):
            off = 0
            for p in g:
                n = p.numel()
                view[off:off + n].copy_(p.grad.reshape(-1))
                off += n
            t0 = MPI.Wtime()
            self.comm.Allreduce(MPI.IN_PLACE, buf)      # float32 -> MPI_FLOAT, MPI_SUM
            self.comm_s += MPI.Wtime() - t0
            self.calls += 1
            self.bytes += buf.nbytes
            view.div_(self.size)
            off = 0
            for p in g:
                n = p.numel()
                p.grad.copy_(view[off:off + n].view_as(p.grad))
                off += n


def evaluate(comm, model, x, y, rank, size, batch=500):
    """Accuracy on the test set; each rank evaluates its contiguous shard, counts are summed
    with an int64 MPI_Allreduce (not a float call, so libcompmpi passes it through)."""
    n = x.shape[0]
    lo, hi = n * rank // size, n * (rank + 1) // size
    correct = 0
    model.eval()
    with torch.no_grad():
        for i in range(lo, hi, batch):
            j = min(hi, i + batch)
            correct += int((model(x[i:j]).argmax(1) == y[i:j]).sum())
    model.train()
    counts = np.array([correct, hi - lo], dtype=np.int64)
    comm.Allreduce(MPI.IN_PLACE, counts)
    return counts[0] / counts[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64, help="global batch (split over ranks)")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--train-limit", type=int, default=0, help="first N training images (0 = all 60000)")
    ap.add_argument("--test-limit", type=int, default=0, help="first N test images (0 = all 10000)")
    ap.add_argument("--eval-every", type=int, default=0, help="also evaluate every N steps (0 = epoch ends)")
    ap.add_argument("--target", type=float, default=0.85, help="report the first time test accuracy >= this")
    ap.add_argument("--hidden", type=int, default=2048, help="width of the fully connected layer")
    ap.add_argument("--buckets", type=int, default=1, help="gradient buffers per step (Horovod fusion: 1)")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads per rank")
    ap.add_argument("--data", default=os.environ.get("FMNIST_DIR", DEFAULT_DATA))
    args = ap.parse_args()

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)                 # identical initial weights on every rank
    torch.use_deterministic_algorithms(True)

    def log(line):
        if rank == 0:
            print(line, flush=True)

    t_load = time.perf_counter()
    xtr, ytr = load(args.data, "train", args.train_limit)
    xte, yte = load(args.data, "test", args.test_limit)
    t_load = time.perf_counter() - t_load

    model = LeNet(args.hidden)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    avg = GradientAverager(comm, model.parameters(), args.buckets)
    nparams = sum(p.numel() for p in model.parameters())

    if args.batch % size:
        raise SystemExit(f"torch_fmnist: --batch {args.batch} is not a multiple of {size} ranks")
    local = args.batch // size
    steps_per_epoch = xtr.shape[0] // args.batch
    if steps_per_epoch < 1:
        raise SystemExit("torch_fmnist: fewer training images than one global batch")
    log(f"config ranks={size} model=lenet hidden={args.hidden} params={nparams} "
        f"grad_bytes={nparams * 4} buckets={len(avg.bufs)} bucket_bytes={','.join(map(str, avg.sizes()))} "
        f"batch={args.batch} local_batch={local} lr={args.lr} momentum={args.momentum} seed={args.seed} "
        f"train={xtr.shape[0]} test={xte.shape[0]} epochs={args.epochs} steps_per_epoch={steps_per_epoch} "
        f"eval_every={args.eval_every} target={args.target} threads={args.threads} "
        f"torch={torch.__version__} mpi={MPI.Get_library_version().splitlines()[0].strip()} load_s={t_load:.2f}")

    evals, epochs_out = [], []
    elapsed = 0.0            # training time so far (evaluation excluded)
    eval_total = 0.0
    step = 0
    target_hit = None

    def do_eval(epoch):
        nonlocal eval_total, target_hit
        t0 = time.perf_counter()
        acc = evaluate(comm, model, xte, yte, rank, size)
        eval_total += time.perf_counter() - t0
        evals.append({"epoch": epoch, "step": step, "elapsed_s": round(elapsed, 4), "test_acc": acc})
        log(f"eval epoch={epoch} step={step} elapsed_s={elapsed:.3f} test_acc={acc:.4f}")
        if target_hit is None and acc >= args.target:
            target_hit = {"step": step, "elapsed_s": round(elapsed, 4), "test_acc": acc}
            log(f"target test_acc>={args.target} reached step={step} elapsed_s={elapsed:.3f}")
        return acc

    comm.Barrier()
    do_eval(0)
    for epoch in range(1, args.epochs + 1):
        # the same permutation on every rank; rank r takes its slice of each global batch
        perm = torch.from_numpy(np.random.RandomState(args.seed * 1000 + epoch).permutation(xtr.shape[0]))
        comm_before = avg.comm_s
        loss_sum, correct, seen = 0.0, 0, 0
        eval_before = eval_total
        comm.Barrier()
        t_epoch = time.perf_counter()
        t_seg = t_epoch
        for s in range(steps_per_epoch):
            idx = perm[s * args.batch + rank * local: s * args.batch + (rank + 1) * local]
            xb, yb = xtr[idx], ytr[idx]
            opt.zero_grad(set_to_none=True)
            out = model(xb)
            loss = F.cross_entropy(out, yb)
            loss.backward()
            avg.average()
            opt.step()
            step += 1
            loss_sum += float(loss) * len(yb)
            correct += int((out.argmax(1) == yb).sum())
            seen += len(yb)
            if args.eval_every and step % args.eval_every == 0 and s != steps_per_epoch - 1:
                now = time.perf_counter()
                elapsed += now - t_seg
                do_eval(epoch)
                t_seg = time.perf_counter()
        now = time.perf_counter()
        elapsed += now - t_seg
        t_ep = now - t_epoch - (eval_total - eval_before)
        train = np.array([loss_sum, correct, seen], dtype=np.float64)
        comm.Allreduce(MPI.IN_PLACE, train)         # 3 doubles, below min_bytes: passes through libcompmpi
        acc = do_eval(epoch)
        rec = {"epoch": epoch, "steps": steps_per_epoch, "time_s": round(t_ep, 4), "elapsed_s": round(elapsed, 4),
               "train_loss": train[0] / train[2], "train_acc": train[1] / train[2], "test_acc": acc,
               "comm_s": round(avg.comm_s - comm_before, 4)}
        epochs_out.append(rec)
        log(f"epoch={epoch} steps={steps_per_epoch} time_s={t_ep:.3f} elapsed_s={elapsed:.3f} "
            f"train_loss={rec['train_loss']:.4f} train_acc={rec['train_acc']:.4f} test_acc={acc:.4f} "
            f"comm_s={rec['comm_s']:.3f} step_ms={1000 * t_ep / steps_per_epoch:.1f} "
            f"eval_s={eval_total - eval_before:.2f}")

    # Replicas must hold identical bits (a lossy collective that gave ranks different sums
    # would break this): compare a SHA-256 of all parameters across ranks.
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().numpy().tobytes())
    digests = comm.allgather(h.hexdigest())      # pickled bytes: MPI_BYTE, passes through
    identical = int(len(set(digests)) == 1)
    final_acc = evals[-1]["test_acc"]
    log(f"final test_acc={final_acc:.4f} total_s={elapsed:.3f} steps={step} epochs={args.epochs} "
        f"ranks={size} allreduce_calls={avg.calls} allreduce_bytes_per_rank={avg.bytes} "
        f"comm_s={avg.comm_s:.3f} eval_s={eval_total:.2f} replicas_identical={identical} "
        f"time_to_target_s={target_hit['elapsed_s'] if target_hit else 'n/a'}")
    summary = {
        "ranks": size, "params": nparams, "grad_bytes": nparams * 4, "buckets": avg.sizes(),
        "batch": args.batch, "lr": args.lr, "train": int(xtr.shape[0]), "test": int(xte.shape[0]),
        "epochs": args.epochs, "steps": step, "final_test_acc": final_acc,
        "train_time_s": round(elapsed, 4), "comm_s": round(avg.comm_s, 4), "eval_s": round(eval_total, 3),
        "allreduce_calls": avg.calls, "allreduce_bytes_per_rank": avg.bytes,
        "target": args.target, "time_to_target_s": target_hit["elapsed_s"] if target_hit else None,
        "steps_to_target": target_hit["step"] if target_hit else None,
        "replicas_identical": identical, "epoch_records": epochs_out, "evals": evals,
    }
    log("summary " + json.dumps(summary, separators=(",", ":")))
    if not identical:
        log("torch_fmnist: ERROR: replicas differ after training")
        sys.exit(3)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Dump real gradients for codec measurements (tools/rf_measure).

Trains a LeNet-5-like CNN (conv 6@5x5, pool, conv 16@5x5, pool, fc 120, fc 84, fc 10; 61 706
parameters) on Fashion-MNIST with SGD (lr 0.05, momentum 0.9, batch 64) for --steps steps
and writes the flattened gradient of the steps listed in --save (all parameters, in
model.parameters() order, as raw little-endian float32) to OUTDIR/grad_step<k>.f32.

    /usr/bin/python3 tools/dump_gradients.py --outdir /tmp/grads --steps 200 --save 1,50,200

Data: Debian's Fashion-MNIST (/usr/share/datasets/fashion-mnist, idx files, gzip). Seeded
(torch.manual_seed), single-threaded: the same gradients on every run of the same torch."""
import argparse
import gzip
import os
import struct

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


class LeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 6, 5, padding=2)
        self.c2 = nn.Conv2d(6, 16, 5)
        self.f1 = nn.Linear(16 * 5 * 5, 120)
        self.f2 = nn.Linear(120, 84)
        self.f3 = nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.c1(x)), 2)
        x = F.max_pool2d(F.relu(self.c2(x)), 2)
        x = x.flatten(1)
        return self.f3(F.relu(self.f2(F.relu(self.f1(x)))))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--outdir", required=True)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--save", default="1,50,200", help="comma-separated step numbers (1-based) to dump")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    torch.set_num_threads(1)
    imgs = read_idx(os.path.join(a.data, "train-images-idx3-ubyte.gz")).astype(np.float32) / 255.0
    labels = read_idx(os.path.join(a.data, "train-labels-idx1-ubyte.gz")).astype(np.int64)
    x_all = torch.from_numpy((imgs - 0.2860) / 0.3530).unsqueeze(1)  # Fashion-MNIST mean/std
    y_all = torch.from_numpy(labels)
    model = LeNet()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    save = {int(s) for s in a.save.split(",") if s}
    os.makedirs(a.outdir, exist_ok=True)
    gen = torch.Generator().manual_seed(a.seed)
    perm = torch.randperm(len(y_all), generator=gen)
    nparam = sum(p.numel() for p in model.parameters())
    for step in range(1, a.steps + 1):
        idx = perm[((step - 1) * a.batch) % len(perm):][:a.batch]
        opt.zero_grad()
        loss = F.cross_entropy(model(x_all[idx]), y_all[idx])
        loss.backward()
        if step in save:
            g = torch.cat([p.grad.reshape(-1) for p in model.parameters()]).to(torch.float32).numpy()
            path = os.path.join(a.outdir, "grad_step%d.f32" % step)
            g.astype("<f4").tofile(path)
            print("step %d loss %.4f: %d floats (%d parameters), |g|_2 %.4g -> %s"
                  % (step, loss.item(), g.size, nparam, float(np.linalg.norm(g)), path))
        opt.step()


if __name__ == "__main__":
    main()

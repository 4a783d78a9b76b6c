#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Time comm.Allreduce(MPI.IN_PLACE, buf) on a float32 buffer, as the PyTorch job calls it.

    mpiexec.openmpi -n 2 [-x LD_PRELOAD=.../libcompmpi_openmpi.so -x COMPMPI_CODEC=q8] \\
        /usr/bin/python3 examples/allreduce_bench.py [--count 1686508] [--iters 20]

The buffer gets fresh gradient-like data (normal, scale 1e-3, different per rank) before each
timed call; rank 0 prints the median, minimum and maximum over --iters calls (after one
untimed call), each call timed between a barrier and its return on rank 0.
"""
import argparse

import numpy as np
from mpi4py import MPI


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=1686508, help="floats (default: torch_fmnist.py's gradients)")
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args()
    comm = MPI.COMM_WORLD
    rng = np.random.RandomState(1234 + comm.rank)
    buf = (rng.randn(args.count) * 1e-3).astype(np.float32)
    comm.Allreduce(MPI.IN_PLACE, buf)
    ts = []
    for _ in range(args.iters):
        buf[:] = rng.randn(args.count) * 1e-3
        comm.Barrier()
        t0 = MPI.Wtime()
        comm.Allreduce(MPI.IN_PLACE, buf)
        ts.append(MPI.Wtime() - t0)
    ts.sort()
    if comm.rank == 0:
        print(f"allreduce ranks={comm.size} bytes={4 * args.count} iters={args.iters} "
              f"t_med_s={ts[len(ts) // 2]:.4f} t_min_s={ts[0]:.4f} t_max_s={ts[-1]:.4f}", flush=True)


if __name__ == "__main__":
    main()

# SPDX-License-Identifier: BSD-3-Clause
"""A user of doubles: numpy float64 arrays through mpi4py, unchanged, under the preload.

    mpiexec.openmpi -n 4 -x LD_PRELOAD=$PWD/_build-openmpi/.libs/libcompmpi_openmpi.so \
        -x COMPMPI_ERROR_BOUND=rel:1e-6 -x COMPMPI_STATS=1 /usr/bin/python3 examples/mpi4py_float64.py

The script knows nothing of libcompmpi: Allreduce, Bcast and Allgather of float64 arrays
(MPI_DOUBLE). Under COMPMPI_ERROR_BOUND the library picks, per call, the narrowest codec that
provably keeps every element within the bound (docs/error_bound.md); COMPMPI_STATS=1 prints
the bytes it saved at MPI_Finalize. The script checks the bound itself against an exact
reference (every rank regenerates every rank's data; sums in numpy's longdouble) and prints
the largest error seen as a fraction of the bound. A different bound can also come from an
MPI_Info hint on a communicator: comm.Set_info(MPI.Info.Create() with compmpi_error_bound).
"""
import os
import sys

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
n = int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 18
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 10


def field(r, step):
    """A smooth simulation-like field with a rank-dependent perturbation (float64)."""
    g = np.random.default_rng(1000 * step + r)
    x = np.linspace(0.0, 8.0 * np.pi, n)
    return np.sin(x + 0.1 * r) * (1.0 + 0.01 * step) + 1e-3 * g.standard_normal(n)


bound = os.environ.get("COMPMPI_ERROR_BOUND", "off")
kind, _, val = bound.partition(":")
X = float(val) if kind in ("abs", "rel") else None
worst = 0.0  # largest |result - exact| / allowed, over every element, call and collective
out = np.empty(n)
for step in range(steps):
    mine = field(rank, step)
    comm.Allreduce(mine, out, op=MPI.SUM)                       # MPI_DOUBLE, MPI_SUM
    allv = [field(r, step).astype(np.longdouble) for r in range(size)]
    exact = np.sum(allv, axis=0)
    mag = np.sum(np.abs(allv), axis=0)
    if X is not None:
        allowed = X * mag if kind == "rel" else np.full(n, X)
        err = np.abs(out.astype(np.longdouble) - exact)
        worst = max(worst, float(np.max(np.where(allowed > 0, err / np.maximum(allowed, 1e-300), 0))))
    b = mine.copy() if rank == 0 else np.empty(n)
    comm.Bcast(b, root=0)                                       # MPI_DOUBLE
    if X is not None and rank != 0:
        ref = field(0, step).astype(np.longdouble)
        allowed = X * np.abs(ref) if kind == "rel" else np.full(n, X)
        err = np.abs(b.astype(np.longdouble) - ref)
        worst = max(worst, float(np.max(np.where(allowed > 0, err / np.maximum(allowed, 1e-300), 0))))
    if rank == 0:
        assert np.array_equal(b, mine), "the bcast root's buffer changed"

worst = comm.allreduce(worst, op=MPI.MAX)  # lowercase: a pickled float, passes through
if rank == 0:
    if X is None:
        print(f"{size} ranks, {steps} steps of {n} doubles: no error bound set")
    else:
        held = worst <= 1.0
        print(f"{size} ranks, {steps} steps of {n} doubles, error_bound {bound}: largest error "
              f"{worst:.3g} of the bound -- bound {'held' if held else 'VIOLATED'}")
        if not held:
            sys.exit(1)

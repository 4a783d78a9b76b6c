# SPDX-License-Identifier: BSD-3-Clause
"""mpi4py (Debian's, linked to Open MPI) under LD_PRELOAD of libcompmpi_openmpi.so.

mpi4py initialises through MPI_Init_thread (MPI_THREAD_MULTIPLE) and finalizes from an
atexit handler: this program never calls MPI.Finalize() itself. Checks: a compressed float
allreduce (fp16 codec: the small integers below are carried exactly) gives the exact sums
and identical bits on every rank (hashlib, not hash(): that differs per process), bcast and
allgather too. Run by scripts/test-openmpi.sh, which also checks from stderr that libcompmpi
compressed (COMPMPI_STATS=1: the statistics are printed by its MPI_Finalize wrapper, so
they also prove mpi4py's exit-time MPI_Finalize went through libcompmpi).
"""
import array
import hashlib
import sys

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
n = 1 << 19  # 2 MiB of floats: above COMPMPI_MIN_BYTES


def digest(buf):
    return hashlib.sha256(buf.tobytes()).hexdigest()


x = array.array("f", [float(i % 53 + rank) for i in range(n)])
y = array.array("f", bytes(4 * n))
comm.Allreduce(x, y, op=MPI.SUM)
want = array.array("f", [float(size * (i % 53) + size * (size - 1) // 2) for i in range(n)])
ok = y == want
ok = ok and len(set(comm.allgather(digest(y)))) == 1

b = array.array("f", [float(i % 41) for i in range(n)]) if rank == 0 else array.array("f", bytes(4 * n))
comm.Bcast(b, root=0)
ok = ok and b == array.array("f", [float(i % 41) for i in range(n)])

g = array.array("f", bytes(4 * n * size))
comm.Allgather(x, g)
ok = ok and all(g[r * n + i] == float(i % 53 + r) for r in range(size) for i in range(0, n, 997))

ok = comm.allreduce(int(not ok), op=MPI.MAX) == 0  # small: passes through uncompressed
if rank == 0:
    print("thread level", MPI.Query_thread(), "(MULTIPLE = %d)" % MPI.THREAD_MULTIPLE)
    print(" No Errors" if ok else "WRONG RESULT")
sys.exit(0 if ok else 1)

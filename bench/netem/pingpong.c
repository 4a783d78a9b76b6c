// SPDX-License-Identifier: BSD-3-Clause
/*
 * pingpong — alpha and beta of the emulated link between two nodes, as MPI sees them.
 *
 *   pingpong [--peer R] [--reps K] [--max BYTES]
 *
 * Rank 0 and rank R (default: the first rank of another node, from
 * MPI_Comm_split_type(SHARED); else rank 1) exchange messages of 8 B to --max (default
 * 4 MiB), K round trips each (default 5, after one untimed), with PMPI point-to-point
 * calls (a preloaded libcompmpi is not involved). One-way time t(s) = the minimum round
 * trip / 2. Prints one line per size and a fit t(s) = alpha + s / beta: alpha from the
 * smallest message, beta from the least-squares slope over messages >= 256 KiB:
 *   pingpong: size=... t_s=...
 *   pingpong: alpha_s=... beta_Bps=... alpha_beta_bytes=... peer=R
 * Then every rank exchanges --max bytes with a rank of another node at the same time
 * (MPI_Sendrecv with rank (r + R) mod P, R = ranks per node; all links busy both ways, as
 * in a collective's step): a node's R x --max bytes over the slowest rank's time give the
 * link's beta under load:
 *   pingpong: exchange_bytes=... t_s=... beta_loaded_Bps=... ranks_per_node=R
 *
 * Build: mpicc.mpich -O2 -o pingpong pingpong.c
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size, peer = -1, reps = 5;
    long maxb = 4L << 20;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int a = 1; a + 1 < argc; a += 2) {
        if (!strcmp(argv[a], "--peer")) peer = atoi(argv[a + 1]);
        else if (!strcmp(argv[a], "--reps")) reps = atoi(argv[a + 1]);
        else if (!strcmp(argv[a], "--max")) maxb = atol(argv[a + 1]);
    }
    if (peer < 0) { /* the lowest rank on another node than rank 0 */
        MPI_Comm node;
        int nr, first_other = size;
        PMPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
        PMPI_Comm_rank(node, &nr);
        int mine = 0, zero_node;
        /* rank 0's node id = its world rank; everyone learns whether it shares rank 0's node */
        int leader = rank;
        PMPI_Bcast(&leader, 1, MPI_INT, 0, node); /* world rank of my node's rank 0 */
        zero_node = leader == 0;
        mine = zero_node ? size : rank;
        PMPI_Allreduce(&mine, &first_other, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        peer = first_other < size ? first_other : (size > 1 ? 1 : 0);
        PMPI_Comm_free(&node);
    }
    char *buf = malloc((size_t)maxb);
    memset(buf, 1, (size_t)maxb);
    double xs[64], ts[64];
    int np = 0;
    if (rank == 0 || rank == peer) {
        const int other = rank == 0 ? peer : 0;
        for (long s = 8; s <= maxb && np < 64; s = s < 1024 ? s * 8 : s * 4) {
            double best = 1e30;
            for (int r = -1; r < reps; ++r) {
                double t0 = PMPI_Wtime();
                if (rank == 0) {
                    PMPI_Send(buf, (int)s, MPI_BYTE, other, 1, MPI_COMM_WORLD);
                    PMPI_Recv(buf, (int)s, MPI_BYTE, other, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                } else {
                    PMPI_Recv(buf, (int)s, MPI_BYTE, other, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    PMPI_Send(buf, (int)s, MPI_BYTE, other, 1, MPI_COMM_WORLD);
                }
                double t = (PMPI_Wtime() - t0) / 2;
                if (r >= 0 && t < best) best = t;
            }
            xs[np] = (double)s, ts[np++] = best;
            if (rank == 0) printf("pingpong: size=%ld t_s=%.9f\n", s, best);
        }
        if (rank == 0) {
            double sx = 0, sy = 0, sxx = 0, sxy = 0;
            int k = 0;
            for (int i = 0; i < np; ++i)
                if (xs[i] >= 262144) sx += xs[i], sy += ts[i], sxx += xs[i] * xs[i], sxy += xs[i] * ts[i], ++k;
            const double slope = k > 1 ? (k * sxy - sx * sy) / (k * sxx - sx * sx) : ts[np - 1] / xs[np - 1];
            const double alpha = ts[0], beta = slope > 0 ? 1 / slope : 0;
            printf("pingpong: alpha_s=%.9f beta_Bps=%.0f alpha_beta_bytes=%.0f peer=%d\n", alpha, beta, alpha * beta, peer);
            fflush(stdout);
        }
    }
    /* every rank at once: send to the rank one node up, receive from the one a node down */
    {
        MPI_Comm node;
        int ppn;
        PMPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
        PMPI_Comm_size(node, &ppn);
        PMPI_Comm_free(&node);
        char *rbuf = malloc((size_t)maxb);
        double best = 1e30;
        if (size > ppn) {
            for (int r = -1; r < reps; ++r) {
                PMPI_Barrier(MPI_COMM_WORLD);
                double t0 = PMPI_Wtime();
                PMPI_Sendrecv(buf, (int)maxb, MPI_BYTE, (rank + ppn) % size, 2, rbuf, (int)maxb, MPI_BYTE,
                              (rank - ppn + size) % size, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                double t = PMPI_Wtime() - t0, tmax;
                PMPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
                if (r >= 0 && tmax < best) best = tmax;
            }
            if (rank == 0)
                printf("pingpong: exchange_bytes=%ld t_s=%.9f beta_loaded_Bps=%.0f ranks_per_node=%d\n", maxb, best,
                       ppn * (double)maxb / best, ppn);
        }
        free(rbuf);
    }
    PMPI_Barrier(MPI_COMM_WORLD);
    free(buf);
    MPI_Finalize();
    return 0;
}

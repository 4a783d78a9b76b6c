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
 * Inside a node (R >= 2; issue 40: the hierarchy's exact node reduce and bcast), the same
 * two measurements over shared memory: rank 0 and its node's second rank (8 B to --max, the
 * same fit), then ranks 2i and 2i+1 of every node exchanging --max bytes at once (every node,
 * every pair: the node stages of the hierarchy run on all nodes at the same time, and here on
 * the same cores), one pair's bytes -- both directions, 2 x --max: shared memory is not full
 * duplex, the two directions' copies share the same cores and memory -- over the slowest
 * pair's time (a node stage's message, one way, takes its bytes over this):
 *   pingpong: node_alpha_s=... node_beta_Bps=... node_alpha_beta_bytes=... peer=...
 *   pingpong: node_exchange_bytes=... t_s=... node_beta_loaded_Bps=... pairs=...
 *
 * Build: mpicc.mpich -O2 -o pingpong pingpong.c
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One-way times of 8 B .. maxb between `a` and `b` of comm (min of reps round trips / 2, after
 * one untimed); rank a prints the sizes (with `prefix`) and returns alpha and beta (fit as in
 * the top comment); other ranks return 0. */
static void fit_pair(MPI_Comm comm, int a, int b, char *buf, long maxb, int reps, const char *prefix, double *alpha,
                     double *beta) {
    int rank;
    MPI_Comm_rank(comm, &rank);
    double xs[64], ts[64];
    int np = 0;
    *alpha = *beta = 0;
    if (rank != a && rank != b) return;
    const int other = rank == a ? b : a;
    for (long s = 8; s <= maxb && np < 64; s = s < 1024 ? s * 8 : s * 4) {
        double best = 1e30;
        for (int r = -1; r < reps; ++r) {
            double t0 = PMPI_Wtime();
            if (rank == a) {
                PMPI_Send(buf, (int)s, MPI_BYTE, other, 1, comm);
                PMPI_Recv(buf, (int)s, MPI_BYTE, other, 1, comm, MPI_STATUS_IGNORE);
            } else {
                PMPI_Recv(buf, (int)s, MPI_BYTE, other, 1, comm, MPI_STATUS_IGNORE);
                PMPI_Send(buf, (int)s, MPI_BYTE, other, 1, comm);
            }
            double t = (PMPI_Wtime() - t0) / 2;
            if (r >= 0 && t < best) best = t;
        }
        xs[np] = (double)s, ts[np++] = best;
        if (rank == a) printf("pingpong: %ssize=%ld t_s=%.9f\n", prefix, s, best);
    }
    if (rank != a) return;
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    int k = 0;
    for (int i = 0; i < np; ++i)
        if (xs[i] >= 262144) sx += xs[i], sy += ts[i], sxx += xs[i] * xs[i], sxy += xs[i] * ts[i], ++k;
    const double slope = k > 1 ? (k * sxy - sx * sy) / (k * sxx - sx * sx) : ts[np - 1] / xs[np - 1];
    *alpha = ts[0], *beta = slope > 0 ? 1 / slope : 0;
}

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
    double alpha, beta;
    fit_pair(MPI_COMM_WORLD, 0, peer, buf, maxb, reps, "", &alpha, &beta);
    if (rank == 0) {
        printf("pingpong: alpha_s=%.9f beta_Bps=%.0f alpha_beta_bytes=%.0f peer=%d\n", alpha, beta, alpha * beta, peer);
        fflush(stdout);
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
    /* inside a node: rank 0 and its node's rank 1, then every node's pairs at once */
    {
        MPI_Comm node;
        int nr, ppn;
        PMPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
        PMPI_Comm_rank(node, &nr);
        PMPI_Comm_size(node, &ppn);
        int minppn;
        PMPI_Allreduce(&ppn, &minppn, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (minppn >= 2) {
            double na, nb;
            /* rank 0 of the world is rank 0 of its node (split keeps the world order) */
            int zero_node = 0, flag = rank == 0;
            PMPI_Allreduce(&flag, &zero_node, 1, MPI_INT, MPI_MAX, node);
            if (zero_node) fit_pair(node, 0, 1, buf, maxb, reps, "node_", &na, &nb);
            if (rank == 0) {
                printf("pingpong: node_alpha_s=%.9f node_beta_Bps=%.0f node_alpha_beta_bytes=%.0f peer=1\n", na, nb,
                       na * nb);
                fflush(stdout);
            }
            char *rbuf = malloc((size_t)maxb);
            const int partner = (nr ^ 1) < ppn ? (nr ^ 1) : MPI_PROC_NULL;
            double best = 1e30;
            for (int r = -1; r < reps; ++r) {
                PMPI_Barrier(MPI_COMM_WORLD);
                double t0 = PMPI_Wtime();
                PMPI_Sendrecv(buf, (int)maxb, MPI_BYTE, partner, 3, rbuf, (int)maxb, MPI_BYTE, partner, 3, node,
                              MPI_STATUS_IGNORE);
                double t = PMPI_Wtime() - t0, tmax;
                PMPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
                if (r >= 0 && tmax < best) best = tmax;
            }
            int pairs = 0, mine = partner != MPI_PROC_NULL && nr % 2 == 0;
            PMPI_Allreduce(&mine, &pairs, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
            if (rank == 0)
                printf("pingpong: node_exchange_bytes=%ld t_s=%.9f node_beta_loaded_Bps=%.0f pairs=%d\n", maxb, best,
                       2.0 * (double)maxb / best, pairs);
            free(rbuf);
        }
        PMPI_Comm_free(&node);
    }
    PMPI_Barrier(MPI_COMM_WORLD);
    free(buf);
    MPI_Finalize();
    return 0;
}

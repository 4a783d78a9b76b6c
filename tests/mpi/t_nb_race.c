// SPDX-License-Identifier: BSD-3-Clause
/* The direct path takes a call's issue index without the channel's lock (channel_take_memo,
 * src/runtime/channel.h) while the progress thread agrees from which index on another class
 * goes direct (agree_direct, src/runtime/progress.cc). Their handshake must keep every rank's
 * operations on the private communicator `direct` in one order. This program (plain MPI,
 * linked with libcompmpi so that the TSan run of scripts/test-hardening.sh takes it too)
 * makes the two race: on a fresh duplicate of MPI_COMM_WORLD per epoch, one call signature
 * A (a 4 KiB MPI_Iallreduce) soon goes direct;
 * then, round after round, one call of another class -- 24 of them: Iallreduce, Ibcast,
 * Iallgather and Ireduce_scatter_block of 8-256 KiB, each exploring, then queued once, then
 * agreed -- is issued and, until it completes, A calls behind it (at most `burst` in
 * flight): the application's thread takes A's indices on the memo's path while the progress
 * thread runs the other call and, at that class's ninth call, its agreement.
 * Checked after every call: every result is MPI's own, bit for bit (the testlist runs it
 * under COMPMPI_FAULT=cost_plain, which decides every class exact and leaves the memo on),
 * and the same on every rank. Operations out of order on `direct` show as a wrong result, an
 * MPI error or a hang (the watchdog).
 * Arguments: rounds=N per epoch (default 300), burst=B (default 24, at most 64),
 * epochs=E (default 3), pause=U (microseconds the application sleeps after every fourth A
 * call, default 5; 0: never). The pauses let the progress thread run while A calls are
 * issued (two threads per rank on a rank per core): some A calls then come while an agreement
 * runs, queue, and the thread issues them on `direct` when it ends. They also found a defect:
 * MPICH 4.0.2's MPI_Waitall asserts that a generalized request it reaches is complete, and
 * a sleeping wait used to return just before the thread completed it (src/runtime/nb_wait.cc). */
#define _DEFAULT_SOURCE /* usleep */
#include "mpitest.h"

enum { kA = 1024, kMaxBurst = 64, kKinds = 4, kSizes = 6 };
enum Kind { K_ALLREDUCE, K_BCAST, K_ALLGATHER, K_RSB };

static int rank, size;

/* MPI's exact result of a sum over ranks, blocking and non-blocking (MPI may sum in another
 * order there; both are its exact result: a call on the progress thread runs the blocking
 * collective, a direct one the non-blocking one). */
static void sums(const float *in, float *ref, float *ref_nb, int n, int rsb) {
    MPI_Request r;
    if (rsb) {
        PMPI_Reduce_scatter_block(in, ref, n / size, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        PMPI_Ireduce_scatter_block(in, ref_nb, n / size, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &r);
    } else {
        PMPI_Allreduce(in, ref, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        PMPI_Iallreduce(in, ref_nb, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &r);
    }
    PMPI_Wait(&r, MPI_STATUS_IGNORE);
}

static int same(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof(float)) == 0; }

int main(int argc, char **argv) {
    int rounds = 300, burst = 24, epochs = 3, pause_us = 5;
    for (int i = 1; i < argc; ++i) {
        if (!strncmp(argv[i], "rounds=", 7)) rounds = atoi(argv[i] + 7);
        else if (!strncmp(argv[i], "burst=", 6)) burst = atoi(argv[i] + 6);
        else if (!strncmp(argv[i], "epochs=", 7)) epochs = atoi(argv[i] + 7);
        else if (!strncmp(argv[i], "pause=", 6)) pause_us = atoi(argv[i] + 6);
    }
    if (burst < 1 || burst > kMaxBurst) burst = 24;
    mt_init(&argc, &argv, &rank, &size);
    mt_watchdog("t_nb_race", 600);
    const int max_n = (256 << 10) / (int)sizeof(float);
    float *a_in = malloc(kA * sizeof(float)), *a_ref = malloc(kA * sizeof(float)),
          *a_ref_nb = malloc(kA * sizeof(float)), *a_out = malloc((size_t)kMaxBurst * kA * sizeof(float));
    float *in = malloc((size_t)max_n * sizeof(float)), *out = malloc((size_t)max_n * size * sizeof(float)),
          *ref = malloc((size_t)max_n * sizeof(float)), *ref_nb = malloc((size_t)max_n * sizeof(float)),
          *tmp = malloc((size_t)max_n * sizeof(float));
    MPI_Request reqs[kMaxBurst + 1];
    MPI_Status st[kMaxBurst + 1];
    mt_fill(a_in, kA, 7, rank);
    sums(a_in, a_ref, a_ref_nb, kA, 0);
    long wrong_a = 0, wrong = 0, differ = 0, a_calls = 0, printed = 0;
    for (int ep = 0; ep < epochs; ++ep) {
        MPI_Comm c;
        MPI_Comm_dup(MPI_COMM_WORLD, &c);
        for (int r = 0; r < rounds; ++r) {
            const int cls = r % (kKinds * kSizes), kind = cls % kKinds;
            const int n = (2048 << (cls / kKinds)) / size * size; /* 8-256 KiB, a multiple of the ranks */
            const int root = r % size;
            const uint64_t seed = 1000u + (uint64_t)ep * 100000u + (uint64_t)r;
            mt_fill(in, (size_t)n, seed, rank);
            size_t on = (size_t)n;
            switch (kind) {
                case K_ALLREDUCE: sums(in, ref, ref_nb, n, 0); break;
                case K_RSB: sums(in, ref, ref_nb, n, 1), on = (size_t)(n / size); break;
                case K_BCAST: /* the root's data, everywhere */
                    mt_fill(ref, (size_t)n, seed, root);
                    if (rank == root) memcpy(out, in, (size_t)n * sizeof(float));
                    else for (int i = 0; i < n; ++i) out[i] = -1.0f;
                    break;
                case K_ALLGATHER: /* every rank's data, in rank order: checked below */
                    on = (size_t)n * size;
                    for (size_t i = 0; i < on; ++i) out[i] = -1.0f;
                    break;
                default: break;
            }
            switch (kind) {
                case K_ALLREDUCE: MPI_Iallreduce(in, out, n, MPI_FLOAT, MPI_SUM, c, &reqs[0]); break;
                case K_BCAST: MPI_Ibcast(out, n, MPI_FLOAT, root, c, &reqs[0]); break;
                case K_ALLGATHER: MPI_Iallgather(in, n, MPI_FLOAT, out, n, MPI_FLOAT, c, &reqs[0]); break;
                case K_RSB: MPI_Ireduce_scatter_block(in, out, n / size, MPI_FLOAT, MPI_SUM, c, &reqs[0]); break;
                default: break;
            }
            /* A calls, at most `burst` in flight (a slot is checked and issued again once
             * complete), for as long as the other call is incomplete -- the thread completes
             * it after its agreement -- then, on every rank, up to the most any rank issued */
            long k = 0, most = 0;
            int done = 0;
            for (int phase = 0; phase < 2; ++phase) {
                while (phase == 0 ? !done && k < 100000 : k < most) {
                    const int b = (int)(k % burst);
                    float *o = a_out + (size_t)b * kA;
                    if (k >= burst) {
                        int f = 0;
                        if (phase == 0) MPI_Test(&reqs[1 + b], &f, MPI_STATUS_IGNORE);
                        else f = 1, MPI_Wait(&reqs[1 + b], MPI_STATUS_IGNORE);
                        if (!f) {
                            MPI_Test(&reqs[0], &done, MPI_STATUS_IGNORE);
                            continue;
                        }
                        wrong_a += !same(o, a_ref, kA) && !same(o, a_ref_nb, kA);
                    }
                    for (int i = 0; i < kA; ++i) o[i] = -1.0f;
                    MPI_Iallreduce(a_in, o, kA, MPI_FLOAT, MPI_SUM, c, &reqs[1 + b]);
                    ++k;
                    if (phase == 0) MPI_Test(&reqs[0], &done, MPI_STATUS_IGNORE);
                    /* leave the core to the other threads now and then (two per rank) */
                    if (pause_us && k % 4 == 0) usleep((unsigned)pause_us);
                }
                if (phase == 0) PMPI_Allreduce(&k, &most, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
            }
            a_calls += k;
            const int inflight = k < burst ? (int)k : burst;
            MPI_Waitall(1 + inflight, reqs, st);
            for (int b = 0; b < inflight; ++b) {
                const float *o = a_out + (size_t)b * kA;
                wrong_a += !same(o, a_ref, kA) && !same(o, a_ref_nb, kA);
            }
            int ok;
            switch (kind) {
                case K_ALLREDUCE: case K_RSB: ok = same(out, ref, on) || same(out, ref_nb, on); break;
                case K_BCAST: ok = same(out, ref, on); break;
                case K_ALLGATHER:
                    ok = 1;
                    for (int q = 0; q < size && ok; ++q) {
                        mt_fill(tmp, (size_t)n, seed, q);
                        ok = same(out + (size_t)q * n, tmp, (size_t)n);
                    }
                    break;
                default: ok = 0;
            }
            wrong += !ok;
            if (kind != K_RSB) differ += !mt_identical(out, on * sizeof(float), MPI_COMM_WORLD);
            if ((!ok || wrong_a) && printed++ < 10) /* the first few; every rank goes on (collectives) */
                fprintf(stderr, "[rank %d] epoch %d round %d (kind %d, %d floats): result %s, A calls wrong so far %ld\n",
                        rank, ep, r, kind, n, ok ? "exact" : "WRONG", wrong_a);
        }
        MPI_Comm_free(&c);
    }
    MT_CHECK(wrong_a == 0, "%ld of the %ld 4 KiB MPI_Iallreduce results are not MPI's own", wrong_a, a_calls);
    MT_CHECK(wrong == 0, "%ld of the other calls' results are not MPI's own", wrong);
    MT_CHECK(differ == 0, "%ld results differ between ranks", differ);
    free(a_in), free(a_ref), free(a_ref_nb), free(a_out), free(in), free(out), free(ref), free(ref_nb), free(tmp);
    return mt_finish();
}

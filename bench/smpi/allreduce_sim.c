// SPDX-License-Identifier: BSD-3-Clause
/* allreduce_sim: MPI_Allreduce of floats under SimGrid SMPI, libcompmpi's configurations
 * against SMPI's own collective, timed on the simulated clock (MPI_Wtime inside SMPI).
 * Built by scripts/build-smpi.sh (smpicc, linked to libcompmpi_smpi.so); run by
 * bench/smpi/run.sh (docs/scale.md, "Simulated with SimGrid SMPI").
 *
 *   allreduce_sim [-s MiB,...] [-w warm-up] [-i timed] -c CONFIG [-c CONFIG ...]
 *
 * CONFIG is LABEL or LABEL:setting=value,setting=value,...:
 *   plain                       PMPI_Allreduce: SMPI's own allreduce (libcompmpi not involved)
 *   default                     libcompmpi with its defaults (awp over bitpack, cost model)
 *   LABEL:codec=q8,...          libcompmpi with these settings (compmpi_comm_set on a dup);
 *                               warm=N: this configuration's warm-up calls instead of -w
 *   LABEL:world                 libcompmpi on MPI_COMM_WORLD itself (COMPMPI_* variables only)
 * Every configuration runs on its own duplicate of MPI_COMM_WORLD, made anew for each size
 * and freed after it, so per-communicator state (cost model, awp, workspaces) starts fresh. Per size, 'plain' runs first and gives the reference sum.
 *
 * One line per (size, configuration), from rank 0:
 *   sim P=.. MiB=.. config=.. t_s=.. t_min_s=.. speedup=.. relerr=.. identical=yes|NO bits=..
 * t_s: mean over the timed calls of the slowest rank's time of one call, each call started
 * after a barrier; speedup: plain's t_s / t_s; relerr: ||out - exact|| / ||exact|| on rank 0;
 * identical: every rank's output has the same 64-bit hash; bits: the awp width the call key
 * has after the run (default config; "-" otherwise). Exit status 1 if some output differs
 * across ranks or is not finite. */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compmpi.h"

#define MAX_CONFIGS 32
#define MAX_SIZES 16

typedef struct {
    char label[64];
    char settings[512]; /* "k=v,k=v" or "" */
} Config;

static int g_rank, g_size;

static void die(const char *msg) {
    if (g_rank == 0) fprintf(stderr, "allreduce_sim: %s\n", msg);
    MPI_Abort(MPI_COMM_WORLD, 2);
    exit(2);
}

/* gradient-like data: a sum of four uniform bytes (nearly normal), a few large outliers,
 * different per rank and element */
static void fill(float *x, size_t n, int rank) {
    uint64_t s = 0x9E3779B97F4A7C15ull ^ ((uint64_t)rank * 0xD1B54A32D192ED03ull);
    for (size_t i = 0; i < n; ++i) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        const int v = (int)(s & 255) + (int)((s >> 8) & 255) + (int)((s >> 16) & 255) + (int)((s >> 24) & 255) - 510;
        x[i] = (float)v * 1e-4f * (((s >> 32) & 1023) == 0 ? 20.0f : 1.0f);
    }
}

static uint64_t hash(const float *x, size_t n) {
    const uint32_t *w = (const uint32_t *)x;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; ++i) h = (h ^ w[i]) * 0x100000001b3ull;
    return h;
}

static int finite_all(const float *x, size_t n) {
    for (size_t i = 0; i < n; ++i)
        if (!isfinite(x[i])) return 0;
    return 1;
}

/* compmpi_comm_set each key=value; "warm=N" is the driver's own: this configuration's
 * warm-up calls (returned; -1 if not given) */
static int apply_settings(MPI_Comm comm, const char *settings) {
    char buf[512];
    int warm = -1;
    snprintf(buf, sizeof buf, "%s", settings);
    for (char *save = NULL, *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq) die("a setting is key=value");
        *eq = 0;
        if (!strcmp(kv, "warm")) warm = atoi(eq + 1);
        else if (compmpi_comm_set(comm, kv, eq + 1) != MPI_SUCCESS) die("compmpi_comm_set failed");
    }
    return warm;
}

/* one timed call: slowest rank's simulated seconds */
static double timed_call(int plain, const float *in, float *out, int n, MPI_Comm comm) {
    MPI_Barrier(comm);
    const double t0 = MPI_Wtime();
    int rc = plain ? PMPI_Allreduce(in, out, n, MPI_FLOAT, MPI_SUM, comm)
                   : MPI_Allreduce(in, out, n, MPI_FLOAT, MPI_SUM, comm);
    double dt = MPI_Wtime() - t0, worst = 0;
    if (rc != MPI_SUCCESS) die("MPI_Allreduce failed");
    PMPI_Allreduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, comm);
    return worst;
}

int main(int argc, char **argv) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SINGLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);

    double sizes[MAX_SIZES];
    int nsizes = 0, warm = 1, iters = 2;
    Config cfg[MAX_CONFIGS];
    int ncfg = 0;
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-s") && v) {
            char buf[256];
            snprintf(buf, sizeof buf, "%s", v);
            for (char *save = NULL, *t = strtok_r(buf, ",", &save); t && nsizes < MAX_SIZES; t = strtok_r(NULL, ",", &save))
                sizes[nsizes++] = atof(t);
            ++i;
        } else if (!strcmp(a, "-w") && v) {
            warm = atoi(v), ++i;
        } else if (!strcmp(a, "-i") && v) {
            iters = atoi(v), ++i;
        } else if (!strcmp(a, "-c") && v && ncfg < MAX_CONFIGS) {
            const char *colon = strchr(v, ':');
            Config *c = &cfg[ncfg++];
            snprintf(c->label, sizeof c->label, "%.*s", (int)(colon ? colon - v : (long)strlen(v)), v);
            snprintf(c->settings, sizeof c->settings, "%s", colon ? colon + 1 : "");
            ++i;
        } else {
            die("usage: allreduce_sim [-s MiB,...] [-w warm-up] [-i timed] -c LABEL[:k=v,...] ...");
        }
    }
    if (!nsizes) sizes[nsizes++] = 1;
    if (!ncfg || iters < 1 || warm < 0) die("give at least one -c CONFIG, -i >= 1, -w >= 0");

    int bad = 0;
    for (int si = 0; si < nsizes; ++si) {
        const int n = (int)(sizes[si] * 1048576.0 / 4) / 16 * 16;
        float *in = malloc((size_t)n * 4), *out = malloc((size_t)n * 4), *ref = NULL;
        if (!in || !out) die("out of memory");
        fill(in, (size_t)n, g_rank);
        /* the exact sum, for the error: rank 0 keeps it */
        PMPI_Allreduce(in, out, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        if (g_rank == 0) {
            ref = malloc((size_t)n * 4);
            if (!ref) die("out of memory");
            memcpy(ref, out, (size_t)n * 4);
        }
        double t_plain = 0;
        for (int k = 0; k < ncfg; ++k) {
            const int plain = !strcmp(cfg[k].label, "plain");
            /* a fresh communicator per size and configuration: its state (cost model, awp,
             * workspaces) starts anew and is released after */
            MPI_Comm comm = MPI_COMM_WORLD; /* "world": COMPMPI_* settings only */
            int nwarm = warm;
            if (strcmp(cfg[k].settings, "world")) {
                MPI_Comm_dup(MPI_COMM_WORLD, &comm);
                const int w = cfg[k].settings[0] ? apply_settings(comm, cfg[k].settings) : -1;
                if (w >= 0) nwarm = w;
            }
            for (int w = 0; w < nwarm; ++w) timed_call(plain, in, out, n, comm);
            double sum = 0, best = 1e300;
            for (int it = 0; it < iters; ++it) {
                const double t = timed_call(plain, in, out, n, comm);
                sum += t;
                if (t < best) best = t;
            }
            const double t = sum / iters;
            if (plain && t_plain == 0) t_plain = t;
            unsigned long long h = hash(out, (size_t)n), hmin = 0, hmax = 0;
            int fin = finite_all(out, (size_t)n), fin_all = 0;
            PMPI_Allreduce(&h, &hmin, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
            PMPI_Allreduce(&h, &hmax, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
            PMPI_Allreduce(&fin, &fin_all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
            const int same = hmin == hmax;
            char bits[16] = "-";
            if (!strcmp(cfg[k].label, "default")) {
                int b = 0;
                long long calls = 0;
                if (compmpi_comm_query_awp(comm, "allreduce", n, -1, &b, &calls) == MPI_SUCCESS)
                    snprintf(bits, sizeof bits, "%d", b);
            }
            if (!same || !fin_all) bad = 1;
            if (g_rank == 0) {
                double num = 0, den = 0;
                for (int i = 0; i < n; ++i) {
                    const double d = (double)out[i] - ref[i];
                    num += d * d, den += (double)ref[i] * ref[i];
                }
                printf("sim P=%d MiB=%g config=%s t_s=%.6e t_min_s=%.6e speedup=%.3f relerr=%.3e identical=%s "
                       "finite=%s bits=%s\n",
                       g_size, sizes[si], cfg[k].label, t, best, t_plain > 0 ? t_plain / t : 0.0,
                       den > 0 ? sqrt(num / den) : 0.0, same ? "yes" : "NO", fin_all ? "yes" : "NO", bits);
                fflush(stdout);
            }
            if (comm != MPI_COMM_WORLD) MPI_Comm_free(&comm);
        }
        free(ref);
        free(out);
        free(in);
    }
    MPI_Finalize();
    return bad;
}

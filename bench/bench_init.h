// SPDX-License-Identifier: BSD-3-Clause
/* bench_init.h — MPI start-up for the benchmark programs at the thread level a program would
 * ask for (issue 42: libcompmpi's default nb_progress=auto gives MPI the program's level).
 * Header-only, plain C; included by coll_bench.c, overlap_bench.c and wholeprog_bench.c. */
#ifndef COMPMPI_BENCH_INIT_H
#define COMPMPI_BENCH_INIT_H
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "single" | "funneled" | "serialized" | "multiple" -> MPI_THREAD_*; -1 otherwise */
static inline int bench_level_of(const char *v)
{
    return !strcmp(v, "single") ? MPI_THREAD_SINGLE : !strcmp(v, "funneled") ? MPI_THREAD_FUNNELED
         : !strcmp(v, "serialized") ? MPI_THREAD_SERIALIZED : !strcmp(v, "multiple") ? MPI_THREAD_MULTIPLE : -1;
}

/* --thread-level single|funneled|serialized|multiple: MPI_Init_thread at that level (scanned
 * before MPI_Init); without it MPI_Init. libcompmpi's default (nb_progress=auto) compresses
 * non-blocking and persistent collectives only in a program that asked for MULTIPLE. */
static inline int bench_init(int *argc, char ***argv)
{
    int level = -2, provided = 0;
    for (int a = 1; a + 1 < *argc; a++)
        if (!strcmp((*argv)[a], "--thread-level")) {
            level = bench_level_of((*argv)[a + 1]);
            if (level < 0) { fprintf(stderr, "--thread-level: single|funneled|serialized|multiple\n"); exit(2); }
        }
    if (level < 0) return MPI_Init(argc, argv);
    return MPI_Init_thread(argc, argv, level, &provided);
}
#endif

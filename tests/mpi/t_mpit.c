// SPDX-License-Identifier: BSD-3-Clause
/* A plain MPI_T client (no libcompmpi header): lists the control variables, finds the
 * compmpi_* ones after MPI's, reads and writes them before and after MPI_Init, and checks
 * that MPI's own still read, that a refused write returns the MPI_T error and that indices
 * stay what they were (Open MPI adds cvars at MPI_Init). Run under LD_PRELOAD; with
 * --expect-none (plain run) there must be no compmpi_* cvar and MPI's must work alike.
 * Settings seen (testlist): COMPMPI_MIN_BYTES=8K in the environment; compmpi_stats=1 written
 * before MPI_Init must make MPI_Finalize print the statistics (expect_stderr). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int errors = 0;
#define CHECK(cond, ...)                                                                    \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            fprintf(stderr, "t_mpit:%d: check failed: %s: ", __LINE__, #cond);              \
            fprintf(stderr, __VA_ARGS__);                                                   \
            fprintf(stderr, "\n");                                                          \
            errors++;                                                                       \
        }                                                                                   \
    } while (0)

/* Index of the cvar named `name` by listing them all (-1: none); *first_ours: the lowest
 * compmpi_* index, *n_ours their count. */
static int list_cvars(const char *name, int *first_ours, int *n_ours) {
    int num = 0, found = -1;
    CHECK(MPI_T_cvar_get_num(&num) == MPI_SUCCESS, "MPI_T_cvar_get_num");
    *first_ours = -1;
    *n_ours = 0;
    for (int i = 0; i < num; ++i) {
        char nm[256], desc[2048];
        int nlen = sizeof nm, dlen = sizeof desc, verb, bind, scope;
        MPI_Datatype dt;
        MPI_T_enum et;
        int rc = MPI_T_cvar_get_info(i, nm, &nlen, &verb, &dt, &et, desc, &dlen, &bind, &scope);
        /* Open MPI leaves holes: indices of variables it no longer has (MPI-4 allows it) */
        CHECK(rc == MPI_SUCCESS || rc == MPI_T_ERR_INVALID_INDEX, "MPI_T_cvar_get_info(%d) = %d", i, rc);
        if (rc != MPI_SUCCESS) continue;
        if (strncmp(nm, "compmpi_", 8) == 0) {
            if (*first_ours < 0) *first_ours = i;
            ++*n_ours;
            CHECK(bind == MPI_T_BIND_NO_OBJECT && scope == MPI_T_SCOPE_ALL_EQ && verb == MPI_T_VERBOSITY_USER_BASIC,
                  "%s: bind %d scope %d verbosity %d", nm, bind, scope, verb);
            CHECK(dlen > 1 && nlen == (int)strlen(nm) + 1, "%s: name_len %d, desc_len %d", nm, nlen, dlen);
        }
        if (strcmp(nm, name) == 0) found = i;
    }
    return found;
}

static MPI_T_cvar_handle handle_of(const char *name, int *count) {
    int idx = -1;
    MPI_T_cvar_handle h = MPI_T_CVAR_HANDLE_NULL;
    CHECK(MPI_T_cvar_get_index(name, &idx) == MPI_SUCCESS, "MPI_T_cvar_get_index(%s)", name);
    CHECK(MPI_T_cvar_handle_alloc(idx, NULL, &h, count) == MPI_SUCCESS, "handle_alloc(%s)", name);
    return h;
}

static int read_int(const char *name) {
    int count = 0, v = -12345;
    MPI_T_cvar_handle h = handle_of(name, &count);
    CHECK(count == 1, "%s: count %d", name, count);
    CHECK(MPI_T_cvar_read(h, &v) == MPI_SUCCESS, "read %s", name);
    MPI_T_cvar_handle_free(&h);
    CHECK(h == MPI_T_CVAR_HANDLE_NULL, "handle_free(%s) leaves the handle set", name);
    return v;
}

static int write_int(const char *name, int v) {
    int count = 0;
    MPI_T_cvar_handle h = handle_of(name, &count);
    int rc = MPI_T_cvar_write(h, &v);
    MPI_T_cvar_handle_free(&h);
    return rc;
}

static unsigned long long read_ull(const char *name) {
    int count = 0;
    unsigned long long v = 0;
    MPI_T_cvar_handle h = handle_of(name, &count);
    CHECK(MPI_T_cvar_read(h, &v) == MPI_SUCCESS, "read %s", name);
    MPI_T_cvar_handle_free(&h);
    return v;
}

/* MPI's own: the first MPI_INT cvar bound to no object, read through a handle. */
static void check_mpi_own(int first_ours) {
    int num = 0;
    MPI_T_cvar_get_num(&num);
    for (int i = 0; i < num; ++i) {
        char nm[256];
        int nlen = sizeof nm, bind, count = 0, v, idx = -1;
        MPI_Datatype dt;
        if (MPI_T_cvar_get_info(i, nm, &nlen, NULL, &dt, NULL, NULL, NULL, &bind, NULL) != MPI_SUCCESS) continue;
        if (strncmp(nm, "compmpi_", 8) == 0 || dt != MPI_INT || bind != MPI_T_BIND_NO_OBJECT) continue;
        CHECK(MPI_T_cvar_get_index(nm, &idx) == MPI_SUCCESS && idx == i, "get_index(%s) = %d, listed at %d", nm, idx, i);
        MPI_T_cvar_handle h;
        CHECK(MPI_T_cvar_handle_alloc(i, NULL, &h, &count) == MPI_SUCCESS, "MPI's %s: handle_alloc", nm);
        CHECK(MPI_T_cvar_read(h, &v) == MPI_SUCCESS, "MPI's %s: read", nm);
        CHECK(MPI_T_cvar_handle_free(&h) == MPI_SUCCESS, "MPI's %s: handle_free", nm);
        return;
    }
    CHECK(0, "no MPI_INT cvar of MPI's own among %d", num);
}

/* Every cvar index a category names describes an MPI cvar (ours are in none). */
static void check_categories(void) {
    int ncat = 0;
    if (MPI_T_category_get_num(&ncat) != MPI_SUCCESS) return;
    for (int c = 0; c < ncat; ++c) {
        int nc = 0, np = 0, nsub = 0, nlen = 1, dlen = 1;
        char cn[1], cd[1];
        if (MPI_T_category_get_info(c, cn, &nlen, cd, &dlen, &nc, &np, &nsub) != MPI_SUCCESS || nc <= 0) continue;
        int *idx = malloc(sizeof(int) * (size_t)nc);
        CHECK(MPI_T_category_get_cvars(c, nc, idx) == MPI_SUCCESS, "category_get_cvars(%d)", c);
        for (int k = 0; k < nc; ++k) {
            char nm[256];
            int nlen = sizeof nm;
            CHECK(MPI_T_cvar_get_info(idx[k], nm, &nlen, NULL, NULL, NULL, NULL, NULL, NULL, NULL) == MPI_SUCCESS &&
                      strncmp(nm, "compmpi_", 8) != 0,
                  "category %d names cvar %d (%s)", c, idx[k], nm);
        }
        free(idx);
    }
}

int main(int argc, char **argv) {
    const int expect_none = argc > 1 && strcmp(argv[1], "--expect-none") == 0;
    const char *mb = getenv("COMPMPI_MIN_BYTES");
    const int env_8k = mb && strcmp(mb, "8K") == 0;
    int provided, first, n_ours, rank = 0;
    CHECK(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) == MPI_SUCCESS, "MPI_T_init_thread");

    /* ---- before MPI_Init */
    int stats_idx = list_cvars("compmpi_stats", &first, &n_ours);
    if (expect_none) {
        CHECK(n_ours == 0, "%d compmpi_* cvars without libcompmpi", n_ours);
    } else {
        int num = 0;
        MPI_T_cvar_get_num(&num);
        CHECK(n_ours >= 30 && first >= 0 && first + n_ours == num, "compmpi_* cvars: %d from %d of %d", n_ours, first,
              num);
        CHECK(stats_idx >= first && stats_idx < first + n_ours, "compmpi_stats at %d", stats_idx);
        int idx = -1;
        CHECK(MPI_T_cvar_get_index("compmpi_stats", &idx) == MPI_SUCCESS && idx == stats_idx, "get_index %d", idx);
        CHECK(MPI_T_cvar_get_index("compmpi_nosuch", &idx) == MPI_T_ERR_INVALID_NAME, "unknown name");
        CHECK(read_int("compmpi_stats") == 0, "stats before the write");
        CHECK(write_int("compmpi_stats", 1) == MPI_SUCCESS, "write compmpi_stats=1 before MPI_Init");
        CHECK(read_int("compmpi_stats") == 1, "stats after the write");
        CHECK(read_ull("compmpi_min_bytes") == (env_8k ? 8192u : 4096u),
              "compmpi_min_bytes from the environment: %llu", read_ull("compmpi_min_bytes"));
        /* refused as the environment refuses it: out of range, and an unknown codec */
        CHECK(write_int("compmpi_threads", 5000) == MPI_T_ERR_INVALID, "threads=5000 accepted");
        CHECK(read_int("compmpi_threads") == 0, "threads changed by a refused write");
        int count = 0;
        MPI_T_cvar_handle h = handle_of("compmpi_codec", &count);
        char *codec = calloc((size_t)count, 1), *back = calloc((size_t)count, 1);
        CHECK(count > 8 && MPI_T_cvar_read(h, codec) == MPI_SUCCESS && strcmp(codec, "bitpack") == 0, "codec %s", codec);
        CHECK(MPI_T_cvar_write(h, "nosuch") == MPI_T_ERR_INVALID, "codec=nosuch accepted");
        CHECK(MPI_T_cvar_write(h, "fp16") == MPI_SUCCESS && MPI_T_cvar_read(h, back) == MPI_SUCCESS &&
                  strcmp(back, "fp16") == 0, "codec fp16 read back as %s", back);
        CHECK(MPI_T_cvar_write(h, codec) == MPI_SUCCESS, "codec back to %s", codec);
        MPI_T_cvar_handle_free(&h);
        free(codec);
        free(back);
    }
    check_mpi_own(first);

    /* ---- after MPI_Init: GLOBAL settings are fixed, COMM defaults reach new communicators */
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (!expect_none) {
        int again = list_cvars("compmpi_stats", &first, &n_ours);
        CHECK(again == stats_idx, "compmpi_stats moved from %d to %d at MPI_Init", stats_idx, again);
        CHECK(read_int("compmpi_stats") == 1, "stats after MPI_Init");
        CHECK(write_int("compmpi_stats", 0) == MPI_T_ERR_CVAR_SET_NEVER, "stats written after MPI_Init");
        int count = 0;
        unsigned long long v = 65536;
        MPI_T_cvar_handle h = handle_of("compmpi_min_bytes", &count);
        CHECK(MPI_T_cvar_write(h, &v) == MPI_SUCCESS, "min_bytes=64K after MPI_Init");
        v = 0;
        CHECK(MPI_T_cvar_read(h, &v) == MPI_SUCCESS && v == 65536, "min_bytes read back %llu", v);
        MPI_T_cvar_handle_free(&h);
        /* a new communicator starts from the new default; the world keeps its own */
        MPI_Comm split;
        MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &split);
        MPI_Info info;
        char val[64] = "";
        int flag = 0;
        MPI_Comm_get_info(split, &info);
        MPI_Info_get(info, "compmpi_min_bytes", sizeof val - 1, val, &flag);
        CHECK(flag && strcmp(val, "65536") == 0, "new communicator: compmpi_min_bytes %s", flag ? val : "(unset)");
        MPI_Info_free(&info);
        MPI_Comm_get_info(MPI_COMM_WORLD, &info);
        flag = 0;
        MPI_Info_get(info, "compmpi_min_bytes", sizeof val - 1, val, &flag);
        CHECK(env_8k ? flag && strcmp(val, "8192") == 0 : !flag, "world: compmpi_min_bytes %s", flag ? val : "(unset)");
        MPI_Info_free(&info);
        MPI_Comm_free(&split);
        float x[1000] = {0}, y[1000];
        MPI_Allreduce(x, y, 1000, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); /* for the statistics */
    }
    check_mpi_own(first);
    check_categories();
    /* MPI_T ends before MPI does: Open MPI 4.1 crashes in MPI_T_finalize after MPI_Finalize
     * (mca_base_components_close, plain run alike) */
    MPI_T_finalize();
    MPI_Finalize();
    if (errors) return 1;
    if (rank == 0) printf(" No Errors\n");
    return 0;
}

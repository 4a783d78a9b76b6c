// SPDX-License-Identifier: BSD-3-Clause
/* Settings through MPI_Info hints and the API: precedence, dup inheritance,
 * dup_with_info replacement, clear errors for bad keys and values (communicator
 * unchanged), codec=none passes through exactly; an explicit width (hint or API) runs
 * static at that width, a width with an explicit awp is refused; a hint refused on one
 * rank is refused on all; MPI_Comm_get_info returns the compmpi_* hints in effect.
 * Other calls that take an info: MPI_Comm_create_from_group (MPI-4) applies ours as
 * MPI_Comm_dup_with_info does (a bad one is refused: error returned, no communicator);
 * MPI_Comm_split_type and MPI_Comm_idup_with_info (MPI-4) do not apply them and say so
 * (the warning lines are checked in tests/mpi/testlist). */
#include "compmpi.h"
#include "mpitest.h"

static void get(MPI_Comm c, const char *k, const char *want) {
    char v[128] = "";
    MT_CHECK(compmpi_comm_get(c, k, v, sizeof v) == MPI_SUCCESS && strcmp(v, want) == 0, "%s = '%s', expected '%s'", k, v, want);
}

/* value of key in info, "" if absent (MPI-3.1 calls: builds against Open MPI 4.1 too) */
static void info_value(MPI_Info info, const char *key, char *v, int len) {
    int flag = 0, vlen = 0;
    v[0] = 0;
    MPI_Info_get_valuelen(info, key, &vlen, &flag);
    if (flag && vlen < len) MPI_Info_get(info, key, len - 1, v, &flag);
}

/* MPI_Allreduce on comm gives MPI's own bits (x: n inputs, y and z: n results) */
static int allreduce_is_exact(MPI_Comm comm, const float *x, float *y, float *z, int n) {
    MPI_Allreduce(x, y, n, MPI_FLOAT, MPI_SUM, comm);
    PMPI_Allreduce(x, z, n, MPI_FLOAT, MPI_SUM, comm);
    return memcmp(y, z, n * sizeof(float)) == 0;
}

static int error_class(int rc) {
    int cls = -1;
    MPI_Error_class(rc, &cls);
    return cls;
}

/* |y - exact| within the bound of a static W-bit bitpack (trunc) sum: contributions and the
 * sum each lose less than 2^-(W-9) of their magnitude; 8 bits (awp's start) does not meet it */
static size_t outside_width_bound(MPI_Comm comm, int bits, int rank) {
    const int n = 200000;
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float)), *z = malloc(n * sizeof(float));
    float *ax = malloc(n * sizeof(float)), *s = malloc(n * sizeof(float));
    mt_fill(x, n, 31, rank);
    for (int i = 0; i < n; ++i) ax[i] = fabsf(x[i]);
    MPI_Allreduce(x, y, n, MPI_FLOAT, MPI_SUM, comm);
    PMPI_Allreduce(x, z, n, MPI_FLOAT, MPI_SUM, comm);
    PMPI_Allreduce(ax, s, n, MPI_FLOAT, MPI_SUM, comm);
    const double rel = ldexp(1.0, -(bits - 9));
    size_t far = 0;
    for (int i = 0; i < n; ++i) far += fabs((double)y[i] - z[i]) > (2 * rel + rel * rel + 1e-6) * s[i] + 1e-30;
    MT_CHECK(mt_identical(y, n * sizeof(float), comm), "ranks differ");
    free(x); free(y); free(z); free(ax); free(s);
    return far;
}

static void explicit_width(int rank, int size) {
    MPI_Comm d, e, f;
    MPI_Comm_dup(MPI_COMM_WORLD, &d);
    MPI_Comm_set_errhandler(d, MPI_ERRORS_RETURN);
    MT_CHECK(outside_width_bound(d, 16, rank) > 0, "the default (awp, 8 bits) met the 16-bit bound: test is blind");

    /* hint bits=16 alone: static 16 bits */
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "compmpi_bits", "16");
    MT_CHECK(MPI_Comm_set_info(d, info) == MPI_SUCCESS, "set_info bits=16");
    get(d, "policy", "static");
    get(d, "bits", "16");
    size_t far = outside_width_bound(d, 16, rank);
    MT_CHECK(far == 0, "hint bits=16: %zu sums outside the 16-bit bound", far);

    /* get_info: our keys in effect, effective values (the implied policy too) */
    MPI_Info used;
    char v[64];
    MT_CHECK(MPI_Comm_get_info(d, &used) == MPI_SUCCESS, "get_info");
    info_value(used, "compmpi_bits", v, sizeof v);
    MT_CHECK(strcmp(v, "16") == 0, "get_info compmpi_bits = '%s'", v);
    info_value(used, "compmpi_policy", v, sizeof v);
    MT_CHECK(strcmp(v, "static") == 0, "get_info compmpi_policy = '%s'", v);
    info_value(used, "compmpi_codec", v, sizeof v);
    MT_CHECK(strcmp(v, "") == 0, "get_info returned compmpi_codec = '%s' though nothing set it", v);
    /* round trip: the returned info reproduces the settings */
    MT_CHECK(MPI_Comm_dup_with_info(MPI_COMM_WORLD, used, &f) == MPI_SUCCESS, "dup_with_info(get_info)");
    get(f, "policy", "static");
    get(f, "bits", "16");
    MPI_Info_free(&used);
    MPI_Comm_free(&f);

    /* bits + explicit awp: refused, naming both, settings unchanged */
    MPI_Info awp;
    MPI_Info_create(&awp);
    MPI_Info_set(awp, "compmpi_policy", "awp");
    MT_CHECK(error_class(MPI_Comm_set_info(d, awp)) == MPI_ERR_INFO_VALUE, "hint policy=awp over hint bits=16 accepted");
    get(d, "policy", "static");
    get(d, "bits", "16");
    MT_CHECK(compmpi_comm_set(d, "policy", "awp") == MPI_ERR_INFO_VALUE, "api policy=awp with hint bits=16 accepted");
    get(d, "policy", "static");
    MPI_Info both;
    MPI_Info_create(&both);
    MPI_Info_set(both, "compmpi_bits", "24");
    MPI_Info_set(both, "compmpi_policy", "awp");
    MT_CHECK(MPI_Comm_dup_with_info(d, both, &f) != MPI_SUCCESS, "dup_with_info bits+awp accepted");
    MPI_Info_free(&both);

    /* API bits=16 alone: static 16; then a hint bits=0 lifts it back to awp */
    MPI_Comm_dup(MPI_COMM_WORLD, &e);
    MPI_Comm_set_errhandler(e, MPI_ERRORS_RETURN);
    MT_CHECK(compmpi_comm_set(e, "bits", "16") == MPI_SUCCESS, "api bits=16");
    get(e, "policy", "static");
    far = outside_width_bound(e, 16, rank);
    MT_CHECK(far == 0, "api bits=16: %zu sums outside the 16-bit bound", far);
    MT_CHECK(error_class(MPI_Comm_set_info(e, awp)) == MPI_ERR_INFO_VALUE, "hint policy=awp over api bits=16 accepted");
    get(e, "policy", "static");
    MPI_Info zero;
    MPI_Info_create(&zero);
    MPI_Info_set(zero, "compmpi_bits", "0");
    MT_CHECK(MPI_Comm_set_info(e, zero) == MPI_SUCCESS, "hint bits=0");
    get(e, "policy", "awp");
    MPI_Info_free(&zero);

    /* a hint refused on one rank only is refused on every rank (no rank goes on alone) */
    char before[64] = "";
    compmpi_comm_get(e, "min_bytes", before, sizeof before);
    MPI_Info one;
    MPI_Info_create(&one);
    MPI_Info_set(one, "compmpi_min_bytes", rank == size - 1 ? "lots" : "2K");
    MT_CHECK(error_class(MPI_Comm_set_info(e, one)) == MPI_ERR_INFO_VALUE, "hint refused elsewhere accepted here");
    get(e, "min_bytes", before);
    MPI_Info_free(&one);

    MPI_Info_free(&awp);
    MPI_Info_free(&info);
    MPI_Comm_free(&e);
    MPI_Comm_free(&d);
}

/* allgather_own: decoded (default) gives every rank the same bits, own block included;
 * exact gives each rank its own input back bit for bit (in place: never overwritten) and
 * the decoded blocks of the others, identical across the ranks that received them. awp
 * keeps deciding alike on every rank in both modes (it observes the agreed result). */
static void allgather_own(int rank, int size) {
    const int n = 40000; /* 160 KB per rank: above min_bytes */
    float *x = malloc(n * sizeof(float)), *all = malloc((size_t)n * size * sizeof(float));
    uint64_t *h = malloc(size * sizeof(uint64_t)), *hall = malloc((size_t)size * size * sizeof(uint64_t));
    for (int mode = 0; mode < 2; ++mode) {
        MPI_Comm g;
        MPI_Comm_dup(MPI_COMM_WORLD, &g);
        get(g, "allgather_own", "decoded");
        if (mode) MT_CHECK(compmpi_comm_set(g, "allgather_own", "exact") == MPI_SUCCESS, "allgather_own=exact");
        /* awp raising often (every norm change counts as a stall): widths change between calls */
        MT_CHECK(compmpi_comm_set(g, "awp_preset", "custom") == MPI_SUCCESS, "awp_preset");
        MT_CHECK(compmpi_comm_set(g, "awp_interval", "1") == MPI_SUCCESS, "awp_interval");
        MT_CHECK(compmpi_comm_set(g, "awp_threshold", "1e9") == MPI_SUCCESS, "awp_threshold");
        for (int it = 0; it < 6; ++it) {
            const int inplace = it % 2;
            mt_fill(x, n, 40 + it, rank);
            if (inplace) {
                memcpy(all + (size_t)n * rank, x, n * sizeof(float));
                MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, n, MPI_FLOAT, g);
            } else {
                MPI_Allgather(x, n, MPI_FLOAT, all, n, MPI_FLOAT, g);
            }
            int own_exact = memcmp(all + (size_t)n * rank, x, n * sizeof(float)) == 0;
            for (int j = 0; j < size; ++j) h[j] = mt_hash(all + (size_t)n * j, n * sizeof(float));
            MPI_Allgather(h, size, MPI_UINT64_T, hall, size, MPI_UINT64_T, g); /* integers: exact */
            int others_same = 1; /* block j is the same on every rank but j */
            for (int j = 0; j < size; ++j)
                for (int r = 0; r < size; ++r)
                    if (r != j && hall[r * size + j] != hall[(j ? 0 : 1) * size + j]) others_same = 0;
            MT_CHECK(others_same, "mode %d call %d: a block differs between ranks that received it", mode, it);
            if (mode == 0) {
                MT_CHECK(mt_identical(all, (size_t)n * size * sizeof(float), g), "decoded: ranks differ (call %d)", it);
                /* the first calls run below 32 bits: quantised */
                if (it < 2) MT_CHECK(!own_exact, "decoded: own block left exact at call %d (not quantised?)", it);
            } else {
                MT_CHECK(own_exact, "exact: own block is not the caller's input (call %d, %s)", it, inplace ? "in place" : "separate");
            }
            int bits = -1;
            compmpi_comm_query_awp(g, "allgather", n, -1, &bits, NULL);
            int lo, hi;
            MPI_Allreduce(&bits, &lo, 1, MPI_INT, MPI_MIN, g);
            MPI_Allreduce(&bits, &hi, 1, MPI_INT, MPI_MAX, g);
            MT_CHECK(lo == hi && bits >= 8, "mode %d call %d: awp bits %d..%d across ranks", mode, it, lo, hi);
            if (it == 5) MT_CHECK(bits > 8, "mode %d: awp never raised the width (%d)", mode, bits);
        }
        MPI_Comm_free(&g);
    }
    free(x); free(all); free(h); free(hall);
}

static void other_info_calls(int rank) {
    MPI_Info hint;
    MPI_Info_create(&hint);
    MPI_Info_set(hint, "compmpi_codec", "none");
    MPI_Comm s, d;
    /* split_type and idup_with_info: not applied (warned); environment / parent settings */
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, hint, &s);
    get(s, "codec", "bitpack");
    MPI_Comm_free(&s);
#if MPI_VERSION >= 4
    MPI_Request rq;
    MPI_Comm_idup_with_info(MPI_COMM_WORLD, hint, &d, &rq);
    MPI_Wait(&rq, MPI_STATUS_IGNORE);
    get(d, "codec", "bitpack");
    MPI_Comm_free(&d);
    /* create_from_group: applied, agreed on the new communicator */
    MPI_Group g;
    MPI_Comm_group(MPI_COMM_WORLD, &g);
    MT_CHECK(MPI_Comm_create_from_group(g, "compmpi.t_hints.1", hint, MPI_ERRORS_RETURN, &d) == MPI_SUCCESS,
             "create_from_group");
    get(d, "codec", "none");
    const int n = 100000;
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float)), *z = malloc(n * sizeof(float));
    mt_fill(x, n, 13, rank);
    MT_CHECK(allreduce_is_exact(d, x, y, z, n), "create_from_group with codec=none is not exact");
    MPI_Comm_free(&d);
    free(x), free(y), free(z);
    MPI_Info bad;
    MPI_Info_create(&bad);
    MPI_Info_set(bad, "compmpi_bits", "12");
    d = MPI_COMM_WORLD;
    const int rc = MPI_Comm_create_from_group(g, "compmpi.t_hints.2", bad, MPI_ERRORS_RETURN, &d);
    MT_CHECK(error_class(rc) == MPI_ERR_INFO_VALUE, "create_from_group with bits=12: class %d", error_class(rc));
    MT_CHECK(d == MPI_COMM_NULL, "create_from_group refused but a communicator was returned");
    MPI_Info_free(&bad);
    MPI_Group_free(&g);
#else
    (void)rank;
    (void)d;
#endif
    MPI_Info_free(&hint);
}

int main(int argc, char **argv) {
    int rank, size;
    mt_init(&argc, &argv, &rank, &size);
    MPI_Comm a, b, c;
    MPI_Comm_dup(MPI_COMM_WORLD, &a);
    MPI_Comm_set_errhandler(a, MPI_ERRORS_RETURN);

    /* defaults */
    get(a, "codec", "bitpack");
    get(a, "policy", "awp");

    /* hint sets, API under the hint loses */
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "compmpi_policy", "static");
    MPI_Info_set(info, "compmpi_bits", "24");
    MPI_Info_set(info, "mpi_assert_no_any_tag", "true"); /* not ours: ignored by us */
    MT_CHECK(MPI_Comm_set_info(a, info) == MPI_SUCCESS, "set_info");
    get(a, "bits", "24");
    MT_CHECK(compmpi_comm_set(a, "bits", "16") == MPI_SUCCESS, "api set");
    get(a, "bits", "24"); /* hint wins over the attribute */
    MT_CHECK(compmpi_comm_set(a, "min_bytes", "1K") == MPI_SUCCESS, "api set");
    get(a, "min_bytes", "1024");

    /* bad value: error returned, nothing changed */
    MPI_Info bad;
    MPI_Info_create(&bad);
    MPI_Info_set(bad, "compmpi_bits", "12");
    int rc = MPI_Comm_set_info(a, bad);
    int cls = -1;
    MPI_Error_class(rc, &cls);
    MT_CHECK(cls == MPI_ERR_INFO_VALUE, "bits=12 for bitpack gave class %d", cls);
    get(a, "bits", "24");
    MPI_Info_free(&bad);
    MPI_Info_create(&bad);
    MPI_Info_set(bad, "compmpi_codek", "none");
    rc = MPI_Comm_set_info(a, bad);
    MPI_Error_class(rc, &cls);
    MT_CHECK(cls == MPI_ERR_INFO_VALUE, "unknown compmpi_ key gave class %d", cls);
    MPI_Info_free(&bad);
    MT_CHECK(compmpi_comm_set(a, "policy", "sometimes") == MPI_ERR_INFO_VALUE, "bad api value");
    MT_CHECK(compmpi_comm_set(a, "nosuch", "1") == MPI_ERR_INFO_KEY, "bad api key");
    MT_CHECK(compmpi_comm_set(a, "stats", "1") == MPI_ERR_INFO_VALUE, "process setting on a communicator");
    get(a, "policy", "static");

    /* dup inherits, dup_with_info replaces the hints */
    MPI_Comm_dup(a, &b);
    get(b, "bits", "24");
    get(b, "min_bytes", "1024");
    MPI_Info only;
    MPI_Info_create(&only);
    MPI_Info_set(only, "compmpi_codec", "none");
    MT_CHECK(MPI_Comm_dup_with_info(a, only, &c) == MPI_SUCCESS, "dup_with_info");
    get(c, "codec", "none");
    get(c, "bits", "16");         /* the parent's hint (24) is gone: the attribute layer's 16 shows */
    get(c, "min_bytes", "1024");  /* the attribute layer is copied */

    /* codec none: exact */
    const int n = 200000;
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float)), *z = malloc(n * sizeof(float));
    mt_fill(x, n, 11, rank);
    MT_CHECK(allreduce_is_exact(c, x, y, z, n), "codec=none is not exact");
    /* 24-bit static on b: close, identical */
    MPI_Allreduce(x, y, n, MPI_FLOAT, MPI_SUM, b);
    MT_CHECK(mt_identical(y, n * sizeof(float), b), "ranks differ");
    float *ax = malloc(n * sizeof(float)), *s = malloc(n * sizeof(float));
    for (int i = 0; i < n; ++i) ax[i] = fabsf(x[i]);
    PMPI_Allreduce(ax, s, n, MPI_FLOAT, MPI_SUM, b);
    size_t far = 0; /* 24-bit truncation twice: 2 * 2^-15 of the magnitudes, plus fp32 sums */
    for (int i = 0; i < n; ++i) far += fabsf(y[i] - z[i]) > 7e-5f * s[i] + 1e-30f;
    free(ax);
    free(s);
    MT_CHECK(far == 0, "24-bit result far from exact at %zu places", far);

    explicit_width(rank, size);
    allgather_own(rank, size);
    other_info_calls(rank);

    MPI_Info_free(&info);
    MPI_Info_free(&only);
    free(x); free(y); free(z);
    MPI_Comm_free(&c);
    MPI_Comm_free(&b);
    MPI_Comm_free(&a);
    return mt_finish();
}

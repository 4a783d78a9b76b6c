/* Settings through MPI_Info hints and the API: precedence, dup inheritance,
 * dup_with_info replacement, clear errors for bad keys and values (communicator
 * unchanged), codec=none passes through exactly. */
#include "compmpi.h"
#include "mpitest.h"

static void get(MPI_Comm c, const char *k, const char *want) {
    char v[128] = "";
    MT_CHECK(compmpi_comm_get(c, k, v, sizeof v) == MPI_SUCCESS && strcmp(v, want) == 0, "%s = '%s', expected '%s'", k, v, want);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
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
    MPI_Allreduce(x, y, n, MPI_FLOAT, MPI_SUM, c);
    PMPI_Allreduce(x, z, n, MPI_FLOAT, MPI_SUM, c);
    MT_CHECK(memcmp(y, z, n * sizeof(float)) == 0, "codec=none is not exact");
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

    MPI_Info_free(&info);
    MPI_Info_free(&only);
    free(x); free(y); free(z);
    MPI_Comm_free(&c);
    MPI_Comm_free(&b);
    MPI_Comm_free(&a);
    return mt_finish();
}

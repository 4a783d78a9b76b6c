# ---- unit tests (CMocka), one program per module; codecs add theirs in kernels/*/local.mk
UNIT_CXXFLAGS = $(AM_CXXFLAGS) $(CMOCKA_CFLAGS)
UNIT_LDADD = libcompmpi_core.la $(CMOCKA_LIBS)

check_PROGRAMS += tests/unit/test_codec tests/unit/test_settings tests/unit/test_policy tests/unit/test_costmodel
TESTS_UNIT += tests/unit/test_codec tests/unit/test_settings tests/unit/test_policy tests/unit/test_costmodel
tests_unit_test_codec_SOURCES = tests/unit/test_codec.cc tests/unit/testutil.h
tests_unit_test_codec_CXXFLAGS = $(UNIT_CXXFLAGS)
tests_unit_test_codec_LDADD = $(UNIT_LDADD)
tests_unit_test_settings_SOURCES = tests/unit/test_settings.cc tests/unit/testutil.h
tests_unit_test_settings_CXXFLAGS = $(UNIT_CXXFLAGS)
tests_unit_test_settings_LDADD = $(UNIT_LDADD)
tests_unit_test_costmodel_SOURCES = tests/unit/test_costmodel.cc tests/unit/testutil.h
tests_unit_test_costmodel_CXXFLAGS = $(UNIT_CXXFLAGS)
tests_unit_test_costmodel_LDADD = $(UNIT_LDADD)
tests_unit_test_policy_SOURCES = tests/unit/test_policy.cc tests/unit/testutil.h
tests_unit_test_policy_CXXFLAGS = $(UNIT_CXXFLAGS)
tests_unit_test_policy_LDADD = $(UNIT_LDADD)

# ---- fuzz: every decoder that reads bytes from the network (bounded, deterministic)
check_PROGRAMS += tests/fuzz/fuzz_blob
TESTS_UNIT += tests/fuzz/fuzz_blob
tests_fuzz_fuzz_blob_SOURCES = tests/fuzz/fuzz_blob.cc
tests_fuzz_fuzz_blob_LDADD = libcompmpi_core.la

# ---- MPI tests: small programs run by tests/mpi/run_tests.sh from tests/mpi/testlist.
# t_plain* know nothing of libcompmpi (run under LD_PRELOAD); t_* link -lcompmpi.
MPITEST_PROGS += tests/mpi/t_plain_passthrough tests/mpi/t_plain_compressed tests/mpi/t_plain_nonfinite \
	tests/mpi/t_compressed tests/mpi/t_awp tests/mpi/t_hints tests/mpi/t_threads tests/mpi/t_ef tests/mpi/t_sparse tests/mpi/t_codecs
MPITEST_PROGS += tests/mpi/t_plain_awp_buffers tests/mpi/t_costmodel
check_PROGRAMS += $(MPITEST_PROGS)
tests_mpi_t_plain_passthrough_SOURCES = tests/mpi/t_plain_passthrough.c tests/mpi/mpitest.h
tests_mpi_t_plain_compressed_SOURCES = tests/mpi/t_plain_compressed.c tests/mpi/mpitest.h
tests_mpi_t_plain_nonfinite_SOURCES = tests/mpi/t_plain_nonfinite.c tests/mpi/mpitest.h
tests_mpi_t_plain_passthrough_LDADD = -lm
tests_mpi_t_plain_compressed_LDADD = -lm
tests_mpi_t_plain_nonfinite_LDADD = -lm
tests_mpi_t_plain_awp_buffers_SOURCES = tests/mpi/t_plain_awp_buffers.c tests/mpi/mpitest.h
tests_mpi_t_plain_awp_buffers_LDADD = -lm
tests_mpi_t_compressed_SOURCES = tests/mpi/t_compressed.c tests/mpi/mpitest.h
tests_mpi_t_compressed_LDADD = libcompmpi.la -lm
tests_mpi_t_awp_SOURCES = tests/mpi/t_awp.c tests/mpi/mpitest.h
tests_mpi_t_awp_LDADD = libcompmpi.la -lm
tests_mpi_t_hints_SOURCES = tests/mpi/t_hints.c tests/mpi/mpitest.h
tests_mpi_t_hints_LDADD = libcompmpi.la -lm
tests_mpi_t_sparse_SOURCES = tests/mpi/t_sparse.c tests/mpi/mpitest.h
tests_mpi_t_sparse_LDADD = libcompmpi.la -lm
tests_mpi_t_sparse_LDFLAGS = $(MPITEST_NOINSTALL)
tests_mpi_t_codecs_SOURCES = tests/mpi/t_codecs.c tests/mpi/mpitest.h
tests_mpi_t_codecs_LDADD = libcompmpi.la -lm
tests_mpi_t_codecs_LDFLAGS = $(MPITEST_NOINSTALL)
tests_mpi_t_costmodel_SOURCES = tests/mpi/t_costmodel.c tests/mpi/mpitest.h
tests_mpi_t_costmodel_LDADD = libcompmpi.la -lm
tests_mpi_t_costmodel_LDFLAGS = $(MPITEST_NOINSTALL)
tests_mpi_t_ef_SOURCES = tests/mpi/t_ef.c tests/mpi/mpitest.h
tests_mpi_t_ef_LDADD = libcompmpi.la -lm
tests_mpi_t_threads_SOURCES = tests/mpi/t_threads.c tests/mpi/mpitest.h
tests_mpi_t_threads_LDADD = libcompmpi.la -lm

EXTRA_DIST += tests/mpi/testlist tests/mpi/run_tests.sh tests/check_docs.sh

# make check: unit tests through automake's harness, then the MPI test list, then the
# docs/settings consistency check.
TESTS = $(TESTS_UNIT) tests/mpi/run_tests.sh tests/check_docs.sh
TESTS_ENVIRONMENT = top_builddir=$(abs_top_builddir) top_srcdir=$(abs_top_srcdir) MPIEXEC='$(MPIEXEC)'; export top_builddir top_srcdir MPIEXEC;
EXTRA_DIST += tests/mpi/valgrind.supp
MPITEST_NOINSTALL = -no-install
tests_mpi_t_compressed_LDFLAGS = $(MPITEST_NOINSTALL)
tests_mpi_t_awp_LDFLAGS = $(MPITEST_NOINSTALL)
tests_mpi_t_hints_LDFLAGS = $(MPITEST_NOINSTALL)
tests_mpi_t_threads_LDFLAGS = $(MPITEST_NOINSTALL)
tests_mpi_t_ef_LDFLAGS = $(MPITEST_NOINSTALL)
# theta schedule (src/schedule.h)
MPITEST_PROGS += tests/mpi/t_theta
tests_mpi_t_theta_SOURCES = tests/mpi/t_theta.c tests/mpi/mpitest.h
tests_mpi_t_theta_LDADD = libcompmpi.la -lm
tests_mpi_t_theta_LDFLAGS = $(MPITEST_NOINSTALL)
# non-blocking collectives (src/nonblocking.h)
MPITEST_PROGS += tests/mpi/t_nonblocking
tests_mpi_t_nonblocking_SOURCES = tests/mpi/t_nonblocking.c tests/mpi/mpitest.h
tests_mpi_t_nonblocking_LDADD = libcompmpi.la -lm

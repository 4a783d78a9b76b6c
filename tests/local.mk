# SPDX-License-Identifier: BSD-3-Clause
# ---- unit tests (CMocka), one program per module; codecs add theirs in kernels/*/local.mk
UNIT_CXXFLAGS = $(AM_CXXFLAGS) $(CMOCKA_CFLAGS)
UNIT_LDADD = libcompmpi_core.la $(CMOCKA_LIBS)

check_PROGRAMS += tests/unit/test_codec tests/unit/test_settings tests/unit/test_policy tests/unit/test_costmodel \
	tests/unit/test_simd_state tests/unit/test_verdict tests/unit/test_bound tests/unit/test_small_counts tests/unit/test_entropy \
	tests/unit/test_stage_model
TESTS_UNIT += tests/unit/test_codec tests/unit/test_settings tests/unit/test_policy tests/unit/test_costmodel \
	tests/unit/test_simd_state tests/unit/test_verdict tests/unit/test_bound tests/unit/test_small_counts tests/unit/test_entropy \
	tests/unit/test_stage_model
tests_unit_test_stage_model_SOURCES = tests/unit/test_stage_model.cc tests/unit/testutil.h
tests_unit_test_stage_model_CXXFLAGS = $(UNIT_CXXFLAGS)
tests_unit_test_stage_model_LDADD = $(UNIT_LDADD)
tests_unit_test_entropy_SOURCES = tests/unit/test_entropy.cc tests/unit/testutil.h
tests_unit_test_entropy_CXXFLAGS = $(UNIT_CXXFLAGS)
tests_unit_test_entropy_LDADD = $(UNIT_LDADD)
tests_unit_test_small_counts_SOURCES = tests/unit/test_small_counts.cc tests/unit/testutil.h
tests_unit_test_small_counts_CXXFLAGS = $(UNIT_CXXFLAGS)
tests_unit_test_small_counts_LDADD = $(UNIT_LDADD)
tests_unit_test_bound_SOURCES = tests/unit/test_bound.cc tests/unit/testutil.h
tests_unit_test_bound_CXXFLAGS = $(UNIT_CXXFLAGS)
tests_unit_test_bound_LDADD = $(UNIT_LDADD)
tests_unit_test_verdict_SOURCES = tests/unit/test_verdict.cc tests/unit/testutil.h
tests_unit_test_verdict_CXXFLAGS = $(UNIT_CXXFLAGS)
tests_unit_test_verdict_LDADD = $(UNIT_LDADD)
tests_unit_test_simd_state_SOURCES = tests/unit/test_simd_state.cc tests/unit/testutil.h
tests_unit_test_simd_state_CXXFLAGS = $(UNIT_CXXFLAGS)
tests_unit_test_simd_state_LDADD = $(UNIT_LDADD)
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

# ---- coverage-guided fuzz targets (decoders through the blob layer, the header validator,
# the settings/hint parser). --enable-fuzzing: libFuzzer binaries (scripts/test-hardening.sh
# runs them); otherwise make check replays the committed corpus through them.
FUZZ_TARGETS = tests/fuzz/fuzz_decode tests/fuzz/fuzz_header tests/fuzz/fuzz_settings
tests_fuzz_fuzz_decode_SOURCES = tests/fuzz/fuzz_decode.cc tests/fuzz/fuzz_target.h
tests_fuzz_fuzz_header_SOURCES = tests/fuzz/fuzz_header.cc tests/fuzz/fuzz_target.h
tests_fuzz_fuzz_settings_SOURCES = tests/fuzz/fuzz_settings.cc tests/fuzz/fuzz_target.h
tests_fuzz_fuzz_decode_CPPFLAGS = $(AM_CPPFLAGS) -DFUZZ_NAME='"fuzz_decode"'
tests_fuzz_fuzz_header_CPPFLAGS = $(AM_CPPFLAGS) -DFUZZ_NAME='"fuzz_header"'
tests_fuzz_fuzz_settings_CPPFLAGS = $(AM_CPPFLAGS) -DFUZZ_NAME='"fuzz_settings"'
tests_fuzz_fuzz_decode_LDADD = libcompmpi_core.la
tests_fuzz_fuzz_header_LDADD = libcompmpi_core.la
tests_fuzz_fuzz_settings_LDADD = libcompmpi_core.la
if ENABLE_FUZZING
noinst_PROGRAMS += $(FUZZ_TARGETS)
tests_fuzz_fuzz_decode_LDFLAGS = -fsanitize=fuzzer
tests_fuzz_fuzz_header_LDFLAGS = -fsanitize=fuzzer
tests_fuzz_fuzz_settings_LDFLAGS = -fsanitize=fuzzer
else
check_PROGRAMS += $(FUZZ_TARGETS)
TESTS_UNIT += $(FUZZ_TARGETS)
tests_fuzz_fuzz_decode_SOURCES += tests/fuzz/standalone_main.cc
tests_fuzz_fuzz_header_SOURCES += tests/fuzz/standalone_main.cc
tests_fuzz_fuzz_settings_SOURCES += tests/fuzz/standalone_main.cc
endif
# the seed corpus generator: tests/fuzz/make_corpus $(top_srcdir)/tests/fuzz/corpus
noinst_PROGRAMS += tests/fuzz/make_corpus
tests_fuzz_make_corpus_SOURCES = tests/fuzz/make_corpus.cc tests/fuzz/fuzz_target.h
tests_fuzz_make_corpus_LDADD = libcompmpi_core.la
EXTRA_DIST += tests/fuzz/corpus tests/fuzz/campaign.sh

# ---- MPI tests: small programs run by tests/mpi/run_tests.sh from tests/mpi/testlist.
# t_plain* know nothing of libcompmpi (run under LD_PRELOAD); t_* link -lcompmpi.
# Each is one source, tests/mpi/t_NAME.c (automake's default _SOURCES), with mpitest.h; a
# program without its own _LDADD links LDADD (libcompmpi).
EXTRA_DIST += tests/mpi/mpitest.h
LDADD = $(COMPMPI_LA) -lm
MPITEST_PROGS += tests/mpi/t_plain_passthrough tests/mpi/t_plain_compressed tests/mpi/t_plain_nonfinite \
	tests/mpi/t_compressed tests/mpi/t_awp tests/mpi/t_hints tests/mpi/t_threads tests/mpi/t_ef tests/mpi/t_sparse tests/mpi/t_codecs
MPITEST_PROGS += tests/mpi/t_plain_awp_buffers tests/mpi/t_costmodel tests/mpi/t_cost_skew tests/mpi/t_plain_explore \
	tests/mpi/t_nb_race
check_PROGRAMS += $(MPITEST_PROGS)
tests_mpi_t_plain_passthrough_LDADD = -lm
tests_mpi_t_plain_compressed_LDADD = -lm
tests_mpi_t_plain_nonfinite_LDADD = -lm
tests_mpi_t_plain_awp_buffers_LDADD = -lm
tests_mpi_t_plain_explore_LDADD = -lm
MPITEST_PROGS += tests/mpi/t_plain_dtypes tests/mpi/t_plain_simd_state tests/mpi/t_plain_verdict \
	tests/mpi/t_plain_gather_segments
tests_mpi_t_plain_gather_segments_LDADD = -lm
tests_mpi_t_plain_verdict_LDADD = -lm
tests_mpi_t_plain_simd_state_LDADD = -lm
MPITEST_PROGS += tests/mpi/t_plain_lossy_types
# every count 0..64, every collective, floats and doubles: no codec logs an error (issue 42)
MPITEST_PROGS += tests/mpi/t_small_counts
tests_mpi_t_plain_lossy_types_LDADD = -lm
MPITEST_PROGS += tests/mpi/t_plain_thread_level
tests_mpi_t_plain_thread_level_LDADD = -lm
MPITEST_PROGS += tests/mpi/t_plain_entropy
tests_mpi_t_plain_entropy_LDADD = -lm
MPITEST_PROGS += tests/mpi/t_plain_cost_replay
tests_mpi_t_plain_cost_replay_LDADD = -lm
# MPI_T control variables (src/runtime/mpit.h): a plain MPI_T client (not under SimGrid SMPI,
# which has no MPI_T: its testlist lines are optional)
if HAVE_MPI_T_CVARS
MPITEST_PROGS += tests/mpi/t_mpit
endif
tests_mpi_t_mpit_LDADD =
tests_mpi_t_plain_dtypes_LDADD = -lm
tests_mpi_t_sparse_LDFLAGS = $(MPITEST_NOINSTALL)
tests_mpi_t_codecs_LDFLAGS = $(MPITEST_NOINSTALL)
tests_mpi_t_costmodel_LDFLAGS = $(MPITEST_NOINSTALL)
tests_mpi_t_cost_skew_LDFLAGS = $(MPITEST_NOINSTALL)

EXTRA_DIST += tests/mpi/testlist tests/mpi/run_tests.sh tests/mpi/launch.sh tests/check_docs.sh tests/check_layers.sh \
	tests/check_spdx.sh tests/mpi/cost_replay.sh

# make check: unit tests through automake's harness, then the MPI test list and the cost model's
# record / replay, then the docs/settings consistency check, the layers and the SPDX licence
# lines (tools/spdx.sh).
TESTS = $(TESTS_UNIT) tests/mpi/run_tests.sh tests/mpi/cost_replay.sh tests/check_docs.sh tests/check_layers.sh \
	tests/check_spdx.sh
TESTS_ENVIRONMENT = top_builddir=$(abs_top_builddir) top_srcdir=$(abs_top_srcdir) MPIEXEC='$(MPIEXEC)' \
	MPI_FAMILY=$(MPI_FAMILY) MPI_TEST_LIBNAME=$(COMPMPI_LIBNAME); export top_builddir top_srcdir MPIEXEC MPI_FAMILY MPI_TEST_LIBNAME;
EXTRA_DIST += tests/mpi/valgrind.supp tests/mpi/valgrind-openmpi.supp tests/mpi/t_mpi4py.py tests/mpi/tsan.supp tests/mpi/lsan.supp
MPITEST_NOINSTALL = -no-install
tests_mpi_t_compressed_LDFLAGS = $(MPITEST_NOINSTALL)
tests_mpi_t_awp_LDFLAGS = $(MPITEST_NOINSTALL)
tests_mpi_t_hints_LDFLAGS = $(MPITEST_NOINSTALL)
tests_mpi_t_threads_LDFLAGS = $(MPITEST_NOINSTALL)
tests_mpi_t_ef_LDFLAGS = $(MPITEST_NOINSTALL)
# t_unbiased: mean of many compressed allreduces = the clipped / exact sum (terngrad, qsgd)
MPITEST_PROGS += tests/mpi/t_unbiased
tests_mpi_t_unbiased_LDFLAGS = $(MPITEST_NOINSTALL)
# theta schedule (src/runtime/schedule.h)
MPITEST_PROGS += tests/mpi/t_theta
tests_mpi_t_theta_LDFLAGS = $(MPITEST_NOINSTALL)
# compressed recursive halving-doubling allreduce (coll/allreduce/allreduce_halving.cc)
MPITEST_PROGS += tests/mpi/t_halving
tests_mpi_t_halving_LDFLAGS = $(MPITEST_NOINSTALL)
# correctness at scale: every algorithm and codec family at 13-32 oversubscribed ranks
MPITEST_PROGS += tests/mpi/t_scale
tests_mpi_t_scale_LDFLAGS = $(MPITEST_NOINSTALL)
# allreduce_algorithm=auto with measured alpha and beta: the same choice on every rank
MPITEST_PROGS += tests/mpi/t_auto_choice
tests_mpi_t_auto_choice_LDFLAGS = $(MPITEST_NOINSTALL)
# hierarchy=auto: hierarchical or flat allreduce by measurement, the same on every rank
MPITEST_PROGS += tests/mpi/t_hier_choice
tests_mpi_t_hier_choice_LDFLAGS = $(MPITEST_NOINSTALL)
# test-only LD_PRELOAD shim: idle MPICH/UCX ranks sleep instead of spinning (testlist option
# idle_sleep; oversubscribed runs such as t_scale at 32 ranks on 2 cores)
check_LTLIBRARIES = tests/mpi/idle_sleep.la
tests_mpi_idle_sleep_la_SOURCES = tests/mpi/idle_sleep.c
tests_mpi_idle_sleep_la_CFLAGS = $(AM_CFLAGS) -O2
tests_mpi_idle_sleep_la_LDFLAGS = -module -avoid-version -shared -rpath $(abs_builddir)/tests/mpi
tests_mpi_idle_sleep_la_LIBADD = -ldl
# libcompmpi beside a PMPI profiler (README, "Beside a PMPI profiler"): a test-only profiler,
# preloaded before or after libcompmpi (testlist options preload_before:/preload_after:), and
# the plain program that reads its counters. The _noinit variant leaves MPI_Init/MPI_Finalize
# alone, so that a profiler before libcompmpi lets libcompmpi's MPI_Init run. Not under
# SimGrid SMPI (no preloading there).
if !MPI_SMPI
MPITEST_PROGS += tests/mpi/t_plain_profiler
tests_mpi_t_plain_profiler_LDADD = -lm
check_LTLIBRARIES += tests/mpi/prof/libtestprof.la tests/mpi/prof/libtestprof_noinit.la
tests_mpi_prof_libtestprof_la_SOURCES = tests/mpi/prof/libtestprof.c
tests_mpi_prof_libtestprof_la_LDFLAGS = -module -avoid-version -shared -rpath $(abs_builddir)/tests/mpi/prof
tests_mpi_prof_libtestprof_noinit_la_SOURCES = tests/mpi/prof/libtestprof.c
tests_mpi_prof_libtestprof_noinit_la_CPPFLAGS = $(AM_CPPFLAGS) -DTESTPROF_NO_INIT
tests_mpi_prof_libtestprof_noinit_la_LDFLAGS = $(tests_mpi_prof_libtestprof_la_LDFLAGS)
endif

# ---- Fortran MPI test (only where configure found the MPI family's Fortran wrapper); built
# by the wrapper directly so that configure needs no Fortran compiler otherwise
EXTRA_DIST += tests/mpi/f_allreduce.f90
if HAVE_MPIFC
check_SCRIPTS = tests/mpi/f_allreduce
CLEANFILES += tests/mpi/f_allreduce
tests/mpi/f_allreduce: $(srcdir)/tests/mpi/f_allreduce.f90
	@$(MKDIR_P) tests/mpi
	$(AM_V_GEN)$(MPIFC) $(MPIFC_FLAGS) -O2 -o $@ $(srcdir)/tests/mpi/f_allreduce.f90
endif
# non-blocking collectives (src/runtime/progress.h)
MPITEST_PROGS += tests/mpi/t_nonblocking
# inline progress (nb_progress=inline): no thread, progress inside the application's MPI calls
MPITEST_PROGS += tests/mpi/t_inline_progress
# reduce-scatter (coll/reduce_scatter/): preloaded plain program
MPITEST_PROGS += tests/mpi/t_plain_reduce_scatter
tests_mpi_t_plain_reduce_scatter_LDADD = -lm
# soak (bounded memory over many calls and communicators) and test-only fault injection
MPITEST_PROGS += tests/mpi/t_soak tests/mpi/t_fault
tests_mpi_t_soak_LDFLAGS = $(MPITEST_NOINSTALL)
tests_mpi_t_fault_LDFLAGS = $(MPITEST_NOINSTALL)
# NaN/Inf storms and hint changes between calls (exact fallback or the hints' own bits)
MPITEST_PROGS += tests/mpi/t_storm
tests_mpi_t_storm_LDFLAGS = $(MPITEST_NOINSTALL)
# state caps (src/runtime/state.h)
check_PROGRAMS += tests/unit/test_state
TESTS_UNIT += tests/unit/test_state
tests_unit_test_state_SOURCES = tests/unit/test_state.cc tests/unit/testutil.h
tests_unit_test_state_CXXFLAGS = $(UNIT_CXXFLAGS)
tests_unit_test_state_LDADD = $(UNIT_LDADD)
# fft_topk: spectral sum in the sparse allgather allreduce (fft_sum_domain)
MPITEST_PROGS += tests/mpi/t_fft_sum
tests_mpi_t_fft_sum_LDFLAGS = $(MPITEST_NOINSTALL)
# error_bound: the bound holds for every element of every result (docs/error_bound.md)
MPITEST_PROGS += tests/mpi/t_error_bound
tests_mpi_t_error_bound_LDFLAGS = $(MPITEST_NOINSTALL)
# doubles through every entry point (issue 30)
MPITEST_PROGS += tests/mpi/t_fp64
tests_mpi_t_fp64_LDFLAGS = $(MPITEST_NOINSTALL)

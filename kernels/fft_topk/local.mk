# SPDX-License-Identifier: BSD-3-Clause
libcompmpi_core_la_SOURCES += kernels/fft_topk/fft_topk.h kernels/fft_topk/cpu/fft_topk.cc kernels/fft_topk/cpu/fft_topk64.cc
check_PROGRAMS += tests/unit/test_fft_topk
TESTS_UNIT += tests/unit/test_fft_topk
tests_unit_test_fft_topk_SOURCES = tests/unit/test_fft_topk.cc tests/unit/testutil.h
tests_unit_test_fft_topk_CXXFLAGS = $(AM_CXXFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_fft_topk_LDADD = libcompmpi_core.la $(CMOCKA_LIBS)
# Throughput/fidelity of topk, fft_topk, rangefloat against memcpy and FFTW alone (run by hand)
noinst_PROGRAMS += kernels/fft_topk/sparse_bench
kernels_fft_topk_sparse_bench_SOURCES = kernels/fft_topk/sparse_bench.cc
kernels_fft_topk_sparse_bench_LDADD = libcompmpi_core.la

# SPDX-License-Identifier: BSD-3-Clause
libcompmpi_core_la_SOURCES += kernels/lossless/lossless.h kernels/lossless/cpu/lossless.cc
check_PROGRAMS += tests/unit/test_lossless
TESTS_UNIT += tests/unit/test_lossless
tests_unit_test_lossless_SOURCES = tests/unit/test_lossless.cc tests/unit/testutil.h
tests_unit_test_lossless_CXXFLAGS = $(AM_CXXFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_lossless_LDADD = libcompmpi_core.la $(ZSTD_LIBS) $(CMOCKA_LIBS)

# SPDX-License-Identifier: BSD-3-Clause
libcompmpi_core_la_SOURCES += kernels/sz/sz.h kernels/sz/cpu/sz.cc
check_PROGRAMS += tests/unit/test_sz
TESTS_UNIT += tests/unit/test_sz
tests_unit_test_sz_SOURCES = tests/unit/test_sz.cc tests/unit/testutil.h
tests_unit_test_sz_CXXFLAGS = $(AM_CXXFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_sz_LDADD = libcompmpi_core.la $(ZSTD_LIBS) $(CMOCKA_LIBS)

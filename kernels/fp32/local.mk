# SPDX-License-Identifier: BSD-3-Clause
libcompmpi_core_la_SOURCES += kernels/fp32/cpu/fp32.cc
check_PROGRAMS += tests/unit/test_fp32
TESTS_UNIT += tests/unit/test_fp32
tests_unit_test_fp32_SOURCES = tests/unit/test_fp32.cc tests/unit/testutil.h
tests_unit_test_fp32_CXXFLAGS = $(AM_CXXFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_fp32_LDADD = libcompmpi_core.la $(CMOCKA_LIBS)

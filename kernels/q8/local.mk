# SPDX-License-Identifier: BSD-3-Clause
libcompmpi_core_la_SOURCES += kernels/q8/q8.h kernels/q8/cpu/q8.cc
check_PROGRAMS += tests/unit/test_q8
TESTS_UNIT += tests/unit/test_q8
tests_unit_test_q8_SOURCES = tests/unit/test_q8.cc tests/unit/testutil.h
tests_unit_test_q8_CXXFLAGS = $(AM_CXXFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_q8_LDADD = libcompmpi_core.la $(CMOCKA_LIBS)

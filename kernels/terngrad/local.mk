# SPDX-License-Identifier: BSD-3-Clause
libcompmpi_core_la_SOURCES += kernels/terngrad/terngrad.h kernels/terngrad/cpu/terngrad.cc
check_PROGRAMS += tests/unit/test_terngrad
TESTS_UNIT += tests/unit/test_terngrad
tests_unit_test_terngrad_SOURCES = tests/unit/test_terngrad.cc tests/unit/testutil.h
tests_unit_test_terngrad_CXXFLAGS = $(AM_CXXFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_terngrad_LDADD = libcompmpi_core.la $(CMOCKA_LIBS)

# SPDX-License-Identifier: BSD-3-Clause
libcompmpi_core_la_SOURCES += kernels/rangefloat/rangefloat.h kernels/rangefloat/cpu/rangefloat.cc
check_PROGRAMS += tests/unit/test_rangefloat
TESTS_UNIT += tests/unit/test_rangefloat
tests_unit_test_rangefloat_SOURCES = tests/unit/test_rangefloat.cc tests/unit/testutil.h
tests_unit_test_rangefloat_CXXFLAGS = $(AM_CXXFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_rangefloat_LDADD = libcompmpi_core.la $(CMOCKA_LIBS)

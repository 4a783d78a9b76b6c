# SPDX-License-Identifier: BSD-3-Clause
libcompmpi_core_la_SOURCES += kernels/qsgd/qsgd.h kernels/qsgd/cpu/qsgd.cc
check_PROGRAMS += tests/unit/test_qsgd
TESTS_UNIT += tests/unit/test_qsgd
tests_unit_test_qsgd_SOURCES = tests/unit/test_qsgd.cc tests/unit/testutil.h
tests_unit_test_qsgd_CXXFLAGS = $(AM_CXXFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_qsgd_LDADD = libcompmpi_core.la $(CMOCKA_LIBS)

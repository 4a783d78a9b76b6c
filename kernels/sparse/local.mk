# SPDX-License-Identifier: BSD-3-Clause
libcompmpi_core_la_SOURCES += kernels/sparse/cpu/sparse.cc
check_PROGRAMS += tests/unit/test_sparse
TESTS_UNIT += tests/unit/test_sparse
tests_unit_test_sparse_SOURCES = tests/unit/test_sparse.cc tests/unit/testutil.h
tests_unit_test_sparse_CXXFLAGS = $(AM_CXXFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_sparse_LDADD = libcompmpi_core.la $(CMOCKA_LIBS)

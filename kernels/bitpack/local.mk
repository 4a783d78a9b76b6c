# SPDX-License-Identifier: BSD-3-Clause
libcompmpi_core_la_SOURCES += kernels/bitpack/bitpack.h kernels/bitpack/cpu/bitpack.cc
check_PROGRAMS += tests/unit/test_bitpack
TESTS_UNIT += tests/unit/test_bitpack
tests_unit_test_bitpack_SOURCES = tests/unit/test_bitpack.cc tests/unit/testutil.h
tests_unit_test_bitpack_CXXFLAGS = $(AM_CXXFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_bitpack_LDADD = libcompmpi_core.la $(CMOCKA_LIBS)

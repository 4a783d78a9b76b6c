# SPDX-License-Identifier: BSD-3-Clause
libcompmpi_core_la_SOURCES += kernels/fp16/fp16.h kernels/fp16/cpu/fp16.cc
check_PROGRAMS += tests/unit/test_fp16
TESTS_UNIT += tests/unit/test_fp16
tests_unit_test_fp16_SOURCES = tests/unit/test_fp16.cc tests/unit/testutil.h
tests_unit_test_fp16_CXXFLAGS = $(AM_CXXFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_fp16_LDADD = libcompmpi_core.la $(CMOCKA_LIBS)

# SPDX-License-Identifier: BSD-3-Clause
libcompmpi_core_la_SOURCES += kernels/topk/topk.h kernels/topk/select.h kernels/topk/cpu/topk.cc
check_PROGRAMS += tests/unit/test_topk
TESTS_UNIT += tests/unit/test_topk
tests_unit_test_topk_SOURCES = tests/unit/test_topk.cc tests/unit/testutil.h
tests_unit_test_topk_CXXFLAGS = $(AM_CXXFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_topk_LDADD = libcompmpi_core.la $(CMOCKA_LIBS)

# SPDX-License-Identifier: BSD-3-Clause
libcompmpi_core_la_SOURCES += kernels/zfp/zfp.h kernels/zfp/cpu/zfp.cc
check_PROGRAMS += tests/unit/test_zfp
TESTS_UNIT += tests/unit/test_zfp
tests_unit_test_zfp_SOURCES = tests/unit/test_zfp.cc tests/unit/testutil.h
tests_unit_test_zfp_CXXFLAGS = $(AM_CXXFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_zfp_LDADD = libcompmpi_core.la $(ZFP_LIBS) $(CMOCKA_LIBS)

# SPDX-License-Identifier: BSD-3-Clause
# Benchmarks (built by make, run by hand or by bench/run_*.sh; never part of make check)
noinst_PROGRAMS += bench/codec_bench bench/coll_bench
bench_codec_bench_SOURCES = bench/codec_bench.cc
bench_codec_bench_LDADD = libcompmpi_core.la
noinst_PROGRAMS += bench/zfp_bench
bench_zfp_bench_SOURCES = bench/zfp_bench.cc
bench_zfp_bench_LDADD = libcompmpi_core.la $(ZFP_LIBS)
if HAVE_FPZIP
noinst_PROGRAMS += bench/lossless_bench
bench_lossless_bench_SOURCES = bench/lossless_bench.cc bench/best_of.h bench/smooth_field.h
bench_lossless_bench_LDADD = libcompmpi_core.la -lfpzip
endif
if HAVE_LZ4_BLOSC
noinst_PROGRAMS += bench/entropy_bench
bench_entropy_bench_SOURCES = bench/entropy_bench.cc bench/best_of.h
bench_entropy_bench_LDADD = libcompmpi_core.la $(ZSTD_LIBS) -llz4 -lblosc
endif
bench_coll_bench_SOURCES = bench/coll_bench.c bench/bench_init.h
bench_coll_bench_LDADD = -lm
noinst_PROGRAMS += bench/overlap_bench
bench_overlap_bench_SOURCES = bench/overlap_bench.c bench/bench_init.h
bench_overlap_bench_LDADD = -lm
noinst_PROGRAMS += bench/after_effect
bench_after_effect_SOURCES = bench/after_effect.c
bench_after_effect_LDADD =
noinst_PROGRAMS += bench/fp64_bench
bench_fp64_bench_SOURCES = bench/fp64_bench.c
bench_fp64_bench_LDADD = -lm
noinst_PROGRAMS += bench/zfp_raw
bench_zfp_raw_SOURCES = bench/zfp_raw.c
bench_zfp_raw_LDADD = $(ZFP_LIBS) -lm
noinst_PROGRAMS += bench/wholeprog_bench
bench_wholeprog_bench_SOURCES = bench/wholeprog_bench.c bench/bench_init.h
bench_wholeprog_bench_LDADD =
noinst_PROGRAMS += bench/validate_exact
bench_validate_exact_SOURCES = bench/validate_exact.c
bench_validate_exact_LDADD = -lm
noinst_PROGRAMS += bench/sz_bench
bench_sz_bench_SOURCES = bench/sz_bench.cc bench/best_of.h bench/smooth_field.h
bench_sz_bench_LDADD = libcompmpi_core.la

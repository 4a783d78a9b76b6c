# SPDX-License-Identifier: BSD-3-Clause
# GPU support (docs/gpu.md).
#
# Always: the core's loader (src/runtime/cuda_loader.*; no CUDA header, no CUDA library: libcuda.so.1
# and the module are dlopen()ed) and tests/unit/test_cuda, whose CPU part always runs.
# With CUDA (configure: --with-cuda[=PATH] | auto | --without-cuda): the module
# libcompmpi_cuda.so, compiled by nvcc with plain make rules (automake knows no .cu), linked
# with the static CUDA runtime, installed beside libcompmpi.so; and bench/cuda_bench.

libcompmpi_core_la_SOURCES += src/runtime/cuda_loader.h src/runtime/cuda_loader.cc coll/cuda/module_abi.h
# dlopen/dladdr: configure's AC_SEARCH_LIBS([dlopen], [dl]) puts -ldl into LIBS where needed.

CUDA_MODULE_SRCS = coll/cuda/backend_cuda.cu coll/cuda/reduce.cu \
	kernels/none/cuda/none.cu kernels/bitpack/cuda/bitpack.cu kernels/fp16/cuda/fp16.cu kernels/q8/cuda/q8.cu \
	kernels/terngrad/cuda/terngrad.cu kernels/qsgd/cuda/qsgd.cu kernels/sparse/cuda/sparse.cu \
	kernels/rangefloat/cuda/rangefloat.cu kernels/topk/cuda/topk.cu
CUDA_MODULE_HDRS = coll/cuda/module_abi.h kernels/common/cuda_util.cuh kernels/common/gpu_codec.cuh kernels/common/stoch.cuh
EXTRA_DIST += $(CUDA_MODULE_SRCS) $(CUDA_MODULE_HDRS) coll/cuda/module.map bench/cuda_bench.cu \
	tests/unit/test_cuda_fakedrv.cc tests/gpu/t_gpu_coll.c tests/gpu/run_device.sh tests/gpu/pack.sh

# ---- unit test: CPU part always, GPU part when the module is built and a GPU is present
check_PROGRAMS += tests/unit/test_cuda
TESTS_UNIT += tests/unit/test_cuda
tests_unit_test_cuda_SOURCES = tests/unit/test_cuda.cc tests/unit/testutil.h
tests_unit_test_cuda_CPPFLAGS = $(AM_CPPFLAGS) \
	-DCOMPMPI_TEST_FAKEDRV='"$(abs_top_builddir)/tests/unit/libcompmpi_fakecuda.so"'
tests_unit_test_cuda_CXXFLAGS = $(AM_CXXFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_cuda_LDADD = libcompmpi_core.la $(CMOCKA_LIBS)
tests_unit_test_cuda_DEPENDENCIES = libcompmpi_core.la tests/unit/libcompmpi_fakecuda.so

# A fake CUDA driver (and a module with a wrong ABI) for the loader tests: a plain shared
# object built from one source, never installed.
tests/unit/libcompmpi_fakecuda.so: $(srcdir)/tests/unit/test_cuda_fakedrv.cc
	@$(MKDIR_P) tests/unit
	$(AM_V_GEN)$(CXX) -std=c++20 -O1 -shared -fPIC -o $@ $(srcdir)/tests/unit/test_cuda_fakedrv.cc

CLEANFILES = tests/unit/libcompmpi_fakecuda.so

if HAVE_CUDA
tests_unit_test_cuda_CPPFLAGS += -DCOMPMPI_TEST_CUDA_MODULE='"$(abs_top_builddir)/libcompmpi_cuda.so"'
tests_unit_test_cuda_DEPENDENCIES += libcompmpi_cuda.so

# nvcc flags; override NVCC_GENCODE on the make command line to build fewer archs while
# iterating: make NVCC_GENCODE='-gencode arch=compute_90,code=sm_90'
NVCC_FLAGS = -std=c++20 -O3 $(NVCC_GENCODE) -fmad=false --expt-relaxed-constexpr \
	-Xcompiler -fPIC,-fvisibility=hidden,-ffp-contract=off \
	-DCOMPMPI_CUDA_ARCHS='"$(CUDA_ARCHS)"' \
	-I$(srcdir)/kernels -I$(srcdir)/coll -I$(srcdir)/src -I$(srcdir)/include
CUDA_MODULE_OBJS = $(CUDA_MODULE_SRCS:.cu=.cu.o)
CUDA_DEP_HDRS = $(CUDA_MODULE_HDRS:%=$(srcdir)/%) $(srcdir)/kernels/codec.h $(srcdir)/src/base/codecs.def $(srcdir)/src/base/codec_ids.h \
	$(srcdir)/kernels/simd.h $(srcdir)/src/base/status.h $(srcdir)/coll/backend.h $(srcdir)/kernels/bitpack/bitpack.h \
	$(srcdir)/kernels/fp16/fp16.h $(srcdir)/kernels/q8/q8.h \
	$(srcdir)/kernels/terngrad/terngrad.h $(srcdir)/kernels/qsgd/qsgd.h $(srcdir)/kernels/rangefloat/rangefloat.h \
	$(srcdir)/kernels/topk/topk.h $(srcdir)/kernels/topk/select.h

$(CUDA_MODULE_OBJS): %.cu.o: $(srcdir)/%.cu $(CUDA_DEP_HDRS)
	@$(MKDIR_P) $(@D)
	$(AM_V_GEN)$(NVCC) $(NVCC_FLAGS) -c -o $@ $<

# The module exports compmpi_cuda_module_v1 only (module.map) and must not leave any symbol
# for the core to provide (--no-undefined): core symbols are hidden in libcompmpi.so.
# .libs/ gets a link so the build tree's .libs/libcompmpi.so finds it as a sibling.
libcompmpi_cuda.so: $(CUDA_MODULE_OBJS) $(srcdir)/coll/cuda/module.map
	$(AM_V_GEN)$(NVCC) -shared $(NVCC_GENCODE) -o $@ $(CUDA_MODULE_OBJS) -cudart static \
		-Xlinker --no-undefined,--version-script=$(srcdir)/coll/cuda/module.map,-soname,libcompmpi_cuda.so
	@$(MKDIR_P) .libs && rm -f .libs/libcompmpi_cuda.so && $(LN_S) ../libcompmpi_cuda.so .libs/libcompmpi_cuda.so

# Kernel throughput against device-to-device cudaMemcpy (links the kernel objects directly;
# q8 is left out: its tables come from the CPU codec, which lives in the core).
CUDA_BENCH_OBJS = coll/cuda/reduce.cu.o kernels/none/cuda/none.cu.o kernels/bitpack/cuda/bitpack.cu.o \
	kernels/fp16/cuda/fp16.cu.o kernels/terngrad/cuda/terngrad.cu.o kernels/qsgd/cuda/qsgd.cu.o \
	kernels/topk/cuda/topk.cu.o
bench/cuda_bench: $(srcdir)/bench/cuda_bench.cu $(CUDA_BENCH_OBJS) $(CUDA_DEP_HDRS)
	@$(MKDIR_P) bench
	$(AM_V_GEN)$(NVCC) $(NVCC_FLAGS) -o $@ $(srcdir)/bench/cuda_bench.cu $(CUDA_BENCH_OBJS) -cudart static

# MPI collectives on device buffers (host/device/managed/mixed runs compared by
# tests/gpu/run_device.sh on a machine with a GPU; here it is only built). Plain C with the
# MPI compiler wrapper, the static CUDA runtime; it runs under LD_PRELOAD of libcompmpi.
tests/gpu/t_gpu_coll: $(srcdir)/tests/gpu/t_gpu_coll.c $(srcdir)/tests/mpi/mpitest.h
	@$(MKDIR_P) tests/gpu
	$(AM_V_GEN)$(CC) -std=gnu11 -O2 -I$(CUDA_HOME)/include -o $@ $(srcdir)/tests/gpu/t_gpu_coll.c \
		$(CUDA_HOME)/lib64/libcudart_static.a -ldl -lrt -lpthread -lm

all-local: libcompmpi_cuda.so bench/cuda_bench tests/gpu/t_gpu_coll

install-exec-local: libcompmpi_cuda.so
	$(MKDIR_P) '$(DESTDIR)$(libdir)'
	$(INSTALL_PROGRAM) libcompmpi_cuda.so '$(DESTDIR)$(libdir)/libcompmpi_cuda.so'

uninstall-local:
	rm -f '$(DESTDIR)$(libdir)/libcompmpi_cuda.so'

clean-local:
	rm -f libcompmpi_cuda.so .libs/libcompmpi_cuda.so $(CUDA_MODULE_OBJS) bench/cuda_bench tests/gpu/t_gpu_coll
endif

# Shared helpers of the stochastic/scaled codecs (terngrad, qsgd): header-only.
libcompmpi_core_la_SOURCES += kernels/common/simd_target.h kernels/common/philox.h \
	kernels/common/bucket_stats.h kernels/common/fields.h

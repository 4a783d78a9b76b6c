# SPDX-License-Identifier: BSD-3-Clause
# Shared helpers of the codecs (terngrad, qsgd; q8, fp16): header-only.
libcompmpi_core_la_SOURCES += kernels/common/simd_target.h kernels/common/philox.h \
	kernels/common/bucket_stats.h kernels/common/fields.h kernels/common/maxabs.h kernels/common/blocks.h \
	kernels/common/aligned_buf.h

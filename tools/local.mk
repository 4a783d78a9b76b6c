# SPDX-License-Identifier: BSD-3-Clause
# compmpi-info: codecs, CPU paths and the settings table (markdown for docs/configuration.md)
bin_PROGRAMS += tools/compmpi-info
tools_compmpi_info_SOURCES = tools/compmpi_info.cc
tools_compmpi_info_LDADD = libcompmpi_core.la

# rf_measure: rangefloat / fft_topk (both quantiser modes) and topk on raw float32 gradients
noinst_PROGRAMS += tools/rf_measure
tools_rf_measure_SOURCES = tools/rf_measure.cc
tools_rf_measure_LDADD = libcompmpi_core.la

libcompmpi_core_la_SOURCES += kernels/none/cpu/none.cc

# compmpi-info: codecs, CPU paths and the settings table (markdown for docs/configuration.md)
bin_PROGRAMS += tools/compmpi-info
tools_compmpi_info_SOURCES = tools/compmpi_info.cc
tools_compmpi_info_LDADD = libcompmpi_core.la

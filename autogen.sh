#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Regenerate the build system (configure, Makefile.in) from configure.ac and Makefile.am.
set -e
cd "$(dirname "$0")"
mkdir -p m4 build-aux
autoreconf --force --install >/dev/null 2>&1 || autoreconf --force --install
echo "autogen.sh: now run ./configure && make"

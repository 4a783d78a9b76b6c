#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Configure and build libcompmpi out of tree in ${BUILD_DIR:-_build}. Extra arguments go to
# configure (e.g. --without-cuda).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-_build}
[ -x configure ] && [ configure -nt configure.ac ] || ./autogen.sh
mkdir -p "$BUILD_DIR"
cd "$BUILD_DIR"
if [ ! -f Makefile ] || [ ../configure -nt config.status ]; then
    ../configure --prefix="$PWD/install" "$@" >configure.out 2>&1 || { tail -30 configure.out; exit 1; }
    sed -n '/libcompmpi [0-9]/,$p' configure.out
fi
make -j"$(nproc)" >make.out 2>&1 || { grep -E "error|Error" -A5 make.out | head -60; exit 1; }
echo "build: $PWD/.libs/$(sed -n 's/^COMPMPI_LIBNAME = //p' Makefile).so"

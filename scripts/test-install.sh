#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The installed tree works like a library: `make install` into a clean prefix, then compile
# a small MPI program against it with pkg-config only (as a user would), dynamic and static,
# and run it on 2 ranks; the installed compmpi-info says which MPI the build is for.
#   scripts/test-install.sh [BUILD_DIR]      (default: ${BUILD_DIR:-_build}; configured)
# The prefix is the build's configured one (scripts/build.sh: BUILD_DIR/install); it must lie
# inside the build directory, because it is deleted first.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
build=$(cd "${1:-${BUILD_DIR:-_build}}" && pwd)
. "$src/tests/mpi/launch.sh"
mkvar() { sed -n "/^$1 = /{s///p;q}" "$build/Makefile"; }  # first match, no pipe
family=$(mkvar MPI_FAMILY)
pcname=$(mkvar COMPMPI_PCNAME)
libname=$(mkvar COMPMPI_LIBNAME)
prefix=$(mkvar prefix)
transform=$(mkvar program_transform_name)
case $prefix/ in
    "$build"/*) ;;
    *) echo "test-install: prefix $prefix is not inside $build: refusing to delete it (configure --prefix=$build/install)"; exit 2 ;;
esac
say() { echo "test-install ($family): $*"; }
fail() { echo "test-install ($family): FAIL: $*"; exit 1; }

rm -rf "$prefix"
make -C "$build" install >"$build/install.out" 2>&1 || { tail -20 "$build/install.out"; fail "make install"; }
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
pkg-config --exists "$pcname" || fail "pkg-config finds no $pcname in $PKG_CONFIG_PATH"
mpicc=$(pkg-config --variable=mpicc "$pcname")
[ "$(pkg-config --variable=mpi_family "$pcname")" = "$family" ] || fail "$pcname.pc: mpi_family is not $family"
say "pkg-config --libs $pcname: $(pkg-config --libs "$pcname")"
say "pkg-config --static --libs $pcname: $(pkg-config --static --libs "$pcname")"

# the installed tool names its MPI (compmpi-info-openmpi for the Open MPI build)
info=$prefix/bin/$(echo compmpi-info | sed "${transform//\$\$/\$}")
[ -x "$info" ] || fail "$info not installed"
[ "$("$info" --mpi)" = "$family" ] || fail "$info --mpi says '$("$info" --mpi)', not $family"
"$info" | grep "^built for MPI: " >/dev/null || fail "$info prints no 'built for MPI' line"
say "$(basename "$info"): $("$info" | sed -n 's/^built for MPI: //p')"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/compmpi-install-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mpi_launch_init "$family" "$(pkg-config --variable=mpiexec "$pcname")"
. "$src/tests/install/check_run.sh"
run2() { # exe label
    check_run "$2" "$1" || fail "$2"
    say "$2: 2 ranks, compressed allreduce exact and identical: ok"
}

# dynamic: the run-time path comes from pkg-config's Libs (no LD_LIBRARY_PATH)
# shellcheck disable=SC2046
"$mpicc" -DCOMPMPI_API -o "$tmp/hello_dyn" "$src/tests/install/allreduce_sum.c" $(pkg-config --cflags --libs "$pcname")
# (ldd into a variable: under pipefail, `ldd | grep -q` fails when grep exits at its first match
# and ldd, still writing, dies of SIGPIPE)
deps=$(ldd "$tmp/hello_dyn")
grep "$libname.so.* => $prefix/lib/" >/dev/null <<<"$deps" || { echo "$deps"; fail "dynamic: $libname.so not found in $prefix/lib at run time"; }
(unset LD_LIBRARY_PATH; run2 "$tmp/hello_dyn" "dynamic link")

# static: libcompmpi.a, everything else as pkg-config --static says
libs=$(pkg-config --static --libs "$pcname" | sed "s/-l${libname#lib}\b//")
# shellcheck disable=SC2086
"$mpicc" -DCOMPMPI_API -o "$tmp/hello_static" "$src/tests/install/allreduce_sum.c" $(pkg-config --cflags "$pcname") "$prefix/lib/$libname.a" $libs
deps=$(ldd "$tmp/hello_static")
! grep "$libname" >/dev/null <<<"$deps" || { echo "$deps"; fail "static: still linked to $libname.so"; }
run2 "$tmp/hello_static" "static link"
say "all ok"

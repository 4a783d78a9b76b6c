#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# build_mpich_ch3.sh PREFIX
#
# Builds MPICH (Debian 12's source package, 4.0.2) with the ch3:nemesis device
# and no Fortran into a private PREFIX.  Works around the ch4:ucx/UCX-TCP hang
# in MPI_Finalize with >= 3 ranks (see /work/shared/ENVIRONMENT.md).
#
# Afterwards use PREFIX/bin/mpicc and PREFIX/bin/mpiexec (the library is
# PREFIX/lib/libmpi.so, not libmpich.so).  Anything that is LD_PRELOADed into
# programs built this way (libcompmpi.so) must be built with PREFIX/bin/mpicc.
#
# Env: BUILD_DIR (default /tmp/compmpi-mpich-ch3-build), JOBS (default nproc),
#      EXTRA_CONFIGURE (appended to configure's arguments).
# Needs root for apt (deb-src lines are added in
# /etc/apt/sources.list.d/compmpi-deb-src.sources if none exist).
set -euo pipefail

die() { echo "build_mpich_ch3.sh: $*" >&2; exit 1; }

[ $# -eq 1 ] || die "usage: $0 PREFIX"
PREFIX=$1
case $PREFIX in /*) ;; *) PREFIX=$(pwd)/$PREFIX ;; esac
BUILD_DIR=${BUILD_DIR:-/tmp/compmpi-mpich-ch3-build}
JOBS=${JOBS:-$(nproc)}

if [ -x "$PREFIX/bin/mpicc" ] && [ -x "$PREFIX/bin/mpiexec" ] && \
   "$PREFIX/bin/mpichversion" 2>/dev/null | grep 'ch3:nemesis' >/dev/null; then
    echo "build_mpich_ch3.sh: $PREFIX already holds an MPICH ch3:nemesis build; nothing to do"
    "$PREFIX/bin/mpichversion" | head -3
    exit 0
fi

[ "$(id -u)" -eq 0 ] || die "must run as root (apt-get is used for sources and build dependencies)"

export DEBIAN_FRONTEND=noninteractive

# 1. deb-src lines -----------------------------------------------------------
have_src() {
    grep -rqsE '^[[:space:]]*(deb-src[[:space:]]|Types:.*deb-src)' \
        /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null
}
if ! have_src; then
    echo "build_mpich_ch3.sh: adding deb-src entries (/etc/apt/sources.list.d/compmpi-deb-src.sources)"
    uri=http://deb.debian.org/debian
    # reuse the URI of the existing 'deb' entry for Debian main if we can find it
    u=$(grep -hsE '^URIs:.*/debian/?$' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1 | awk '{print $2}') || true
    [ -n "${u:-}" ] && uri=$u
    suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
    cat > /etc/apt/sources.list.d/compmpi-deb-src.sources <<SRC
Types: deb-src
URIs: $uri
Suites: $suite $suite-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
fi
apt-get update -qq

# 2. build dependencies (just the few needed; build-dep would pull gfortran,
#    libucx-dev, libfabric-dev ... which this configuration does not use) ---------
apt-get install -y -qq --no-install-recommends build-essential dpkg-dev \
    python3 libhwloc-dev pkg-config >/dev/null

# 3. source ------------------------------------------------------------------
mkdir -p "$BUILD_DIR"
cd "$BUILD_DIR"
src=$(ls -d mpich-4*/ 2>/dev/null | head -1 || true)
if [ -z "$src" ]; then
    apt-get source -qq mpich
    src=$(ls -d mpich-4*/ | head -1)
fi
[ -n "$src" ] || die "apt-get source mpich produced no mpich-4* directory in $BUILD_DIR"
cd "$src"
echo "build_mpich_ch3.sh: source in $BUILD_DIR/$src"

# 4. configure / build / install ----------------------------------------------
# Separate build directory so a re-run with a different PREFIX is clean.
rm -rf _build_ch3 && mkdir _build_ch3 && cd _build_ch3
# shellcheck disable=SC2086
../configure --prefix="$PREFIX" \
    --with-device=ch3:nemesis \
    --disable-fortran \
    --with-hwloc=/usr \
    --enable-fast=O2 \
    ${EXTRA_CONFIGURE:-} > configure.log 2>&1 || { tail -40 configure.log; die "configure failed (log: $PWD/configure.log)"; }
make -j"$JOBS" > make.log 2>&1 || { tail -40 make.log; die "make failed (log: $PWD/make.log)"; }
make install > install.log 2>&1 || { tail -40 install.log; die "make install failed (log: $PWD/install.log)"; }

# 5. smoke test ----------------------------------------------------------------
t=$(mktemp -d)
cat > "$t/hello.c" <<'C'
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
    int r, n; float x = 1.0f, y = 0.0f;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &r); MPI_Comm_size(MPI_COMM_WORLD, &n);
    MPI_Allreduce(&x, &y, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    if (r == 0) printf("ok ranks=%d sum=%g\n", n, y);
    MPI_Finalize();
    return y == (float)n ? 0 : 1;
}
C
"$PREFIX/bin/mpicc" -O2 -o "$t/hello" "$t/hello.c"
timeout 60 "$PREFIX/bin/mpiexec" -n 2 "$t/hello"
rm -rf "$t"
"$PREFIX/bin/mpichversion" | head -3
echo "build_mpich_ch3.sh: done: $PREFIX"

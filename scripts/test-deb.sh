#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The Debian packages (debian/; README.md, "Debian packages"), end to end, on Debian 12 as
# root (it installs and purges packages):
#  1. build them with `dpkg-buildpackage -us -uc -b` from a clean copy of the tree (what is
#     committed plus uncommitted changes to tracked files; the checkout is not touched) in
#     ${DEB_DIR:-_build-deb}/src; the .debs are left in ${DEB_DIR:-_build-deb};
#  2. lintian on the .changes: all tags shown, an error or a warning fails;
#  3. purge any earlier install of them, then install them with apt-get;
#  4. for MPICH and Open MPI, from the installed paths only: compmpi-info[-openmpi] names its
#     MPI; an unmodified float MPI_Allreduce program (tests/install/allreduce_sum.c, built
#     with the MPI's own wrapper) run on 2 ranks with the installed libcompmpi preloaded: a
#     right result and compressed allreduces in COMPMPI_STATS' report; the same program
#     compiled and linked against libcompmpi-dev with pkg-config only (dynamic: the
#     library from /usr/lib, no RPATH; static: the .a) and run the same way;
#  5. purge them; every file they installed is gone, and every directory they installed is
#     gone or belongs to another package.
# Prints the time of each step and one closing line "test-deb: N passed, N failed".
#   DEB_BUILD_OPTIONS=nocheck scripts/test-deb.sh   skips the unit tests of the package build
#   scripts/test-deb.sh --no-build                  steps 2-5 on the .debs an earlier run left
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
out=$src/${DEB_DIR:-_build-deb}
pkgs=(libcompmpi0 libcompmpi-openmpi0 libcompmpi-dev compmpi-tools)
dbg=(libcompmpi0-dbgsym libcompmpi-openmpi0-dbgsym compmpi-tools-dbgsym)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
libdir=/usr/lib/$multiarch
. tests/mpi/launch.sh
. tests/install/check_run.sh

[ "$(id -u)" = 0 ] || { echo "test-deb: must run as root (it installs and purges packages)"; exit 2; }
for c in dpkg-buildpackage dh lintian fakeroot; do
    command -v $c >/dev/null || { echo "test-deb: $c not found: scripts/install-deps.sh"; exit 2; }
done
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok    $*"; }
bad() { fail=$((fail + 1)); echo "FAIL  $*"; }
t_all=$SECONDS t=$SECONDS
step() { echo "test-deb: $* ($((SECONDS - t)) s)"; t=$SECONDS; }
# one installed-package test at a time on this machine (other worktrees' CI runs, too)
exec 9>/var/lock/compmpi-test-deb.lock
apt() { apt-get -o DPkg::Lock::Timeout=600 -y -qq "$@"; }

build=1
[ "${1:-}" = --no-build ] && build=0
# ---- 1. build from a clean copy
if [ $build = 1 ]; then
    rm -rf "$out"
    mkdir -p "$out/src"
    tree=$(git stash create 2>/dev/null || true)  # a commit of the working tree, or nothing if clean
    git archive "${tree:-HEAD}" | tar -x -C "$out/src"
    if (cd "$out/src" && dpkg-buildpackage -us -uc -b) >"$out/build.log" 2>&1; then
        ok "dpkg-buildpackage: $(find "$out" -maxdepth 1 -name "*.deb" ! -name "*-dbgsym_*" | wc -l) packages (+ dbgsym), log $out/build.log"
    else
        tail -40 "$out/build.log"; bad "dpkg-buildpackage (log: $out/build.log)"
        echo "test-deb: $pass passed, $fail failed"; exit 1
    fi
    units=$(grep -E "^# (TOTAL|PASS|FAIL):" "$out/build.log" | tr -s ' \n' ' ' || true)
    echo "      unit tests in the package build: ${units:-not run (DEB_BUILD_OPTIONS=nocheck?)}"
    step "built"
fi
ls "$out"/libcompmpi_*.changes >/dev/null 2>&1 || { echo "test-deb: no packages in $out (run it without --no-build)"; exit 2; }

# ---- 2. lintian (debian/*.lintian-overrides: the tags kept, with their reasons)
if lintian -I --pedantic --display-experimental --show-overrides --fail-on error,warning "$out"/libcompmpi_*.changes >"$out/lintian.out" 2>&1; then
    ok "lintian: no error or warning ($(grep -c '^[IPX]:' "$out/lintian.out" || true) info/pedantic/experimental tags, $(grep -c '^O:' "$out/lintian.out" || true) overridden)"
else
    bad "lintian: errors or warnings"
fi
grep -v '^running with root privileges' "$out/lintian.out" | sed 's/^/      | /' || true
step "lintian"

# ---- 3. install, after purging an earlier run's (and purged again if this run stops early)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/compmpi-deb.XXXXXX")
ours=0
cleanup() {
    rm -rf "$tmp"
    [ $ours = 0 ] || dpkg --purge "${pkgs[@]}" >/dev/null 2>&1 || true
}
trap cleanup EXIT
flock -w 1800 9 || { bad "another test-deb.sh held /var/lock/compmpi-test-deb.lock for 30 min"; exit 1; }
installed() { { dpkg-query -W -f='${Package} ${Status}\n' "$@" 2>/dev/null || true; } | awk '$NF != "not-installed" {print $1}'; }
old=$(installed "${pkgs[@]}" "${dbg[@]}")
# shellcheck disable=SC2086
[ -z "$old" ] || { dpkg --purge $old >/dev/null && echo "      purged an earlier install: $(echo $old)"; }
debs=()
version=$(dpkg-parsechangelog -l debian/changelog -SVersion)
for p in "${pkgs[@]}"; do debs+=("$out/${p}_${version}_$(dpkg --print-architecture).deb"); done
if apt install --no-install-recommends "${debs[@]}" >"$out/install.log" 2>&1; then
    ok "apt-get install ${pkgs[*]}"
    ours=1
else
    cat "$out/install.log"; bad "apt-get install"
    echo "test-deb: $pass passed, $fail failed"; exit 1
fi
for p in "${pkgs[@]}"; do dpkg -L "$p" | sort >"$out/files-$p"; done
step "installed"

# ---- 4. both MPI families, from the installed paths
unset PKG_CONFIG_PATH LD_LIBRARY_PATH
for family in mpich openmpi; do
    case $family in
        mpich) name=compmpi pc=compmpi info=/usr/bin/compmpi-info mpicc=mpicc.mpich ;;
        openmpi) name=compmpi_openmpi pc=compmpi-openmpi info=/usr/bin/compmpi-info-openmpi mpicc=mpicc.openmpi ;;
    esac
    lib=lib$name.so.0 a=$libdir/lib$name.a
    mpi_launch_init "$family"
    [ "$("$info" --mpi)" = $family ] && ok "$info --mpi: $family ($("$info" | sed -n 's/^built for MPI: \(.*\) (MPI .*/\1/p'))" ||
        bad "$info --mpi says '$("$info" --mpi 2>&1)', not $family"

    # unmodified program, libcompmpi preloaded from the installed path
    $mpicc -O2 -o "$tmp/plain_$family" tests/install/allreduce_sum.c
    deps=$(ldd "$tmp/plain_$family")
    if grep -q libcompmpi <<<"$deps"; then bad "$family: the plain program links libcompmpi"
    elif check_run "$family preloaded" "$tmp/plain_$family" LD_PRELOAD="$libdir/$lib"; then
        ok "$family: unmodified float MPI_Allreduce, LD_PRELOAD=$libdir/$lib, 2 ranks: exact, compressed"
    else bad "$family: preloaded $libdir/$lib"; fi

    # linked against libcompmpi-dev through pkg-config only
    [ "$(pkg-config --variable=mpicc "$pc")" = "$mpicc" ] || bad "$pc.pc: mpicc is '$(pkg-config --variable=mpicc "$pc")', not $mpicc"
    # shellcheck disable=SC2046
    if $mpicc -DCOMPMPI_API -o "$tmp/dyn_$family" tests/install/allreduce_sum.c $(pkg-config --cflags --libs "$pc"); then
        deps=$(ldd "$tmp/dyn_$family") dyn=$(readelf -d "$tmp/dyn_$family")
        found=$(awk -v l="$lib" '$1 == l {print $3}' <<<"$deps")  # /lib/... or /usr/lib/... (merged /usr)
        if [ -z "$found" ] || [ "$(readlink -f "$found")" != "$(readlink -f "$libdir/$lib")" ]; then
            echo "$deps"; bad "$family: pkg-config link: $lib found at '$found', not the installed $libdir/$lib"
        elif grep -Eq "RPATH|RUNPATH" <<<"$dyn"; then bad "$family: pkg-config link has an RPATH: $(grep -E 'RPATH|RUNPATH' <<<"$dyn")"
        elif check_run "$family linked" "$tmp/dyn_$family"; then
            ok "$family: linked with \$(pkg-config --cflags --libs $pc) ($(pkg-config --libs "$pc")), 2 ranks: exact, compressed"
        else bad "$family: linked with pkg-config"; fi
    else bad "$family: compile and link with pkg-config $pc"; fi
    # shellcheck disable=SC2046
    if $mpicc -DCOMPMPI_API -o "$tmp/static_$family" tests/install/allreduce_sum.c $(pkg-config --cflags "$pc") "$a" \
        $(pkg-config --static --libs "$pc" | sed "s/-l$name\b//"); then
        deps=$(ldd "$tmp/static_$family")
        if grep -q libcompmpi <<<"$deps"; then bad "$family: static link still needs $lib"
        elif check_run "$family static" "$tmp/static_$family"; then ok "$family: static link with $a and pkg-config --static, 2 ranks: exact, compressed"
        else bad "$family: static link"; fi
    else bad "$family: static link with $a"; fi
done
step "tested both MPI families"

# ---- 5. purge; nothing of the packages may be left
dpkg --purge "${pkgs[@]}" >"$out/purge.log" 2>&1 || { cat "$out/purge.log"; bad "dpkg --purge"; }
ours=0
left=$(installed "${pkgs[@]}")
[ -z "$left" ] && ok "purged: no package left in any state (no config-files)" || bad "still known to dpkg after purge: $left"
leftover=()
for p in "${pkgs[@]}"; do
    while read -r f; do
        [ "$f" = /. ] && continue
        if [ -d "$f" ] && [ ! -L "$f" ]; then
            dpkg-query -S "$f" >/dev/null 2>&1 || leftover+=("$f/ (directory of no package)")
        elif [ -e "$f" ] || [ -L "$f" ]; then
            leftover+=("$f")
        fi
    done <"$out/files-$p"
done
for f in "$libdir"/libcompmpi* /usr/include/compmpi.h /usr/bin/compmpi-info* "$libdir"/pkgconfig/compmpi*; do
    [ -e "$f" ] || [ -L "$f" ] && leftover+=("$f")
done
[ ${#leftover[@]} = 0 ] && ok "purged: none of the $(cat "$out"/files-* | sort -u | wc -l) paths the packages listed is left" ||
    bad "left after purge: $(printf '%s\n' "${leftover[@]}" | sort -u | tr '\n' ' ')"
step "purged"
rm -rf "$out/src"  # the build trees; the .debs, .changes and logs stay in $out

echo "test-deb: $((SECONDS - t_all)) s in all; $pass passed, $fail failed"
[ $fail = 0 ]

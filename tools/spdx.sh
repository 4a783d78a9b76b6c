#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# tools/spdx.sh [--check | --list]: the licence line (LICENSE, README.md "Licence")
#     SPDX-License-Identifier: BSD-3-Clause
# in every source file git tracks, in the file's own comment syntax, as its first line (after
# a "#!" line, and after a Python coding line or an Emacs -*- mode -*- line, where there is one):
#   //   C, C++, CUDA, X-macro tables     .c .cc .cpp .h .hpp .cu .cuh .def
#   /**/ public C header, linker scripts  include/*.h (users may compile as C89), .map
#   #    shell, Python, make, autotools   .sh .py .mk Makefile.am .ac .m4 .pc.in, and any
#                                         file whose "#!" line runs sh, bash, python, make
#   !    Fortran                          .f90
# Left alone: data and test corpora (tests/fuzz/corpus/, docs/, *.txt, *.tsv, *.png,
# valgrind/sanitizer suppressions, tests/mpi/testlist), debian/ but for its scripts, m4/
# (what autoreconf copies there is libtool's and autoconf-archive's, under their own
# licences; debian/copyright), generated files (a "generated ... do not edit" mark in the
# first lines), and any file that carries someone's copyright notice of its own (a third
# party's: it keeps its licence). A file that already names an SPDX licence in its first 10
# lines is left as it is, so a second run changes nothing.
#   tools/spdx.sh           add the line where it is missing; prints how many files changed
#   tools/spdx.sh --check   exit 1 and list the files that lack it (tests/check_spdx.sh);
#                           exit 77 (automake's SKIP) outside a git checkout (a dist tarball)
#   tools/spdx.sh --list    every file that must carry it, "path<TAB>syntax", one a line
set -euo pipefail
cd "$(dirname "$0")/.."
id='SPDX-License-Identifier: BSD-3-Clause'
mode=add
case "${1:-}" in
    '') ;;
    --check) mode=check ;;
    --list) mode=list ;;
    -h | --help) awk 'NR > 1 && /^# SPDX-License-Identifier:/ { next } NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "spdx.sh: unknown argument '$1' (--check, --list)" >&2; exit 2 ;;
esac

top=$(git rev-parse --show-toplevel 2>/dev/null || true)
if [ -z "$top" ] || [ "$(cd "$top" && pwd -P)" != "$(pwd -P)" ]; then
    echo "spdx.sh: $(pwd) is not a git checkout's top (a dist tarball?): nothing to check"
    exit 77
fi

# style PATH: prints //, /*, #, ! or nothing (left alone)
style() {
    local f=$1 first
    case "$f" in
        tests/fuzz/corpus/* | docs/* | m4/*) return ;;
        include/*.h) echo '/*'; return ;;
    esac
    first=$(head -n 1 -- "$f" 2>/dev/null || true)
    case "$f" in
        debian/*)
            case "$first" in '#!'*sh* | '#!'*python* | '#!'*make* | '#!'*perl*) echo '#' ;; esac
            return ;;
        *.c | *.cc | *.cpp | *.h | *.hpp | *.cu | *.cuh | *.def) echo '//' ;;
        *.map) echo '/*' ;;
        *.sh | *.py | *.mk | */Makefile.am | Makefile.am | *.ac | *.m4 | *.pc.in) echo '#' ;;
        *.f90) echo '!' ;;
        *)  # no extension: a script if its "#!" line says so; other extensions: data, documents
            case "${f##*/}" in *.*) ;; *) case "$first" in '#!'*sh* | '#!'*python* | '#!'*make* | '#!'*perl*) echo '#' ;; esac ;; esac ;;
    esac
}

has_id() { head -n 10 -- "$1" | grep -q 'SPDX-License-Identifier:'; }
# a generated file, or one with a copyright notice other than ours
foreign() {
    head -n 30 -- "$1" | grep -Eiq 'generated (automatically|by)|automatically generated|do not edit' && return 0
    head -n 60 -- "$1" | grep -Ei 'copyright (\(c\)|©)? *[0-9]|copying and distribution of this file' |
        grep -viq 'libcompmpi developers'
}

# insert LINE into F after line AFTER (0: at the top), keeping F's mode
insert() {
    local f=$1 after=$2 line=$3 tmp
    tmp=$(mktemp "$f.spdx.XXXXXX")
    { head -n "$after" -- "$f"; printf '%s\n' "$line"; tail -n +"$((after + 1))" -- "$f"; } >"$tmp"
    chmod --reference="$f" "$tmp"
    mv -f -- "$tmp" "$f"
}

missing=() changed=0
while IFS= read -r -d '' f; do
    { [ -f "$f" ] && [ ! -L "$f" ]; } || continue
    s=$(style "$f")
    [ -n "$s" ] || continue
    if has_id "$f"; then
        [ $mode = list ] && printf '%s\t%s\n' "$f" "$s"
        continue
    fi
    foreign "$f" && continue
    case $mode in
        list) printf '%s\t%s\n' "$f" "$s" ;;
        check) missing+=("$f") ;;
        add)
            case "$s" in
                '/*') line="/* $id */" ;;
                *) line="$s $id" ;;
            esac
            after=0
            [ "$(head -c 2 -- "$f")" = '#!' ] && after=1
            # PEP 263's coding line and Emacs' -*- mode -*- line must stay on line 1 (or 2)
            sed -n "$((after + 1))p" -- "$f" | grep -Eq 'coding[:=]|-\*-.*-\*-' && after=$((after + 1))
            insert "$f" $after "$line"
            changed=$((changed + 1)) ;;
    esac
done < <(git ls-files -z)

case $mode in
    check)
        if [ ${#missing[@]} -gt 0 ]; then
            echo "spdx.sh: ${#missing[@]} files lack '$id' (run tools/spdx.sh to add it):"
            printf '  %s\n' "${missing[@]}"
            exit 1
        fi
        echo "spdx.sh: every source file names its licence ($id)" ;;
    add) echo "spdx.sh: added '$id' to $changed files" ;;
esac

#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The layers show in the folders, and nothing below includes anything above
# (ARCHITECTURE.md; docs/design.md, "Layers and files"):
#
#   src/boundary/   MPI entry points, public API        may include everything below
#   src/runtime/    dispatch pipeline, per-comm state   runtime, coll, kernels, base
#   coll/           compressed collective algorithms    coll, kernels, base
#   kernels/        codecs                              kernels, base
#   src/base/       status, log, stats, settings, ...   base only
#
# Every #include "..." of every source is resolved the way the compiler does (the file's own
# folder, then -I include, src, kernels, coll: Makefile.am's AM_CPPFLAGS) and the folder it
# lands in must be the file's own layer or one below. Also: no file under src/ reaches 500
# lines (issue 31: a reader takes in each in one sitting).
set -eu
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$top_srcdir"
layer_of() { # path -> rank (higher = above)
    case $1 in
        src/boundary/*) echo 5 ;; src/runtime/*) echo 4 ;; coll/*) echo 3 ;; kernels/*) echo 2 ;;
        src/base/*) echo 1 ;; include/*) echo 0 ;; *) echo -1 ;;
    esac
}
bad=0 checked=0
while IFS= read -r f; do
    from=$(layer_of "$f")
    [ "$from" -ge 1 ] || continue
    dir=$(dirname "$f")
    while IFS= read -r inc; do
        target=
        for d in "$dir" include src kernels coll; do
            if [ -f "$d/$inc" ]; then target=$d/$inc; break; fi
        done
        [ -n "$target" ] || continue # a system header or one generated at build time (config.h)
        target=$(realpath --relative-to=. "$target")
        to=$(layer_of "$target")
        checked=$((checked + 1))
        if [ "$to" -gt "$from" ]; then
            echo "layer violation: $f includes $target (from layer $(dirname "$f") upwards)"
            bad=1
        fi
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
done < <(find src coll kernels -type f \( -name '*.h' -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' -o -name '*.def' \) | sort)
while IFS= read -r f; do
    n=$(wc -l <"$f")
    if [ "$n" -ge 500 ]; then
        echo "$f has $n lines (src/ keeps every file under 500)"
        bad=1
    fi
done < <(find src -type f \( -name '*.h' -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' \))
# Every MPI call of the library goes through src/base/mpi_next.h (mpi_next::Allreduce(...)), so
# that a PMPI profiler loaded after libcompmpi sees it (README, "Beside a PMPI profiler"): a
# direct PMPI_* call anywhere else (comment lines aside) would bypass the chain.
while IFS= read -r hit; do
    echo "direct PMPI call (write mpi_next::NAME(...), src/base/mpi_next.h): $hit"
    bad=1
done < <(grep -rnE '\bPMPI_[A-Za-z0-9_]+[[:space:]]*\(' src coll kernels --include='*.h' --include='*.cc' \
             --include='*.cu' --include='*.cuh' | grep -v '^src/base/mpi_next\.' |
         grep -vE '^[^:]+:[0-9]+:[[:space:]]*(\*|/\*|//)' || true)
[ $bad = 0 ] && echo "layers hold: $checked includes checked, every file under src/ below 500 lines, no direct PMPI_* call"
exit $bad

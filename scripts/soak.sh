#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The long soak, run by hand (not in CI; docs/hardening.md, "Soak"). tests/mpi/t_soak with
# every form (blocking, non-blocking, persistent), datatypes and communicator churn:
#   1. a long run (default 100000 calls, a pool communicator replaced every 10 pool calls, so
#      more communicators are made and freed than MPICH has context ids): its ten checkpoints
#      (VmRSS, VmHWM, threads, live communicator states, tables) as a table, the program's own
#      checks (caps reached and held, RSS flat from the middle on, states and threads back to
#      their start, results) deciding the outcome;
#   2. a shorter run under valgrind memcheck (definite leaks are errors, suppressions of
#      tests/mpi/valgrind*.supp);
#   3. a shorter run under LeakSanitizer, when the clang ASan build (scripts/test-hardening.sh,
#      _build-clang) has its test programs: leak records whose allocating frame is
#      libcompmpi's own code (src/, coll/, kernels/) fail the run; records allocated inside MPI
#      under a libcompmpi call are listed, MPI's own are counted.
#
#   scripts/soak.sh [--calls N] [--churn K] [--mpi mpich|openmpi] [--valgrind-calls N]
#                   [--lsan-calls N] [--out DIR] [--parts "long valgrind lsan"]
# BUILD_DIR (default _build, or _build-openmpi with --mpi openmpi) must hold the test
# programs (make check TESTS=). Runs at nice 10 with 2 ranks. Prints "soak: ok" or
# "soak: FAILED (...)" last; exit status 0 only when every part passed.
set -uo pipefail
cd "$(dirname "$0")/.."
top=$PWD
calls=100000 churn=10 mpi=mpich vcalls=2000 lcalls=4000 out=/tmp/compmpi-soak parts="long valgrind lsan"
while [ $# -gt 0 ]; do
    case $1 in
    --calls) calls=$2; shift ;;
    --churn) churn=$2; shift ;;
    --mpi) mpi=$2; shift ;;
    --valgrind-calls) vcalls=$2; shift ;;
    --lsan-calls) lcalls=$2; shift ;;
    --out) out=$2; shift ;;
    --parts) parts=$2; shift ;;
    *) echo "soak.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
build=${BUILD_DIR:-_build}
[ "$mpi" = openmpi ] && build=${BUILD_DIR:-_build-openmpi}
build=$(cd "$build" && pwd) || exit 2
prog=$build/tests/mpi/t_soak
[ -x "$prog" ] || { echo "soak.sh: $prog not built (make -C $build check TESTS=)"; exit 2; }
mkdir -p "$out"
. tests/mpi/launch.sh
mpi_launch_init "$mpi" || exit 2
for v in $(env | sed -n 's/^\(COMPMPI_[A-Z0-9_]*\)=.*/\1/p'); do unset "$v"; done
env_common=(COMPMPI_COST_MODEL=off COMPMPI_MIN_BYTES=256)
failed=()

# run NAME ARGS...: t_soak on 2 ranks with MPI_ENV/MPI_WRAP as set; output in $out/NAME.log
run() {
    local name=$1; shift
    mpi_launch 2 -- "$@"
    local t0=$SECONDS
    nice -n 10 "${MPI_CMD[@]}" >"$out/$name.log" 2>&1 </dev/null
    local rc=$?
    echo "$name: exit $rc after $((SECONDS - t0)) s (log $out/$name.log)"
    return $rc
}

if [[ " $parts " == *" long "* ]]; then
    echo "==== long run: $calls calls, churn $churn, $mpi"
    MPI_ENV=("${env_common[@]}" COMPMPI_STATS=1) MPI_WRAP=()
    run long "$prog" calls="$calls" churn="$churn" || failed+=(long)
    grep -E '^\[rank|check failed' "$out/long.log" | head -20
    echo
    echo "| calls | VmRSS (KiB) | VmHWM (KiB) | threads | live states | communicators made | persistent requests made | awp entries (WORLD) | θ shapes (max) | residuals (max) |"
    echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    awk 'function v(k,   i, r) { i = index(line, k); r = substr(line, i + length(k)); sub(/[^0-9].*/, "", r); return r }
         /^t_soak: call / { line = $0; split($3, c, "/")
             printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", c[1], v("VmRSS="), v("VmHWM="), v("threads="),
                    v("live_states="), v("comms_made="), v("persistent_made="), v("awp="), v("sched max "), v("ef max ") }' \
        "$out/long.log"
    echo
    grep -E '^t_soak: [0-9]+ calls' "$out/long.log"
    grep -E '^compmpi-stats: coll=' "$out/long.log" | sed 's/ t_encode_s.*//'
fi

if [[ " $parts " == *" valgrind "* ]]; then
    echo "==== valgrind: $vcalls calls"
    supp=(--suppressions="$top/tests/mpi/valgrind.supp")
    if [ "$mpi" = openmpi ]; then
        supp+=(--suppressions="$top/tests/mpi/valgrind-openmpi.supp")
        [ -f /usr/share/openmpi/openmpi-valgrind.supp ] && supp+=(--suppressions=/usr/share/openmpi/openmpi-valgrind.supp)
    fi
    MPI_ENV=("${env_common[@]}")
    MPI_WRAP=(valgrind -q --error-exitcode=97 --leak-check=full --errors-for-leak-kinds=definite
              --show-leak-kinds=definite "${supp[@]}" --num-callers=30)
    run valgrind "$prog" calls="$vcalls" buffers=64 churn=10 quiet || failed+=(valgrind)
    grep -E 'definitely lost|ERROR SUMMARY|^t_soak: [0-9]+ calls|No Errors' "$out/valgrind.log" | sort | uniq -c
fi

if [[ " $parts " == *" lsan "* ]]; then
    lprog=$top/_build-clang/tests/mpi/t_soak
    if [ "$mpi" != mpich ] || [ ! -x "$lprog" ]; then
        echo "==== LeakSanitizer: skipped (needs the MPICH clang build's $lprog: HARDENING_PARTS=clang scripts/test-hardening.sh)"
    else
        echo "==== LeakSanitizer: $lcalls calls (clang ASan build)"
        # as scripts/test-hardening.sh runs MPI programs under ASan, leak checking on
        MPI_ENV=("${env_common[@]}" UCX_MEM_MALLOC_HOOKS=no UCX_MEM_EVENTS=no
                 "ASAN_OPTIONS=detect_leaks=1:exitcode=86:verify_asan_link_order=0:fast_unwind_on_malloc=0"
                 "LSAN_OPTIONS=suppressions=$top/tests/mpi/lsan.supp:print_suppressions=0"
                 "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:exitcode=87")
        MPI_WRAP=()
        # rss_slack: ASan keeps freed blocks in a quarantine (256 MiB by default), which is RSS
        run lsan "$lprog" calls="$lcalls" churn=10 rss_slack=512 quiet
        lrc=$?
        grep -q '^ No Errors' "$out/lsan.log" || failed+=(lsan-checks)
        # one record per "Direct/Indirect leak of" paragraph; its allocating frame is the first
        # after the allocator's own (#0 malloc/new/calloc/realloc, operator new)
        awk '
            /^(Direct|Indirect) leak of/ { rec = $0; inrec = 1; alloc = ""; ours = 0; next }
            inrec && /^ *#[0-9]+/ {
                frame = $0
                if (alloc == "" && frame !~ /(malloc|calloc|realloc|operator new|aligned_alloc|posix_memalign|strdup)/) alloc = frame
                if (frame ~ /\/(src|coll|kernels)\/[^ ]*\.(cc|h|cu):[0-9]/) ours = 1
                next
            }
            inrec && /^$/ {
                kind = alloc ~ /\/(src|coll|kernels)\/[^ ]*\.(cc|h|cu):[0-9]/ ? "libcompmpi" : (ours ? "mpi-under-libcompmpi" : "mpi")
                n[kind]++
                if (kind != "mpi") print kind ": " rec "\n    allocated at: " alloc
                inrec = 0
            }
            END { printf "leak records: libcompmpi %d, MPI under a libcompmpi call %d, MPI alone %d\n",
                  n["libcompmpi"], n["mpi-under-libcompmpi"], n["mpi"] }' "$out/lsan.log" | tee "$out/lsan.summary"
        grep -q '^leak records: libcompmpi 0,' "$out/lsan.summary" || failed+=(lsan-leaks)
        grep -E 'ERROR: AddressSanitizer|runtime error' "$out/lsan.log" | head -5
        grep -qE 'ERROR: AddressSanitizer|runtime error' "$out/lsan.log" && failed+=(lsan-asan)
        echo "lsan: t_soak exit $lrc (86 = LeakSanitizer found leaks, of any origin)"
    fi
fi

if [ ${#failed[@]} = 0 ]; then echo "soak: ok"; else echo "soak: FAILED (${failed[*]})"; exit 1; fi

#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Hardening checks, run by scripts/test.sh after the main suite (docs/hardening.md):
#   clang  clang 14 build of the whole tree with ASan+UBSan (and libFuzzer coverage on the
#          library): the unit tests, the MPI test list under ASan (LD_PRELOAD and linked;
#          the valgrind lines and the runs without libcompmpi left out), then every libFuzzer
#          target for FUZZ_SECONDS from the committed corpus
#   tsan   GCC build with TSan: the MPI_THREAD_MULTIPLE test (t_threads) and the direct path's
#          lock-free issue index against agreements (t_nb_race)
#   asan   (not run by default: the clang part covers it) the same ASan+UBSan checks as
#          clang's, with GCC
# Each part configures its own build directory (_build-clang, _build-tsan, _build-asan) and
# prints its cost. HARDENING_PARTS selects parts (default "clang tsan").
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD
parts=${HARDENING_PARTS:-clang tsan}
FUZZ_SECONDS=${FUZZ_SECONDS:-20}
jobs=$(nproc)
[ -x configure ] && [ configure -nt configure.ac ] || ./autogen.sh >/dev/null
# The tests set what they need; a developer's own COMPMPI_* must not leak in.
for v in $(env | sed -n 's/^\(COMPMPI_[A-Z0-9_]*\)=.*/\1/p'); do unset "$v"; done
export COMPMPI_THREADS=1 OMP_NUM_THREADS=1

fail=0
report=()
t_start=0
begin() { t_start=$(date +%s); echo "==== hardening: $1"; }
end() { # name status
    local dt=$(($(date +%s) - t_start))
    report+=("$(printf '%-7s %-4s %4ss' "$1" "$2" "$dt")")
    [ "$2" = ok ] || fail=1
}

# configure DIR ARGS...: configure into DIR once (again when configure is newer)
configure_in() {
    local dir=$1; shift
    mkdir -p "$dir"
    if [ ! -f "$dir/Makefile" ] || [ configure -nt "$dir/config.status" ] || [ "$*" != "$(cat "$dir/.hardening-args" 2>/dev/null)" ]; then
        (cd "$dir" && ../configure --without-cuda "$@" >configure.out 2>&1) || { tail -30 "$dir/configure.out"; return 1; }
        echo "$*" >"$dir/.hardening-args"
    fi
}
# The unit test programs of a configured tree (automake's TESTS_UNIT, the corpus replays
# of the fuzz targets included in non-fuzzing builds).
unit_tests() { make -s --no-print-directory -C "$1" -f Makefile -f - print-units <<<'print-units: ; @echo $(TESTS_UNIT)'; }
# build the tree and every check program, run the unit tests through automake's harness
build_and_unit() {
    local dir=$1 units
    units=$(unit_tests "$dir")
    make -C "$dir" -j"$jobs" >"$dir/make.out" 2>&1 || { grep -E "error" -A5 "$dir/make.out" | head -40; return 1; }
    if ! make -C "$dir" -j"$jobs" check TESTS="$units" >"$dir/check.out" 2>&1; then
        grep -E "^(FAIL|ERROR)" "$dir/check.out" || tail -30 "$dir/check.out"
        for t in $units; do
            if grep -qE '^:test-result: (FAIL|ERROR)' "$dir/$t.trs" 2>/dev/null; then echo "--- $t"; tail -40 "$dir/$t.log"; fi
        done
        return 1
    fi
    grep -E "^# (TOTAL|PASS|FAIL)" "$dir/check.out" | tr '\n' ' '; echo
}

# Sanitizer settings.
# UCX (MPICH's device here) patches malloc/mmap in every loaded library to watch memory
# events for its registration cache; that replaces the sanitizers' interceptors and the
# ranks die with SIGSEGV in MPI_Init (seen under TSan). Its hooks off, UCX only loses the
# cache invalidation, which ranks sharing memory on one node do not use.
export UCX_MEM_MALLOC_HOOKS=no UCX_MEM_EVENTS=no
lsan_supp=$top/tests/mpi/lsan.supp  # every entry justified there
asan_env() {
    # verify_asan_link_order=0: the MPI compiler wrappers list libstdc++ before the shared
    # ASan runtime in the programs' DT_NEEDED; libstdc++ is not instrumented, so the runtime
    # still starts before any instrumented code (preloaded runs put it first anyway)
    export ASAN_OPTIONS="detect_leaks=1:exitcode=86:verify_asan_link_order=0"
    export LSAN_OPTIONS="suppressions=$lsan_supp:print_suppressions=0"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:exitcode=87"
}

# The MPI test list under ASan in a configured tree; $1 = build dir, $2 = the ASan runtime.
# Preloaded runs: the launcher and the test programs are not instrumented, so the ASan
# runtime must be the first library of every rank. valgrind lines cannot run under ASan;
# plain lines run no libcompmpi code.
mpi_list_asan() {
    local dir=$1 rt=$2
    make -C "$dir" -j"$jobs" check TESTS= >"$dir/check-build.out" 2>&1 || { echo "building the MPI tests failed"; tail -20 "$dir/check-build.out"; return 1; }
    # One line per MPI test program (preloaded programs at 2-3 ranks, the linked ones at 2,
    # t_codecs with every codec at 3): the whole list under ASan costs several times the
    # 9-minute budget on 2 cores. ASAN_MPI_ALL=1 runs every line.
    # (t_storm: NaN storms over every form and hint churn; t_fault: a truncated blob in the
    # progress thread's allreduce; t_inline_progress, t_nonblocking inline: fibers, whose
    # switches ASan is told about)
    local filter='^(t_plain_(compressed|passthrough|nonfinite) +2 preload *$|t_plain_dtypes +3 preload|t_(compressed|hints|ef|threads) +2 link *$|t_sparse +3 link *$|t_codecs +3 link arg|t_awp +2 link *$|t_costmodel +2 link COMPMPI_COST_MODEL=on|t_plain_awp_buffers +2 preload arg:bcast|f_allreduce +3 preload|t_storm +2 link|t_fault +3 link COMPMPI_FAULT=truncate_blob:rank=1:call=3 COMPMPI_STATS=1 arg:coll=iallreduce|t_nb_race +2 link COMPMPI_COST_MODEL=auto COMPMPI_FAULT=cost_plain *$|t_inline_progress +2 link COMPMPI_NB_PROGRESS=inline *$|t_nonblocking +3 link COMPMPI_NB_PROGRESS=inline arg:quick *$)'
    [ "${ASAN_MPI_ALL:-0}" = 1 ] && filter=''
    # Leak checking is off in the MPI processes: LSan reports allocations made by MPI's
    # dlopen()ed transports whose modules are unloaded at MPI_Finalize ("<unknown module>",
    # nothing to symbolize or suppress); leaks of libcompmpi in MPI runs are checked by the
    # valgrind lines of the main suite, and the unit tests run with leak checking on.
    (cd "$dir" && ASAN_OPTIONS="${ASAN_OPTIONS/detect_leaks=1/detect_leaks=0}" \
        MPI_TEST_FILTER="$filter" MPI_TEST_PRELOAD="$rt" MPI_TEST_EXCLUDE=' (valgrind|plain)( |$)' \
        MPI_TEST_TIMEOUT=300 top_builddir=$PWD top_srcdir=$top "$top/tests/mpi/run_tests.sh") >"$dir/mpi.out" 2>&1 \
        && { tail -1 "$dir/mpi.out"; return 0; }
    grep -A60 '^FAIL' "$dir/mpi.out" | head -150
    tail -1 "$dir/mpi.out"
    return 1
}

# ---------------------------------------------------------------- clang + libFuzzer
part_clang() {
    local dir=_build-clang
    # the ASan runtime as a shared library, so that it can be preloaded into uninstrumented
    # MPI programs before libcompmpi.so
    local rt
    rt=$(clang-14 -print-file-name=libclang_rt.asan-x86_64.so)
    configure_in "$dir" CC="mpicc.mpich -cc=clang-14" CXX="mpicxx.mpich -cxx=clang++-14" \
        --enable-sanitizers=address,undefined --enable-fuzzing CFLAGS="-O1 -g" CXXFLAGS="-O1 -g" \
        LDFLAGS="-shared-libasan -Wl,-rpath,$(dirname "$rt")" || return 1
    asan_env
    build_and_unit "$dir" || return 1
    # a preloaded clang build of libcompmpi needs LLVM's OpenMP runtime in the process too
    # (plain MPI programs do not link it)
    local omp
    omp=$(dirname "$rt")/../../../../libomp.so.5  # .../llvm-14/lib/clang/V/lib/linux -> .../llvm-14/lib
    mpi_list_asan "$dir" "$rt $omp" || return 1
    local t c out secs status=0
    rm -rf "$dir/fuzz-run" && mkdir -p "$dir/fuzz-run/artifacts"
    # fuzz_decode runs once per decoder (FUZZ_CODEC, corpus/fuzz_decode/<codec>/); the
    # decoders share one FUZZ_SECONDS between them (ceil(FUZZ_SECONDS / codecs) each), so the
    # whole fuzz step still costs about 3 x FUZZ_SECONDS. FUZZ_CODECS picks a subset.
    local codecs ncodecs
    codecs=${FUZZ_CODECS:-$(sed -n 's/^COMPMPI_CODEC([a-z0-9_]*, *[0-9]*, *"\([a-z0-9_]*\)")/\1/p' src/base/codecs.def)}
    ncodecs=$(wc -w <<<"$codecs")
    for t in $(printf 'fuzz_decode:%s ' $codecs) fuzz_header fuzz_settings; do
        c=${t#fuzz_decode:}; [ "$c" = "$t" ] && c=
        secs=$FUZZ_SECONDS
        [ -n "$c" ] && secs=$(((FUZZ_SECONDS + ncodecs - 1) / ncodecs))
        # libFuzzer adds what it finds to the first corpus directory: a copy, not the tree's
        cp -r "tests/fuzz/corpus/${t/://}" "$dir/fuzz-run/${t/:/-}"
        out=$dir/fuzz-run/${t/:/-}.log
        if FUZZ_CODEC=$c "$dir/tests/fuzz/${t%%:*}" -max_total_time="$secs" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 \
            ${c:+-max_len=16500} -artifact_prefix="$dir/fuzz-run/artifacts/${t/:/-}-" "$dir/fuzz-run/${t/:/-}" >"$out" 2>&1; then
            printf '%-22s %s\n' "$t" "$(grep -E '^stat::(number_of_executed_units|new_units_added)' "$out" | tr '\n' ' ')"
            grep -E '^#[0-9]+[[:space:]]+DONE' "$out" | tail -1
        else
            echo "$t: FAILED"; grep -vE '^(INFO|#[0-9]+ )' "$out" | tail -40
            status=1
        fi
    done
    return $status
}

# ---------------------------------------------------------------- GCC ASan + UBSan
part_asan() {
    local dir=_build-asan
    configure_in "$dir" --enable-sanitizers=address,undefined CFLAGS="-O1 -g" CXXFLAGS="-O1 -g" || return 1
    asan_env
    build_and_unit "$dir" || return 1
    mpi_list_asan "$dir" "$(gcc -print-file-name=libasan.so)"
}

# ---------------------------------------------------------------- GCC TSan
# Built without OpenMP: libgomp is not instrumented (every parallel region would be a false
# report); what this run checks is libcompmpi's own state under MPI_THREAD_MULTIPLE, and the
# fibers of inline progress (ThreadSanitizer is told about every switch: src/base/fiber.cc).
part_tsan() {
    local dir=_build-tsan
    configure_in "$dir" --enable-sanitizers=thread --disable-openmp CFLAGS="-O1 -g" CXXFLAGS="-O1 -g" || return 1
    make -C "$dir" -j"$jobs" tests/mpi/t_threads tests/mpi/t_nb_race tests/mpi/t_inline_progress >"$dir/make.out" 2>&1 || { grep -E "error" -A5 "$dir/make.out" | head -40; return 1; }
    export TSAN_OPTIONS="halt_on_error=1:exitcode=88:second_deadlock_stack=1:suppressions=$top/tests/mpi/tsan.supp"
    (cd "$dir" && MPI_TEST_FILTER='^(t_threads |t_nb_race +2 |t_inline_progress +2 link COMPMPI_NB_PROGRESS=inline *$)' MPI_TEST_TIMEOUT=300 top_builddir=$PWD top_srcdir=$top \
        "$top/tests/mpi/run_tests.sh") >"$dir/mpi.out" 2>&1 && { tail -1 "$dir/mpi.out"; return 0; }
    grep -A80 '^FAIL' "$dir/mpi.out" | head -150
    return 1
}

for p in $parts; do
    begin "$p"
    if "part_$p"; then end "$p" ok; else end "$p" FAIL; fi
done
echo "==== hardening summary (part, result, wall seconds)"
printf '%s\n' "${report[@]}"
exit $fail

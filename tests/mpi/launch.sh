# SPDX-License-Identifier: BSD-3-Clause
# MPI launcher differences, in one place (sourced by tests/mpi/run_tests.sh and the
# scripts/test-*.sh checks). Each MPI is called by its own name (mpiexec.mpich,
# mpiexec.openmpi): the plain mpiexec follows whichever MPI was installed last.
#
#   mpi_launch_init FAMILY [MPIEXEC]   FAMILY: mpich | openmpi (default launcher:
#                                      mpiexec.FAMILY)
#   mpi_launch NP -- PROG ARGS...      sets the array MPI_CMD: PROG on NP ranks with
#                                      the environment in MPI_ENV (NAME=VALUE ...) for
#                                      every rank and MPI_ENV0 (NAME=VALUE ...) for rank 0
#                                      only (an MPMD launch: 1 rank, then NP-1), every
#                                      rank wrapped in MPI_WRAP (e.g. valgrind ...)
#
#   MPICH (hydra): mpiexec.mpich -genv N V ... -n 1 -env N V ... prog : -n NP-1 prog
#   Open MPI     : mpiexec.openmpi [--allow-run-as-root] --oversubscribe
#                  -np 1 -x N=V ... prog : -np NP-1 -x N=V ... prog
#                  (-x applies to its own app context only: the global environment is
#                  repeated in each; as root Open MPI refuses to start without
#                  --allow-run-as-root; --oversubscribe: more ranks than the 2 cores)

mpi_launch_init() {
    MPI_LAUNCH_FAMILY=$1
    case $MPI_LAUNCH_FAMILY in
        mpich) MPI_LAUNCHER=${2:-mpiexec.mpich} ;;
        openmpi) MPI_LAUNCHER=${2:-mpiexec.openmpi} ;;
        *) echo "mpi_launch_init: unknown MPI family '$MPI_LAUNCH_FAMILY' (mpich or openmpi)" >&2; return 2 ;;
    esac
    MPI_ENV=() MPI_ENV0=() MPI_WRAP=()
}

# The MPI family of a launcher, from its --version (hydra says HYDRA, Open MPI says OpenRTE
# or Open MPI): for run_tests.sh run by hand with MPIEXEC but no MPI_FAMILY.
mpi_family_of_launcher() {
    local v
    v=$("$1" --version 2>&1 </dev/null) || true  # no `| head`: SIGPIPE under pipefail
    case $v in
        *HYDRA*|*hydra*|*MPICH*) echo mpich ;;
        *OpenRTE*|*"Open MPI"*|*PRRTE*) echo openmpi ;;
        *) echo unknown ;;
    esac
}

# _mpi_env_args NAME=VALUE...: the launcher's flags for these variables (into _ARGS)
_mpi_env_args() {
    local flag=$1; shift
    _ARGS=()
    local kv
    for kv in "$@"; do
        case $MPI_LAUNCH_FAMILY in
            mpich) _ARGS+=("$flag" "${kv%%=*}" "${kv#*=}") ;;
            openmpi) _ARGS+=(-x "$kv") ;;
        esac
    done
}

mpi_launch() {
    local np=$1; shift
    [ "${1:-}" = -- ] && shift
    local prog=("$@") g=() r0=() head=()
    case $MPI_LAUNCH_FAMILY in
        mpich)
            _mpi_env_args -genv "${MPI_ENV[@]}"; g=("${_ARGS[@]}")
            _mpi_env_args -env "${MPI_ENV0[@]}"; r0=("${_ARGS[@]}")
            if [ ${#MPI_ENV0[@]} -gt 0 ]; then
                MPI_CMD=("$MPI_LAUNCHER" "${g[@]}" -n 1 "${r0[@]}" "${MPI_WRAP[@]}" "${prog[@]}"
                         : -n $((np - 1)) "${MPI_WRAP[@]}" "${prog[@]}")
            else
                MPI_CMD=("$MPI_LAUNCHER" "${g[@]}" -n "$np" "${MPI_WRAP[@]}" "${prog[@]}")
            fi ;;
        openmpi)
            [ "$(id -u)" = 0 ] && head+=(--allow-run-as-root)
            head+=(--oversubscribe)
            _mpi_env_args -x "${MPI_ENV[@]}"; g=("${_ARGS[@]}")
            _mpi_env_args -x "${MPI_ENV0[@]}"; r0=("${_ARGS[@]}")
            if [ ${#MPI_ENV0[@]} -gt 0 ]; then
                MPI_CMD=("$MPI_LAUNCHER" "${head[@]}" -np 1 "${g[@]}" "${r0[@]}" "${MPI_WRAP[@]}" "${prog[@]}"
                         : -np $((np - 1)) "${g[@]}" "${MPI_WRAP[@]}" "${prog[@]}")
            else
                MPI_CMD=("$MPI_LAUNCHER" "${head[@]}" -np "$np" "${g[@]}" "${MPI_WRAP[@]}" "${prog[@]}")
            fi ;;
    esac
}

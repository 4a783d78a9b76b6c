#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# mpirun.sh — run an MPI program on the emulated hosts of the cluster made by
# cluster.sh: one rank per host (rank k in namespace cmpik, address 10.77.0.(k+1)),
# or with --ppn R, R ranks per host ("node"): ranks kR .. kR+R-1 in cmpik.
#
#   mpirun.sh -n P [--ppn R] [--preload LIB] [--mpi-prefix PREFIX] [--timeout SEC]
#             [--openmpi] [-genv K V ...] -- PROGRAM ARGS...
#
#   -n P              number of ranks (the cluster must have >= ceil(P/R) hosts)
#   --ppn R           ranks per host (default 1): hydra gets -hosts 10.77.0.1:R,...,
#                     Open MPI --host 10.77.0.1:R,...; the R ranks of a host share its
#                     namespace and shaped link, and MPI sees them as one node
#                     (MPI_Comm_split_type SHARED, shared memory between them)
#   --preload LIB     LD_PRELOAD=LIB for the ranks only (passed with -genv, so
#                     mpiexec and the hydra proxies are not preloaded)
#   --mpi-prefix DIR  use DIR/bin/mpiexec instead of Debian's mpiexec.mpich
#                     (also settable as MPI_PREFIX in the environment)
#   --timeout SEC     kill the whole job after SEC seconds (exit 124)
#   --finalize-fix    also preload build/ucx_finalize_fix.so (built on demand):
#                     avoids the MPI_Finalize hang of Debian's MPICH ch4:ucx over
#                     UCX TCP (see ucx_finalize_fix.c); only changes MPI_Finalize
#   --idle-sleep      also preload build/idle_sleep.so (tests/mpi/idle_sleep.c): a rank
#                     that finds nothing to do sleeps (MPITEST_IDLE_SLEEP_US, default 50)
#                     instead of spinning, so that more ranks than cores do not starve
#                     each other (plain and compressed arms alike); adds up to the
#                     sleep to the time a waiting rank notices a message
#   --ucx-eager       -genv UCX_RNDV_THRESH inf: UCX sends every message eagerly
#                     (no rendezvous handshake); much steadier times on the shaped
#                     links, see README.md (ignored by a ch3 build)
#   --openmpi         launch with Open MPI's mpiexec.openmpi instead of MPICH (for
#                     programs linked to Open MPI, e.g. Debian's mpi4py): rsh agent
#                     nsrsh, hosts = the namespace addresses, --mca pml ob1 --mca btl
#                     tcp,self on eth0 (also the runtime's out-of-band channel),
#                     --bind-to none; -genv K V becomes -x K=V; --finalize-fix and
#                     --ucx-eager (MPICH/UCX only) are ignored with a note
#   -genv K V         extra environment for the ranks (repeatable)
#   -v                print the mpiexec command line
#
# The job runs mpiexec inside cmpi0 with hydra's rsh launcher replaced by
# nsrsh, so each proxy/rank is started inside its own namespace, and forces
# UCX (ch4:ucx) onto the shaped link: UCX_TLS=tcp,self UCX_NET_DEVICES=eth0.
set -euo pipefail

dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
IFACE=eth0
NET=10.77.0

die() { echo "mpirun.sh: error: $*" >&2; exit 2; }

np=""; ppn=1; preload=""; timeout_s=""; verbose=0; ffix=0; eager=0; ompi=0; idle=0
mpi_prefix=${MPI_PREFIX:-}
genv=()
while [ $# -gt 0 ]; do
    case $1 in
        -n|-np) np=${2:-}; shift 2 ;;
        --ppn) ppn=${2:-}; shift 2 ;;
        --preload) preload=${2:-}; shift 2 ;;
        --mpi-prefix) mpi_prefix=${2:-}; shift 2 ;;
        --timeout) timeout_s=${2:-}; shift 2 ;;
        --finalize-fix) ffix=1; shift ;;
        --idle-sleep) idle=1; shift ;;
        --ucx-eager) eager=1; shift ;;
        --openmpi) ompi=1; shift ;;
        -genv) [ $# -ge 3 ] || die "-genv needs K V"; genv+=(-genv "$2" "$3"); shift 3 ;;
        -v) verbose=1; shift ;;
        --) shift; break ;;
        -h|--help) awk 'NR > 1 && /^# SPDX-License-Identifier:/ { next } NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        *) die "unknown option '$1' (program and its arguments go after --)" ;;
    esac
done
[ $# -ge 1 ] || die "usage: mpirun.sh -n P [--preload LIB] [-genv K V ...] -- PROGRAM ARGS"
[[ $np =~ ^[0-9]+$ ]] && [ "$np" -ge 1 ] || die "-n P needs a positive integer"
[[ $ppn =~ ^[0-9]+$ ]] && [ "$ppn" -ge 1 ] || die "--ppn R needs a positive integer"
[ "$(id -u)" -eq 0 ] || die "must be run as root (ip netns exec)"
nhosts=$(( (np + ppn - 1) / ppn ))

for ((k = 0; k < nhosts; k++)); do
    ip netns list 2>/dev/null | awk '{print $1}' | grep -x "cmpi$k" >/dev/null \
        || die "cluster has no host cmpi$k; run: $dir/cluster.sh up $nhosts RATE"
done

if [ $ompi -eq 1 ]; then
    [ -z "$mpi_prefix" ] || die "--openmpi and --mpi-prefix do not go together"
    mpiexec=$(command -v mpiexec.openmpi) || die "mpiexec.openmpi not found (apt-get install openmpi-bin)"
    if [ $ffix -eq 1 ] || [ $eager -eq 1 ]; then
        echo "mpirun.sh: note: --finalize-fix/--ucx-eager are for MPICH over UCX; ignored with --openmpi" >&2
        ffix=0; eager=0
    fi
elif [ -n "$mpi_prefix" ]; then
    mpiexec=$mpi_prefix/bin/mpiexec
    [ -x "$mpiexec" ] || die "$mpiexec not found (build it with build_mpich_ch3.sh $mpi_prefix)"
else
    mpiexec=$(command -v mpiexec.mpich) || die "mpiexec.mpich not found (apt-get install mpich)"
fi
if [ -n "$preload" ]; then
    [ -f "$preload" ] || die "--preload: no such file: $preload"
    case $preload in /*) ;; *) preload=$(pwd)/$preload ;; esac
fi
if [ $ffix -eq 1 ]; then
    fix=$dir/build/ucx_finalize_fix.so
    if [ ! -f "$fix" ] || [ "$dir/ucx_finalize_fix.c" -nt "$fix" ]; then
        mkdir -p "$dir/build"
        cc -O2 -shared -fPIC -o "$fix" "$dir/ucx_finalize_fix.c" || die "could not build $fix"
    fi
    preload=$fix${preload:+:$preload}
fi
if [ $idle -eq 1 ] && [ $ompi -eq 1 ]; then
    # Open MPI's ob1/TCP waits in opal_progress, not in UCX: its own setting makes an idle
    # rank yield the core instead of spinning (both arms of a paired job alike)
    genv=(-genv OMPI_MCA_mpi_yield_when_idle 1 "${genv[@]}")
elif [ $idle -eq 1 ]; then
    isl=$dir/build/idle_sleep.so
    if [ ! -f "$isl" ] || [ "$dir/../../tests/mpi/idle_sleep.c" -nt "$isl" ]; then
        mkdir -p "$dir/build"
        cc -O2 -shared -fPIC -o "$isl" "$dir/../../tests/mpi/idle_sleep.c" -ldl || die "could not build $isl"
    fi
    preload=$isl${preload:+:$preload}
fi
[ -n "$preload" ] && genv=(-genv LD_PRELOAD "$preload" "${genv[@]}")
[ $eager -eq 1 ] && genv=(-genv UCX_RNDV_THRESH inf "${genv[@]}")

hosts=""
for ((k = 1; k <= nhosts; k++)); do hosts+="${hosts:+,}$NET.$k:$ppn"; done

if [ $ompi -eq 1 ]; then
    # Open MPI: its rsh launcher starts one orted per host through nsrsh (no tree spawn:
    # mpiexec starts them all), ob1 + the TCP BTL on eth0 only (pml ucx would pick its own
    # transports), the runtime's out-of-band TCP on eth0 too; with --ppn R >= 2 the ranks of
    # one host also get Open MPI's shared-memory BTL (vader), as MPICH's ranks of one host
    # share memory (without it they would talk TCP over the unshaped loopback).  No binding: every namespace
    # sees the same cores and Open MPI would pin each host's only rank to core 0.
    # Running as root needs the two OMPI_ALLOW_RUN_AS_ROOT variables; they reach the
    # orteds through nsrsh's inherited environment.
    xenv=()
    btl=tcp,self
    [ "$ppn" -ge 2 ] && btl=tcp,vader,self
    for ((i = 0; i < ${#genv[@]}; i += 3)); do xenv+=(-x "${genv[i+1]}=${genv[i+2]}"); done
    # shellcheck disable=SC2054  # "tcp,self" is one element
    cmd=("$mpiexec" --host "$hosts" -n "$np" --bind-to none
         --mca plm_rsh_agent "$dir/nsrsh" --mca plm_rsh_no_tree_spawn 1
         --mca pml ob1 --mca btl "$btl" --mca btl_tcp_if_include "$IFACE"
         --mca oob_tcp_if_include "$IFACE"
         "${xenv[@]}" "$@")
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export NSRSH_UTS=1   # every host its own hostname (nsrsh): Open MPI's node-local files
else
    # shellcheck disable=SC2054  # "tcp,self" is one element
    cmd=("$mpiexec" -launcher rsh -launcher-exec "$dir/nsrsh" -hosts "$hosts" -iface "$IFACE"
         -n "$np"
         -genv UCX_TLS tcp,self -genv UCX_NET_DEVICES "$IFACE"
         "${genv[@]}" "$@")
fi
[ $verbose -eq 1 ] && echo "mpirun.sh: ip netns exec cmpi0 ${cmd[*]}" >&2

# The caller's own LD_PRELOAD must not leak into mpiexec or (through hydra's
# default environment propagation) into the ranks of an uncompressed run.
if [ -n "$timeout_s" ]; then
    # TERM first (hydra then tears the job down), KILL 10 s later.
    rc=0
    env -u LD_PRELOAD timeout -k 10 "$timeout_s" ip netns exec cmpi0 "${cmd[@]}" || rc=$?
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        echo "mpirun.sh: job timed out after ${timeout_s}s; killing leftovers in the cluster" >&2
        "$dir/cluster.sh" kill || true
    fi
    exit $rc
fi
exec env -u LD_PRELOAD ip netns exec cmpi0 "${cmd[@]}"

#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The main job, from a fresh Debian 12 machine: a real, unmodified PyTorch training script
# (examples/torch_fmnist.py: LeNet-like CNN on Fashion-MNIST, gradients averaged with mpi4py's
# comm.Allreduce) trained with 2 MPI ranks, once with plain Open MPI and once per libcompmpi
# codec slipped underneath with LD_PRELOAD. Every rank runs in its own network namespace on a
# link shaped to 1 Gbit/s (bench/netem), so compression has a network to save time on.
# Prints a table (accuracy, time to target accuracy, time per epoch, bytes on the wire) and
# a text plot; writes table.md, accuracy.png (test accuracy against wall time) and the logs.
#
#   scripts/demo.sh            emulated 1 Gbit/s cluster (needs root: network namespaces, tc);
#                              falls back to TCP over loopback, with a message, where it cannot
#   scripts/demo.sh --local    all ranks on this machine's shared memory (no emulated network)
#   scripts/demo.sh --full     2 epochs on all 60,000 training images and all 10,000 test images
#                              (about 5x longer) instead of 2 epochs on 12,800 / 2,000
#   DEMO_CODECS="q8 terngrad"  overrides the codec list (spec syntax: examples/README.md)
#   DEMO_RATE=500mbit          another link rate;  DEMO_RANKS="2 4"  more rank counts
#   DEMO_OUT=dir               output directory (default demo-out)
set -euo pipefail
cd "$(dirname "$0")/.."
mode=netem; size=short
for a in "$@"; do
    case $a in
        --local) mode=local ;;
        --full) size=full ;;
        -h|--help) awk 'NR > 1 && /^# SPDX-License-Identifier:/ { next } NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        *) echo "demo.sh: unknown argument '$a' (try --help)" >&2; exit 2 ;;
    esac
done

scripts/install-deps.sh
# libcompmpi for Open MPI (Debian's mpi4py is linked to Open MPI): libcompmpi_openmpi.so
BUILD_DIR=_build-openmpi scripts/build.sh --with-mpi=openmpi --without-cuda
lib=$PWD/_build-openmpi/.libs/libcompmpi_openmpi.so
[ -f "$lib" ] || { echo "demo.sh: $lib was not built" >&2; exit 1; }

codecs=${DEMO_CODECS:-"bitpack:awp q8 terngrad topk+COMPMPI_ERROR_FEEDBACK=1 fft_topk"}
rate=${DEMO_RATE:-1gbit}
out=${DEMO_OUT:-demo-out}
if [ "$size" = full ]; then
    train=(--epochs 2 --train-limit 60000 --test-limit 10000 --eval-every 100 --target 0.88 --timeout 2400)
else
    train=(--epochs 2 --train-limit 12800 --test-limit 2000 --eval-every 25 --target 0.82)
fi

where=()
if [ "$mode" = netem ]; then
    why=""
    if [ "$(id -u)" -ne 0 ]; then
        why="not root (network namespaces and tc need root)"
    elif ! err=$(bench/netem/cluster.sh up 2 "$rate" 2>&1); then
        why=$(printf '%s' "$err" | tail -n 1)
    fi
    if [ -z "$why" ]; then
        bench/netem/cluster.sh down >/dev/null 2>&1 || true
        where=(--netem "$rate")
    else
        cat >&2 <<EOF

demo.sh: the emulated cluster cannot run here: $why
demo.sh: FALLING BACK to TCP over loopback on this one machine. Loopback moves data at memory
         speed, so compression saves little or no time here (see the note at the end); the
         accuracies and bytes on the wire are still what they would be on a cluster.

EOF
        where=(--loopback)
    fi
fi

examples/torch_codecs.py --lib "$lib" --ranks "${DEMO_RANKS:-2}" --codecs "$codecs" --out "$out" \
    "${where[@]}" "${train[@]}" || rc=$?

echo
[ -f "$out/accuracy.txt" ] && cat "$out/accuracy.txt"
cat <<EOF

demo.sh: table in $out/table.md, plot of test accuracy against wall time in $out/accuracy.png,
         logs of every run (trainer output, libcompmpi statistics) in $out/runs/.
EOF
if [ "${where[0]:-}" = --netem ]; then
    cat <<EOF
Each rank ran in its own network namespace on a $rate link: the 6.7 MB gradient allreduce of
every step needs about 55 ms at 1 Gbit/s (6.7 MB x 8 / 10^9 b/s), comparable to the step's
compute on one core, so sending 3-16x fewer bytes shortens every step. On one machine's shared
memory (scripts/demo.sh --local) the same 6.7 MB move in milliseconds: there is little
time to save there, and encoding and decoding take CPU from the training on the same cores,
so compressed runs can even be slower.
EOF
else
    cat <<EOF
These ranks shared one machine, where MPI moves the 6.7 MB of gradients per step through
memory in milliseconds: there is little time to save, and encoding and decoding take
CPU from the training on the same cores, so compressed runs can even be slower. The bytes on
the wire and the accuracies are what a cluster would see; run as root for the emulated
1 Gbit/s cluster, where fewer bytes mean shorter steps.
EOF
fi
# Times mean something only if the ranks had their cores: say so when the machine was busy.
# The 1-minute load average at the end includes the demo's own work (2 ranks, their MPI and
# Python threads: about 3.5 on a quiet 2-core machine), hence the margin of 2 above the cores.
read -r load1 _ < /proc/loadavg
if awk -v l="$load1" -v n="$(nproc)" 'BEGIN { exit !(l > n + 2) }'; then
    cat <<EOF

demo.sh: NOTE: the machine was busy while this ran (load average $load1 on $(nproc) cores). The
         ranks did not get their cores: step times are then set by the CPU scheduler, not by
         the link, and understate (or hide) what compression buys. Bytes and accuracies are
         unaffected; re-run on a quiet machine for the times.
EOF
fi
exit "${rc:-0}"

#!/usr/bin/env bash
# The main job, from a fresh Debian 12 machine: install dependencies, build libcompmpi and
# the example trainer, then train a data-parallel MLP on Fashion-MNIST with 2 MPI ranks,
# once with plain MPI and once per codec under LD_PRELOAD=libcompmpi.so (the trainer knows
# nothing of libcompmpi), and print accuracy, bytes on the wire and time for each.
#   scripts/demo.sh [--full]     (--full: 2 epochs on all 60k images instead of the short run)
#   DEMO_CODECS="..." overrides the codec list (spec syntax: examples/README.md)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
examples/build.sh _build/examples >/dev/null
codecs=${DEMO_CODECS:-"bitpack:awp q8 terngrad topk+COMPMPI_ERROR_FEEDBACK=1 fft_topk"}
out=${DEMO_OUT:-demo-out}
if [ "${1:-}" = "--full" ]; then
    mode=(--ranks 2 --epochs 2 --train-limit 60000)
else
    mode=(--quick)
fi
examples/run_codecs.sh "${mode[@]}" --lib _build/.libs/libcompmpi.so --bin _build/examples/fmnist_train \
    --codecs "$codecs" --out "$out"
echo
echo "demo: table in $out/table.md, plot of test accuracy against time in $out/accuracy.png"

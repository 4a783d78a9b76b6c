#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Build libcompmpi for SimGrid SMPI (scripts/build-smpi.sh, in ${SMPI_BUILD_DIR:-_build-smpi})
# and run the SMPI smoke test (tests/smpi/smoke.sh: 4 and 8 simulated ranks, behaviour only).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${SMPI_BUILD_DIR:-_build-smpi} scripts/build-smpi.sh
tests/smpi/smoke.sh "${SMPI_BUILD_DIR:-_build-smpi}"

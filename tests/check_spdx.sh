#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Every source file git tracks names its licence in an SPDX line (LICENSE; tools/spdx.sh says
# which files and in which comment syntax, and adds the line where it is missing). Skipped
# (exit 77) outside a git checkout, e.g. in make distcheck's copy of the tarball.
set -eu
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
exec "$top_srcdir/tools/spdx.sh" --check

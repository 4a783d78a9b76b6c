#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The configuration reference in docs/configuration.md must be exactly what the settings
# table generates (compmpi-info --settings), between the BEGIN/END markers.
set -eu
top_builddir=${top_builddir:-$(pwd)}
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
doc="$top_srcdir/docs/configuration.md"
gen=$("$top_builddir/tools/compmpi-info" --settings)
have=$(sed -n '/<!-- BEGIN SETTINGS TABLE/,/<!-- END SETTINGS TABLE/p' "$doc" | sed '1d;$d')
if [ "$gen" != "$have" ]; then
    echo "docs/configuration.md is out of date with src/base/settings.def; regenerate the table with:"
    echo "  tools/compmpi-info --settings"
    diff <(echo "$have") <(echo "$gen") || true
    exit 1
fi
echo "docs/configuration.md matches the settings table"

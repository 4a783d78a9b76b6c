// SPDX-License-Identifier: BSD-3-Clause
/* The rules across settings, which need to know the codecs (kernels/): whether a width is
 * valid for a codec, which settings have no effect with the others, the layers' resolution
 * and the printed configuration (docs/configuration.md, "Explicit settings"). The table,
 * its parsers and the layers themselves are src/base/settings.h. */
#pragma once
#include <cstdio>
#include <string>

#include "base/settings.h"

namespace compmpi {

/* Checks that span several settings (bits valid for the codec, multiples of 8, ...). */
Status settings_validate(const Settings &s, std::string *err);

/* The one resolution of a communicator's settings (the process's at MPI_Init: api and hints
 * empty): defaults < env < api < hints, then the rules across settings
 * (docs/configuration.md, "Explicit settings"):
 *   - bits set explicitly (nonzero) with policy not set explicitly: policy = static;
 *   - bits set explicitly with policy = awp set explicitly (any layer): error naming both;
 *   - process-scope settings in api/hints, bits invalid for the codec, ...: errors;
 *   - an explicitly set value that has no effect with the other settings (theta for a
 *     non-sparse codec, awp_* under static, ...) is kept, marked inapplicable with the
 *     reason in why->note.
 * On error *out is untouched and *err names the settings and where each came from. */
Status settings_resolve(const SettingLayer &env, const SettingLayer &api, const SettingLayer &hints, Settings *out,
                        Resolution *why, std::string *err);

/* "name = value  (source; note)" lines of the effective settings. */
void settings_print(std::FILE *f, const Settings &s, const Resolution &why, const char *title);

}  // namespace compmpi

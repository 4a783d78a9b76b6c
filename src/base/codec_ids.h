// SPDX-License-Identifier: BSD-3-Clause
/* Codec identities: the one table src/base/codecs.def gives every codec an id (written into
 * every blob header, so it never changes meaning) and a name (the `codec` setting's value).
 * The codecs themselves are kernels/<name>/; this is what the layers below them need to know:
 * the settings parse names, the blob format carries ids. */
#pragma once
#include <cstdint>
#include <cstring>

namespace compmpi {

enum class CodecId : uint8_t {
#define COMPMPI_CODEC(sym, id, name) sym = id,
#include "base/codecs.def"
#undef COMPMPI_CODEC
};

/* The name of codec id, nullptr if there is none. */
inline const char *codec_id_name(int id) {
    switch (id) {
#define COMPMPI_CODEC(sym, cid, name) \
    case cid: return name;
#include "base/codecs.def"
#undef COMPMPI_CODEC
        default: return nullptr;
    }
}

/* The id of the codec called name, -1 if none is. */
inline int codec_id_by_name(const char *name) {
#define COMPMPI_CODEC(sym, cid, cname) \
    if (std::strcmp(name, cname) == 0) return cid;
#include "base/codecs.def"
#undef COMPMPI_CODEC
    return -1;
}

/* "none|bitpack|...": every codec's name in table order. */
inline const char *codec_id_names() {
    static const char *const names = ""
#define COMPMPI_CODEC(sym, cid, name) "|" name
#include "base/codecs.def"
#undef COMPMPI_CODEC
        ;
    return names + 1;
}

}  // namespace compmpi

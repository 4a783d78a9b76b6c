/* compmpi-info: what this build of libcompmpi offers.
 *   compmpi-info             codecs, CPU kernel paths, version
 *   compmpi-info --settings  the settings table as markdown (docs/configuration.md is
 *                            checked against this output by tests/check_docs.sh)      */
#include <cstdio>
#include <cstring>

#include "codec.h"
#include "settings.h"
#include "simd.h"

using namespace compmpi;

int main(int argc, char **argv) {
    if (argc > 1 && std::strcmp(argv[1], "--settings") == 0) {
        settings_print_markdown(stdout);
        return 0;
    }
    if (argc > 1) {
        std::fprintf(stderr, "usage: compmpi-info [--settings]\n");
        return 2;
    }
    std::printf("libcompmpi %s\n", PACKAGE_VERSION);
    std::printf("CPU kernel path: %s (detected)\n", simd_name(simd_detect()));
    std::printf("codecs:\n");
    for (int id = 0; id < 256; ++id)
        if (const CodecOps *c = codec_by_id(id)) {
            if (c->bits_step)
                std::printf("  %-10s id %-3d bits %d..%d step %d (default %d)  %s\n", c->name, id, c->bits_min,
                            c->bits_max, c->bits_step, c->bits_default, c->doc);
            else
                std::printf("  %-10s id %-3d %s\n", c->name, id, c->doc);
        }
    return 0;
}

// SPDX-License-Identifier: BSD-3-Clause
/* compmpi-info: what this build of libcompmpi offers.
 *   compmpi-info             codecs, CPU kernel paths, version, the MPI it is built for
 *   compmpi-info --mpi       the MPI family only: "mpich" or "openmpi" (for scripts)
 *   compmpi-info --settings  the settings table as markdown (docs/configuration.md is
 *                            checked against this output by tests/check_docs.sh)      */
#include <cstdio>
#include <cstring>

#include <mpi.h>

#include "codec.h"
#include "base/mpi_family.h"
#include "base/settings.h"
#include "simd.h"

using namespace compmpi;

int main(int argc, char **argv) {
    if (argc > 1 && std::strcmp(argv[1], "--settings") == 0) {
        settings_print_markdown(stdout);
        return 0;
    }
    if (argc > 1 && std::strcmp(argv[1], "--mpi") == 0) {
        std::printf("%s\n", mpi_family_id(mpi_family_built()));
        return 0;
    }
    if (argc > 1) {
        std::fprintf(stderr, "usage: compmpi-info [--settings | --mpi]\n");
        return 2;
    }
    std::printf("libcompmpi %s\n", PACKAGE_VERSION);
    const MpiFamily fam = mpi_family_built();
    std::printf("built for MPI: %s (family '%s')\n", mpi_family_describe().c_str(), mpi_family_id(fam));
    std::printf("library: %s, pkg-config: %s\n", mpi_family_libcompmpi(fam),
                fam == MpiFamily::openmpi ? "compmpi-openmpi" : fam == MpiFamily::smpi ? "compmpi-smpi" : "compmpi");
    /* MPI_Get_library_version may be called before MPI_Init (MPI-3.0) */
    char lib[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int len = 0;
    if (MPI_Get_library_version(lib, &len) == MPI_SUCCESS) {
        if (char *nl = std::strchr(lib, '\n')) *nl = '\0';
        std::printf("MPI library at run time: %s\n", lib);
    }
    std::printf("CUDA-aware MPI: %s\n", mpi_cuda_aware_compiled());
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

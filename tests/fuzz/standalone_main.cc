// SPDX-License-Identifier: BSD-3-Clause
/* main() for the fuzz targets when built without libFuzzer: replay every file of the given
 * files or directories (default: $top_srcdir/tests/fuzz/corpus/<FUZZ_NAME>) through
 * LLVMFuzzerTestOneInput. make check runs this over the committed corpus, so every compiler
 * and sanitizer build checks the targets' properties on known inputs. */
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "fuzz_target.h"

namespace {
long g_files = 0;
bool run_file(const std::string &path) {
    FILE *f = std::fopen(path.c_str(), "rb");
    if (!f) return false;
    std::vector<uint8_t> buf;
    uint8_t tmp[65536];
    size_t k;
    while ((k = std::fread(tmp, 1, sizeof tmp, f)) > 0) buf.insert(buf.end(), tmp, tmp + k);
    std::fclose(f);
    /* an exactly sized block, as libFuzzer hands inputs over */
    uint8_t *p = static_cast<uint8_t *>(std::malloc(buf.size() ? buf.size() : 1));
    std::copy(buf.begin(), buf.end(), p);
    LLVMFuzzerTestOneInput(p, buf.size());
    std::free(p);
    ++g_files;
    return true;
}
bool run_path(const std::string &path) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) return false;
    if (!S_ISDIR(st.st_mode)) return run_file(path);
    DIR *d = opendir(path.c_str());
    if (!d) return false;
    std::vector<std::string> names;
    while (dirent *e = readdir(d))
        if (e->d_name[0] != '.') names.push_back(e->d_name);
    closedir(d);
    std::sort(names.begin(), names.end());
    for (const auto &n : names)
        if (!run_path(path + "/" + n)) return false;
    return true;
}
}  // namespace

int main(int argc, char **argv) {
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
    std::vector<std::string> paths(argv + 1, argv + argc);
    if (paths.empty()) {
        const char *src = std::getenv("top_srcdir");
        paths.push_back(std::string(src ? src : ".") + "/tests/fuzz/corpus/" FUZZ_NAME);
    }
    for (const auto &p : paths)
        if (!run_path(p)) {
            std::fprintf(stderr, "%s: cannot read %s\n", FUZZ_NAME, p.c_str());
            return 1;
        }
    if (g_files == 0) {
        std::fprintf(stderr, "%s: no inputs\n", FUZZ_NAME);
        return 1;
    }
    std::printf("%s: %ld inputs replayed, every property held\n", FUZZ_NAME, g_files);
    return 0;
}

// SPDX-License-Identifier: BSD-3-Clause
#include "base/log.h"
#include "base/status.h"

#include <chrono>
#include <cstdio>
#include <thread>

namespace compmpi {

namespace {
int g_rank = -1;

void vlog(const char *level, const char *fmt, va_list ap) {
    char msg[4096];
    std::vsnprintf(msg, sizeof msg, fmt, ap);
    if (g_rank >= 0)
        std::fprintf(stderr, "libcompmpi[%d] %s: %s\n", g_rank, level, msg);
    else
        std::fprintf(stderr, "libcompmpi %s: %s\n", level, msg);
}
}  // namespace

void log_set_rank(int rank) { g_rank = rank; }

void log_flush_pause() {
    std::fflush(nullptr);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
}

void log_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vlog("error", fmt, ap);
    va_end(ap);
}
void log_error_all(int nranks, const char *fmt, ...) {
    char msg[4096];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    std::fprintf(stderr, "libcompmpi error (the same on all %d ranks): %s\n", nranks, msg);
}
void log_warn(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vlog("warning", fmt, ap);
    va_end(ap);
}
void log_info(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vlog("info", fmt, ap);
    va_end(ap);
}

const char *status_str(Status s) {
    switch (s) {
        case Status::ok: return "ok";
        case Status::invalid_arg: return "invalid argument";
        case Status::corrupt: return "corrupted payload";
        case Status::no_memory: return "out of memory";
        case Status::unsupported: return "unsupported";
        case Status::nonfinite: return "NaN or Inf in data";
        case Status::mpi_error: return "MPI error";
        case Status::mismatch: return "settings differ across ranks";
    }
    return "unknown status";
}

}  // namespace compmpi

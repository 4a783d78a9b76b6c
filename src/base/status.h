// SPDX-License-Identifier: BSD-3-Clause
/* Internal status codes and the one check macro. Converted to MPI error codes only at the
 * MPI boundary (src/boundary/interpose.cc); no exception crosses extern "C". */
#pragma once

namespace compmpi {

enum class Status : int {
    ok = 0,
    invalid_arg,   /* caller passed something out of range */
    corrupt,       /* an encoded payload failed validation */
    no_memory,
    unsupported,   /* a codec/backend cannot handle this request */
    nonfinite,     /* NaN or Inf in data that a lossy codec was asked to encode */
    mpi_error,     /* a PMPI call failed; the MPI code is kept by the caller */
    mismatch,      /* ranks disagree on settings */
};

const char *status_str(Status s);

}  // namespace compmpi

/* Evaluate a Status expression; on failure return it from the enclosing function. */
#define CMPI_CHECK(expr)                                     \
    do {                                                     \
        ::compmpi::Status cmpi_s_ = (expr);                  \
        if (cmpi_s_ != ::compmpi::Status::ok) return cmpi_s_; \
    } while (0)

// Installing a file so that readers never see a partial one: write a temporary file beside the
// target, fsync it, rename it over the target. Used for libsmc-preload.so, which running pods
// map from the host directory while the agent may be replacing it.
#pragma once

#include <string>

#include "common/result.hpp"

namespace erdma::agent {

enum class InstallResult { Installed, Unchanged };

// Copies `source` to `dir`/`name` (mode 0755) unless an identical file is there already. Creates
// `dir` (and missing parents) with mode 0755. Files larger than `max_bytes` are refused. Errors:
// NotFound (no source), InvalidArgument (source not a regular file, or too large), and
// Unavailable/PermissionDenied for I/O failures, each naming the path. Never leaves a temporary
// file behind.
[[nodiscard]] Result<InstallResult> install_file_atomically(const std::string& source, const std::string& dir,
                                                            const std::string& name, size_t max_bytes = 64u << 20);

}  // namespace erdma::agent

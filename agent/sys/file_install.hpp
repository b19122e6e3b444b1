// Installing a file so that readers never see a partial one: write a temporary file beside the
// target, fsync it, rename it over the target, all relative to the checked directory (safe_dir.hpp). Used for
// libsmc-preload.so, which running pods map from the host directory while the agent may be replacing it.
#pragma once

#include <string>

#include "common/result.hpp"

namespace erdma::agent {

enum class InstallResult { Installed, Unchanged };

// Copies `source` (the agent image's copy, opened without blocking on a FIFO) to `dir`/`name`
// (mode 0755) unless an identical regular file of the agent's is there already. `dir` is opened with
// SafeDir::open (missing components created with mode 0755; a symbolic link on the way, a directory
// not the agent's or writable by group or others is refused with a message saying how to fix it),
// and the file is replaced with SafeDir::write_atomically: a symbolic link or FIFO at the target is
// replaced, never followed. Files larger than `max_bytes` are refused. Errors: NotFound (no source),
// InvalidArgument (source not a regular file, or too large), those of SafeDir::open, and
// Unavailable/PermissionDenied for I/O failures, each naming the path. Never leaves a temporary
// file behind.
[[nodiscard]] Result<InstallResult> install_file_atomically(const std::string& source, const std::string& dir,
                                                            const std::string& name, size_t max_bytes = 64u << 20);

}  // namespace erdma::agent

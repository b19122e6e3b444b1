// Reading the node's RDMA driver facts from sysfs (/sys/module/<name>, module parameters, device
// node types) and writing the node-feature-discovery local feature file. Reads a tree under a root
// directory ("/sys" on a node, a fake tree in tests). Loads a module only through run_modprobe,
// which driver.loadModules asks for.
#pragma once

#include <string>

#include "agent/core/driver_mode.hpp"
#include "common/result.hpp"

namespace erdma::agent {

// Facts under `sys_root`: module/{erdma,mlx_compat,nvidia,nvidia_peermem,smc},
// module/erdma/parameters/compat_mode ("Y"/"N"), module/erdma/version, and the node_type of every
// class/infiniband device whose name starts with "erdma" or whose bus driver is erdma. Missing
// files are facts ("not loaded"), never errors.
[[nodiscard]] DriverFacts read_driver_facts(const std::string& sys_root = "/sys");

// "1: CA\n" -> "CA", "4: RNIC\n" -> "RNIC"; "" for anything else.
[[nodiscard]] std::string parse_node_type(std::string_view text);

// Replaces `path` with `content` (mode 0644) atomically: SafeDir::write_atomically in the
// file's directory, which must exist, belong to the agent and be writable by nobody else (a unique
// dot-file created with O_EXCL|O_NOFOLLOW, fsync, renameat: NFD ignores dot-files, so it never reads
// a partial file, and nothing planted in the directory is followed). Returns false (Unchanged) when
// the file is already a regular file holding exactly `content`. Errors name the path: those of
// SafeDir::open (NotFound, FailedPrecondition, InvalidArgument), Unavailable / PermissionDenied for I/O.
[[nodiscard]] Result<bool> write_file_atomically(const std::string& path, const std::string& content);

// Runs `modprobe -- MODULE` (no shell, stdin from /dev/null, at most `timeout_ms`; killed after
// it). Ok when it exits 0; otherwise an error naming the module and modprobe's own last stderr
// line, plus how to fix the usual causes (no CAP_SYS_MODULE, no host /lib/modules).
[[nodiscard]] Status run_modprobe(const std::string& modprobe, const std::string& module, int timeout_ms = 15000);

}  // namespace erdma::agent

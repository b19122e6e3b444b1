// Loading the webhook Config from a YAML or JSON file.
#pragma once

#include <string>

#include "common/result.hpp"
#include "webhook/core/config.hpp"

namespace erdma::webhook {

// Reads and validates `path` (empty path = the defaults). Errors name the file and the key:
// `/etc/erdma/config.yaml: smcr.mountPath: must be an absolute path, got "lib"`.
[[nodiscard]] Result<Config> load_config_file(const std::string& path);

}  // namespace erdma::webhook

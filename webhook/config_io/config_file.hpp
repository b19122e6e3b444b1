// Loading the webhook Config from a YAML or JSON file.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "common/result.hpp"
#include "webhook/core/config.hpp"

namespace erdma::webhook {

// Reads and validates `path` (empty path = the defaults). Errors name the file and the key:
// `/etc/erdma/config.yaml: smcr.mountPath: must be an absolute path, got "lib"`.
// A top-level `server` section (settings of `erdma-webhook serve`) is not part of the Config and
// is ignored here; load_config_document returns it.
[[nodiscard]] Result<Config> load_config_file(const std::string& path);

// A config file split in two: the validated webhook Config and the raw `server` section (null
// when absent) for `erdma-webhook serve` to validate.
struct ConfigDocument {
  Config config;
  nlohmann::json server;
};
[[nodiscard]] Result<ConfigDocument> load_config_document(const std::string& path);

}  // namespace erdma::webhook

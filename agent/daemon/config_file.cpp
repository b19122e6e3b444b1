// The agent's configuration file (see config_file.hpp).
#include "agent/daemon/config_file.hpp"

#include <filesystem>

#include "common/structured.hpp"

namespace erdma::agent {

std::string default_config_path() {
  std::error_code ec;
  return std::filesystem::is_regular_file(kDefaultConfigPath, ec) ? kDefaultConfigPath : "";
}

Result<AgentConfig> load_config_file(const std::string& path) {
  if (path.empty()) return AgentConfig{};
  ERDMA_TRY_ASSIGN(auto text, common::read_file(path, 1u << 20));
  ERDMA_TRY_ASSIGN(auto doc, common::parse_document(text, path));
  auto cfg = AgentConfig::load(doc);
  if (!cfg) return make_error(cfg.error().code, path + ": " + cfg.error().message);
  return cfg;
}

}  // namespace erdma::agent

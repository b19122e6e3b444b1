// Config files: read, parse (YAML or JSON), validate.
#include "webhook/config_io/config_file.hpp"

#include "common/structured.hpp"

namespace erdma::webhook {

Result<ConfigDocument> load_config_document(const std::string& path) {
  if (path.empty()) return ConfigDocument{Config::defaults(), nullptr};
  ERDMA_TRY_ASSIGN(auto text, common::read_file(path, 1u << 20));
  ERDMA_TRY_ASSIGN(auto doc, common::parse_document(text, path));
  nlohmann::json server;
  if (doc.is_object()) {
    if (auto it = doc.find("server"); it != doc.end()) {
      server = std::move(*it);
      doc.erase(it);
    }
  }
  auto cfg = Config::load(doc);
  if (!cfg) return make_error(cfg.error().code, path + ": " + cfg.error().message);
  return ConfigDocument{std::move(cfg).value(), std::move(server)};
}

Result<Config> load_config_file(const std::string& path) {
  ERDMA_TRY_ASSIGN(auto doc, load_config_document(path));
  return std::move(doc.config);
}

}  // namespace erdma::webhook

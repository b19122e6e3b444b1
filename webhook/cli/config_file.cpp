// Config files: read, parse (YAML or JSON), validate.
#include "webhook/cli/config_file.hpp"

#include "common/structured.hpp"

namespace erdma::webhook {

Result<Config> load_config_file(const std::string& path) {
  if (path.empty()) return Config::defaults();
  auto text = common::read_file(path, 1u << 20);
  if (!text) return std::move(text).error();
  auto doc = common::parse_document(*text, path);
  if (!doc) return std::move(doc).error();
  auto cfg = Config::load(*doc);
  if (!cfg) return make_error(cfg.error().code, path + ": " + cfg.error().message);
  return cfg;
}

}  // namespace erdma::webhook

// Fuzz target: configuration files (YAML or JSON) through the document reader and Config::load.
// A config that loads must survive to_json -> load unchanged.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "common/structured.hpp"
#include "webhook/core/config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  erdma::common::ParseLimits limits;
  limits.max_nodes = 100000;  // keep alias expansion cheap per input
  auto docs = erdma::common::parse_documents(text, "fuzz.yaml", limits);
  if (!docs.ok()) {
    if (docs.error().message.empty()) std::abort();
    return 0;
  }
  for (const auto& doc : *docs) {
    auto cfg = erdma::webhook::Config::load(doc);
    if (!cfg.ok()) {
      if (cfg.error().message.empty()) std::abort();
      continue;
    }
    auto again = erdma::webhook::Config::load(cfg->to_json());
    if (!again.ok() || again->to_json() != cfg->to_json()) {
      std::fprintf(stderr, "fuzz_config: to_json does not round-trip\n");
      std::abort();
    }
  }
  return 0;
}

// Fuzz target: the agent's configuration file through the document reader and AgentConfig::load.
// A config that loads must survive to_json -> load unchanged.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "agent/core/config.hpp"
#include "common/structured.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  erdma::common::ParseLimits limits;
  limits.max_nodes = 100000;
  auto docs = erdma::common::parse_documents(text, "fuzz.yaml", limits);
  if (!docs.ok()) return 0;
  for (const auto& doc : *docs) {
    auto cfg = erdma::agent::AgentConfig::load(doc);
    if (!cfg.ok()) {
      if (cfg.error().message.empty()) std::abort();
      continue;
    }
    auto again = erdma::agent::AgentConfig::load(cfg->to_json());
    if (!again.ok() || again->to_json() != cfg->to_json()) {
      std::fprintf(stderr, "fuzz_agent_config: to_json does not round-trip\n");
      std::abort();
    }
  }
  return 0;
}

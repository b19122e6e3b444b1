// Reading configuration and manifests: YAML or JSON text (or a file of it) into nlohmann::json.
// JSON is recognised by its first non-blank character ('{' or '['); anything else is YAML, read
// with one of two scalar policies (yaml_scalars.hpp): the YAML 1.2 core schema for configuration
// files, kubectl's YAML 1.1 for manifests. Quoted scalars are strings under both. Every failure is
// an Error naming the source and, where known, the line and column: malformed YAML, a duplicate
// key, a key that is not a scalar, an unsupported tag, nesting or alias expansion past the limits.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/json_types.hpp"
#include "common/result.hpp"
#include "common/yaml_scalars.hpp"

namespace erdma::common {

struct ParseLimits {
  size_t max_depth = 128;        // nesting of maps and lists
  size_t max_nodes = 1'000'000;  // values after YAML aliases are expanded (guards alias bombs)
};

// Parses every document of `text` (YAML may hold several, separated by '---'; JSON holds one).
// Empty YAML documents are dropped. `source` names the input in messages (a path or "<stdin>").
[[nodiscard]] Result<std::vector<nlohmann::json>> parse_documents(std::string_view text, std::string_view source,
                                                                  const ParseLimits& limits = {},
                                                                  YamlSchema schema = YamlSchema::Core);

// Parses text that must hold exactly one document; an empty input yields an empty object.
[[nodiscard]] Result<nlohmann::json> parse_document(std::string_view text, std::string_view source,
                                                    const ParseLimits& limits = {});

// Reads a whole file (or standard input for "-"), refusing anything larger than `max_bytes`.
[[nodiscard]] Result<std::string> read_file(const std::string& path, size_t max_bytes = 16u << 20);

}  // namespace erdma::common

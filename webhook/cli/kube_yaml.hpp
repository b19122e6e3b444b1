// Manifests read the way kubectl reads them, and written back as a YAML stream.
//
// Reading is common/structured.hpp's loader under YamlSchema::Kubectl (common/yaml_scalars.hpp
// spells out how kubectl resolves plain scalars and keys). JSON input (starting with '{' or '[') is
// read as JSON.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.hpp"

namespace erdma::webhook {

// Parses every document of `text`. Errors (InvalidArgument, with source:line:column where known):
// malformed YAML; .inf/.nan, which have no JSON form (kubectl refuses them too); a key that is a
// float, null or a collection; a duplicate key (go-yaml would keep the last one; the preview
// refuses to guess); unsupported tags; nesting deeper than 128 or more than 1e6 values after
// aliases are expanded. Merge keys ("<<: *anchor") are honoured, as go-yaml does.
[[nodiscard]] Result<std::vector<nlohmann::json>> parse_kube_manifests(std::string_view text, std::string_view source);

// Writes `docs` as a YAML stream: every document starts with "---", block style, and every string
// that a YAML 1.1 or YAML 1.2 reader would take for another type is double-quoted, so kubectl and
// any other reader get back exactly `docs`.
// Errors: Internal if libyaml refuses an event (a bug).
[[nodiscard]] Result<std::string> to_yaml_stream(const std::vector<nlohmann::json>& docs);

}  // namespace erdma::webhook

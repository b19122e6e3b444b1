// How a plain (unquoted) YAML scalar becomes a JSON value: the two scalar policies the YAML
// loader (common/structured.hpp) reads with.
//
// YamlSchema::Core, for this project's configuration files: the YAML 1.2 core schema. null, ~ and
// the empty scalar are null; true/false (three spellings each) are booleans; decimal, 0o octal and
// 0x hex integers; decimal floats. Everything else, yes/no/on/off included, is a string.
//
// YamlSchema::Kubectl, for Kubernetes manifests: what kubectl does. It turns YAML into JSON with
// sigs.k8s.io/yaml, which resolves plain scalars by go-yaml v2's YAML 1.1 rules: y/Y/yes/Yes/YES/
// on/On/ON/true/True/TRUE are true, the n/no/off/false forms false, ""/~/null/Null/NULL null,
// integers in Go's base-0 syntax after dropping '_' (0x1F, 0o17, 0b101, 0777 octal, 1_000), floats
// ([-+]?(.d+|d+(.d*)?)([eE][-+]?d+)?), and timestamps stay strings. Map keys resolve the same way
// and become text again ("on:" is the key "true").
//
// Neither policy gives .inf or .nan a number: JSON has no form for them.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace erdma::common {

enum class YamlSchema { Core, Kubectl };

// The value of the plain scalar `s` under `schema`; a string when it is nothing else.
[[nodiscard]] nlohmann::json resolve_plain_scalar(std::string_view s, YamlSchema schema);

// .inf, .nan and their spellings: floats to YAML, with no JSON form.
[[nodiscard]] bool is_yaml_inf_or_nan(std::string_view s);

// The text a resolved map key becomes under YamlSchema::Kubectl (booleans and integers turn back
// into text); nullopt for keys kubectl refuses (null, floats, collections).
[[nodiscard]] std::optional<std::string> kubectl_key_text(const nlohmann::json& key);

}  // namespace erdma::common

// The one reader both programs' configuration files go through: key checks, typed getters and the
// Kubernetes name and path rules, with a single wording for every error. Every message starts with
// the key's path (`smcr.mountPath: must be an absolute path, got "lib"`). Pure: it reads an
// already parsed document (common/structured.hpp turns YAML or JSON into one) and never touches a
// file, so the cores that use it stay free of I/O.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/k8s_names.hpp"
#include "common/result.hpp"

namespace erdma::common::config {

using nlohmann::json;

// InvalidArgument "<key>: <what>".
[[nodiscard]] Error error(std::string_view key, std::string_view what);

// "prefix.key" ("key" at the top level) and "path[i]".
[[nodiscard]] std::string key_path(std::string_view prefix, std::string_view key);
[[nodiscard]] std::string item_path(std::string_view path, size_t index);

// Rejects the first key of `obj` not in `known`, naming it and the keys allowed there.
[[nodiscard]] Status check_keys(const json& obj, std::string_view prefix,
                                std::initializer_list<std::string_view> known);

// The value at `key`, or nullptr when it is absent or null (null means "use the default").
[[nodiscard]] const json* get(const json& obj, std::string_view key);

// "<key>: expected <want>, got <type>", with a hint for the usual YAML slips: a number where a
// string belongs ("quote it") and a quoted "true" where a boolean belongs.
[[nodiscard]] Error type_error(const json& value, std::string_view key, std::string_view want);
// A map / a list at `key`, or a type_error that describes what belongs there.
[[nodiscard]] Status expect_map(const json& value, std::string_view key, std::string_view want = "a map");
[[nodiscard]] Status expect_list(const json& value, std::string_view key, std::string_view want = "a list");

// Typed getters: the fallback when the key is absent or null, else the value or a type error.
[[nodiscard]] Result<std::string> get_string(const json& obj, std::string_view key, std::string_view path,
                                             std::string fallback);
[[nodiscard]] Result<bool> get_bool(const json& obj, std::string_view key, std::string_view path, bool fallback);
// An integer within [min, max].
[[nodiscard]] Result<int64_t> get_int(const json& obj, std::string_view key, std::string_view path, int64_t fallback,
                                      int64_t min, int64_t max);
// A list of strings.
[[nodiscard]] Result<std::vector<std::string>> get_string_list(const json& obj, std::string_view key,
                                                               std::string_view path,
                                                               std::vector<std::string> fallback);

// A list of namespace names (each a DNS-1123 label, checked by check_name).
[[nodiscard]] Result<std::vector<std::string>> get_namespace_list(const json& obj, std::string_view key,
                                                                  std::string_view path,
                                                                  std::vector<std::string> fallback);

// `value` under one of Kubernetes' name rules (common/k8s_names.hpp), or
//   <key>: "<value>" is not <role> (<rule>): <what failed>; <the rule, with an example>
// `role` says what the name is for ("a namespace name"); empty, the rule's name stands alone.
[[nodiscard]] Status check_name(std::string_view value, NameRule rule, std::string_view key,
                                std::string_view role = {});

// An absolute path without ".." components or NUL bytes.
[[nodiscard]] Status check_abs_path(std::string_view path, std::string_view key);
// "/a/b/" -> "/a/b" ("/" stays "/").
[[nodiscard]] std::string trim_trailing_slashes(std::string path);

}  // namespace erdma::common::config

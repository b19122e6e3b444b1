// The shared configuration reader (see config_reader.hpp).
#include "common/config_reader.hpp"

#include <algorithm>

#include "common/json_types.hpp"
#include "common/text.hpp"

namespace erdma::common::config {

Error error(std::string_view key, std::string_view what) {
  std::string msg(key);
  msg += ": ";
  msg += what;
  return make_error(ErrorCode::InvalidArgument, std::move(msg));
}

std::string key_path(std::string_view prefix, std::string_view key) {
  if (prefix.empty()) return std::string(key);
  std::string out(prefix);
  out += '.';
  out += key;
  return out;
}

std::string item_path(std::string_view path, size_t index) {
  return std::string(path) + "[" + std::to_string(index) + "]";
}

Status check_keys(const json& obj, std::string_view prefix, std::initializer_list<std::string_view> known) {
  for (const auto& item : obj.items()) {
    const std::string& key = item.key();  // a plain variable: clang 14 cannot capture bindings
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    std::vector<std::string> names(known.begin(), known.end());
    return error(key_path(prefix, key), "unknown key (known keys" +
                                            (prefix.empty() ? std::string() : " of " + std::string(prefix)) + ": " +
                                            join(names, ", ") + ")");
  }
  return {};
}

const json* get(const json& obj, std::string_view key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

Error type_error(const json& value, std::string_view key, std::string_view want) {
  std::string what = "expected " + std::string(want) + ", got " + std::string(json_type_name(value));
  const bool wants_string = want == "a string" || want.starts_with("a string ");
  if (value.is_number() && wants_string) what += " (quote it)";
  if (value.is_string() && want == "true or false") what += " (write it without quotes)";
  return error(key, what);
}

Status expect_map(const json& value, std::string_view key, std::string_view want) {
  if (value.is_object()) return {};
  return type_error(value, key, want);
}

Status expect_list(const json& value, std::string_view key, std::string_view want) {
  if (value.is_array()) return {};
  return type_error(value, key, want);
}

Result<std::string> get_string(const json& obj, std::string_view key, std::string_view path, std::string fallback) {
  const json* v = get(obj, key);
  if (v == nullptr) return fallback;
  if (!v->is_string()) return type_error(*v, path, "a string");
  return v->get<std::string>();
}

Result<bool> get_bool(const json& obj, std::string_view key, std::string_view path, bool fallback) {
  const json* v = get(obj, key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) return type_error(*v, path, "true or false");
  return v->get<bool>();
}

Result<int64_t> get_int(const json& obj, std::string_view key, std::string_view path, int64_t fallback, int64_t min,
                        int64_t max) {
  const json* v = get(obj, key);
  if (v == nullptr) return fallback;
  if (!v->is_number_integer()) return type_error(*v, path, "an integer");
  const auto out_of_range = [&](const std::string& got) {
    return error(path, "must be between " + std::to_string(min) + " and " + std::to_string(max) + ", got " + got);
  };
  if (v->is_number_unsigned()) {
    const auto u = v->get<uint64_t>();
    if (u > static_cast<uint64_t>(max)) return out_of_range(std::to_string(u));
    if (static_cast<int64_t>(u) < min) return out_of_range(std::to_string(u));
    return static_cast<int64_t>(u);
  }
  const auto n = v->get<int64_t>();
  if (n < min || n > max) return out_of_range(std::to_string(n));
  return n;
}

Result<std::vector<std::string>> get_string_list(const json& obj, std::string_view key, std::string_view path,
                                                 std::vector<std::string> fallback) {
  const json* v = get(obj, key);
  if (v == nullptr) return fallback;
  if (!v->is_array()) return type_error(*v, path, "a list of strings");
  std::vector<std::string> out;
  out.reserve(v->size());
  for (size_t i = 0; i < v->size(); ++i) {
    const json& item = (*v)[i];
    if (!item.is_string()) return type_error(item, item_path(path, i), "a string");
    out.push_back(item.get<std::string>());
  }
  return out;
}

Result<std::vector<std::string>> get_namespace_list(const json& obj, std::string_view key, std::string_view path,
                                                    std::vector<std::string> fallback) {
  const json* v = get(obj, key);
  if (v == nullptr) return fallback;
  if (!v->is_array()) return type_error(*v, path, "a list of namespace names");
  std::vector<std::string> out;
  out.reserve(v->size());
  for (size_t i = 0; i < v->size(); ++i) {
    const json& item = (*v)[i];
    const std::string p = item_path(path, i);
    if (!item.is_string()) return type_error(item, p, "a string");
    auto ns = item.get<std::string>();
    ERDMA_TRY(check_name(ns, NameRule::Dns1123Label, p, "a namespace name"));
    out.push_back(std::move(ns));
  }
  return out;
}

Status check_name(std::string_view value, NameRule rule, std::string_view key, std::string_view role) {
  const NameCheck check = common::check_name(rule, value);
  if (check.ok()) return {};
  return error(key, json_quote(value) + " " + describe(check, role));
}

Status check_abs_path(std::string_view p, std::string_view key) {
  if (p.empty() || p.front() != '/') return error(key, "must be an absolute path, got " + json_quote(p));
  if (p.find('\0') != std::string_view::npos) return error(key, "must not contain NUL");
  for (size_t start = 1; start <= p.size();) {
    const size_t slash = p.find('/', start);
    if (p.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start) == "..") {
      return error(key, "must not contain \"..\", got " + json_quote(p));
    }
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return {};
}

std::string trim_trailing_slashes(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

}  // namespace erdma::common::config

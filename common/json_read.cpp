// Typed reads of untrusted JSON that never throw (see json_read.hpp).
#include "common/json_read.hpp"

#include "common/json_types.hpp"
#include "common/text.hpp"

namespace erdma::common {

using nlohmann::json;

std::string_view json_kind_name(JsonKind kind) noexcept {
  switch (kind) {
    case JsonKind::String: return "a string";
    case JsonKind::Integer: return "an integer";
    case JsonKind::Boolean: return "a boolean";
    case JsonKind::Object: return "an object";
    case JsonKind::Array: return "an array";
  }
  return "a value";
}

JsonAt::JsonAt(const json& root, std::string subject)
    : value_(&root), subject_(std::make_shared<const std::string>(std::move(subject))) {}

JsonAt JsonAt::member(std::string_view key) const {
  std::string p = path_.empty() ? std::string(key) : path_ + "." + std::string(key);
  if (value_ == nullptr || !value_->is_object()) return JsonAt(nullptr, subject_, std::move(p));
  const auto it = value_->find(key);
  return JsonAt(it == value_->end() ? nullptr : &*it, subject_, std::move(p));
}

JsonAt JsonAt::element(size_t index) const {
  std::string p = path_ + "[" + std::to_string(index) + "]";
  if (value_ == nullptr || !value_->is_array() || index >= value_->size())
    return JsonAt(nullptr, subject_, std::move(p));
  // operator[] on a const array with an index in range: defined, no throw.
  return JsonAt(&(*value_)[index], subject_, std::move(p));
}

JsonAt JsonAt::path(std::string_view dotted) const {
  JsonAt at = *this;
  while (!dotted.empty()) {
    const auto dot = dotted.find('.');
    at = at.member(dotted.substr(0, dot));
    if (dot == std::string_view::npos) break;
    dotted.remove_prefix(dot + 1);
  }
  return at;
}

bool JsonAt::is(JsonKind kind) const noexcept {
  if (value_ == nullptr) return false;
  switch (kind) {
    case JsonKind::String: return value_->is_string();
    case JsonKind::Integer: return value_->is_number_integer();
    case JsonKind::Boolean: return value_->is_boolean();
    case JsonKind::Object: return value_->is_object();
    case JsonKind::Array: return value_->is_array();
  }
  return false;
}

size_t JsonAt::size() const noexcept {
  return value_ != nullptr && (value_->is_array() || value_->is_object()) ? value_->size() : 0;
}

std::string JsonAt::where() const { return path_.empty() ? *subject_ : *subject_ + ": " + path_; }

Error JsonAt::error(std::string_view problem) const {
  return make_error(ErrorCode::InvalidArgument, where() + " " + std::string(problem));
}

Error JsonAt::wrong_type(std::string_view want) const {
  if (value_ == nullptr) return error("is missing");
  std::string got(json_type_name(*value_));
  // Scalars are shown (cut): "got number 5"; containers only by their kind (they can be huge).
  if (!value_->is_object() && !value_->is_array() && !value_->is_null()) {
    got += " " + cut_for_message(value_->dump(-1, ' ', false, json::error_handler_t::replace), 40);
  }
  return make_error(ErrorCode::InvalidArgument, where() + ": expected " + std::string(want) + ", got " + got);
}

Result<std::string> JsonAt::string() const {
  if (!is(JsonKind::String)) return wrong_type("a string");
  return value_->get_ref<const std::string&>();
}

Result<int64_t> JsonAt::int64(int64_t min, int64_t max) const {
  if (!is(JsonKind::Integer)) return wrong_type("an integer");
  const std::string range = "an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  if (value_->is_number_unsigned()) {
    const auto u = value_->get<uint64_t>();
    if (max < 0 || u > static_cast<uint64_t>(max)) return wrong_type(range);
    const auto v = static_cast<int64_t>(u);
    if (v < min) return wrong_type(range);
    return v;
  }
  const auto v = value_->get<int64_t>();
  if (v < min || v > max) return wrong_type(range);
  return v;
}

Result<uint64_t> JsonAt::uint64(uint64_t max) const {
  if (!is(JsonKind::Integer)) return wrong_type("an integer");
  const std::string range = "an integer in [0, " + std::to_string(max) + "]";
  // number_integer holds the negative values (nlohmann parses non-negative ones as unsigned).
  if (!value_->is_number_unsigned()) {
    const auto v = value_->get<int64_t>();
    if (v < 0) return wrong_type(range);
    const auto u = static_cast<uint64_t>(v);
    if (u > max) return wrong_type(range);
    return u;
  }
  const auto u = value_->get<uint64_t>();
  if (u > max) return wrong_type(range);
  return u;
}

Result<bool> JsonAt::boolean() const {
  if (!is(JsonKind::Boolean)) return wrong_type("a boolean");
  return value_->get<bool>();
}

Status JsonAt::expect(JsonKind kind) const {
  if (!is(kind)) return wrong_type(json_kind_name(kind));
  return {};
}

Result<std::string> JsonAt::string_or(std::string fallback) const {
  if (is_missing()) return fallback;
  return string();
}

Result<int64_t> JsonAt::int64_or(int64_t fallback, int64_t min, int64_t max) const {
  if (is_missing()) return fallback;
  return int64(min, max);
}

Result<bool> JsonAt::boolean_or(bool fallback) const {
  if (is_missing()) return fallback;
  return boolean();
}

Status JsonAt::expect_optional(JsonKind kind) const {
  if (is_missing()) return {};
  return expect(kind);
}

std::optional<std::string> JsonAt::if_string() const {
  if (!is(JsonKind::String)) return std::nullopt;
  return value_->get_ref<const std::string&>();
}

std::optional<int64_t> JsonAt::if_int64() const {
  auto v = int64();
  if (!v) return std::nullopt;
  return *v;
}

std::optional<bool> JsonAt::if_boolean() const {
  if (!is(JsonKind::Boolean)) return std::nullopt;
  return value_->get<bool>();
}

}  // namespace erdma::common

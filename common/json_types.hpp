// Names of nlohmann::json value types for error messages, in the words YAML users know.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

namespace erdma::common {

// "string", "number", "map", "list", "boolean", "null".
[[nodiscard]] inline std::string_view json_type_name(const nlohmann::json& v) noexcept {
  using nlohmann::json;
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::object: return "map";
    case json::value_t::array: return "list";
    case json::value_t::string: return "string";
    case json::value_t::boolean: return "boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float: return "number";
    case json::value_t::binary: return "binary";
    case json::value_t::discarded: return "invalid";
  }
  return "unknown";
}

}  // namespace erdma::common

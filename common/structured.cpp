// YAML/JSON document loading for configuration files and manifests (see structured.hpp).
#include "common/structured.hpp"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <limits>
#include <memory>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "common/text.hpp"

namespace erdma::common {
namespace {

using nlohmann::json;

bool is_json_text(std::string_view text) {
  for (char c : text) {
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') continue;
    return c == '{' || c == '[';
  }
  return false;
}

std::string where(std::string_view source, const YAML::Mark& mark) {
  std::string out(source);
  if (!mark.is_null()) {
    out += ':' + std::to_string(mark.line + 1) + ':' + std::to_string(mark.column + 1);
  }
  return out;
}

bool all_of(std::string_view s, bool (*pred)(char)) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!pred(c)) return false;
  }
  return true;
}
bool is_dec(char c) { return c >= '0' && c <= '9'; }
bool is_oct(char c) { return c >= '0' && c <= '7'; }
bool is_hex(char c) { return is_dec(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// Integer per the YAML 1.2 core schema; nullopt if `s` is not one or does not fit in int64.
std::optional<json> yaml_int(std::string_view s) {
  std::string_view digits = s;
  bool neg = false;
  int base = 10;
  if (!digits.empty() && (digits[0] == '-' || digits[0] == '+')) {
    neg = digits[0] == '-';
    digits.remove_prefix(1);
    if (!all_of(digits, is_dec)) return std::nullopt;
  } else if (digits.starts_with("0o")) {
    digits.remove_prefix(2);
    base = 8;
    if (!all_of(digits, is_oct)) return std::nullopt;
  } else if (digits.starts_with("0x")) {
    digits.remove_prefix(2);
    base = 16;
    if (!all_of(digits, is_hex)) return std::nullopt;
  } else if (!all_of(digits, is_dec)) {
    return std::nullopt;
  }
  uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v, base);
  if (ec != std::errc() || ptr != digits.data() + digits.size()) return std::nullopt;
  if (neg) {
    if (v > uint64_t{1} << 63) return std::nullopt;
    return json(v == uint64_t{1} << 63 ? std::numeric_limits<int64_t>::min() : -static_cast<int64_t>(v));
  }
  if (v <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return json(static_cast<int64_t>(v));
  return json(v);
}

std::optional<json> yaml_float(std::string_view s) {
  if (s == ".inf" || s == ".Inf" || s == ".INF" || s == "+.inf" || s == "+.Inf" || s == "+.INF" || s == "-.inf" ||
      s == "-.Inf" || s == "-.INF" || s == ".nan" || s == ".NaN" || s == ".NAN") {
    // JSON has no infinities or NaN; keep the text rather than invent a number.
    return std::nullopt;
  }
  // [-+]? ( \. [0-9]+ | [0-9]+ ( \. [0-9]* )? ) ( [eE] [-+]? [0-9]+ )?
  size_t i = 0;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
  size_t int_digits = 0, frac_digits = 0;
  while (i < s.size() && is_dec(s[i])) ++i, ++int_digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && is_dec(s[i])) ++i, ++frac_digits;
  }
  if (int_digits == 0 && frac_digits == 0) return std::nullopt;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    size_t exp_digits = 0;
    while (i < s.size() && is_dec(s[i])) ++i, ++exp_digits;
    if (exp_digits == 0) return std::nullopt;
  }
  if (i != s.size()) return std::nullopt;
  const std::string copy(s);
  errno = 0;
  const double d = std::strtod(copy.c_str(), nullptr);
  if (errno == ERANGE || !std::isfinite(d)) return std::nullopt;
  return json(d);
}

json plain_scalar(const std::string& s) {
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  if (auto i = yaml_int(s)) return *i;
  if (auto f = yaml_float(s)) return *f;
  return s;
}

class YamlConverter {
 public:
  YamlConverter(std::string_view source, const ParseLimits& limits) : source_(source), limits_(limits) {}

  Result<json> convert(const YAML::Node& node, size_t depth) {
    if (++nodes_ > limits_.max_nodes) {
      return make_error(ErrorCode::ResourceExhausted,
                        where(source_, node.Mark()) + ": document has more than " +
                            std::to_string(limits_.max_nodes) + " values (after expanding aliases)");
    }
    if (depth > limits_.max_depth) {
      return make_error(ErrorCode::ResourceExhausted, where(source_, node.Mark()) + ": nesting deeper than " +
                                                          std::to_string(limits_.max_depth) + " levels");
    }
    switch (node.Type()) {
      case YAML::NodeType::Undefined:
      case YAML::NodeType::Null:
        return json(nullptr);
      case YAML::NodeType::Scalar:
        return scalar(node);
      case YAML::NodeType::Sequence: {
        json arr = json::array();
        for (const auto& item : node) {
          auto v = convert(item, depth + 1);
          if (!v) return v;
          arr.push_back(std::move(*v));
        }
        return arr;
      }
      case YAML::NodeType::Map: {
        json obj = json::object();
        for (const auto& kv : node) {
          if (!kv.first.IsScalar()) {
            return make_error(ErrorCode::InvalidArgument,
                              where(source_, kv.first.Mark()) + ": map keys must be plain strings");
          }
          const std::string& key = kv.first.Scalar();
          if (!is_valid_utf8(key)) {
            return make_error(ErrorCode::InvalidArgument, where(source_, kv.first.Mark()) + ": key is not valid UTF-8");
          }
          if (obj.contains(key)) {
            return make_error(ErrorCode::InvalidArgument,
                              where(source_, kv.first.Mark()) + ": duplicate key \"" + key + "\"");
          }
          auto v = convert(kv.second, depth + 1);
          if (!v) return v;
          obj[key] = std::move(*v);
        }
        return obj;
      }
    }
    return make_error(ErrorCode::Internal, where(source_, node.Mark()) + ": unknown YAML node type");
  }

 private:
  Result<json> scalar(const YAML::Node& node) {
    const std::string& s = node.Scalar();
    if (!is_valid_utf8(s)) {
      return make_error(ErrorCode::InvalidArgument, where(source_, node.Mark()) + ": value is not valid UTF-8");
    }
    const std::string& tag = node.Tag();
    if (tag == "?") return plain_scalar(s);  // untagged plain scalar: resolve by the core schema
    if (tag == "!" || tag == "tag:yaml.org,2002:str") return json(s);  // quoted, or explicitly a string
    if (tag == "tag:yaml.org,2002:int") {
      if (auto i = yaml_int(s)) return *i;
    } else if (tag == "tag:yaml.org,2002:float") {
      if (auto f = yaml_float(s)) return *f;
    } else if (tag == "tag:yaml.org,2002:bool") {
      json b = plain_scalar(s);
      if (b.is_boolean()) return b;
    } else if (tag == "tag:yaml.org,2002:null") {
      return json(nullptr);
    } else {
      return make_error(ErrorCode::InvalidArgument,
                        where(source_, node.Mark()) + ": unsupported YAML tag \"" + tag + "\"");
    }
    return make_error(ErrorCode::InvalidArgument,
                      where(source_, node.Mark()) + ": \"" + s + "\" does not match its tag " + tag);
  }

  std::string_view source_;
  const ParseLimits& limits_;
  size_t nodes_ = 0;
};

Result<json> parse_json_text(std::string_view text, std::string_view source, const ParseLimits& limits) {
  // A depth-limited parse: nlohmann's callback sees every nesting level as it starts.
  size_t depth = 0;
  size_t nodes = 0;
  bool too_deep = false;
  bool too_many = false;
  json::parser_callback_t cb = [&](int d, json::parse_event_t ev, json&) {
    if (ev == json::parse_event_t::object_start || ev == json::parse_event_t::array_start) {
      depth = static_cast<size_t>(d) + 1;
      if (depth > limits.max_depth) too_deep = true;
    }
    if (ev == json::parse_event_t::value && ++nodes > limits.max_nodes) too_many = true;
    return !(too_deep || too_many);
  };
  json doc;
  try {
    doc = json::parse(text.begin(), text.end(), cb, /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const json::parse_error& e) {
    // e.what() is "[json.exception.parse_error.101] parse error at line 1, column 2: ..."
    std::string msg = e.what();
    if (auto pos = msg.find("] "); pos != std::string::npos) msg = msg.substr(pos + 2);
    return make_error(ErrorCode::InvalidArgument, std::string(source) + ": invalid JSON: " + msg);
  }
  if (too_deep) {
    return make_error(ErrorCode::ResourceExhausted,
                      std::string(source) + ": nesting deeper than " + std::to_string(limits.max_depth) + " levels");
  }
  if (too_many) {
    return make_error(ErrorCode::ResourceExhausted,
                      std::string(source) + ": more than " + std::to_string(limits.max_nodes) + " values");
  }
  return doc;
}

}  // namespace

Result<std::vector<json>> parse_documents(std::string_view text, std::string_view source, const ParseLimits& limits) {
  std::vector<json> docs;
  if (is_json_text(text)) {
    auto doc = parse_json_text(text, source, limits);
    if (!doc) return std::move(doc).error();
    docs.push_back(std::move(*doc));
    return docs;
  }
  if (text.find('\0') != std::string_view::npos) {
    return make_error(ErrorCode::InvalidArgument, std::string(source) + ": contains a NUL byte; not a text file");
  }
  std::vector<YAML::Node> nodes;
  try {
    nodes = YAML::LoadAll(std::string(text));
  } catch (const YAML::Exception& e) {
    return make_error(ErrorCode::InvalidArgument, where(source, e.mark) + ": invalid YAML: " + e.msg);
  } catch (const std::exception& e) {
    // yaml-cpp reports deep recursion and allocation failures with other exception types.
    return make_error(ErrorCode::InvalidArgument, std::string(source) + ": invalid YAML: " + e.what());
  }
  YamlConverter conv(source, limits);
  for (const auto& n : nodes) {
    if (n.IsNull()) continue;
    try {
      auto v = conv.convert(n, 0);
      if (!v) return std::move(v).error();
      docs.push_back(std::move(*v));
    } catch (const YAML::Exception& e) {
      return make_error(ErrorCode::InvalidArgument, where(source, e.mark) + ": invalid YAML: " + e.msg);
    }
  }
  return docs;
}

Result<json> parse_document(std::string_view text, std::string_view source, const ParseLimits& limits) {
  auto docs = parse_documents(text, source, limits);
  if (!docs) return std::move(docs).error();
  if (docs->empty()) return json::object();
  if (docs->size() > 1) {
    return make_error(ErrorCode::InvalidArgument, std::string(source) + ": expected one document, found " +
                                                      std::to_string(docs->size()));
  }
  return std::move(docs->front());
}

Result<std::string> read_file(const std::string& path, size_t max_bytes) {
  std::FILE* f = path == "-" ? stdin : std::fopen(path.c_str(), "rb");
  const std::string name = path == "-" ? std::string("<stdin>") : path;
  if (f == nullptr) {
    const int err = errno;
    return make_error(err == ENOENT ? ErrorCode::NotFound
                      : err == EACCES ? ErrorCode::PermissionDenied
                                      : ErrorCode::Unavailable,
                      name + ": cannot open: " + std::strerror(err));
  }
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> guard(f == stdin ? nullptr : f, &std::fclose);
  std::string out;
  char buf[65536];
  for (;;) {
    const size_t n = std::fread(buf, 1, sizeof buf, f);
    if (n > 0) {
      if (out.size() + n > max_bytes) {
        return make_error(ErrorCode::ResourceExhausted,
                          name + ": larger than the limit of " + std::to_string(max_bytes) + " bytes");
      }
      out.append(buf, n);
    }
    if (n < sizeof buf) {
      if (std::ferror(f)) {
        return make_error(ErrorCode::Unavailable, name + ": read failed: " + std::strerror(errno));
      }
      break;
    }
  }
  return out;
}

}  // namespace erdma::common

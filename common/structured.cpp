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
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include <yaml.h>

#include "common/json_types.hpp"
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

std::string where(std::string_view source, const yaml_mark_t& mark) {
  return std::string(source) + ':' + std::to_string(mark.line + 1) + ':' + std::to_string(mark.column + 1);
}

const char* const kMergeKey = "<<";

// Builds nlohmann::json documents from libyaml's event stream. Iterative (an explicit stack), so
// deep input cannot exhaust the C++ stack; aliases are expanded by copy within a value budget.
// The schema decides how plain scalars and map keys resolve (yaml_scalars.hpp); under
// YamlSchema::Kubectl, "<<" merge keys are honoured as go-yaml v2 does.
class YamlLoader {
 public:
  YamlLoader(std::string_view text, std::string_view source, const ParseLimits& limits, YamlSchema schema)
      : source_(source), limits_(limits), schema_(schema) {
    yaml_parser_initialize(&parser_);
    yaml_parser_set_input_string(&parser_, reinterpret_cast<const unsigned char*>(text.data()), text.size());
  }
  ~YamlLoader() { yaml_parser_delete(&parser_); }
  YamlLoader(const YamlLoader&) = delete;
  YamlLoader& operator=(const YamlLoader&) = delete;

  Result<std::vector<json>> load() {
    std::vector<json> docs;
    for (;;) {
      yaml_event_t ev;
      if (yaml_parser_parse(&parser_, &ev) == 0) return parser_error();
      // Own the event for the rest of the iteration whatever path we leave by.
      std::unique_ptr<yaml_event_t, void (*)(yaml_event_t*)> guard(&ev, yaml_event_delete);
      switch (ev.type) {
        case YAML_STREAM_END_EVENT: return docs;
        case YAML_DOCUMENT_START_EVENT:
          anchors_.clear();
          has_root_ = false;
          root_ = nullptr;
          break;
        case YAML_DOCUMENT_END_EVENT:
          if (has_root_ && !root_.is_null()) docs.push_back(std::move(root_));
          break;
        case YAML_SCALAR_EVENT: {
          const auto& sc = ev.data.scalar;
          if (expecting_key() && schema_ == YamlSchema::Kubectl && sc.style == YAML_PLAIN_SCALAR_STYLE &&
              std::string_view(reinterpret_cast<const char*>(sc.value), sc.length) == kMergeKey) {
            stack_.back().expecting_key = false;
            stack_.back().merging = true;
            break;
          }
          if (expecting_key() && schema_ == YamlSchema::Core) {
            // Keys are taken as written ("1: x" has the key "1"), whatever the scalar's style.
            std::string key(reinterpret_cast<const char*>(sc.value), sc.length);
            if (!is_valid_utf8(key)) return error(ev.start_mark, "key is not valid UTF-8");
            ERDMA_TRY(set_key(std::move(key), ev.start_mark));
            if (sc.anchor != nullptr)
              anchors_[reinterpret_cast<const char*>(sc.anchor)] = Anchor{json(stack_.back().key), 1};
            break;
          }
          ERDMA_TRY_ASSIGN(auto v, scalar(ev));
          ERDMA_TRY(add_value(std::move(v), 1, sc.anchor, ev.start_mark));
          break;
        }
        case YAML_ALIAS_EVENT: {
          const std::string name(reinterpret_cast<const char*>(ev.data.alias.anchor));
          auto it = anchors_.find(name);
          if (it == anchors_.end()) {
            return error(ev.start_mark, "alias *" + name + " refers to no complete anchor");
          }
          ERDMA_TRY(count(it->second.count, ev.start_mark));
          const Anchor a = it->second;  // add_value may register anchors
          ERDMA_TRY(add_value(a.value, a.count, nullptr, ev.start_mark));
          break;
        }
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT: {
          const bool is_map = ev.type == YAML_MAPPING_START_EVENT;
          const yaml_char_t* tag = is_map ? ev.data.mapping_start.tag : ev.data.sequence_start.tag;
          const yaml_char_t* anchor = is_map ? ev.data.mapping_start.anchor : ev.data.sequence_start.anchor;
          if (tag != nullptr) {
            const std::string t(reinterpret_cast<const char*>(tag));
            const char* want = is_map ? "tag:yaml.org,2002:map" : "tag:yaml.org,2002:seq";
            if (t != want && t != "!") return error(ev.start_mark, "unsupported YAML tag \"" + t + "\"");
          }
          if (expecting_key()) {
            return error(ev.start_mark, std::string("a map key must be a scalar, not a ") + (is_map ? "map" : "list"));
          }
          if (stack_.size() + 1 > limits_.max_depth) {
            return make_error(ErrorCode::ResourceExhausted, where(source_, ev.start_mark) + ": nesting deeper than " +
                                                                std::to_string(limits_.max_depth) + " levels");
          }
          ERDMA_TRY(count(1, ev.start_mark));
          Frame f;
          f.value = is_map ? json::object() : json::array();
          f.anchor = anchor != nullptr ? reinterpret_cast<const char*>(anchor) : "";
          stack_.push_back(std::move(f));
          break;
        }
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT: {
          Frame f = std::move(stack_.back());
          stack_.pop_back();
          const char* anchor = f.anchor.empty() ? nullptr : f.anchor.c_str();
          ERDMA_TRY(
              add_value(std::move(f.value), f.count, reinterpret_cast<const yaml_char_t*>(anchor), ev.start_mark));
          break;
        }
        default: break;
      }
    }
  }

 private:
  struct Frame {
    json value;                 // an object or an array being filled
    bool expecting_key = true;  // objects alternate key, value
    bool merging = false;       // the pending value is the operand of a "<<" merge key
    std::string key;
    std::set<std::string, std::less<>> keys;  // keys written in this map (a repeat is refused)
    std::string anchor;
    uint64_t count = 1;  // values inside, itself included
  };
  struct Anchor {
    json value;
    uint64_t count = 1;
  };

  Error error(const yaml_mark_t& mark, const std::string& what) const {
    return make_error(ErrorCode::InvalidArgument, where(source_, mark) + ": " + what);
  }

  Error parser_error() const {
    std::string msg = parser_.problem != nullptr ? parser_.problem : "malformed YAML";
    if (parser_.context != nullptr) msg = std::string(parser_.context) + ": " + msg;
    return make_error(ErrorCode::InvalidArgument, where(source_, parser_.problem_mark) + ": invalid YAML: " + msg);
  }

  Status count(uint64_t n, const yaml_mark_t& mark) {
    total_ += n;
    if (total_ > limits_.max_nodes) {
      return make_error(ErrorCode::ResourceExhausted, where(source_, mark) + ": document has more than " +
                                                          std::to_string(limits_.max_nodes) +
                                                          " values (after expanding aliases)");
    }
    return {};
  }

  bool expecting_key() const {
    return !stack_.empty() && stack_.back().value.is_object() && stack_.back().expecting_key;
  }

  Status set_key(std::string key, const yaml_mark_t& mark) {
    Frame& parent = stack_.back();
    if (!parent.keys.insert(key).second) {
      return error(
          mark, "duplicate key \"" + key + "\"" +
                    (schema_ == YamlSchema::Kubectl ? " (kubectl would silently keep the last one); remove one" : ""));
    }
    parent.key = std::move(key);
    parent.expecting_key = false;
    return {};
  }

  // Places a finished value (`n` values in all): as a map key, a map value or merge operand, a
  // list item or the document's root; registers its anchor.
  Status add_value(json v, uint64_t n, const yaml_char_t* anchor, const yaml_mark_t& mark) {
    if (anchor != nullptr) anchors_[reinterpret_cast<const char*>(anchor)] = Anchor{v, n};
    if (stack_.empty()) {
      root_ = std::move(v);
      has_root_ = true;
      return {};
    }
    Frame& parent = stack_.back();
    parent.count += n;
    if (parent.value.is_array()) {
      parent.value.push_back(std::move(v));
      return {};
    }
    if (parent.expecting_key) {
      if (schema_ == YamlSchema::Core) {
        if (!v.is_string()) return error(mark, "map keys must be plain strings");
        return set_key(v.get<std::string>(), mark);
      }
      auto text = kubectl_key_text(v);
      if (!text) {
        return error(mark, "map key " + v.dump() + " is a " + std::string(json_type_name(v)) +
                               " for kubectl, which cannot turn it into a JSON key; quote it");
      }
      return set_key(std::move(*text), mark);
    }
    parent.expecting_key = true;
    if (parent.merging) {
      // go-yaml v2: the merged maps' keys are set in order (a list merges its last map first, so
      // earlier maps win), over keys written before "<<"; keys written after it win.
      parent.merging = false;
      auto merge_one = [&](const json& m) -> Status {
        if (!m.is_object()) return error(mark, "a \"<<\" merge takes a map or a list of maps");
        for (const auto& [k, val] : m.items()) parent.value[k] = val;
        return {};
      };
      if (!v.is_array()) return merge_one(v);
      for (auto it = v.rbegin(); it != v.rend(); ++it) ERDMA_TRY(merge_one(*it));
      return {};
    }
    parent.value[parent.key] = std::move(v);
    return {};
  }

  Result<json> scalar(const yaml_event_t& ev) {
    const auto& sc = ev.data.scalar;
    std::string s(reinterpret_cast<const char*>(sc.value), sc.length);
    if (!is_valid_utf8(s)) return error(ev.start_mark, "value is not valid UTF-8");
    ERDMA_TRY(count(1, ev.start_mark));
    const std::string tag = sc.tag != nullptr ? reinterpret_cast<const char*>(sc.tag) : "";
    if (tag == "!" || tag == "tag:yaml.org,2002:str" || (tag.empty() && sc.style != YAML_PLAIN_SCALAR_STYLE)) {
      return json(std::move(s));  // quoted or tagged as a string
    }
    if (tag.empty()) {
      if (schema_ == YamlSchema::Kubectl && is_yaml_inf_or_nan(s)) {
        return error(ev.start_mark,
                     "\"" + s + "\" reads as a float with no JSON form (kubectl refuses it too); quote it");
      }
      return resolve_plain_scalar(s, schema_);
    }
    const json v = tag == "tag:yaml.org,2002:null" ? json(nullptr) : resolve_plain_scalar(s, schema_);
    if (tag == "tag:yaml.org,2002:int" || tag == "tag:yaml.org,2002:float" || tag == "tag:yaml.org,2002:bool" ||
        tag == "tag:yaml.org,2002:null") {
      if (tag.ends_with(":int") && v.is_number_integer()) return v;
      if (tag.ends_with(":float") && v.is_number()) return json(v.get<double>());
      if (tag.ends_with(":bool") && v.is_boolean()) return v;
      if (tag.ends_with(":null")) return v;
      return error(ev.start_mark, "\"" + s + "\" does not match its tag " + tag);
    }
    return error(ev.start_mark, "unsupported YAML tag \"" + tag + "\"");
  }

  std::string_view source_;
  const ParseLimits& limits_;
  YamlSchema schema_;
  yaml_parser_t parser_{};
  std::vector<Frame> stack_;
  std::map<std::string, Anchor> anchors_;
  json root_;
  bool has_root_ = false;
  uint64_t total_ = 0;
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
  } catch (const json::exception& e) {
    // parse_error, or out_of_range for a number too large for a double ("1e999").
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

Result<std::vector<json>> parse_documents(std::string_view text, std::string_view source, const ParseLimits& limits,
                                          YamlSchema schema) {
  std::vector<json> docs;
  if (is_json_text(text)) {
    ERDMA_TRY_ASSIGN(auto doc, parse_json_text(text, source, limits));
    docs.push_back(std::move(doc));
    return docs;
  }
  if (text.find('\0') != std::string_view::npos) {
    return make_error(ErrorCode::InvalidArgument, std::string(source) + ": contains a NUL byte; not a text file");
  }
  YamlLoader loader(text, source, limits, schema);
  ERDMA_TRY_ASSIGN(auto loaded, loader.load());
  docs = std::move(loaded);
  return docs;
}

Result<json> parse_document(std::string_view text, std::string_view source, const ParseLimits& limits) {
  ERDMA_TRY_ASSIGN(auto docs, parse_documents(text, source, limits));
  if (docs.empty()) return json::object();
  if (docs.size() > 1) {
    return make_error(ErrorCode::InvalidArgument,
                      std::string(source) + ": expected one document, found " + std::to_string(docs.size()));
  }
  return std::move(docs.front());
}

Result<std::string> read_file(const std::string& path, size_t max_bytes) {
  std::FILE* f = path == "-" ? stdin : std::fopen(path.c_str(), "rb");
  const std::string name = path == "-" ? std::string("<stdin>") : path;
  if (f == nullptr) {
    const int err = errno;
    return make_error(err == ENOENT   ? ErrorCode::NotFound
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

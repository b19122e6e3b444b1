// kubectl-compatible YAML reading and YAML stream writing (see kube_yaml.hpp).
#include "webhook/cli/kube_yaml.hpp"

#include <yaml.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <limits>
#include <optional>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>

#include "common/json_types.hpp"
#include "common/structured.hpp"
#include "common/text.hpp"

namespace erdma::webhook {
namespace {

using nlohmann::json;

constexpr size_t kMaxDepth = 128;
constexpr uint64_t kMaxNodes = 1'000'000;

bool is_dec(char c) { return c >= '0' && c <= '9'; }

bool is_inf_or_nan(std::string_view s) {
  for (std::string_view t : {".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF", ".nan",
                             ".NaN", ".NAN"}) {
    if (s == t) return true;
  }
  return false;
}

// Go's strconv.ParseUint(s, 0, 64) digits after the sign: 0x / 0o / 0b prefixes, a leading 0
// for octal, else decimal. nullopt if not an unsigned integer that fits.
std::optional<uint64_t> go_base0_unsigned(std::string_view s) {
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    s.remove_prefix(2);
  } else if (s.size() > 2 && s[0] == '0' && (s[1] == 'o' || s[1] == 'O')) {
    base = 8;
    s.remove_prefix(2);
  } else if (s.size() > 2 && s[0] == '0' && (s[1] == 'b' || s[1] == 'B')) {
    base = 2;
    s.remove_prefix(2);
  } else if (s.size() > 1 && s[0] == '0') {
    base = 8;
    s.remove_prefix(1);
  }
  if (s.empty()) return std::nullopt;
  uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

// [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?
bool yaml_style_float(std::string_view s) {
  size_t i = 0;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
  size_t int_digits = 0, frac_digits = 0;
  while (i < s.size() && is_dec(s[i])) ++i, ++int_digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && is_dec(s[i])) ++i, ++frac_digits;
    if (int_digits == 0 && frac_digits == 0) return false;
  } else if (int_digits == 0) {
    return false;
  }
  if (int_digits == 0 && frac_digits == 0) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    size_t exp_digits = 0;
    while (i < s.size() && is_dec(s[i])) ++i, ++exp_digits;
    if (exp_digits == 0) return false;
  }
  return i == s.size();
}

std::optional<json> parse_float(std::string_view s) {
  const std::string copy(s);
  errno = 0;
  char* end = nullptr;
  const double d = std::strtod(copy.c_str(), &end);
  if (end != copy.c_str() + copy.size() || errno == ERANGE || !std::isfinite(d)) return std::nullopt;
  return json(d);
}

// The string a resolved map key becomes (sigs.k8s.io/yaml turns bool and integer keys back into
// text); nullopt for keys it refuses or that the preview cannot reproduce exactly (floats).
std::optional<std::string> key_text(const json& k) {
  if (k.is_string()) return k.get<std::string>();
  if (k.is_boolean()) return k.get<bool>() ? "true" : "false";
  if (k.is_number_unsigned()) return std::to_string(k.get<uint64_t>());
  if (k.is_number_integer()) return std::to_string(k.get<int64_t>());
  return std::nullopt;
}

class Loader {
 public:
  Loader(std::string_view text, std::string_view source) : source_(source) {
    yaml_parser_initialize(&parser_);
    yaml_parser_set_input_string(&parser_, reinterpret_cast<const unsigned char*>(text.data()), text.size());
  }
  ~Loader() { yaml_parser_delete(&parser_); }
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  Result<std::vector<json>> load() {
    std::vector<json> docs;
    for (;;) {
      yaml_event_t ev;
      if (yaml_parser_parse(&parser_, &ev) == 0) return parser_error();
      std::unique_ptr<yaml_event_t, void (*)(yaml_event_t*)> guard(&ev, yaml_event_delete);
      switch (ev.type) {
        case YAML_STREAM_END_EVENT:
          return docs;
        case YAML_DOCUMENT_START_EVENT:
          anchors_.clear();
          root_ = nullptr;
          break;
        case YAML_DOCUMENT_END_EVENT:
          if (!root_.is_null()) docs.push_back(std::move(root_));
          break;
        case YAML_SCALAR_EVENT: {
          ERDMA_TRY_ASSIGN(auto v, scalar(ev));
          const auto* anchor = ev.data.scalar.anchor;
          const bool merge_key = ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE && v.is_string() && v == "<<";
          ERDMA_TRY(add(std::move(v), 1, anchor, ev.start_mark, merge_key));
          break;
        }
        case YAML_ALIAS_EVENT: {
          const std::string name(reinterpret_cast<const char*>(ev.data.alias.anchor));
          auto it = anchors_.find(name);
          if (it == anchors_.end()) return error(ev.start_mark, "alias *" + name + " refers to no complete anchor");
          ERDMA_TRY(count(it->second.count, ev.start_mark));
          const Anchor a = it->second;  // add() may register anchors and rehash
          ERDMA_TRY(add(a.value, a.count, nullptr, ev.start_mark, false));
          break;
        }
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT: {
          const bool is_map = ev.type == YAML_MAPPING_START_EVENT;
          const yaml_char_t* tag = is_map ? ev.data.mapping_start.tag : ev.data.sequence_start.tag;
          const yaml_char_t* anchor = is_map ? ev.data.mapping_start.anchor : ev.data.sequence_start.anchor;
          if (tag != nullptr) {
            const std::string t(reinterpret_cast<const char*>(tag));
            if (t != (is_map ? "tag:yaml.org,2002:map" : "tag:yaml.org,2002:seq") && t != "!") {
              return error(ev.start_mark, "unsupported YAML tag \"" + t + "\"");
            }
          }
          if (expecting_key()) return error(ev.start_mark, "a map key must be a scalar, not a " + std::string(is_map ? "map" : "list"));
          if (stack_.size() + 1 > kMaxDepth) {
            return make_error(ErrorCode::ResourceExhausted,
                              where(ev.start_mark) + ": nesting deeper than " + std::to_string(kMaxDepth) + " levels");
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
          const std::string anchor = std::move(f.anchor);
          ERDMA_TRY(add(std::move(f.value), f.count, anchor.empty() ? nullptr : reinterpret_cast<const yaml_char_t*>(anchor.c_str()), ev.start_mark, false));
          break;
        }
        default:
          break;
      }
    }
  }

 private:
  struct Frame {
    json value;
    bool expecting_key = true;
    bool merging = false;          // the pending value is the operand of a "<<" merge key
    std::string key;
    std::vector<std::string> explicit_keys;  // keys written in this map (duplicates are refused)
    std::string anchor;
    uint64_t count = 1;
  };
  struct Anchor {
    json value;
    uint64_t count = 1;
  };

  std::string where(const yaml_mark_t& m) const {
    return std::string(source_) + ':' + std::to_string(m.line + 1) + ':' + std::to_string(m.column + 1);
  }
  Error error(const yaml_mark_t& m, const std::string& what) const {
    return make_error(ErrorCode::InvalidArgument, where(m) + ": " + what);
  }
  Error parser_error() const {
    std::string msg = parser_.problem != nullptr ? parser_.problem : "malformed YAML";
    if (parser_.context != nullptr) msg = std::string(parser_.context) + ": " + msg;
    return make_error(ErrorCode::InvalidArgument, where(parser_.problem_mark) + ": invalid YAML: " + msg);
  }
  Status count(uint64_t n, const yaml_mark_t& m) {
    total_ += n;
    if (total_ > kMaxNodes) {
      return make_error(ErrorCode::ResourceExhausted, where(m) + ": more than " + std::to_string(kMaxNodes) +
                                                          " values after expanding aliases");
    }
    return {};
  }
  bool expecting_key() const { return !stack_.empty() && stack_.back().value.is_object() && stack_.back().expecting_key; }

  Result<json> scalar(const yaml_event_t& ev) {
    const auto& sc = ev.data.scalar;
    std::string s(reinterpret_cast<const char*>(sc.value), sc.length);
    if (!common::is_valid_utf8(s)) return error(ev.start_mark, "not valid UTF-8");
    ERDMA_TRY(count(1, ev.start_mark));
    const std::string tag = sc.tag != nullptr ? reinterpret_cast<const char*>(sc.tag) : "";
    const bool plain = sc.style == YAML_PLAIN_SCALAR_STYLE;
    if (tag.empty() || tag == "!" || tag == "tag:yaml.org,2002:str") {
      if (!plain || !tag.empty()) return json(s);
      if (is_inf_or_nan(s)) {
        return error(ev.start_mark, "\"" + s + "\" reads as a float with no JSON form (kubectl refuses it too); quote it");
      }
      return resolve_plain_scalar(s);
    }
    const json v = resolve_plain_scalar(s);
    const bool ok = (tag == "tag:yaml.org,2002:int" && v.is_number_integer()) ||
                    (tag == "tag:yaml.org,2002:float" && v.is_number()) ||
                    (tag == "tag:yaml.org,2002:bool" && v.is_boolean()) || (tag == "tag:yaml.org,2002:null" && v.is_null());
    if (ok) return tag == "tag:yaml.org,2002:float" ? json(v.get<double>()) : v;
    if (tag.starts_with("tag:yaml.org,2002:") &&
        (tag.ends_with(":int") || tag.ends_with(":float") || tag.ends_with(":bool") || tag.ends_with(":null"))) {
      return error(ev.start_mark, "\"" + s + "\" does not match its tag " + tag);
    }
    return error(ev.start_mark, "unsupported YAML tag \"" + tag + "\"");
  }

  // Places a finished value: as a map key, a map value (or merge operand), a list item or the root.
  Status add(json v, uint64_t n, const yaml_char_t* anchor, const yaml_mark_t& mark, bool merge_key) {
    if (anchor != nullptr) anchors_[reinterpret_cast<const char*>(anchor)] = Anchor{v, n};
    if (stack_.empty()) {
      root_ = std::move(v);
      return {};
    }
    Frame& parent = stack_.back();
    parent.count += n;
    if (parent.value.is_array()) {
      parent.value.push_back(std::move(v));
      return {};
    }
    if (parent.expecting_key) {
      parent.expecting_key = false;
      if (merge_key) {
        parent.merging = true;
        return {};
      }
      auto text = key_text(v);
      if (!text) {
        return error(mark, "map key " + v.dump() + " is a " + std::string(common::json_type_name(v)) +
                               " for kubectl, which cannot turn it into a JSON key; quote it");
      }
      if (std::find(parent.explicit_keys.begin(), parent.explicit_keys.end(), *text) != parent.explicit_keys.end()) {
        return error(mark, "duplicate key \"" + *text + "\" (kubectl would silently keep the last one); remove one");
      }
      parent.explicit_keys.push_back(*text);
      parent.key = std::move(*text);
      return {};
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
      if (v.is_array()) {
        for (auto it = v.rbegin(); it != v.rend(); ++it) {
          if (auto s = merge_one(*it); !s) return s;
        }
        return {};
      }
      return merge_one(v);
    }
    parent.value[parent.key] = std::move(v);
    return {};
  }

  std::string_view source_;
  yaml_parser_t parser_{};
  std::vector<Frame> stack_;
  std::map<std::string, Anchor> anchors_;
  json root_;
  uint64_t total_ = 0;
};

bool needs_quotes(const std::string& s) {
  if (s.empty() || s == "<<" || s == "=" || is_inf_or_nan(s)) return true;
  if (!resolve_plain_scalar(s).is_string()) return true;
  if (s.find('\n') != std::string::npos) return false;  // written as a literal block: always a string
  // YAML 1.2 core readers (the tree's own config loader among them) resolve a few forms go-yaml
  // does not, e.g. "0o17" is an int in both but ".5" differs nowhere; check with that reader too.
  auto core = common::parse_document("v: " + s, "<quote-check>");
  return !core.ok() || !core->is_object() || !(*core)["v"].is_string() || (*core)["v"] != s;
}

class Emitter {
 public:
  Emitter() {
    yaml_emitter_initialize(&emitter_);
    yaml_emitter_set_output(&emitter_, &Emitter::write, this);
    yaml_emitter_set_unicode(&emitter_, 1);
    yaml_emitter_set_width(&emitter_, -1);
    yaml_emitter_set_indent(&emitter_, 2);
  }
  ~Emitter() { yaml_emitter_delete(&emitter_); }
  Emitter(const Emitter&) = delete;
  Emitter& operator=(const Emitter&) = delete;

  Result<std::string> run(const std::vector<json>& docs) {
    yaml_event_t ev;
    yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING);
    emit(ev);
    for (const auto& d : docs) {
      yaml_document_start_event_initialize(&ev, nullptr, nullptr, nullptr, 0);
      emit(ev);
      node(d);
      yaml_document_end_event_initialize(&ev, 1);
      emit(ev);
    }
    yaml_stream_end_event_initialize(&ev);
    emit(ev);
    if (!failed_) yaml_emitter_flush(&emitter_);
    if (failed_) return make_error(ErrorCode::Internal, "writing YAML: " + problem_);
    return std::move(out_);
  }

 private:
  static int write(void* self, unsigned char* buffer, size_t size) {
    static_cast<Emitter*>(self)->out_.append(reinterpret_cast<const char*>(buffer), size);
    return 1;
  }

  // Every value comes from nlohmann::json (valid UTF-8, no tags, no anchors), so libyaml has no
  // reason to refuse an event; if it ever does, that is a bug here, reported by run().
  void emit(yaml_event_t& ev) {
    if (failed_) {
      yaml_event_delete(&ev);
      return;
    }
    if (yaml_emitter_emit(&emitter_, &ev) == 0) {
      failed_ = true;
      problem_ = emitter_.problem != nullptr ? emitter_.problem : "failed";
    }
  }

  void scalar(const std::string& text, yaml_scalar_style_t style) {
    yaml_event_t ev;
    yaml_scalar_event_initialize(&ev, nullptr, nullptr, reinterpret_cast<const yaml_char_t*>(text.data()),
                                 static_cast<int>(text.size()), 1, 1, style);
    emit(ev);
  }

  void string(const std::string& s) {
    if (needs_quotes(s)) return scalar(s, YAML_DOUBLE_QUOTED_SCALAR_STYLE);
    scalar(s, s.find('\n') != std::string::npos ? YAML_LITERAL_SCALAR_STYLE : YAML_ANY_SCALAR_STYLE);
  }

  void node(const json& v) {
    yaml_event_t ev;
    switch (v.type()) {
      case json::value_t::object:
        yaml_mapping_start_event_initialize(&ev, nullptr, nullptr, 1, YAML_BLOCK_MAPPING_STYLE);
        emit(ev);
        for (const auto& [k, val] : v.items()) {
          string(k);
          node(val);
        }
        yaml_mapping_end_event_initialize(&ev);
        emit(ev);
        return;
      case json::value_t::array:
        yaml_sequence_start_event_initialize(&ev, nullptr, nullptr, 1, YAML_BLOCK_SEQUENCE_STYLE);
        emit(ev);
        for (const auto& item : v) node(item);
        yaml_sequence_end_event_initialize(&ev);
        emit(ev);
        return;
      case json::value_t::string:
        return string(v.get<std::string>());
      case json::value_t::null:
        return scalar("null", YAML_PLAIN_SCALAR_STYLE);
      default:  // numbers and booleans print as JSON does, which both YAML readers take back as such
        return scalar(v.dump(), YAML_PLAIN_SCALAR_STYLE);
    }
  }

  yaml_emitter_t emitter_{};
  std::string out_;
  bool failed_ = false;
  std::string problem_;
};

}  // namespace

json resolve_plain_scalar(std::string_view s) {
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  for (std::string_view t : {"y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"}) {
    if (s == t) return true;
  }
  for (std::string_view f : {"n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"}) {
    if (s == f) return false;
  }
  const char c = s.front();
  if (c == '.') {
    // Go's ParseFloat on the text as written.
    if (yaml_style_float(s)) {
      if (auto f = parse_float(s)) return *f;
    }
    return std::string(s);
  }
  if (!(is_dec(c) || c == '+' || c == '-')) return std::string(s);
  std::string plain;
  for (char ch : s) {
    if (ch != '_') plain += ch;
  }
  std::string_view digits = plain;
  const bool neg = !digits.empty() && digits.front() == '-';
  if (!digits.empty() && (digits.front() == '-' || digits.front() == '+')) digits.remove_prefix(1);
  if (auto u = go_base0_unsigned(digits)) {
    if (neg) {
      if (*u <= uint64_t{1} << 63) {
        return json(*u == uint64_t{1} << 63 ? std::numeric_limits<int64_t>::min() : -static_cast<int64_t>(*u));
      }
    } else if (*u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return json(static_cast<int64_t>(*u));
    } else if (plain.front() != '+') {
      return json(*u);  // ParseUint takes no sign
    }
  }
  if (yaml_style_float(plain)) {
    if (auto f = parse_float(plain)) return *f;
  }
  return std::string(s);
}

Result<std::vector<json>> parse_kube_manifests(std::string_view text, std::string_view source) {
  for (char ch : text) {
    if (ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n') continue;
    if (ch == '{' || ch == '[') return common::parse_documents(text, source);
    break;
  }
  if (text.find('\0') != std::string_view::npos) {
    return make_error(ErrorCode::InvalidArgument, std::string(source) + ": contains a NUL byte; not a text file");
  }
  Loader loader(text, source);
  return loader.load();
}

Result<std::string> to_yaml_stream(const std::vector<json>& docs) {
  Emitter e;
  return e.run(docs);
}

}  // namespace erdma::webhook

// kubectl-compatible YAML reading and YAML stream writing (see kube_yaml.hpp).
#include "webhook/cli/kube_yaml.hpp"

#include <yaml.h>

#include <string>

#include "common/structured.hpp"
#include "common/yaml_scalars.hpp"

namespace erdma::webhook {
namespace {

using nlohmann::json;

bool needs_quotes(const std::string& s) {
  if (s.empty() || s == "<<" || s == "=" || common::is_yaml_inf_or_nan(s)) return true;
  if (!common::resolve_plain_scalar(s, common::YamlSchema::Kubectl).is_string()) return true;
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
      case json::value_t::string: return string(v.get<std::string>());
      case json::value_t::null: return scalar("null", YAML_PLAIN_SCALAR_STYLE);
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

Result<std::vector<json>> parse_kube_manifests(std::string_view text, std::string_view source) {
  return common::parse_documents(text, source, {}, common::YamlSchema::Kubectl);
}

Result<std::string> to_yaml_stream(const std::vector<json>& docs) {
  Emitter e;
  return e.run(docs);
}

}  // namespace erdma::webhook

// The CDI createRuntime hook's request and answer (see cdi_hook.hpp).
#include "agent/core/cdi_hook.hpp"

#include <algorithm>
#include <vector>

#include "agent/core/cdi_spec.hpp"
#include "common/json_read.hpp"
#include "common/text.hpp"

namespace erdma::agent {
namespace {

using common::JsonAt;
using common::JsonKind;
using nlohmann::json;

bool is_sandbox_id(std::string_view id) {
  if (id.empty() || id.size() > 128) return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '.' ||
           c == '-';
  });
}

// "a b c" -> {"a", "b", "c"}; an empty word (two spaces in a row) stays an empty word.
std::vector<std::string> words_of(std::string_view line) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const auto space = line.find(' ', start);
    out.emplace_back(line.substr(start, space == std::string_view::npos ? std::string_view::npos : space - start));
    if (space == std::string_view::npos) return out;
    start = space + 1;
  }
}

}  // namespace

CdiHookPaths cdi_hook_paths(std::string_view dir) {
  std::string base(dir);
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  return {base + "/" + std::string(kCdiHookBinary), base + "/" + std::string(kCdiHookSocket)};
}

json cdi_hook_entry(const CdiHookPaths& paths, std::string_view claim_uid) {
  return json{{"hookName", "createRuntime"},
              {"path", paths.binary},
              {"args", json::array({std::string(kCdiHookBinary), ERDMA_CDI_HOOK_MODE_SMCR, "--claim",
                                    std::string(claim_uid), "--socket", paths.socket})}};
}

Result<HookRequest> parse_hook_request(std::string_view bytes) {
  if (bytes.size() > kMaxHookRequestBytes) {
    return make_error(ErrorCode::InvalidArgument,
                      "the request is larger than " + std::to_string(kMaxHookRequestBytes) + " bytes");
  }
  const auto eol = bytes.find('\n');
  if (eol == std::string_view::npos) {
    return make_error(ErrorCode::InvalidArgument, "the request has no header line (is the caller erdma-cdi-hook?)");
  }
  const auto words = words_of(bytes.substr(0, eol));
  const std::string want = std::string(ERDMA_CDI_HOOK_PROTOCOL) + " " + ERDMA_CDI_HOOK_MODE_SMCR + " <claim uid>";
  if (words.size() != 3 || words[0] != ERDMA_CDI_HOOK_PROTOCOL || words[1] != ERDMA_CDI_HOOK_MODE_SMCR) {
    return make_error(ErrorCode::InvalidArgument,
                      "the header line " + common::json_quote(common::cut_for_message(bytes.substr(0, eol), 80)) +
                          " is not \"" + want + "\" (hook and agent of different versions?)");
  }
  HookRequest out;
  out.claim_uid = words[2];
  if (!is_claim_uid(out.claim_uid)) {
    return make_error(ErrorCode::InvalidArgument,
                      "the claim UID " + common::json_quote(out.claim_uid) + " is not a Kubernetes UID");
  }
  const auto text = bytes.substr(eol + 1);
  const json state = json::parse(text.begin(), text.end(), nullptr, false);
  if (state.is_discarded() || !state.is_object()) {
    return make_error(ErrorCode::InvalidArgument, "the OCI state after the header is not a JSON object");
  }
  const JsonAt root(state, "OCI state");
  ERDMA_TRY_ASSIGN(out.container_id, root.member("id").string_or(""));
  ERDMA_TRY_ASSIGN(out.pid, root.member("pid").int64_or(0, 0, INT32_MAX));
  const JsonAt annotations = root.member("annotations");
  ERDMA_TRY(annotations.expect_optional(JsonKind::Object));
  for (const auto key : {kContainerdSandboxIdAnnotation, kCrioSandboxIdAnnotation}) {
    ERDMA_TRY_ASSIGN(out.sandbox_id, annotations.member(key).string_or(""));
    if (!out.sandbox_id.empty()) break;
  }
  if (out.sandbox_id.empty()) {
    return make_error(ErrorCode::FailedPrecondition,
                      "the runtime's OCI state for container " + common::json_quote(out.container_id) +
                          " names no pod sandbox (annotation " + std::string(kContainerdSandboxIdAnnotation) + " or " +
                          std::string(kCrioSandboxIdAnnotation) +
                          "): is the container started by a CRI runtime whose runtime passes annotations to hooks?");
  }
  if (!is_sandbox_id(out.sandbox_id)) {
    return make_error(ErrorCode::FailedPrecondition,
                      "the sandbox id " + common::json_quote(out.sandbox_id.substr(0, 80)) + " is not a runtime's id");
  }
  return out;
}

Status check_hook_claim(const std::optional<PreparedClaim>& recorded, std::string_view uid) {
  if (!recorded) {
    return make_error(ErrorCode::NotFound, "claim " + std::string(uid) +
                                               " is not prepared on this node (unprepared already, or never "
                                               "prepared by this agent)");
  }
  if (!recorded->smcr) {
    return make_error(ErrorCode::FailedPrecondition, "claim " + recorded->ns + "/" + recorded->name +
                                                         " is not an SMC-R claim: nothing to set up in its pods");
  }
  return {};
}

std::string hook_answer(bool ok, std::string_view text) {
  std::string out = ok ? "ok " : "error ";
  for (const char c : text) out.push_back(c == '\n' || c == '\r' ? ' ' : c);
  if (out.size() > kMaxHookAnswerBytes - 1) out.resize(kMaxHookAnswerBytes - 1);
  out.push_back('\n');
  return out;
}

}  // namespace erdma::agent

// The DRA driver's NodePrepareResources / NodeUnprepareResources (see dra_service.hpp).
#include "agent/dra/dra_service.hpp"

#include <algorithm>
#include <chrono>

#include <fcntl.h>
#include <sys/stat.h>

#include "agent/core/cdi_spec.hpp"
#include "agent/core/config.hpp"
#include "agent/core/dra_slices.hpp"
#include "agent/kube/api_paths.hpp"
#include "agent/kube/events.hpp"
#include "common/guarded.hpp"
#include "common/json_read.hpp"
#include "common/k8s_names.hpp"
#include "common/log.hpp"
#include "common/text.hpp"

namespace erdma::agent::dra {
namespace log = common::log;

namespace {

// Spec files are read by the container runtime (root); the checkpoint only by the agent.
constexpr mode_t kSpecMode = 0644;
constexpr mode_t kCheckpointMode = 0600;

constexpr const char* kPrepareHelp =
    "Time to answer one NodePrepareResources call (all claims of one pod for this driver), by result "
    "(error: at least one claim answered with an error)";
constexpr const char* kUnprepareHelp =
    "Time to answer one NodeUnprepareResources call, by result (error: at least one claim answered with an error)";

std::string claim_text(const drapb::Claim& c) {
  return "claim " + c.namespace_() + "/" + c.name() + " (" + c.uid() + ")";
}

void fill_devices(const PreparedClaim& claim, drapb::NodePrepareResourceResponse& out) {
  out.clear_devices();
  for (const auto& d : claim.devices) {
    auto* dev = out.add_devices();
    for (const auto& r : d.requests) dev->add_request_names(r);
    dev->set_pool_name(d.pool);
    dev->set_device_name(d.device);
    for (const auto& id : d.cdi_ids) dev->add_cdi_device_ids(id);
    if (!d.share_id.empty()) dev->set_share_id(d.share_id);
  }
}

// The kubelet's reference, checked before it is used in a path or a file name.
Status check_ref(const drapb::Claim& c) {
  if (!is_claim_uid(c.uid())) {
    return make_error(ErrorCode::InvalidArgument, claim_text(c) + ": the UID is not a Kubernetes UID");
  }
  if (const auto check = common::check_name(common::NameRule::Dns1123Label, c.namespace_()); !check) {
    return make_error(ErrorCode::InvalidArgument,
                      claim_text(c) + ": the namespace " + common::describe(check, "a namespace name"));
  }
  if (const auto check = common::check_name(common::NameRule::Dns1123Subdomain, c.name()); !check) {
    return make_error(ErrorCode::InvalidArgument,
                      claim_text(c) + ": the name " + common::describe(check, "a ResourceClaim name"));
  }
  return {};
}

}  // namespace

DraService::DraService(DraServiceConfig config, kube::Api& api, DeviceScanFn scan, SafeDir plugin_dir, SafeDir cdi_dir,
                       Checkpoint checkpoint, common::metrics::Registry* metrics)
    : config_(std::move(config)),
      api_(api),
      scan_(std::move(scan)),
      plugin_dir_(std::move(plugin_dir)),
      cdi_dir_(std::move(cdi_dir)),
      checkpoint_(std::move(checkpoint)) {
  if (metrics == nullptr) return;
  auto& r = *metrics;
  const auto buckets = dra_latency_buckets();
  prepare_latency_.ok =
      &r.histogram("erdma_agent_dra_prepare_duration_seconds", kPrepareHelp, buckets, {{"result", "ok"}});
  prepare_latency_.error =
      &r.histogram("erdma_agent_dra_prepare_duration_seconds", kPrepareHelp, buckets, {{"result", "error"}});
  unprepare_latency_.ok =
      &r.histogram("erdma_agent_dra_unprepare_duration_seconds", kUnprepareHelp, buckets, {{"result", "ok"}});
  unprepare_latency_.error =
      &r.histogram("erdma_agent_dra_unprepare_duration_seconds", kUnprepareHelp, buckets, {{"result", "error"}});
}

Result<std::unique_ptr<DraService>> DraService::open(DraServiceConfig config, kube::Api& api, DeviceScanFn scan,
                                                     common::metrics::Registry* metrics) {
  ERDMA_TRY_ASSIGN(SafeDir plugin_dir, SafeDir::open(config.plugin_dir, true));
  ERDMA_TRY_ASSIGN(SafeDir cdi_dir, SafeDir::open(config.cdi_dir, true));
  const std::string file(kCheckpointFile);
  const std::string full = plugin_dir.path() + "/" + file;
  ERDMA_TRY_ASSIGN(auto text, plugin_dir.read_regular(file, kMaxCheckpointBytes));
  Checkpoint checkpoint;
  if (text) {
    auto decoded = decode_checkpoint(text->content);
    if (!decoded) {
      return make_error(ErrorCode::InvalidArgument,
                        "DRA checkpoint " + full +
                            " is unreadable, so the claims prepared on this node are unknown; "
                            "the DRA driver does not start and deletes nothing. " +
                            decoded.error().message);
    }
    checkpoint = std::move(*decoded);
  } else {
    struct stat st {};
    if (::fstatat(plugin_dir.fd(), file.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
      return make_error(ErrorCode::InvalidArgument, "DRA checkpoint " + full +
                                                        " is not a regular file; the DRA driver does not start and "
                                                        "deletes nothing (remove it if no claim is prepared here)");
    }
  }
  std::unique_ptr<DraService> service(new DraService(std::move(config), api, std::move(scan), std::move(plugin_dir),
                                                     std::move(cdi_dir), std::move(checkpoint), metrics));
  ERDMA_TRY_ASSIGN(const auto names, service->cdi_dir_.list());
  for (const auto& stale : stale_spec_files(service->checkpoint_, names, service->config_.driver)) {
    auto removed = service->cdi_dir_.remove(stale);
    if (!removed) return std::move(removed).error();
    log::info("removed a CDI spec no prepared claim owns").kv("file", service->cdi_dir_.path() + "/" + stale);
    service->removed_at_start_.push_back(stale);
  }
  log::info("DRA driver's checkpoint read")
      .kv("file", full)
      .kv("claims", static_cast<uint64_t>(service->checkpoint_.claims.size()));
  return service;
}

Checkpoint DraService::checkpoint() const {
  std::lock_guard lock(mu_);
  return checkpoint_;
}

std::optional<PreparedClaim> DraService::recorded(const std::string& claim_uid) const {
  std::lock_guard lock(mu_);
  if (auto it = checkpoint_.claims.find(claim_uid); it != checkpoint_.claims.end()) return it->second;
  return std::nullopt;
}

DraCounters DraService::counters() const {
  std::lock_guard lock(mu_);
  return counters_;
}

Status DraService::write_checkpoint(const Checkpoint& next) {
  auto w = plugin_dir_.write_atomically(std::string(kCheckpointFile), encode_checkpoint(next), kCheckpointMode);
  if (!w) return std::move(w).error();
  return {};
}

Result<bool> DraService::answer_recorded(const std::string& uid, drapb::NodePrepareResourceResponse& out) {
  const auto known = decide_unprepare(checkpoint_, uid);
  if (!known.known) return false;
  // The spec directory is emptied at reboot while the checkpoint stays: a recorded claim whose
  // spec is gone is decided again (same UID, same allocation, same spec).
  ERDMA_TRY_ASSIGN(const auto spec, cdi_dir_.read_regular(known.claim.cdi_spec_file, 1u << 20));
  if (!spec) return false;
  fill_devices(known.claim, out);
  ++counters_.already;
  return true;
}

drapb::NodePrepareResourceResponse DraService::prepare_one(const drapb::Claim& c) {
  drapb::NodePrepareResourceResponse out;
  auto fail = [&](const Error& e) {
    out.clear_devices();
    out.set_error(e.message);
    std::lock_guard lock(mu_);
    ++counters_.prepare_errors;
    log::warn("claim not prepared")
        .kv("claim", c.namespace_() + "/" + c.name())
        .kv("uid", c.uid())
        .kv("error", e.message);
    return out;
  };
  if (auto s = check_ref(c); !s) return fail(s.error());
  {
    std::lock_guard lock(mu_);
    auto recorded = answer_recorded(c.uid(), out);
    if (recorded && *recorded) return out;
  }
  // The API read, outside the lock: calls for other claims go on meanwhile.
  auto object = api_.get(kube::resource_claim_path(c.namespace_(), c.name()));
  if (!object) {
    return fail(make_error(object.error().code,
                           claim_text(c) + ": reading it from the API server failed: " + object.error().message +
                               " (the kubelet retries; check the agent's RBAC: get "
                               "resourceclaims in resource.k8s.io)"));
  }
  std::unique_lock lock(mu_);
  if (auto recorded = answer_recorded(c.uid(), out); recorded && *recorded) return out;
  const auto cards = scan_();
  auto plan = plan_claim(*object, ClaimRef{c.namespace_(), c.name(), c.uid()}, cards, config_.pool, config_.driver);
  if (!plan) {
    lock.unlock();
    return fail(plan.error());
  }
  const auto& allowed = config_.smcr_allowed_namespaces;
  if (plan->mode == ClaimMode::Smcr && !namespace_allowed(allowed, c.namespace_())) {
    lock.unlock();
    return fail(make_error(ErrorCode::PermissionDenied,
                           claim_text(c) + ": SMC-R claims are refused in namespace " + c.namespace_() +
                               ": it is not in smcr.allowedNamespaces of the agent's config (" +
                               common::join(allowed, ",") + "); ask the cluster admin to add it"));
  }
  auto spec = build_cdi_spec(plan->cdi, cards, config_.allocate, config_.driver);
  if (!spec) {
    lock.unlock();
    return fail(spec.error());
  }
  auto wanted = prepared_claim(*plan, *spec);
  if (!wanted) {
    lock.unlock();
    return fail(wanted.error());
  }
  auto decision = decide_prepare(checkpoint_, *wanted);
  if (!decision) {
    lock.unlock();
    return fail(decision.error());
  }
  // Prepare, or AlreadyPrepared with its spec file gone (answer_recorded said so): write both.
  auto written = cdi_dir_.write_atomically(spec->file_name, spec->spec.dump(2) + "\n", kSpecMode);
  if (!written) {
    lock.unlock();
    return fail(
        make_error(written.error().code, claim_text(c) + ": writing its CDI spec failed: " + written.error().message));
  }
  if (*written) ++counters_.spec_writes;
  const bool is_new = decision->verdict == PrepareVerdict::Prepare;
  if (is_new) {
    Checkpoint next = with_claim(checkpoint_, decision->claim);
    if (auto s = write_checkpoint(next); !s) {
      // Nobody owns the spec now: remove it rather than leave it to the next start.
      (void)cdi_dir_.remove(spec->file_name);
      lock.unlock();
      return fail(
          make_error(s.error().code, claim_text(c) + ": recording it in the checkpoint failed: " + s.error().message));
    }
    checkpoint_ = std::move(next);
    ++counters_.prepared;
  } else {
    ++counters_.already;
  }
  for (const auto& note : spec->notes) log::warn("claim prepared with a note").kv("uid", c.uid()).kv("note", note);
  fill_devices(decision->claim, out);
  log::info(is_new ? "claim prepared" : "claim's CDI spec written again")
      .kv("claim", c.namespace_() + "/" + c.name())
      .kv("uid", c.uid())
      .kv("mode", to_string(plan->mode))
      .kv("cards", common::join(spec->cards, ","));
  lock.unlock();
  if (is_new && config_.on_prepared) {
    const std::string what = "claim " + c.name() + " prepared by the DRA driver " + config_.driver + ": " +
                             std::string(to_string(plan->mode)) + ", cards " + common::join(spec->cards, ",");
    for (const auto& pod : reserved_pods(*object)) config_.on_prepared(c.namespace_() + "/" + pod.name, pod.uid, what);
  }
  if (config_.report_status) report_status(c, std::move(*object), decision->claim);
  return out;
}

void DraService::report_status(const drapb::Claim& c, nlohmann::json object, const PreparedClaim& claim) {
  if (config_.pod_side_status && claim.smcr) {
    const PodSideStatus waiting{false, "WaitingForPod",
                                "set up when the pod's first container is created (the CDI hook); until then "
                                "the claim names no interface, since the pod may have a network namespace of its own",
                                kube::rfc3339(std::chrono::system_clock::now())};
    return put_device_status(c.namespace_(), c.name(), c.uid(), std::move(object),
                             pod_side_status_entries(claim, {}, waiting, config_.driver));
  }
  put_device_status(c.namespace_(), c.name(), c.uid(), std::move(object),
                    device_status_entries(claim,
                                          config_.networks ? config_.networks() : std::map<std::string, CardNetwork>{},
                                          config_.driver));
}

void DraService::report_pod_side(const PreparedClaim& claim, const std::map<std::string, CardNetwork>& networks,
                                 const PodSideStatus& side) {
  auto object = api_.get(kube::resource_claim_path(claim.ns, claim.name));
  if (!object) return count_status(claim.uid, false, object.error().message);
  if (common::JsonAt(*object, "ResourceClaim").path("metadata.uid").if_string() != claim.uid) {
    return count_status(claim.uid, false, "the claim was recreated");
  }
  PodSideStatus kept = side;  // the condition's time moves only when its status does
  kept.since = ready_since(*object, side.ready, side.since, config_.driver);
  auto entries = pod_side_status_entries(claim, networks, kept, config_.driver);
  put_device_status(claim.ns, claim.name, claim.uid, std::move(*object), entries);
}

void DraService::count_status(const std::string& uid, bool ok, const std::string& why) {
  std::lock_guard lock(mu_);
  ++(ok ? counters_.status_reports : counters_.status_errors);
  if (!ok) log::warn("claim's device status not written").kv("uid", uid).kv("error", why);
}

void DraService::put_device_status(const std::string& ns, const std::string& name, const std::string& uid,
                                   nlohmann::json object, const Result<nlohmann::json>& entries) {
  auto count = [&](bool ok, const std::string& why) { count_status(uid, ok, why); };
  if (!entries) return count(false, entries.error().message);
  const std::string path = kube::resource_claim_status_path(ns, name);
  // Two tries: a 409 (someone else wrote the claim meanwhile) is answered with a fresh read.
  for (int attempt = 0;; ++attempt) {
    const auto merged = merged_device_status(object, *entries, config_.driver);
    const common::JsonAt status = common::JsonAt(object, "ResourceClaim").member("status");
    const nlohmann::json* devices = status.member("devices").get();
    if (status.is(common::JsonKind::Object) && (devices != nullptr ? *devices : nlohmann::json::array()) == merged) {
      return count(true, "");  // already says so
    }
    // The answer is the claim plan_claim read: an object; a status of another type is replaced.
    if (!object.is_object()) return count(false, "the API server's answer is not a ResourceClaim");
    if (!status.is(common::JsonKind::Object)) object["status"] = nlohmann::json::object();
    object["status"]["devices"] = merged;
    auto put = api_.replace(path, object);
    if (put) return count(true, "");
    if (put.error().code != ErrorCode::FailedPrecondition || attempt > 0) return count(false, put.error().message);
    auto fresh = api_.get(kube::resource_claim_path(ns, name));
    if (!fresh) return count(false, fresh.error().message);
    object = std::move(*fresh);
    if (common::JsonAt(object, "ResourceClaim").path("metadata.uid").if_string() != uid) {
      return count(false, "the claim was recreated");
    }
  }
}

std::string DraService::unprepare_one(const drapb::Claim& c) {
  std::lock_guard lock(mu_);
  const auto decision = decide_unprepare(checkpoint_, c.uid());
  if (!decision.known) {
    ++counters_.unprepared;
    return "";  // never prepared here, or unprepared already
  }
  auto removed = cdi_dir_.remove(decision.claim.cdi_spec_file);
  if (!removed) {
    ++counters_.unprepare_errors;
    log::warn("claim not unprepared").kv("uid", c.uid()).kv("error", removed.error().message);
    return claim_text(c) + ": removing its CDI spec failed: " + removed.error().message;
  }
  Checkpoint next = without_claim(checkpoint_, c.uid());
  if (auto s = write_checkpoint(next); !s) {
    ++counters_.unprepare_errors;
    log::warn("claim not unprepared").kv("uid", c.uid()).kv("error", s.error().message);
    return claim_text(c) +
           ": its CDI spec is removed, but updating the checkpoint failed (the kubelet retries): " + s.error().message;
  }
  checkpoint_ = std::move(next);
  ++counters_.unprepared;
  log::info("claim unprepared").kv("claim", decision.claim.ns + "/" + decision.claim.name).kv("uid", c.uid());
  return "";
}

drapb::NodePrepareResourcesResponse DraService::prepare(const drapb::NodePrepareResourcesRequest& request) {
  const auto start = std::chrono::steady_clock::now();
  drapb::NodePrepareResourcesResponse response;
  bool ok = true;
  for (const auto& c : request.claims()) {
    // Each claim on its own: an unexpected failure fails that claim, not the claims beside it.
    auto& answer = (*response.mutable_claims())[c.uid()];
    if (!common::run_guarded("NodePrepareResources", [&] { answer = prepare_one(c); })) {
      answer.clear_devices();
      answer.set_error(claim_text(c) + ": unexpected internal error (the agent's log has it); the kubelet retries");
    }
    ok = ok && answer.error().empty();
  }
  prepare_latency_.observe(ok, start);
  return response;
}

drapb::NodeUnprepareResourcesResponse DraService::unprepare(const drapb::NodeUnprepareResourcesRequest& request) {
  const auto start = std::chrono::steady_clock::now();
  drapb::NodeUnprepareResourcesResponse response;
  bool ok = true;
  for (const auto& c : request.claims()) {
    std::string error = unprepare_one(c);
    ok = ok && error.empty();
    (*response.mutable_claims())[c.uid()].set_error(std::move(error));
  }
  unprepare_latency_.observe(ok, start);
  return response;
}

grpc::Status DraService::NodePrepareResources(grpc::ServerContext*, const drapb::NodePrepareResourcesRequest* request,
                                              drapb::NodePrepareResourcesResponse* response) {
  *response = prepare(*request);
  return grpc::Status::OK;
}

grpc::Status DraService::NodeUnprepareResources(grpc::ServerContext*,
                                                const drapb::NodeUnprepareResourcesRequest* request,
                                                drapb::NodeUnprepareResourcesResponse* response) {
  *response = unprepare(*request);
  return grpc::Status::OK;
}

}  // namespace erdma::agent::dra

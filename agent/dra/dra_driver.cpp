// The DRA driver as the daemon runs it (see dra_driver.hpp).
#include "agent/dra/dra_driver.hpp"

#include "agent/core/plugin_model.hpp"
#include "agent/dra/dra_facts.hpp"
#include "agent/kube/api_paths.hpp"
#include "agent/kube/events.hpp"
#include "agent/sys/dra_node_facts.hpp"
#include "agent/sys/file_install.hpp"
#include "agent/sys/netns.hpp"
#include "common/json_read.hpp"
#include "common/log.hpp"

namespace erdma::agent {
namespace log = common::log;

namespace {
constexpr size_t kEventQueue = 256;
constexpr const char* kSysRoot = "/sys";

// metadata.uid of an API answer (the Node's), or "" when it is missing or not a string.
std::string uid_of(const nlohmann::json& object) {
  return common::JsonAt(object, "object").path("metadata.uid").if_string().value_or("");
}

}  // namespace

ApiPodEvents::ApiPodEvents(kube::Api& api, std::string node_name)
    : api_(api), poster_(api, std::move(node_name)), queue_(1, kEventQueue, [this](Job&& job, bool stopping) {
        if (!stopping) post(job);
      }) {}

ApiPodEvents::~ApiPodEvents() { stop(); }

void ApiPodEvents::stop() { queue_.stop(); }

void ApiPodEvents::warning(const std::string& pod, std::string_view uid, std::string_view reason,
                           const std::string& message) {
  Job job{pod, std::string(uid), std::string(reason), message, kube::EventType::Warning};
  if (queue_.submit(job)) log::warn("pod Event dropped: the queue is full").kv("pod", pod).kv("reason", reason);
}

void ApiPodEvents::normal(const std::string& pod, std::string_view uid, std::string_view reason,
                          const std::string& message) {
  Job job{pod, std::string(uid), std::string(reason), message, kube::EventType::Normal};
  if (queue_.submit(job)) log::warn("pod Event dropped: the queue is full").kv("pod", pod).kv("reason", reason);
}

void ApiPodEvents::claim_warning(const std::string& claim, std::string_view reason, const std::string& message) {
  Job job{claim, "", std::string(reason), message, kube::EventType::Warning, true};
  if (queue_.submit(job)) log::warn("claim Event dropped: the queue is full").kv("claim", claim).kv("reason", reason);
}

void ApiPodEvents::post(const Job& job) {
  const auto slash = job.pod.find('/');
  if (slash == std::string::npos) return;
  if (job.claim) {
    const std::string ns = job.pod.substr(0, slash);
    auto claim = api_.get(kube::resource_claim_path(ns, job.pod.substr(slash + 1)));
    if (!claim) {
      log::warn("cannot post a claim's Event")
          .kv("claim", job.pod)
          .kv("reason", job.reason)
          .kv("error", claim.error().message);
      return;
    }
    for (const auto& pod : reserved_pods(*claim)) {
      post(Job{ns + "/" + pod.name, pod.uid, job.reason, job.message, job.type, false});
    }
    return;
  }
  // kubectl describe pod shows only the Events whose involvedObject.uid is the pod's. The caller
  // knows it (the runtime's sandbox metadata, the claim's reservedFor): the agent never reads pods.
  if (job.uid.empty()) {
    log::warn("cannot post a pod Event: the pod's UID is unknown").kv("pod", job.pod).kv("reason", job.reason);
    return;
  }
  const kube::PodRef ref{job.pod.substr(0, slash), job.pod.substr(slash + 1), job.uid};
  auto posted = poster_.post(ref, job.type, job.reason, job.message);
  if (!posted) {
    log::warn("cannot post a pod Event")
        .kv("pod", job.pod)
        .kv("reason", job.reason)
        .kv("error", posted.error().message);
  }
}

DraDriver::DraDriver(const AgentConfig& cfg, DeviceState& state, common::metrics::Registry& registry)
    : cfg_(cfg), state_(state), registry_(registry) {}

DraDriver::~DraDriver() { stop(); }

Status DraDriver::start() {
  ERDMA_TRY_ASSIGN(node_name_, dra_node_name(cfg_.dra));
  ERDMA_TRY_ASSIGN(auto api_cfg, kube::in_cluster_config());
  ERDMA_TRY_ASSIGN(api_, kube::make_https_api(std::move(api_cfg)));
  auto node = api_->get(kube::node_path(node_name_));
  if (node) node_uid_ = uid_of(*node);
  if (node_uid_.empty()) {
    log::warn("the Node's UID is not known: the slices are published without an owner (not garbage-collected with "
              "the Node)")
        .kv("node", node_name_)
        .kv("error", node ? std::string("no metadata.uid") : node.error().message);
  }

  dra::DraPluginConfig pc;
  pc.driver = cfg_.dra.driver_name;
  pc.node_name = node_name_;
  pc.registry_dir = cfg_.dra.registry_dir;
  pc.plugin_dir = cfg_.dra.plugin_socket_dir();
  pc.cdi_dir = cfg_.dra.cdi_dir;
  pc.allocate = erdma_endpoint(cfg_).allocate;
  pc.report_status = true;
  pc.allocate.cdi_hook_dir = serve_hook();
  pc.pod_side_status = !pc.allocate.cdi_hook_dir.empty();  // SMC-R claims' status comes from on_hook
  pc.smcr_allowed_namespaces = cfg_.smcr.allowed_namespaces;
  pc.networks = [this] { return card_networks(state_.snapshot()->devices, kSysRoot); };
  events_ = std::make_unique<ApiPodEvents>(*api_, node_name_);
  pc.on_prepared = [this](const std::string& pod, const std::string& uid, const std::string& message) {
    events_->normal(pod, uid, kEventClaimPrepared, message);
  };
  plugin_ = std::make_unique<dra::DraKubeletPlugin>(
      pc, *api_, [this] { return state_.snapshot()->devices; }, &registry_);
  ERDMA_TRY(plugin_->start());
  hook_plugin_.store(plugin_.get());

  SlicePublisherOptions po;
  po.node_name = node_name_;
  po.driver = cfg_.dra.driver_name;
  publisher_ = std::make_unique<SlicePublisher>(
      *api_, [this] { return wanted(); }, po, &registry_);
  publisher_->start();
  // The first tick looks at every card a prepared claim holds as if it had been healthy: a card
  // that went down while the agent was away is told to its pods too.
  last_snapshot_ = nullptr;
  const Checkpoint recorded = plugin_->service()->checkpoint();
  for (const auto& [uid, claim] : recorded.claims) {
    for (const auto& d : claim.devices) healthy_before_.insert(d.card);
  }
  log::info("DRA driver started")
      .kv("driver", cfg_.dra.driver_name)
      .kv("node", node_name_)
      .kv("registration", pc.registration_socket())
      .kv("endpoint", pc.dra_socket())
      .kv("cdi_dir", cfg_.dra.cdi_dir)
      .kv("extended_resource", cfg_.dra.extended_resource ? cfg_.resource_name : std::string("(device plugin)"))
      .kv("slots_per_device", cfg_.dra.slots_per_device)
      .kv("cdi_hook", pc.allocate.cdi_hook_dir.empty() ? std::string("(none)") : hook_server_->socket_path());
  return {};
}

std::string DraDriver::serve_hook() {
  if (!claim_pod_setup_) return "";  // smcr.enabled: false: nothing to set up in pods
  if (cfg_.dra.hook_dir.empty()) {
    log::info("DRA: no CDI hook (dra.hookDir is empty): SMC-R claims carry SMC-R for hostNetwork pods only");
    return "";
  }
  if (!cfg_.dra.hook_source.empty()) {
    auto installed = install_file_atomically(cfg_.dra.hook_source, cfg_.dra.hook_dir, std::string(kCdiHookBinary));
    if (!installed) {
      log::error("cannot install the CDI hook; SMC-R claims carry SMC-R for hostNetwork pods only")
          .kv("source", cfg_.dra.hook_source)
          .kv("dir", cfg_.dra.hook_dir)
          .kv("error", installed.error().message);
      return "";
    }
    log::info("CDI hook")
        .kv("path", cdi_hook_paths(cfg_.dra.hook_dir).binary)
        .kv("result", *installed == InstallResult::Installed ? "installed" : "unchanged");
  }
  auto server = std::make_unique<dra::ClaimHookServer>(
      cdi_hook_paths(cfg_.dra.hook_dir).socket,
      [this](const HookRequest& r, std::chrono::steady_clock::time_point deadline) { return on_hook(r, deadline); });
  if (auto s = server->start(); !s) {
    log::error("cannot serve the CDI hook's socket; SMC-R claims carry SMC-R for hostNetwork pods only")
        .kv("error", s.error().message);
    return "";
  }
  hook_server_ = std::move(server);
  pod_side_queue_ = std::make_unique<common::WorkQueue<PodSideJob>>(
      1, 256, [this](PodSideJob&& job, bool stopping) { report_pod_side(std::move(job), stopping); });
  return cfg_.dra.hook_dir;
}

dra::ClaimHookOutcome DraDriver::on_hook(const HookRequest& request, std::chrono::steady_clock::time_point deadline) {
  dra::DraKubeletPlugin* plugin = hook_plugin_.load();
  if (plugin == nullptr || plugin->service() == nullptr) {
    return {false, "the agent's DRA driver is starting; this container's pod is not set up (SMC-R falls back to TCP)"};
  }
  const std::optional<PreparedClaim> claim = plugin->service()->recorded(request.claim_uid);
  if (auto ok = check_hook_claim(claim, request.claim_uid); !ok) {
    log::warn("CDI hook: request refused")
        .kv("claim", request.claim_uid)
        .kv("container", request.container_id)
        .kv("error", ok.error().message);
    return {false, ok.error().message};
  }
  auto outcome = claim_pod_setup_(request.sandbox_id, *claim, deadline);
  if (pod_side_queue_) {
    PodSideJob job{*claim, outcome};
    if (pod_side_queue_->submit(job)) {
      log::warn("claim's pod-side status not written: the queue is full").kv("claim", claim->ns + "/" + claim->name);
    }
  }
  return outcome;
}

void DraDriver::report_pod_side(PodSideJob&& job, bool stopping) {
  dra::DraKubeletPlugin* plugin = hook_plugin_.load();
  if (stopping || plugin == nullptr || plugin->service() == nullptr) return;  // the agent is stopping
  const PreparedClaim& claim = job.claim;
  const dra::ClaimHookOutcome& outcome = job.outcome;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  std::map<std::string, CardNetwork> networks;
  std::string where;
  if (outcome.host_network) {
    networks = card_networks(state_.snapshot()->devices, kSysRoot);  // the node's netdevs are the pod's
  } else if (!outcome.netns.empty()) {
    // The pod's own interface, read inside its netns; never the card's netdev.
    auto pod_net = std::make_shared<Result<CardNetwork>>(make_error(ErrorCode::Internal, "not read"));
    auto ran = SetnsNetns().run(
        NetnsRef::of_path(outcome.netns),
        [pod_net] {
          *pod_net = pod_interface_network();
          return Status{};
        },
        deadline);
    if (ran && *pod_net) {
      networks = every_card(claim, **pod_net);
    } else {
      where = "; the pod's interface was not read: " + (ran ? pod_net->error().message : ran.error().message);
    }
  }
  const std::string reason = !outcome.ok ? "PodSetupFailed" : outcome.host_network ? "HostNetwork" : "PodNetnsSetUp";
  plugin->service()->report_pod_side(
      claim, networks,
      PodSideStatus{outcome.ok, reason, outcome.text + where, kube::rfc3339(std::chrono::system_clock::now())});
}

void DraDriver::stop() {
  if (hook_server_) hook_server_->stop();
  if (pod_side_queue_) pod_side_queue_->stop();  // before the plugin (and its service) stops
  hook_plugin_.store(nullptr);
  if (publisher_) publisher_->stop();
  if (plugin_) plugin_->stop();
  if (events_) events_->stop();
}

Result<SliceSet> DraDriver::wanted() {
  const auto snap = state_.snapshot();
  std::vector<std::string> notes;
  const auto facts = read_slice_facts(cfg_, node_name_, node_uid_, snap->devices, kSysRoot, notes);
  ERDMA_TRY_ASSIGN(auto set, build_slices(snap->devices, facts));
  notes.insert(notes.end(), set.notes.begin(), set.notes.end());
  if (notes != last_notes_) {  // once per change, not at every publish
    for (const auto& n : notes) log::info("DRA slices").kv("note", n);
    last_notes_ = notes;
  }
  return set;
}

void DraDriver::tick() {
  if (!plugin_ || !publisher_) return;
  const auto snap = state_.snapshot();
  if (!last_snapshot_ || snap->generation != last_snapshot_->generation) {
    last_snapshot_ = snap;
    publisher_->trigger();
    plugin_->devices_changed();
    report_lost_cards(*snap);
  }
  // Monotonic counters to metrics, by their growth since the last tick.
  const auto grow = [](common::metrics::Counter& counter, uint64_t now, uint64_t before) {
    if (now > before) counter.inc(now - before);
  };
  auto& r = registry_;
  if (auto* service = plugin_->service()) {
    const auto c = service->counters();
    const auto& l = last_counters_;
    static constexpr const char* kPrepares =
        "Claims NodePrepareResources answered, by result (prepared, already: from the checkpoint, error)";
    grow(r.counter("erdma_agent_dra_prepares_total", kPrepares, {{"result", "prepared"}}), c.prepared, l.prepared);
    grow(r.counter("erdma_agent_dra_prepares_total", kPrepares, {{"result", "already"}}), c.already, l.already);
    grow(r.counter("erdma_agent_dra_prepares_total", kPrepares, {{"result", "error"}}), c.prepare_errors,
         l.prepare_errors);
    static constexpr const char* kUnprepares = "Claims NodeUnprepareResources answered, by result (ok, error)";
    grow(r.counter("erdma_agent_dra_unprepares_total", kUnprepares, {{"result", "ok"}}), c.unprepared, l.unprepared);
    grow(r.counter("erdma_agent_dra_unprepares_total", kUnprepares, {{"result", "error"}}), c.unprepare_errors,
         l.unprepare_errors);
    last_counters_ = c;
  }
  if (hook_server_) {
    static constexpr const char* kHooks =
        "Requests of the CDI hook of SMC-R claims, by answer (ok: the pod's netns is set up, error: it is not)";
    grow(r.counter("erdma_agent_dra_hook_requests_total", kHooks, {{"result", "ok"}}), hook_server_->answered_ok(),
         last_hook_ok_);
    grow(r.counter("erdma_agent_dra_hook_requests_total", kHooks, {{"result", "error"}}),
         hook_server_->answered_error(), last_hook_errors_);
    last_hook_ok_ = hook_server_->answered_ok();
    last_hook_errors_ = hook_server_->answered_error();
  }
  const auto s = publisher_->stats();
  static constexpr const char* kPublishes = "ResourceSlice publishes (list, plan, write), by result (ok, error)";
  grow(r.counter("erdma_agent_dra_slice_publishes_total", kPublishes, {{"result", "ok"}}), s.publishes_ok,
       last_stats_.publishes_ok);
  grow(r.counter("erdma_agent_dra_slice_publishes_total", kPublishes, {{"result", "error"}}), s.publishes_failed,
       last_stats_.publishes_failed);
  grow(r.counter("erdma_agent_dra_slice_repairs_total",
                 "Publishes caused by a change someone else made to the node's slices"),
       s.repairs, last_stats_.repairs);
  last_stats_ = s;
  registry_.gauge("erdma_agent_dra_registered", "1 while the kubelet has accepted the DRA driver's registration")
      .set(plugin_->registration().registered ? 1 : 0);
}

void DraDriver::report_lost_cards(const DeviceState::Snapshot& now) {
  std::set<std::string> lost = healthy_before_;
  std::set<std::string> healthy;
  std::map<std::string, std::string> why;
  for (const auto& d : now.devices) {
    if (is_healthy(d)) {
      healthy.insert(d.name);
      lost.erase(d.name);
    } else {
      why[d.name] = d.uverbs.empty() ? "its uverbs device is gone" : "no port is ACTIVE";
    }
  }
  healthy_before_ = std::move(healthy);
  if (lost.empty() || !plugin_->service() || !events_) return;
  const Checkpoint recorded = plugin_->service()->checkpoint();
  for (const auto& [uid, cards] : claims_on_cards(recorded, lost)) {
    const auto& claim = recorded.claims.at(uid);
    std::string what;
    for (const auto& c : cards) {
      const auto w = why.find(c);
      what += (what.empty() ? "" : ", ") + c + " (" + (w == why.end() ? "gone from the node" : w->second) + ")";
    }
    log::warn("a card held by a claim went down").kv("claim", claim.ns + "/" + claim.name).kv("cards", what);
    events_->claim_warning(claim.ns + "/" + claim.name, kEventCardUnavailable,
                           "eRDMA card " + what + " of claim " + claim.name +
                               " is unavailable: RDMA on it fails until it recovers; new claims do not get it "
                               "(tainted). Check the card with `erdma-agent devices` on node " +
                               node_name_);
  }
}

std::optional<std::string> DraDriver::not_ready() const {
  if (!plugin_) return "the DRA driver has not started";
  const auto r = plugin_->registration();
  if (!r.registered) {
    return r.error.empty() ? std::string("the DRA driver is not registered with kubelet yet")
                           : "the kubelet refused the DRA driver: " + r.error;
  }
  return std::nullopt;
}

// DraStartRetry

bool DraStartRetry::record(const Status& outcome, Clock::time_point now) {
  if (outcome.ok()) {
    errors_.succeeded();
    std::lock_guard lock(mu_);
    last_error_.clear();
    return true;
  }
  const std::string& message = outcome.error().message;
  const auto wait = common::jittered(every_, 0.2, draw_());
  if (errors_.failed(message)) {
    log::error("DRA driver did not start; retrying")
        .kv("error", message)
        .kv("retry_ms", static_cast<int64_t>(wait.count()));
  }
  next_ = now + wait;
  std::lock_guard lock(mu_);
  last_error_ = message;
  return false;
}

std::string DraStartRetry::last_error() const {
  std::lock_guard lock(mu_);
  return last_error_;
}

// DraSupervisor

DraSupervisor::DraSupervisor(const AgentConfig& cfg, DeviceState& state, common::metrics::Registry& registry,
                             std::function<void(PodEventSink*)> on_started)
    : cfg_(cfg), state_(state), registry_(registry), on_started_(std::move(on_started)) {}

void DraSupervisor::start() {
  if (cfg_.dra.enabled) try_start();
}

void DraSupervisor::tick() {
  if (driver_) {
    driver_->tick();
  } else if (cfg_.dra.enabled && retry_.due(std::chrono::steady_clock::now())) {
    try_start();
  }
}

std::optional<std::string> DraSupervisor::not_ready() const {
  if (!cfg_.dra.enabled) return std::nullopt;
  std::lock_guard lock(mu_);
  if (!driver_) {
    const std::string error = retry_.last_error();
    return "the DRA driver did not start: " + (error.empty() ? std::string("starting") : error);
  }
  return driver_->not_ready();
}

void DraSupervisor::stop() {
  if (driver_) driver_->stop();
}

void DraSupervisor::try_start() {
  auto driver = std::make_unique<DraDriver>(cfg_, state_, registry_);
  if (claim_pod_setup_) driver->set_claim_pod_setup(claim_pod_setup_);
  if (!retry_.record(driver->start(), std::chrono::steady_clock::now())) return;
  if (on_started_) on_started_(driver->events());
  std::lock_guard lock(mu_);
  driver_ = std::move(driver);
}

}  // namespace erdma::agent

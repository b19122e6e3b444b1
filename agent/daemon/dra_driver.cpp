// The DRA driver as the daemon runs it (see dra_driver.hpp).
#include "agent/daemon/dra_driver.hpp"

#include "agent/core/plugin_model.hpp"
#include "agent/daemon/dra_facts.hpp"
#include "agent/sys/dra_node_facts.hpp"
#include "common/log.hpp"

namespace erdma::agent {
namespace log = common::log;

namespace {
constexpr size_t kEventQueue = 256;
constexpr const char* kSysRoot = "/sys";
}  // namespace

ApiPodEvents::ApiPodEvents(kube::Api& api, std::string node_name)
    : api_(api),
      poster_(api, std::move(node_name)),
      queue_(1, kEventQueue, [this](Job&& job, bool stopping) {
        if (!stopping) post(job);
      }) {}

ApiPodEvents::~ApiPodEvents() { stop(); }

void ApiPodEvents::stop() { queue_.stop(); }

void ApiPodEvents::warning(const std::string& pod, std::string_view reason, const std::string& message) {
  Job job{pod, std::string(reason), message};
  if (queue_.submit(job)) log::warn("pod Event dropped: the queue is full").kv("pod", pod).kv("reason", reason);
}

void ApiPodEvents::post(const Job& job) {
  const auto slash = job.pod.find('/');
  if (slash == std::string::npos) return;
  kube::PodRef ref{job.pod.substr(0, slash), job.pod.substr(slash + 1), ""};
  // kubectl describe pod shows the Events whose involvedObject.uid is the pod's: look it up.
  auto pod = api_.get("/api/v1/namespaces/" + ref.pod_namespace + "/pods/" + ref.name);
  if (!pod) {
    log::warn("cannot post a pod Event").kv("pod", job.pod).kv("reason", job.reason).kv("error", pod.error().message);
    return;
  }
  if (const auto* uid = pod->contains("metadata") ? &(*pod)["metadata"] : nullptr; uid && uid->contains("uid") &&
                                                                                  (*uid)["uid"].is_string()) {
    ref.uid = (*uid)["uid"].get<std::string>();
  }
  auto posted = poster_.post(ref, kube::EventType::Warning, job.reason, job.message);
  if (!posted) {
    log::warn("cannot post a pod Event").kv("pod", job.pod).kv("reason", job.reason).kv("error", posted.error().message);
  }
}

DraDriver::DraDriver(const AgentConfig& cfg, DeviceState& state, common::metrics::Registry& registry)
    : cfg_(cfg), state_(state), registry_(registry) {}

DraDriver::~DraDriver() { stop(); }

Status DraDriver::start() {
  ERDMA_TRY_ASSIGN(node_name_, dra_node_name(cfg_.dra));
  ERDMA_TRY_ASSIGN(auto api_cfg, kube::in_cluster_config());
  ERDMA_TRY_ASSIGN(api_, kube::make_https_api(std::move(api_cfg)));
  if (auto node = api_->get("/api/v1/nodes/" + node_name_); node && node->contains("metadata") &&
                                                              (*node)["metadata"].value("uid", "") != "") {
    node_uid_ = (*node)["metadata"]["uid"].get<std::string>();
  } else {
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
  pc.networks = [this] { return card_networks(state_.snapshot()->devices, kSysRoot); };
  plugin_ = std::make_unique<dra::DraKubeletPlugin>(pc, *api_, [this] { return state_.snapshot()->devices; });
  ERDMA_TRY(plugin_->start());

  SlicePublisherOptions po;
  po.node_name = node_name_;
  po.driver = cfg_.dra.driver_name;
  publisher_ = std::make_unique<SlicePublisher>(*api_, [this] { return wanted(); }, po);
  publisher_->start();
  events_ = std::make_unique<ApiPodEvents>(*api_, node_name_);
  last_snapshot_ = state_.snapshot();
  log::info("DRA driver started")
      .kv("driver", cfg_.dra.driver_name)
      .kv("node", node_name_)
      .kv("registration", pc.registration_socket())
      .kv("endpoint", pc.dra_socket())
      .kv("cdi_dir", cfg_.dra.cdi_dir)
      .kv("extended_resource", cfg_.dra.extended_resource ? cfg_.resource_name : std::string("(device plugin)"))
      .kv("slots_per_device", cfg_.dra.slots_per_device);
  return {};
}

void DraDriver::stop() {
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
  }
  // Monotonic counters to metrics, by their growth since the last tick.
  const auto grow = [this](const char* name, const char* help, const common::metrics::Labels& labels, uint64_t now,
                           uint64_t before) {
    auto& c = registry_.counter(name, help, labels);
    if (now > before) c.inc(now - before);
  };
  if (auto* service = plugin_->service()) {
    const auto c = service->counters();
    const char* prep = "erdma_agent_dra_prepares_total";
    const char* prep_help = "Claims NodePrepareResources answered, by result (prepared, already: from the checkpoint, error)";
    grow(prep, prep_help, {{"result", "prepared"}}, c.prepared, last_counters_.prepared);
    grow(prep, prep_help, {{"result", "already"}}, c.already, last_counters_.already);
    grow(prep, prep_help, {{"result", "error"}}, c.prepare_errors, last_counters_.prepare_errors);
    const char* unprep = "erdma_agent_dra_unprepares_total";
    const char* unprep_help = "Claims NodeUnprepareResources answered, by result (ok, error)";
    grow(unprep, unprep_help, {{"result", "ok"}}, c.unprepared, last_counters_.unprepared);
    grow(unprep, unprep_help, {{"result", "error"}}, c.unprepare_errors, last_counters_.unprepare_errors);
    last_counters_ = c;
  }
  const auto s = publisher_->stats();
  const char* pub = "erdma_agent_dra_slice_publishes_total";
  const char* pub_help = "ResourceSlice publishes (list, plan, write), by result (ok, error)";
  grow(pub, pub_help, {{"result", "ok"}}, s.publishes_ok, last_stats_.publishes_ok);
  grow(pub, pub_help, {{"result", "error"}}, s.publishes_failed, last_stats_.publishes_failed);
  grow("erdma_agent_dra_slice_repairs_total", "Publishes caused by a change someone else made to the node's slices", {},
       s.repairs, last_stats_.repairs);
  if (s.last_error != last_stats_.last_error && !s.last_error.empty()) {
    log::warn("DRA slices not published; retrying with backoff").kv("error", s.last_error);
  }
  last_stats_ = s;
  registry_
      .gauge("erdma_agent_dra_registered", "1 while the kubelet has accepted the DRA driver's registration")
      .set(plugin_->registration().registered ? 1 : 0);
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

}  // namespace erdma::agent

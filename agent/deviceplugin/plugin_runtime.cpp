// The plugin's control loop (see plugin_runtime.hpp).
#include "agent/deviceplugin/plugin_runtime.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

#include <sys/inotify.h>
#include <sys/stat.h>

#include "common/log.hpp"

namespace erdma::agent {
namespace log = common::log;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

int64_t ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration_cast<milliseconds>(b - a).count();
}

std::string health_summary(const RdmaDevice& d) {
  std::string s;
  for (const auto& p : d.ports)
    s += (s.empty() ? "" : ",") + std::to_string(p.number) + ":" + std::string(to_string(p.state));
  return s;
}

}  // namespace

PluginRuntime::PluginRuntime(const AgentConfig& cfg, PluginEndpoint endpoint, RdmaDevices& devices, PreStartHook& hook,
                             AgentMetrics* metrics, RuntimeTiming timing)
    : cfg_(cfg),
      endpoint_(std::move(endpoint)),
      devices_(devices),
      metrics_(metrics),
      timing_(timing),
      state_(endpoint_.slots_per_device),
      hooks_(hook),
      service_(
          state_, hooks_, metrics, [this] { request_rescan(); }, endpoint_.allocate),
      server_(service_),
      keeper_(
          "device plugin loop",
          {{cfg_.device_plugin_dir, IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF,
            "the device plugin directory"}},
          timing_.socket_check,
          kubelet::SocketKeeper::Owner{[this] { return act(); },
                                       [this](const kubelet::SocketKeeper::Pass& pass) { handle(pass); }}) {}

PluginRuntime::PluginRuntime(const AgentConfig& cfg, RdmaDevices& devices, PreStartHook& hook, AgentMetrics* metrics,
                             RuntimeTiming timing)
    : PluginRuntime(cfg, erdma_endpoint(cfg), devices, hook, metrics, timing) {}

std::string PluginRuntime::socket_path() const {
  return cfg_.device_plugin_dir + (cfg_.device_plugin_dir == "/" ? "" : "/") + endpoint_.socket_name;
}

PluginRuntime::~PluginRuntime() { stop(); }

Status PluginRuntime::start() {
  if (!endpoint_.advertise) {
    log::info("device scan only: the resource is served by the DRA driver (dra.extendedResource)")
        .kv("resource", endpoint_.resource_name)
        .kv("source", devices_.describe());
  } else {
    log::info("device plugin starting")
        .kv("resource", endpoint_.resource_name)
        .kv("socket", socket_path())
        .kv("source", devices_.describe())
        .kv("slots_per_device", endpoint_.slots_per_device);
  }
  scan();
  next_scan_ = Clock::now() + std::chrono::seconds(cfg_.rescan_seconds);
  return keeper_.start();
}

void PluginRuntime::stop() {
  if (stopping_.exchange(true)) {
    keeper_.stop();
    return;
  }
  keeper_.stop();
  // Hooks first: queued PreStartContainer calls are answered, so the server's Wait() is bounded.
  hooks_.stop();
  server_.stop(timing_.shutdown_grace);
  registered_ = false;
  if (metrics_ != nullptr) metrics_->kubelet_registered.set(0);
  log::info("device plugin stopped").kv("socket", socket_path());
}

void PluginRuntime::request_rescan() {
  rescan_requested_ = true;
  keeper_.wake();
}

std::optional<milliseconds> PluginRuntime::last_reregistration_time() const {
  std::lock_guard lock(timing_mu_);
  return last_reregistration_;
}

void PluginRuntime::scan() {
  auto result = devices_.scan();
  if (!result) {
    if (metrics_ != nullptr) metrics_->scans_error.inc();
    if (scan_errors_.failed(result.error().message)) {
      log::warn("device scan failed; keeping the previous view").kv("error", result.error().message);
    }
    return;
  }
  scan_errors_.succeeded();
  if (metrics_ != nullptr) metrics_->scans_ok.inc();
  if (result->notes != last_notes_) {
    for (const auto& note : result->notes) log::warn("device discovery").kv("note", note);
    last_notes_ = result->notes;
  }
  const auto before = state_.snapshot();
  if (state_.update(*result)) {
    if (metrics_ != nullptr) metrics_->health_changes.inc();
    std::map<std::string, bool> old_health;
    for (const auto& d : before->devices) old_health[d.name] = is_healthy(d);
    for (const auto& d : result->devices) {
      auto it = old_health.find(d.name);
      const bool healthy = is_healthy(d);
      if (it == old_health.end() || it->second != healthy) {
        (healthy ? log::info("device healthy") : log::warn("device unhealthy"))
            .kv("device", d.name)
            .kv("uverbs", d.uverbs)
            .kv("ports", health_summary(d))
            .kv("numa_node", d.numa_node);
      }
      if (it != old_health.end()) old_health.erase(it);
    }
    for (const auto& [name, h] : old_health) log::warn("device gone").kv("device", name);
    for (const auto& note : state_.snapshot()->advertisement.notes) log::warn("device not advertised").kv("note", note);
  }
  if (metrics_ != nullptr) {
    const auto snap = state_.snapshot();
    double healthy = 0, unhealthy = 0;
    for (const auto& d : snap->devices) (is_healthy(d) ? healthy : unhealthy) += 1;
    metrics_->devices_healthy.set(healthy);
    metrics_->devices_unhealthy.set(unhealthy);
    metrics_->slots_advertised.set(static_cast<double>(snap->advertisement.slots.size()));
  }
}

void PluginRuntime::serve() {
  const auto path = socket_path();
  auto s = server_.start(path, timing_.shutdown_grace);
  if (!s) {
    if (serve_errors_.failed(s.error().message)) {
      log::error("cannot serve the device plugin socket; retrying every second").kv("error", s.error().message);
    }
    return;
  }
  serve_errors_.succeeded();
  need_serve_ = false;
  need_register_ = true;
  next_register_ = Clock::now();
  backoff_ = milliseconds(0);
  log::info("serving device plugin").kv("socket", path);
}

void PluginRuntime::try_register() {
  const Registration reg{cfg_.kubelet_socket_path(), endpoint_.socket_name, endpoint_.resource_name};
  auto s = register_with_kubelet(reg, timing_.register_timeout);
  if (!s) {
    if (metrics_ != nullptr) metrics_->registrations_error.inc();
    backoff_ = std::clamp(backoff_ * 2, timing_.register_backoff_min, timing_.register_backoff_max);
    next_register_ = Clock::now() + backoff_;
    if (register_errors_.failed(s.error().message)) {
      log::warn("registration with kubelet failed; retrying")
          .kv("error", s.error().message)
          .kv("retry_ms", backoff_.count());
    }
    return;
  }
  register_errors_.succeeded();
  need_register_ = false;
  backoff_ = milliseconds(0);
  registered_kubelet_ = *s;
  registered_ = true;
  if (metrics_ != nullptr) {
    metrics_->registrations_ok.inc();
    metrics_->kubelet_registered.set(1);
  }
  auto line = log::info("registered with kubelet");
  line.kv("resource", endpoint_.resource_name).kv("endpoint", endpoint_.socket_name);
  if (restart_seen_at_) {
    const auto ms = milliseconds(ms_between(*restart_seen_at_, Clock::now()));
    line.kv("ms_since_kubelet_restart", static_cast<int64_t>(ms.count()));
    std::lock_guard lock(timing_mu_);
    last_reregistration_ = ms;
    restart_seen_at_.reset();
  }
}

void PluginRuntime::kubelet_restart_seen(const char* why) {
  if (!restart_seen_at_) restart_seen_at_ = Clock::now();
  // One restart shows up twice (our socket deleted, kubelet.sock created): count it once.
  if (registered_.exchange(false)) {
    if (metrics_ != nullptr) {
      metrics_->kubelet_restarts.inc();
      metrics_->kubelet_registered.set(0);
    }
    log::warn("kubelet restart detected; serving and registering again").kv("signal", why);
  }
}

void PluginRuntime::handle_events(const std::vector<kubelet::SocketKeeper::Event>& events) {
  for (const auto& ev : events) {
    const std::string& name = ev.name;
    if ((ev.mask & IN_Q_OVERFLOW) != 0) {
      // Events were lost: check everything.
      if (!server_.socket_is_ours()) need_serve_ = true;
      need_register_ = true;
      next_register_ = Clock::now();
    }
    if ((ev.mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)) != 0) {
      // The directory itself went away (the keeper watches it again when it is back).
      if (ev.mask & (IN_DELETE_SELF | IN_MOVE_SELF)) {
        kubelet_restart_seen("device plugin directory removed");
        need_serve_ = true;
      }
      continue;
    }
    if (name == endpoint_.socket_name && (ev.mask & (IN_DELETE | IN_MOVED_FROM)) != 0) {
      // Our own restarts delete the file too; only a socket that is not ours counts.
      if (server_.serving() && !server_.socket_is_ours()) {
        kubelet_restart_seen("plugin socket deleted");
        need_serve_ = true;
      }
    } else if (name == kKubeletSocketName && (ev.mask & (IN_CREATE | IN_MOVED_TO)) != 0) {
      // Events can arrive after the registration they would trigger already happened.
      if (registered_ && socket_file_id(cfg_.kubelet_socket_path()) == registered_kubelet_) continue;
      kubelet_restart_seen("kubelet.sock created");
      if (!server_.socket_is_ours()) need_serve_ = true;
      need_register_ = true;
      next_register_ = Clock::now();
      backoff_ = milliseconds(0);
    }
  }
}

Clock::time_point PluginRuntime::act() {
  if (!endpoint_.advertise) need_serve_ = need_register_ = false;  // scans only (plugin_model.hpp)
  if (need_serve_) serve();
  if (!need_serve_ && need_register_ && Clock::now() >= next_register_) try_register();
  if (!need_serve_ && need_register_) return std::min(next_scan_, next_register_);
  return next_scan_;
}

void PluginRuntime::handle(const kubelet::SocketKeeper::Pass& pass) {
  handle_events(pass.events);
  if (rescan_requested_.exchange(false) || Clock::now() >= next_scan_) {
    scan();
    next_scan_ = Clock::now() + std::chrono::seconds(cfg_.rescan_seconds);
  }
  if (pass.check_due && endpoint_.advertise && !need_serve_ && !server_.socket_is_ours()) {
    kubelet_restart_seen("plugin socket missing");
    need_serve_ = true;
  }
  work_pending_ = need_serve_ || need_register_;
}

}  // namespace erdma::agent

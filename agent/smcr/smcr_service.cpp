// The SMC-R background thread (see smcr_service.hpp).
#include "agent/smcr/smcr_service.hpp"

#include "agent/sys/file_install.hpp"
#include "common/guarded.hpp"
#include "common/jitter.hpp"
#include "common/log.hpp"

namespace erdma::agent {
namespace log = common::log;
using Clock = std::chrono::steady_clock;

SmcrService::SmcrService(const AgentConfig& cfg, DeviceState& state, SmcrHostSetup& host, SmcrPodSetup* pods,
                         SmcStatsCollector* stats, AgentMetrics* metrics, SmcrServiceTiming timing)
    : cfg_(cfg), state_(state), host_(host), pods_(pods), stats_(stats), metrics_(metrics), timing_(timing) {}

SmcrService::~SmcrService() { stop(); }

void SmcrService::start() {
  // Watchers run on the scan thread and must be quick: only note the change.
  watcher_ = state_.add_watcher([this] {
    {
      std::lock_guard lock(mu_);
      devices_changed_ = true;
    }
    cv_.notify_all();
  });
  thread_ = std::thread([this] {
    common::run_restarting(
        "SMC-R service loop", [this] { loop(); },
        [this] {
          std::lock_guard lock(mu_);
          return stopping_;
        });
  });
}

void SmcrService::stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (watcher_ != 0) {
    state_.remove_watcher(watcher_);
    watcher_ = 0;
  }
  if (thread_.joinable()) thread_.join();
}

uint64_t SmcrService::host_setups_ok() const {
  std::lock_guard lock(mu_);
  return host_ok_;
}

bool SmcrService::resynced() const {
  std::lock_guard lock(mu_);
  return resynced_;
}

void SmcrService::host_setup() {
  const auto snap = state_.snapshot();
  auto r = host_.reconcile(snap->devices);
  if (!r) {
    if (metrics_ != nullptr) metrics_->host_setups_error.inc();
    // The same failure every period is one log line, not one per minute.
    if (host_errors_.failed(r.error().message)) {
      log::error("SMC-R host setup failed; retrying").kv("error", r.error().message);
    }
    return;
  }
  if (host_errors_.succeeded()) log::info("SMC-R host setup works again");
  for (const auto& op : r->applied) log::info("SMC-R host setup").kv("op", op);
  for (const auto& n : r->notes) log::warn("SMC-R host setup").kv("note", n);
  std::string conflicts;
  for (const auto& c : r->conflicts) conflicts += (conflicts.empty() ? "" : "; ") + c;
  if (conflicts != last_host_conflicts_) {
    for (const auto& c : r->conflicts) log::warn("SMC-R host setup left an entry alone").kv("conflict", c);
    last_host_conflicts_ = conflicts;
  }
  if (metrics_ != nullptr) {
    (r->conflicts.empty() ? metrics_->host_setups_ok : metrics_->host_setups_error).inc();
    metrics_->host_setup_ops.inc(r->applied.size());
    metrics_->set_smcd_loopback(r->smcd_loopback);
  }
  if (!r->applied.empty() || host_ok_ == 0) {
    log::info("SMC-R host setup done")
        .kv("pnet_id", cfg_.smcr.pnet_id.str())
        .kv("ueid", cfg_.smcr.ueid.empty() ? "(not managed)" : cfg_.smcr.ueid)
        .kv("smcd_loopback", r->smcd_loopback)
        .kv("devices", static_cast<uint64_t>(snap->devices.size()))
        .kv("changes", static_cast<uint64_t>(r->applied.size()));
  }
  std::lock_guard lock(mu_);
  ++host_ok_;
}

void SmcrService::loop() {
  auto next_host = Clock::now();
  auto next_resync = Clock::now();
  auto next_stats = Clock::now() + std::chrono::seconds(cfg_.smcr.stats_seconds);
  bool need_resync = pods_ != nullptr;
  for (;;) {
    {
      std::unique_lock lock(mu_);
      auto wake = next_host;
      if (need_resync) wake = std::min(wake, next_resync);
      if (stats_ != nullptr) wake = std::min(wake, next_stats);
      cv_.wait_until(lock, wake, [&] { return stopping_ || devices_changed_ || Clock::now() >= wake; });
      if (stopping_) return;
      if (devices_changed_) {
        devices_changed_ = false;
        next_host = Clock::now();
      }
    }
    const auto now = Clock::now();
    if (now >= next_host) {
      const uint64_t before = host_setups_ok();
      host_setup();
      next_host = Clock::now() + (host_setups_ok() > before ? timing_.host_period : timing_.host_retry);
    }
    if (need_resync && Clock::now() >= next_resync) {
      auto r = pods_->resync(Clock::now() + timing_.resync_budget);
      if (r) {
        log::info("SMC-R resync done")
            .kv("sandboxes", static_cast<uint64_t>(r->sandboxes))
            .kv("smcr", static_cast<uint64_t>(r->smcr))
            .kv("configured", static_cast<uint64_t>(r->configured))
            .kv("failed", static_cast<uint64_t>(r->failed));
        need_resync = false;
        std::lock_guard lock(mu_);
        resynced_ = true;
      } else {
        log::warn("SMC-R resync: cannot list the runtime's sandboxes; retrying")
            .kv("error", r.error().message)
            .kv("retry_ms", static_cast<int64_t>(timing_.resync_retry.count()));
        next_resync = Clock::now() + common::jittered(timing_.resync_retry);
      }
    }
    if (stats_ != nullptr && Clock::now() >= next_stats) {
      const auto reading = stats_->collect(pods_ != nullptr ? pods_->tracked() : std::vector<TrackedPod>{},
                                           Clock::now() + std::chrono::seconds(10));
      for (const auto& id : reading.gone) {
        if (pods_ != nullptr) pods_->forget(id);
      }
      for (const auto& e : reading.errors) log::debug("SMC statistics").kv("error", e);
      next_stats = Clock::now() + std::chrono::seconds(cfg_.smcr.stats_seconds);
    }
  }
}

Status install_preload(const SmcrConfig& cfg, AgentMetrics* metrics) {
  if (cfg.preload_source.empty()) {
    log::info("preload library: not installed (smcr.preloadSource is empty)");
    return {};
  }
  auto r = install_file_atomically(cfg.preload_source, cfg.preload_host_dir, std::string(kPreloadFileName));
  if (!r) {
    if (metrics != nullptr) metrics->preload_error.inc();
    log::error("cannot install the preload library; SMC-R pods will use TCP")
        .kv("source", cfg.preload_source)
        .kv("dir", cfg.preload_host_dir)
        .kv("error", r.error().message);
    return r.error();
  }
  if (metrics != nullptr)
    (*r == InstallResult::Installed ? metrics->preload_installed : metrics->preload_unchanged).inc();
  log::info("preload library")
      .kv("path", cfg.preload_host_dir + "/" + std::string(kPreloadFileName))
      .kv("result", *r == InstallResult::Installed ? "installed" : "unchanged");
  return {};
}

}  // namespace erdma::agent

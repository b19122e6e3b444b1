// The DRA driver's registration and sockets (see dra_plugin.hpp).
#include "agent/dra/dra_plugin.hpp"

#include <algorithm>

#include <sys/inotify.h>
#include <sys/stat.h>

#include "common/log.hpp"
#include "common/repeat_filter.hpp"

namespace erdma::agent::dra {
namespace log = common::log;
using std::chrono::milliseconds;

namespace {

std::string join_path(const std::string& dir, std::string_view name) {
  return dir + (dir.ends_with('/') ? "" : "/") + std::string(name);
}

std::string base_name(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string dir_name(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos || slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

// RegistrationService

grpc::Status RegistrationService::GetInfo(grpc::ServerContext*, const ::pluginregistration::InfoRequest*,
                                          ::pluginregistration::PluginInfo* info) {
  info->set_type(std::string(kDraPluginType));
  info->set_name(driver_);
  info->set_endpoint(endpoint_);
  for (const auto& v : versions_) info->add_supported_versions(v);
  return grpc::Status::OK;
}

grpc::Status RegistrationService::NotifyRegistrationStatus(grpc::ServerContext*,
                                                           const ::pluginregistration::RegistrationStatus* status,
                                                           ::pluginregistration::RegistrationStatusResponse*) {
  {
    std::lock_guard lock(mu_);
    state_.notified = true;
    state_.registered = status->plugin_registered();
    state_.error = status->error();
    ++state_.notifications;
  }
  if (status->plugin_registered()) {
    log::info("DRA driver registered with the kubelet").kv("driver", driver_).kv("endpoint", endpoint_);
  } else {
    // The kubelet's own words, e.g. a version list it does not know or an endpoint taken.
    log::error("the kubelet refused the DRA driver's registration")
        .kv("driver", driver_)
        .kv("endpoint", endpoint_)
        .kv("reason", status->error());
  }
  // Always OK: an error answer to a successful registration makes the kubelet deregister.
  return grpc::Status::OK;
}

RegistrationState RegistrationService::state() const {
  std::lock_guard lock(mu_);
  return state_;
}

void RegistrationService::reset() {
  std::lock_guard lock(mu_);
  const uint64_t n = state_.notifications;
  state_ = RegistrationState{};
  state_.notifications = n;
}

// DraPluginConfig

std::string DraPluginConfig::plugin_dir_or_default() const {
  return plugin_dir.empty() ? join_path(std::string(kKubeletPluginsDir), driver) : plugin_dir;
}
std::string DraPluginConfig::registration_socket() const { return join_path(registry_dir, driver + "-reg.sock"); }
std::string DraPluginConfig::dra_socket() const { return join_path(plugin_dir_or_default(), kDraSocketName); }

// DraKubeletPlugin

DraKubeletPlugin::DraKubeletPlugin(DraPluginConfig config, kube::Api& api, DeviceScanFn scan,
                                   common::metrics::Registry* metrics)
    : config_(std::move(config)),
      api_(api),
      scan_(std::move(scan)),
      metrics_(metrics),
      registration_(config_.driver, config_.dra_socket(),
                    config_.health
                        ? std::vector<std::string>{std::string(kDraServiceV1), std::string(kDraHealthServiceV1)}
                        : std::vector<std::string>{std::string(kDraServiceV1)}),
      reg_server_(registration_) {}

DraKubeletPlugin::~DraKubeletPlugin() { stop(); }

Status DraKubeletPlugin::serve_dra() {
  ERDMA_TRY(dra_server_->start(config_.dra_socket(), config_.shutdown_grace));
  log::info("serving the DRA service").kv("socket", config_.dra_socket());
  return {};
}

Status DraKubeletPlugin::serve_registration() {
  registration_.reset();
  ERDMA_TRY(reg_server_.start(config_.registration_socket(), config_.shutdown_grace));
  log::info("serving DRA registration").kv("socket", config_.registration_socket()).kv("driver", config_.driver);
  return {};
}

Status DraKubeletPlugin::start() {
  if (service_) return {};
  DraServiceConfig sc;
  sc.driver = config_.driver;
  sc.pool = config_.node_name;
  sc.plugin_dir = config_.plugin_dir_or_default();
  sc.cdi_dir = config_.cdi_dir;
  sc.allocate = config_.allocate;
  sc.report_status = config_.report_status;
  sc.networks = config_.networks;
  sc.pod_side_status = config_.pod_side_status;
  sc.on_prepared = config_.on_prepared;
  sc.smcr_allowed_namespaces = config_.smcr_allowed_namespaces;
  ERDMA_TRY_ASSIGN(service_, DraService::open(std::move(sc), api_, scan_, metrics_));
  std::vector<grpc::Service*> services{service_.get()};
  if (config_.health) {
    health_ = std::make_unique<DraHealthService>(config_.node_name, scan_, config_.health_refresh);
    services.push_back(health_.get());
  }
  dra_server_ = std::make_unique<PluginServer>(std::move(services));
  // The kubelet creates its registry directory at start; an agent that comes first makes it too
  // (mode 0755, as the kubelet's plugin watcher would).
  ::mkdir(config_.registry_dir.c_str(), 0755);
  // The service first: the kubelet may call it as soon as it has read GetInfo.
  if (auto s = serve_dra(); !s) {
    stop_serving();
    return s;
  }
  if (auto s = serve_registration(); !s) {
    stop_serving();
    return s;
  }
  // Both directories: a removed socket (IN_DELETE, IN_MOVED_FROM) or a directory gone is served
  // again at once; the periodic check catches what inotify cannot see.
  reg_errors_ = {};
  dra_errors_ = {};
  const uint32_t mask = IN_DELETE | IN_MOVED_FROM | IN_DELETE_SELF | IN_MOVE_SELF;
  keeper_ = std::make_unique<kubelet::SocketKeeper>(
      "DRA socket keeper",
      std::vector<kubelet::SocketKeeper::Dir>{{config_.registry_dir, mask, "the kubelet's plugin registry directory"},
                                              {dir_name(config_.dra_socket()), mask, "the DRA plugin directory"}},
      config_.socket_check,
      kubelet::SocketKeeper::Owner{nullptr, [this](const kubelet::SocketKeeper::Pass& pass) { keep_sockets(pass); }});
  if (auto s = keeper_->start(); !s) {
    stop_serving();
    return s;
  }
  return {};
}

void DraKubeletPlugin::stop_serving() {
  if (keeper_) keeper_->stop();  // first: it would serve again what is stopped below
  keeper_.reset();
  // Registration first: the kubelet stops sending new work before the service goes.
  reg_server_.stop(config_.shutdown_grace);
  if (health_) health_->stop();  // open health streams end now, not at the grace deadline
  if (dra_server_) dra_server_->stop(config_.shutdown_grace);
  dra_server_.reset();
  health_.reset();
  service_.reset();
}

void DraKubeletPlugin::stop() {
  if (!service_) return;
  stop_serving();
  log::info("DRA driver stopped").kv("driver", config_.driver);
}

void DraKubeletPlugin::devices_changed() {
  if (health_) health_->notify();
}

void DraKubeletPlugin::keep_sockets(const kubelet::SocketKeeper::Pass& pass) {
  const std::string reg_name = base_name(config_.registration_socket());
  const std::string dra_name = base_name(config_.dra_socket());
  bool check = pass.check_due;
  for (const auto& ev : pass.events) {
    if (ev.name == reg_name || ev.name == dra_name || (ev.mask & IN_Q_OVERFLOW) != 0 || ev.name.empty()) check = true;
  }
  if (!check) return;
  if (!dra_server_->socket_is_ours()) {
    if (auto s = serve_dra(); !s) {
      if (dra_errors_.failed(s.error().message)) {
        log::error("cannot serve the DRA socket; retrying").kv("error", s.error().message);
      }
    } else {
      dra_errors_.succeeded();
      log::warn("the DRA socket was removed; serving it again").kv("socket", config_.dra_socket());
    }
  }
  if (!reg_server_.socket_is_ours()) {
    ::mkdir(config_.registry_dir.c_str(), 0755);
    if (auto s = serve_registration(); !s) {
      if (reg_errors_.failed(s.error().message)) {
        log::error("cannot serve the DRA registration socket; retrying").kv("error", s.error().message);
      }
    } else {
      reg_errors_.succeeded();
      ++reregistrations_;
      log::warn("the DRA registration socket was removed; serving it again so the kubelet registers the driver")
          .kv("socket", config_.registration_socket());
    }
  }
  ++socket_checks_;
}

}  // namespace erdma::agent::dra

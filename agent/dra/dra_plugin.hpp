// The DRA driver's kubelet plugin: the registration socket the kubelet's plugin watcher finds in
// its plugins_registry directory, the DRA service socket it then calls, and the loop that serves
// both again when their files are removed.
//
// Registration (kubernetes v1.37.2 pkg/kubelet/pluginmanager): the kubelet watches
// /var/lib/kubelet/plugins_registry, ignores names starting with '.', and for each unix socket
// calls GetInfo (1 s deadline) and then NotifyRegistrationStatus with the outcome. For type
// "DRAPlugin" (k8s.io/kubelet pkg/apis/pluginregistration/v1 constants.go) the DRA plugin manager
// (pkg/kubelet/cm/dra/plugin) takes `name` as the driver, `endpoint` as the service socket it
// dials ("unix:" + endpoint) and `supported_versions` as the gRPC services served there, of which
// it knows "v1.DRAPlugin" and "v1beta1.DRAPlugin" (and "v1.DRAResourceHealth" /
// "v1alpha1.DRAResourceHealth" as the optional health service, which it watches when listed). A kubelet restart does
// not delete the registry's sockets; it finds them again. Removing the registration socket deregisters the driver, so
// the loop serves a new one at once when that happens.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/dra/dra_health.hpp"
#include "agent/dra/dra_service.hpp"
#include "agent/kubelet/plugin_server.hpp"
#include "agent/kubelet/socket_keeper.hpp"
#include "agent/proto/pluginregistration_v1.grpc.pb.h"
#include "common/metrics.hpp"
#include "common/repeat_filter.hpp"

namespace erdma::agent::dra {

// pluginregistration v1 constants.go DRAPlugin; dra v1 types.go DRAPluginService.
inline constexpr std::string_view kDraPluginType = "DRAPlugin";
inline constexpr std::string_view kDraServiceV1 = "v1.DRAPlugin";
// kubeletplugin defaults (k8s.io/dynamic-resource-allocation v0.37.2 kubeletplugin/draplugin.go).
inline constexpr std::string_view kKubeletRegistryDir = "/var/lib/kubelet/plugins_registry";
inline constexpr std::string_view kKubeletPluginsDir = "/var/lib/kubelet/plugins";
inline constexpr std::string_view kDraSocketName = "dra.sock";

// What the kubelet said in its last NotifyRegistrationStatus.
struct RegistrationState {
  bool notified = false;    // the kubelet has called at least once since start
  bool registered = false;  // its last word: accepted
  std::string error;        // its reason when it refused
  uint64_t notifications = 0;
};

// pluginregistration.Registration for one DRA driver.
class RegistrationService final : public ::pluginregistration::Registration::Service {
 public:
  RegistrationService(std::string driver, std::string endpoint, std::vector<std::string> versions)
      : driver_(std::move(driver)), endpoint_(std::move(endpoint)), versions_(std::move(versions)) {}

  grpc::Status GetInfo(grpc::ServerContext* ctx, const ::pluginregistration::InfoRequest* request,
                       ::pluginregistration::PluginInfo* info) override;
  grpc::Status NotifyRegistrationStatus(grpc::ServerContext* ctx,
                                        const ::pluginregistration::RegistrationStatus* status,
                                        ::pluginregistration::RegistrationStatusResponse* response) override;

  [[nodiscard]] RegistrationState state() const;
  // A new registration socket is served: the kubelet's word on the old one no longer holds.
  void reset();

 private:
  const std::string driver_;
  const std::string endpoint_;
  const std::vector<std::string> versions_;
  mutable std::mutex mu_;
  RegistrationState state_;
};

struct DraPluginConfig {
  std::string driver{contract::kDraDriverName};
  std::string node_name;                          // the pool: ResourceSlices publish under it
  std::string registry_dir{kKubeletRegistryDir};  // the kubelet's plugins_registry
  std::string plugin_dir;                         // "" = <kKubeletPluginsDir>/<driver>
  std::string cdi_dir{kCdiSpecDir};
  AllocateOptions allocate;
  bool report_status = false;  // DraServiceConfig::report_status
  CardNetworkFn networks;
  bool pod_side_status = false;  // DraServiceConfig::pod_side_status
  std::function<void(const std::string&, const std::string&, const std::string&)>
      on_prepared;                                   // DraServiceConfig::on_prepared
  std::vector<std::string> smcr_allowed_namespaces;  // DraServiceConfig::smcr_allowed_namespaces
  bool health = true;                                // serve v1.DRAResourceHealth beside the DRA service
  std::chrono::milliseconds health_refresh{10000};   // health list sent at least this often
  std::chrono::milliseconds socket_check{1000};      // own sockets' inode check (inotify's backstop)
  std::chrono::milliseconds shutdown_grace{500};

  [[nodiscard]] std::string plugin_dir_or_default() const;
  [[nodiscard]] std::string registration_socket() const;  // <registry_dir>/<driver>-reg.sock
  [[nodiscard]] std::string dra_socket() const;           // <plugin dir>/dra.sock
};

class DraKubeletPlugin {
 public:
  // `api` and `scan` must outlive the plugin; so must `metrics` when not null (the service's
  // latency histograms, DraService::open).
  DraKubeletPlugin(DraPluginConfig config, kube::Api& api, DeviceScanFn scan,
                   common::metrics::Registry* metrics = nullptr);
  ~DraKubeletPlugin();
  DraKubeletPlugin(const DraKubeletPlugin&) = delete;
  DraKubeletPlugin& operator=(const DraKubeletPlugin&) = delete;

  // Opens the service (checkpoint, stale specs: DraService::open's errors, nothing served then),
  // serves the DRA socket, then the registration socket, and starts the loop that serves them
  // again when they are removed. Errors: those of DraService::open; Unavailable when a socket
  // cannot be served (a missing registry directory is created: the kubelet does the same).
  [[nodiscard]] Status start();
  // Stops serving and removes both sockets (the kubelet deregisters the driver; prepared claims
  // stay in the checkpoint for the next start). Bounded; idempotent.
  void stop();

  // The cards may have changed (call after each device scan): the health stream sends the list
  // when it differs. Thread-safe, but not concurrent with start() or stop(); a no-op when not
  // started.
  void devices_changed();

  [[nodiscard]] RegistrationState registration() const { return registration_.state(); }
  // Null before a successful start().
  [[nodiscard]] DraService* service() noexcept { return service_.get(); }
  [[nodiscard]] const DraPluginConfig& config() const noexcept { return config_; }
  // Times the registration socket was served again after it was removed.
  [[nodiscard]] uint64_t reregistrations() const noexcept { return reregistrations_.load(); }
  // Checks of both sockets the loop has finished (each serves again what was removed), for tests
  // that check that something does not happen at the next checks.
  [[nodiscard]] uint64_t socket_checks_for_test() const noexcept { return socket_checks_.load(); }

 private:
  // On the keeper's thread: serves again each socket that is no longer ours, when an event says
  // one may be gone or the periodic check is due.
  void keep_sockets(const kubelet::SocketKeeper::Pass& pass);
  // Stops the keeper and whatever is served, and lets go of the service: stop(), and start()
  // when it fails part way (nothing stays served then).
  void stop_serving();
  Status serve_dra();
  Status serve_registration();

  const DraPluginConfig config_;
  kube::Api& api_;
  DeviceScanFn scan_;
  common::metrics::Registry* metrics_;
  RegistrationService registration_;
  std::unique_ptr<DraService> service_;
  std::unique_ptr<DraHealthService> health_;
  std::unique_ptr<PluginServer> dra_server_;
  PluginServer reg_server_;
  std::unique_ptr<kubelet::SocketKeeper> keeper_;  // made by start(), ended by stop()
  // A socket that cannot be served again is tried at every check: one line per distinct error.
  common::RepeatFilter reg_errors_, dra_errors_;
  std::atomic<uint64_t> reregistrations_{0};
  std::atomic<uint64_t> socket_checks_{0};
};

}  // namespace erdma::agent::dra

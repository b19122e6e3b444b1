// The device source the config asks for (see device_source.hpp).
#include "agent/daemon/device_source.hpp"

#include "agent/sys/rdma_netlink.hpp"
#include "agent/sys/static_rdma_devices.hpp"
#include "agent/sys/verbs_rdma_devices.hpp"

namespace erdma::agent {
namespace {

// The verbs source with its RDMA netlink queries, owned together.
class VerbsWithNetlink final : public RdmaDevices {
 public:
  explicit VerbsWithNetlink(const std::vector<std::string>& drivers) : verbs_(drivers, &kernel_) {}
  Result<DeviceScan> scan() override { return verbs_.scan(); }
  std::string describe() const override { return verbs_.describe(); }

 private:
  NetlinkDeviceInfo kernel_;
  VerbsRdmaDevices verbs_;
};

}  // namespace

std::unique_ptr<RdmaDevices> make_device_source(const AgentConfig& cfg) {
  if (cfg.source == DeviceSourceKind::Static) return std::make_unique<StaticRdmaDevices>(cfg.static_devices);
  return std::make_unique<VerbsWithNetlink>(cfg.drivers);
}

}  // namespace erdma::agent

// The DRA driver's device health stream (v1.DRAResourceHealth/NodeWatchResources): the kubelet
// keeps one stream open per driver and shows each device's health in the status of the pods that
// hold it (Kubernetes 1.37, feature ResourceHealthStatus, beta and on).
//
// Every answer is the full list of the node's cards, as published (pool = the node, device =
// dra_device_name(card)): HEALTHY or UNHEALTHY by rdma_device.hpp is_healthy, with a message
// saying why a card is down. Sent at once, again when notify() says the cards changed and the
// list differs, and at least every `refresh` (the kubelet marks a device Unknown when no answer
// names it for 30 s: pkg/kubelet/cm/dra/healthinfo.go DefaultHealthTimeout in v1.37.2).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "agent/dra/dra_service.hpp"
#include "agent/proto/drahealth_v1.grpc.pb.h"

namespace erdma::agent::dra {

namespace healthpb = ::v1;

// dra-health v1 types.go DRAResourceHealthService.
inline constexpr std::string_view kDraHealthServiceV1 = "v1.DRAResourceHealth";

// The report for these cards (unix time `now_seconds`). Cards whose name gives no device name are
// left out, as the slices leave them out.
[[nodiscard]] healthpb::NodeWatchResourcesResponse health_report(const std::vector<RdmaDevice>& cards,
                                                                 const std::string& pool, int64_t now_seconds);

class DraHealthService final : public healthpb::DRAResourceHealth::Service {
 public:
  DraHealthService(std::string pool, DeviceScanFn scan, std::chrono::milliseconds refresh = std::chrono::seconds(10))
      : pool_(std::move(pool)), scan_(std::move(scan)), refresh_(refresh) {}

  grpc::Status NodeWatchResources(grpc::ServerContext* ctx, const healthpb::NodeWatchResourcesRequest* request,
                                  grpc::ServerWriter<healthpb::NodeWatchResourcesResponse>* writer) override;

  // The cards may have changed (after a scan): open streams send the list if it differs.
  void notify();
  // Ends every open stream (before the server stops, so its shutdown does not wait). Idempotent.
  void stop();
  [[nodiscard]] uint64_t reports_sent() const;

 private:
  const std::string pool_;
  DeviceScanFn scan_;
  const std::chrono::milliseconds refresh_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t generation_ = 0;
  bool stopping_ = false;
  uint64_t sent_ = 0;
};

}  // namespace erdma::agent::dra

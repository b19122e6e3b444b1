// The device health stream (see dra_health.hpp).
#include "agent/dra/dra_health.hpp"

#include "agent/core/dra_slices.hpp"
#include "common/log.hpp"

namespace erdma::agent::dra {
namespace log = common::log;
using Clock = std::chrono::steady_clock;

healthpb::NodeWatchResourcesResponse health_report(const std::vector<RdmaDevice>& cards, const std::string& pool,
                                                   int64_t now_seconds) {
  healthpb::NodeWatchResourcesResponse out;
  for (const auto& card : cards) {
    auto name = dra_device_name(card.name);
    if (!name) continue;
    auto* d = out.add_devices();
    d->mutable_device()->set_pool_name(pool);
    d->mutable_device()->set_device_name(*name);
    d->set_last_updated_time(now_seconds);
    if (is_healthy(card)) {
      d->set_health(healthpb::HEALTHY);
      continue;
    }
    d->set_health(healthpb::UNHEALTHY);
    std::string why = card.uverbs.empty() ? "card " + card.name + " has no uverbs device" : "";
    if (why.empty()) {
      why = "card " + card.name + " has no active port (";
      for (size_t i = 0; i < card.ports.size(); ++i) {
        why +=
            (i ? ", " : "") + std::to_string(card.ports[i].number) + ": " + std::string(to_string(card.ports[i].state));
      }
      why += ")";
    }
    d->set_message(why.substr(0, 1024));
  }
  return out;
}

namespace {
// The report without its times: what decides whether something changed.
std::string content_of(healthpb::NodeWatchResourcesResponse r) {
  for (auto& d : *r.mutable_devices()) d.set_last_updated_time(0);
  return r.SerializeAsString();
}
int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}
}  // namespace

grpc::Status DraHealthService::NodeWatchResources(grpc::ServerContext* ctx, const healthpb::NodeWatchResourcesRequest*,
                                                  grpc::ServerWriter<healthpb::NodeWatchResourcesResponse>* writer) {
  log::info("the kubelet watches the DRA devices' health");
  std::string last;
  auto last_sent = Clock::time_point{};
  uint64_t seen = ~uint64_t{0};
  for (;;) {
    uint64_t gen = 0;
    {
      std::unique_lock lock(mu_);
      // A short wait so that a cancelled stream (the kubelet went away) ends soon.
      cv_.wait_for(lock, std::chrono::milliseconds(200), [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return grpc::Status::OK;
      gen = generation_;
    }
    if (ctx->IsCancelled()) return grpc::Status::CANCELLED;
    const bool due = Clock::now() - last_sent >= refresh_;
    if (gen == seen && !due) continue;
    seen = gen;
    auto report = health_report(scan_(), pool_, unix_now());
    auto content = content_of(report);
    if (content == last && !due) continue;
    if (!writer->Write(report)) return grpc::Status::OK;  // the stream is gone
    last = std::move(content);
    last_sent = Clock::now();
    std::lock_guard lock(mu_);
    ++sent_;
  }
}

void DraHealthService::notify() {
  {
    std::lock_guard lock(mu_);
    ++generation_;
  }
  cv_.notify_all();
}

void DraHealthService::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
}

uint64_t DraHealthService::reports_sent() const {
  std::lock_guard lock(mu_);
  return sent_;
}

}  // namespace erdma::agent::dra

// SMC statistics as metrics (see smc_stats.hpp).
#include "agent/smcr/smc_stats.hpp"

#include <map>
#include <memory>
#include <set>

namespace erdma::agent {
namespace {

void add(SmcTechStats& a, const SmcTechStats& b) {
  a.client_v1_success += b.client_v1_success;
  a.client_v2_success += b.client_v2_success;
  a.server_v1_success += b.server_v1_success;
  a.server_v2_success += b.server_v2_success;
  a.rx_bytes += b.rx_bytes;
  a.tx_bytes += b.tx_bytes;
  a.rx_calls += b.rx_calls;
  a.tx_calls += b.tx_calls;
}

Result<SmcCounters> read_counters(const SmcInfoOpener& open) {
  ERDMA_TRY_ASSIGN(auto info, open());
  SmcCounters c;
  ERDMA_TRY_ASSIGN(auto s, info->stats());
  c.stats = s;
  ERDMA_TRY_ASSIGN(auto f, info->fallback_stats());
  c.fallbacks = std::move(f);
  return c;
}

}  // namespace

void accumulate(SmcCounters& a, const SmcCounters& b) {
  add(a.stats.smcr, b.stats.smcr);
  add(a.stats.smcd, b.stats.smcd);
  a.stats.client_handshake_errors += b.stats.client_handshake_errors;
  a.stats.server_handshake_errors += b.stats.server_handshake_errors;
  a.fallbacks.client_total += b.fallbacks.client_total;
  a.fallbacks.server_total += b.fallbacks.server_total;
  for (const auto& r : b.fallbacks.reasons) {
    bool merged = false;
    for (auto& have : a.fallbacks.reasons) {
      if (have.server == r.server && have.code == r.code) {
        have.count += r.count;
        merged = true;
        break;
      }
    }
    if (!merged) a.fallbacks.reasons.push_back(r);
  }
}

SmcStatsCollector::SmcStatsCollector(AgentMetrics& metrics, Netns& netns, SmcInfoOpener open_info)
    : metrics_(metrics), netns_(netns), open_info_(std::move(open_info)) {}

void SmcStatsCollector::publish(const std::string& scope, const SmcCounters& c) {
  const auto& r = c.stats.smcr;
  metrics_.smcr_connections(scope, "client", "v1").set(static_cast<double>(r.client_v1_success));
  metrics_.smcr_connections(scope, "client", "v2").set(static_cast<double>(r.client_v2_success));
  metrics_.smcr_connections(scope, "server", "v1").set(static_cast<double>(r.server_v1_success));
  metrics_.smcr_connections(scope, "server", "v2").set(static_cast<double>(r.server_v2_success));
  const auto& d = c.stats.smcd;
  metrics_.smcd_connections(scope, "client", "v1").set(static_cast<double>(d.client_v1_success));
  metrics_.smcd_connections(scope, "client", "v2").set(static_cast<double>(d.client_v2_success));
  metrics_.smcd_connections(scope, "server", "v1").set(static_cast<double>(d.server_v1_success));
  metrics_.smcd_connections(scope, "server", "v2").set(static_cast<double>(d.server_v2_success));
  // Reason names, not codes: the set is small and fixed (unknown codes share "UNKNOWN").
  std::map<std::pair<std::string, std::string>, double> now;
  for (const auto& f : c.fallbacks.reasons) {
    now[{f.server ? "server" : "client", std::string(fallback_reason_name(f.code))}] += f.count;
  }
  for (const auto& [key, gauge] : metrics_.fallback_series()) {
    if (std::get<0>(key) != scope) continue;
    auto it = now.find({std::get<1>(key), std::get<2>(key)});
    gauge->set(it == now.end() ? 0.0 : it->second);
  }
  for (const auto& [key, value] : now) metrics_.smc_fallbacks(scope, key.first, key.second).set(value);
}

SmcStatsCollector::Reading SmcStatsCollector::collect(const std::vector<TrackedPod>& pods,
                                                      std::chrono::steady_clock::time_point deadline) {
  Reading reading;
  if (auto host = read_counters(open_info_); host) {
    reading.host_ok = true;
    publish("host", *host);
  } else {
    reading.errors.push_back("host: " + host.error().message);
  }

  SmcCounters sum;
  for (const auto& pod : pods) {
    auto c = std::make_shared<SmcCounters>();
    auto open = open_info_;
    auto s = netns_.run(
        pod.netns,
        [c, open]() -> Status {
          ERDMA_TRY_ASSIGN(auto r, read_counters(open));
          *c = std::move(r);
          return {};
        },
        deadline);
    if (!s) {
      if (s.error().code == ErrorCode::NotFound) {
        reading.gone.push_back(pod.sandbox);
      } else {
        reading.errors.push_back(pod.pod + ": " + s.error().message);
      }
      continue;
    }
    accumulate(sum, *c);
    ++reading.pods_read;
  }
  // With pods configured but none readable, keep the previous values rather than report zeros.
  if (reading.pods_read > 0 || pods.size() == reading.gone.size()) publish("pods", sum);
  return reading;
}

}  // namespace erdma::agent

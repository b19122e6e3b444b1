// The node's driver state, reported every rescan (see node_reporter.hpp).
#include "agent/daemon/node_reporter.hpp"

#include "agent/sys/file_install.hpp"
#include "agent/sys/kernel_modules.hpp"
#include "common/log.hpp"

namespace erdma::agent {
namespace log = common::log;

NodeReporter::NodeReporter(const AgentConfig& cfg, common::metrics::Registry& registry, PluginRuntime& runtime)
    : cfg_(cfg), registry_(registry), runtime_(runtime) {}

void NodeReporter::check() {
  auto facts = read_driver_facts("/sys");
  auto verdict = judge_driver(cfg_.driver.prefer, facts);
  // driver.loadModules: each planned module once per agent run (a failure is logged once, not
  // at every rescan); loading erdma can bring smc into the plan, hence the second round.
  for (int round = 0; round < 2 && cfg_.driver.load_modules; ++round) {
    bool loaded_any = false;
    for (const auto& m : plan_module_loads(verdict)) {
      if (!attempted_.insert(m).second) continue;
      if (auto s = run_modprobe(cfg_.driver.modprobe, m); s) {
        log::info("kernel module loaded").kv("module", m).kv("by", cfg_.driver.modprobe);
        loaded_any = true;
      } else {
        log::error("cannot load kernel module").kv("module", m).kv("error", s.error().message);
      }
    }
    if (!loaded_any) break;
    facts = read_driver_facts("/sys");
    verdict = judge_driver(cfg_.driver.prefer, facts);
  }
  if (!last_ || verdict != *last_) {
    (verdict.mismatch ? log::warn(verdict.line) : log::info(verdict.line))
        .kv("want", verdict.want)
        .kv("have", verdict.have)
        .kv("smcr_capable", verdict.smcr_capable ? "true" : "false");
    for (const auto& n : verdict.notes) log::warn("node preparation").kv("note", n);
    if (last_ && (last_->want != verdict.want || last_->have != verdict.have)) gauge(*last_).set(0);
    gauge(verdict).set(verdict.mismatch ? 1 : 0);
    last_ = verdict;
  }
  if (!cfg_.nfd_feature_file.empty()) {
    const auto text = nfd_features(verdict, runtime_.state().snapshot()->devices.size());
    auto w = write_file_atomically(cfg_.nfd_feature_file, text);
    if (!w) {
      if (nfd_errors_.failed(w.error().message)) {
        log::error("cannot write the NFD feature file").kv("error", w.error().message);
      }
    } else {
      nfd_errors_.succeeded();
      if (*w) log::info("NFD feature file written").kv("path", cfg_.nfd_feature_file);
    }
  }
}

common::metrics::Gauge& NodeReporter::gauge(const DriverVerdict& v) {
  return registry_.gauge("erdma_agent_driver_mode_mismatch",
                         "1 when the node's erdma driver mode (have) differs from the configured one (want)",
                         {{"want", v.want}, {"have", v.have}});
}

}  // namespace erdma::agent

// Pod network namespace setup (see pod_netns.hpp).
#include "agent/sys/pod_netns.hpp"

namespace erdma::agent {

KernelPodNetns::KernelPodNetns(Netns& netns, PnetTableOpener open_table)
    : netns_(netns), open_table_(std::move(open_table)) {}

Result<PodNetnsReport> KernelPodNetns::configure(const NetnsRef& ns, const PodNetnsPlan& plan,
                                                 std::chrono::steady_clock::time_point deadline) {
  // Shared with the worker: after a deadline the worker may still run and must find its state.
  auto report = std::make_shared<PodNetnsReport>();
  auto opener = open_table_;
  auto status = netns_.run(
      ns,
      [report, plan, opener]() -> Status {
        auto table = opener();
        if (!table) return table.error();
        auto added = (*table)->add(plan.entry);
        if (!added) return added.error();
        report->pnet = *added;
        std::string failures;
        ErrorCode first = ErrorCode::Internal;
        for (const auto& [name, value] : plan.sysctls) {
          if (auto w = write_sysctl(name, value, plan.proc_root); !w) {
            if (failures.empty()) first = w.error().code;
            failures += (failures.empty() ? "" : "; ") + w.error().message;
            continue;
          }
          report->sysctls_set.push_back(name + "=" + value);
        }
        if (plan.tcp2smc && plan.sysctls.count(kTcp2SmcSysctl) == 0) {
          // Only some kernels have it: absence is the normal case, not an error.
          if (auto w = write_sysctl(kTcp2SmcSysctl, "1", plan.proc_root); w) {
            report->sysctls_set.push_back(std::string(kTcp2SmcSysctl) + "=1");
          } else if (w.error().code != ErrorCode::NotFound) {
            if (failures.empty()) first = w.error().code;
            failures += (failures.empty() ? "" : "; ") + w.error().message;
          }
        }
        // A sysctl the kernel does not have is a configuration problem, not a vanished pod.
        if (!failures.empty()) return make_error(first == ErrorCode::NotFound ? ErrorCode::FailedPrecondition : first, failures);
        return {};
      },
      deadline);
  if (!status) return status.error();
  return *report;
}

}  // namespace erdma::agent

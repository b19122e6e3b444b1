// Driver mode decision (see driver_mode.hpp).
#include "agent/core/driver_mode.hpp"

#include "common/text.hpp"

namespace erdma::agent {

std::string found_mode(const DriverFacts& f) {
  if (!f.erdma_loaded) return "none";
  // MLNX_OFED replaces the kernel's RDMA core and loads its mlx_compat layer; an erdma module
  // loaded on top of it is the OFED build.
  if (f.ofed_stack) return "ofed";
  if (f.compat_mode) return *f.compat_mode ? "compat" : "default";
  // No compat_mode parameter (in-tree driver): the device's node type decides. compat mode
  // registers devices as CA (RoCE-like), the default iWARP mode as RNIC.
  for (const auto& [dev, type] : f.node_types) {
    if (type == "CA") return "compat";
  }
  return "default";
}

DriverMode wanted_mode(DriverMode prefer, const DriverFacts& f) {
  if (prefer != DriverMode::Auto) return prefer;
  return f.nvidia_loaded ? DriverMode::Ofed : DriverMode::Default;
}

DriverVerdict judge_driver(DriverMode prefer, const DriverFacts& f) {
  DriverVerdict v;
  const DriverMode want = wanted_mode(prefer, f);
  v.want = std::string(to_string(want));
  v.have = found_mode(f);
  v.mismatch = v.have != v.want;
  v.smcr_capable = v.have == "default" && f.smc_loaded;
  const std::string auto_note =
      prefer == DriverMode::Auto
          ? std::string(" (driver.prefer: auto, ") + (f.nvidia_loaded ? "NVIDIA driver loaded)" : "no NVIDIA driver)")
          : std::string();
  const std::string install =
      "install the eRDMA driver in " + v.want + " mode (ACK add-on: preferDriver: " + v.want + ")";
  if (v.have == "none") {
    v.line = "driver mode mismatch: want " + v.want + auto_note +
             ", have none: the erdma kernel module is not loaded; " + install +
             (v.want == "default" ? " or run `modprobe erdma`" : "");
    v.modules_to_load.push_back("erdma");
  } else if (!v.mismatch) {
    v.line = "driver mode " + v.have + " as wanted" + auto_note;
  } else if (v.want == "default") {
    v.line = "driver mode mismatch: want default" + auto_note + ", have " + v.have +
             (v.have == "ofed" ? " (the RDMA core comes from MLNX_OFED)" : " (erdma compat_mode=Y)") +
             ": SMC-R is not supported with the " + v.have + " driver; " + install +
             ", or set driver.prefer: " + v.have + " if this node runs NCCL rather than SMC-R";
  } else if (v.want == "ofed") {
    v.line = "driver mode mismatch: want ofed" + auto_note + ", have " + v.have +
             ": GPU nodes running NCCL with GPUDirect RDMA need the OFED build of the eRDMA driver; " + install +
             ", or set driver.prefer: " + v.have + " if this node does not run NCCL";
  } else {  // want compat
    v.line = "driver mode mismatch: want compat" + auto_note + ", have " + v.have +
             ": reload the module in compat mode (`modprobe -r erdma && modprobe erdma compat_mode=Y`, with no "
             "RDMA user running) or " +
             install;
  }
  if (v.have != "none" && !f.smc_loaded && v.want == "default") {
    v.notes.push_back("the smc kernel module is not loaded: SMC-R pods fall back to TCP until `modprobe smc`");
    v.modules_to_load.push_back("smc");
  }
  if (v.want == "ofed" && f.nvidia_loaded && !f.nvidia_peermem_loaded) {
    v.notes.push_back("nvidia_peermem is not loaded: NCCL cannot use GPUDirect RDMA (`modprobe nvidia_peermem`)");
    v.modules_to_load.push_back("nvidia_peermem");
  }
  if (v.want == "ofed" && !f.nvidia_loaded) {
    v.notes.push_back("no NVIDIA GPU driver is loaded (/sys/module/nvidia is missing)");
  }
  return v;
}

std::string nfd_features(const DriverVerdict& v, size_t device_count) {
  std::string out;
  out += "# Written by erdma-agent; rewritten when the node's eRDMA state changes.\n";
  out += "erdma-driver-mode=" + v.have + "\n";
  out += "erdma-driver-want=" + v.want + "\n";
  out += std::string("erdma-driver-mismatch=") + (v.mismatch ? "true" : "false") + "\n";
  out += std::string("erdma-smcr=") + (v.smcr_capable ? "true" : "false") + "\n";
  out += "erdma-devices=" + std::to_string(device_count) + "\n";
  return out;
}

std::vector<std::string> plan_module_loads(const DriverVerdict& verdict) {
  std::vector<std::string> out;
  for (const auto& m : verdict.modules_to_load) {
    if (m == "erdma" && verdict.want != "default") continue;
    if (m != "erdma" && m != "smc" && m != "nvidia_peermem") continue;
    out.push_back(m);
    if (m == "smc") out.emplace_back("smc_diag");
  }
  return out;
}

}  // namespace erdma::agent

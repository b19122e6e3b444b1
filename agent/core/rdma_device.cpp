// Port states, GID types and device health (see rdma_device.hpp).
#include "agent/core/rdma_device.hpp"

#include <algorithm>
#include <cctype>

namespace erdma::agent {

std::string_view to_string(PortState state) noexcept {
  switch (state) {
    case PortState::Down: return "DOWN";
    case PortState::Init: return "INIT";
    case PortState::Armed: return "ARMED";
    case PortState::Active: return "ACTIVE";
    case PortState::ActiveDefer: return "ACTIVE_DEFER";
    case PortState::Unknown: break;
  }
  return "UNKNOWN";
}

std::optional<PortState> parse_port_state_name(std::string_view name) noexcept {
  std::string upper(name);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (PortState s : {PortState::Unknown, PortState::Down, PortState::Init, PortState::Armed, PortState::Active,
                      PortState::ActiveDefer}) {
    if (upper == to_string(s)) return s;
  }
  return std::nullopt;
}

std::string_view to_string(GidType type) noexcept {
  switch (type) {
    case GidType::IbRoceV1: return "IB/RoCE v1";
    case GidType::RoceV2: return "RoCE v2";
    case GidType::Unknown: break;
  }
  return "unknown";
}

bool is_healthy(const RdmaDevice& device) noexcept {
  if (device.uverbs.empty()) return false;
  return std::any_of(device.ports.begin(), device.ports.end(), [](const RdmaPort& p) {
    return p.state == PortState::Active || p.state == PortState::ActiveDefer;
  });
}

std::string uverbs_path(const RdmaDevice& device) {
  if (device.uverbs.empty()) return {};
  return std::string(kInfinibandDevDir) + "/" + device.uverbs;
}

bool is_uverbs_name(std::string_view name) noexcept {
  constexpr std::string_view prefix = "uverbs";
  if (!name.starts_with(prefix) || name.size() == prefix.size() || name.size() > prefix.size() + 5) return false;
  return std::all_of(name.begin() + static_cast<std::ptrdiff_t>(prefix.size()), name.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

bool is_device_name(std::string_view name) noexcept {
  if (name.empty() || name.size() > 63) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == '-';
  });
}

}  // namespace erdma::agent

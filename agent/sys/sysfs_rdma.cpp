// sysfs parsers and the tree walker (see sysfs_rdma.hpp).
#include "agent/sys/sysfs_rdma.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "common/text.hpp"

namespace erdma::agent::sysfs {
namespace {

namespace fs = std::filesystem;
using common::json_quote;

Error bad(std::string_view what, std::string_view text) {
  return make_error(ErrorCode::InvalidArgument, std::string(what) + ": unexpected content " + json_quote(trim(text)));
}

// Reads a small sysfs attribute. Sysfs attributes are at most a page.
Result<std::string> read_attr(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ErrorCode::NotFound, path.string() + ": cannot open");
  std::string text(4096, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) return make_error(ErrorCode::Unavailable, path.string() + ": read error");
  text.resize(static_cast<size_t>(in.gcount()));
  return text;
}

bool parse_unsigned(std::string_view s, unsigned& out) {
  if (s.empty() || s.size() > 9) return false;
  unsigned v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<unsigned>(c - '0');
  }
  out = v;
  return true;
}

// Numeric entries of a directory, sorted ("1", "2" under ports/; "0".."255" under gids/).
std::vector<unsigned> numeric_entries(const fs::path& dir) {
  std::vector<unsigned> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    unsigned n = 0;
    if (parse_unsigned(it->path().filename().string(), n)) out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::string trim(std::string_view text) {
  size_t b = 0, e = text.size();
  while (b < e && std::isspace(static_cast<unsigned char>(text[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(text[e - 1]))) --e;
  return std::string(text.substr(b, e - b));
}

Result<PortState> parse_port_state(std::string_view text) {
  const std::string t = trim(text);
  const auto colon = t.find(':');
  if (colon == std::string::npos) return bad("port state", text);
  unsigned n = 0;
  if (!parse_unsigned(t.substr(0, colon), n) || n > 5) return bad("port state", text);
  const std::string name = trim(std::string_view(t).substr(colon + 1));
  if (n == 0) {  // IB_PORT_NOP: the driver reports no state
    if (name != "NOP") return bad("port state", text);
    return PortState::Unknown;
  }
  const auto state = static_cast<PortState>(n);
  if (name != to_string(state)) return bad("port state", text);
  return state;
}

Result<int> parse_numa_node(std::string_view text) {
  const std::string t = trim(text);
  if (t == "-1") return -1;
  unsigned n = 0;
  if (!parse_unsigned(t, n) || n > 65535) return bad("numa_node", text);
  return static_cast<int>(n);
}

Result<GidType> parse_gid_type(std::string_view text) {
  const std::string t = trim(text);
  if (t == "RoCE v2") return GidType::RoceV2;
  if (t == "IB/RoCE v1") return GidType::IbRoceV1;
  return bad("GID type", text);
}

Result<std::string> parse_gid(std::string_view text) {
  const std::string t = trim(text);
  bool ok = t.size() == 39;
  for (size_t i = 0; ok && i < t.size(); ++i) {
    ok = (i % 5 == 4) ? t[i] == ':' : std::isxdigit(static_cast<unsigned char>(t[i])) != 0;
  }
  if (!ok) return bad("GID", text);
  return t;
}

bool is_zero_gid(std::string_view gid) noexcept {
  return std::all_of(gid.begin(), gid.end(), [](char c) { return c == '0' || c == ':'; });
}

std::string SysfsRdmaReader::smcd_loopback_device() const {
  std::error_code ec;
  std::vector<std::string> names;
  for (fs::directory_iterator it(fs::path(root_) / "class/dibs", ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code lec;
    const auto target = fs::read_symlink(it->path(), lec).generic_string();
    if (!lec && target.find("devices/virtual/dibs/") != std::string::npos)
      names.push_back(it->path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names.empty() ? std::string() : names.front();
}

bool SysfsRdmaReader::has_infiniband_class() const {
  std::error_code ec;
  return fs::is_directory(fs::path(root_) / "class/infiniband", ec);
}

Result<std::vector<std::string>> SysfsRdmaReader::device_names() const {
  const fs::path dir = fs::path(root_) / "class/infiniband";
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return make_error(ErrorCode::NotFound, dir.string() + " does not exist");
  std::vector<std::string> out;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    out.push_back(it->path().filename().string());
  }
  if (ec) return make_error(ErrorCode::Unavailable, dir.string() + ": " + ec.message());
  std::sort(out.begin(), out.end());
  return out;
}

std::map<std::string, std::string> SysfsRdmaReader::uverbs_by_device() const {
  std::map<std::string, std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(fs::path(root_) / "class/infiniband_verbs", ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!is_uverbs_name(name)) continue;  // e.g. abi_version
    auto ibdev = read_attr(it->path() / "ibdev");
    if (ibdev) out[trim(*ibdev)] = name;
  }
  return out;
}

Result<DeviceRead> SysfsRdmaReader::read_device(const std::string& name,
                                                const std::map<std::string, std::string>& uverbs) const {
  const fs::path dir = fs::path(root_) / "class/infiniband" / name;
  std::error_code ec;
  if (name.empty() || name.find('/') != std::string::npos || !fs::is_directory(dir, ec)) {
    return make_error(ErrorCode::NotFound, "RDMA device " + json_quote(name) + ": no directory " + dir.string());
  }
  DeviceRead out;
  RdmaDevice& d = out.device;
  d.name = name;
  if (auto it = uverbs.find(name); it != uverbs.end()) d.uverbs = it->second;

  // The bus device's driver (PCI drivers: "erdma", "mlx5_core"); software devices have none.
  const fs::path driver_link = fs::read_symlink(dir / "device/driver", ec);
  if (!ec) d.driver = driver_link.filename().string();

  if (auto numa = read_attr(dir / "device/numa_node")) {
    if (auto n = parse_numa_node(*numa)) {
      d.numa_node = *n;
    } else {
      out.notes.push_back(name + ": " + n.error().message + "; NUMA node taken as unknown");
    }
  }

  for (unsigned p : numeric_entries(dir / "ports")) {
    const fs::path pdir = dir / "ports" / std::to_string(p);
    RdmaPort port;
    port.number = p;
    auto state = read_attr(pdir / "state");
    if (!state) {
      out.notes.push_back(name + " port " + std::to_string(p) + ": " + state.error().message + "; port taken as down");
    } else if (auto s = parse_port_state(*state)) {
      port.state = *s;
    } else {
      out.notes.push_back(name + " port " + std::to_string(p) + ": " + s.error().message + "; port taken as down");
    }
    if (auto ll = read_attr(pdir / "link_layer")) port.link_layer = trim(*ll);
    for (unsigned i : numeric_entries(pdir / "gids")) {
      auto text = read_attr(pdir / "gids" / std::to_string(i));
      if (!text) continue;
      auto gid = parse_gid(*text);
      if (!gid) {
        out.notes.push_back(name + " port " + std::to_string(p) + " gid " + std::to_string(i) + ": " +
                            gid.error().message);
        continue;
      }
      if (is_zero_gid(*gid)) continue;
      Gid g;
      g.index = i;
      g.address = *gid;
      // Reading the type or netdev of an entry the kernel considers invalid fails (EINVAL).
      if (auto type = read_attr(pdir / "gid_attrs/types" / std::to_string(i))) {
        if (auto t = parse_gid_type(*type)) g.type = *t;
      }
      if (auto nd = read_attr(pdir / "gid_attrs/ndevs" / std::to_string(i))) g.netdev = trim(*nd);
      port.gids.push_back(std::move(g));
    }
    d.ports.push_back(std::move(port));
  }
  if (d.ports.empty()) out.notes.push_back(name + ": no ports under " + (dir / "ports").string());

  // The netdev: the first GID that names one, else the "parent" attribute of software devices
  // (rxe, siw print the netdev they sit on).
  for (const auto& port : d.ports) {
    for (const auto& g : port.gids) {
      if (d.netdev.empty() && !g.netdev.empty()) d.netdev = g.netdev;
    }
  }
  if (d.netdev.empty()) {
    if (auto parent = read_attr(dir / "parent")) d.netdev = trim(*parent);
  }
  return out;
}

}  // namespace erdma::agent::sysfs

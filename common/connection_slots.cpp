// Connection bookkeeping with idle-first eviction and per-peer caps (see connection_slots.hpp).
#include "common/connection_slots.hpp"

namespace erdma::common {

ConnectionSlots::Admission ConnectionSlots::admit(std::string_view peer, bool start_idle) {
  Admission out;
  auto pit = peers_.find(std::string(peer));
  if (pit != peers_.end() && pit->second.open >= limits_.max_per_peer) {
    // The peer pays for its own hoard: its longest-waiting connection makes room, nobody else's.
    if (pit->second.idle.empty()) {
      out.verdict = Verdict::RefusedPeer;
      return out;
    }
    out.evicted = pit->second.idle.begin()->id;
  } else if (entries_.size() >= limits_.max_open) {
    if (idle_.empty()) {
      out.verdict = Verdict::RefusedFull;
      return out;
    }
    out.evicted = idle_.begin()->id;
  }
  if (out.evicted) remove(*out.evicted);
  out.id = next_id_++;
  Entry e;
  e.peer = std::string(peer);
  entries_.emplace(out.id, std::move(e));
  ++peers_[std::string(peer)].open;
  if (start_idle) set_idle(out.id);
  return out;
}

void ConnectionSlots::unindex(Id id, Entry& e) {
  if (!e.idle) return;
  idle_.erase(e.key(id));
  peers_[e.peer].idle.erase(e.key(id));
  e.idle = false;
}

void ConnectionSlots::set_idle(Id id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  Entry& e = it->second;
  if (e.idle) return;  // already waiting: keeps its place
  e.idle = true;
  e.since = next_since_++;
  idle_.insert(e.key(id));
  peers_[e.peer].idle.insert(e.key(id));
}

void ConnectionSlots::set_busy(Id id) {
  auto it = entries_.find(id);
  if (it != entries_.end()) unindex(id, it->second);
}

void ConnectionSlots::set_proven(Id id) {
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second.proven) return;
  Entry& e = it->second;
  const bool was_idle = e.idle;
  unindex(id, e);
  e.proven = true;
  if (was_idle) {
    e.idle = true;
    idle_.insert(e.key(id));
    peers_[e.peer].idle.insert(e.key(id));
  }
}

void ConnectionSlots::release(Id id) { remove(id); }

void ConnectionSlots::remove(Id id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  unindex(id, it->second);
  auto pit = peers_.find(it->second.peer);
  if (pit != peers_.end() && --pit->second.open == 0) peers_.erase(pit);
  entries_.erase(it);
}

size_t ConnectionSlots::open_from(std::string_view peer) const {
  auto it = peers_.find(std::string(peer));
  return it == peers_.end() ? 0 : it->second.open;
}

}  // namespace erdma::common

// Bookkeeping of a server's open connections that one client cannot hoard: a cap on all of them,
// a cap per peer address, and, at either cap, which idle connection to close to make room.
// Pure: no sockets, no clock, no lock. The servers (the admission listener, the metrics/probe
// server) hold it under their own mutex and do the closing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>

namespace erdma::common {

class ConnectionSlots {
 public:
  using Id = uint64_t;

  struct Limits {
    size_t max_open = 1024;    // all connections together
    size_t max_per_peer = 64;  // connections from one peer address
  };

  enum class Verdict {
    Admitted,
    RefusedFull,  // at max_open and every connection is busy
    RefusedPeer,  // at max_per_peer for this peer and every one of its connections is busy
  };

  struct Admission {
    Verdict verdict = Verdict::Admitted;
    Id id = 0;                  // the new connection's id (1, 2, ...), when admitted
    std::optional<Id> evicted;  // the idle connection the caller must now close to make room
  };

  explicit ConnectionSlots(Limits limits) : limits_(limits) {}

  // A new connection from `peer` (an address, as text). It starts busy (a TLS handshake), or idle
  // with `start_idle` (a plain-HTTP connection, reading its first request). At the peer's cap the
  // peer's own idle connection that has waited longest is evicted; at the total cap, the idle
  // connection that has waited longest of all. Connections that never carried a request the
  // server exists for (see set_proven) go before those that did. With nothing idle to evict, the
  // new connection is refused and nothing changes. An evicted id is forgotten at once: the
  // caller closes that connection, and its later calls with the id are ignored.
  [[nodiscard]] Admission admit(std::string_view peer, bool start_idle = false);

  // The connection waits for (or is reading) its next request: it may be evicted. Its place in
  // the eviction order is the order of these calls: the earliest waits longest. A call while
  // already idle changes nothing.
  void set_idle(Id id);
  // The connection is handling a request: it is never evicted until set_idle again.
  void set_busy(Id id);
  // The connection carried a request the server exists for (an AdmissionReview answered): among
  // idle connections it is evicted after every one that did not.
  void set_proven(Id id);
  // The connection closed. Unknown ids (evicted, or released before) are ignored.
  void release(Id id);

  [[nodiscard]] size_t open() const noexcept { return entries_.size(); }
  // Connections waiting for a request now: the ones a newcomer at a cap may evict.
  [[nodiscard]] size_t idle() const noexcept { return idle_.size(); }
  [[nodiscard]] size_t open_from(std::string_view peer) const;
  [[nodiscard]] bool contains(Id id) const { return entries_.count(id) != 0; }
  [[nodiscard]] const Limits& limits() const noexcept { return limits_; }

 private:
  // Eviction order: unproven before proven, then the longest waiting.
  struct IdleKey {
    bool proven;
    uint64_t since;
    Id id;
    auto operator<=>(const IdleKey&) const = default;
  };
  struct Entry {
    std::string peer;
    bool idle = false;
    bool proven = false;
    uint64_t since = 0;
    IdleKey key(Id id) const { return {proven, since, id}; }
  };
  struct Peer {
    size_t open = 0;
    std::set<IdleKey> idle;
  };

  void unindex(Id id, Entry& e);
  void remove(Id id);

  Limits limits_;
  Id next_id_ = 1;
  uint64_t next_since_ = 1;
  std::unordered_map<Id, Entry> entries_;
  std::unordered_map<std::string, Peer> peers_;
  std::set<IdleKey> idle_;
};

}  // namespace erdma::common

// The admission server's Prometheus series, registered once at start-up; updates are lock-free.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/metrics.hpp"
#include "webhook/core/admission.hpp"

namespace erdma::webhook::server {

class ServerMetrics {
 public:
  explicit ServerMetrics(common::metrics::Registry& registry);

  // One admission request: its outcome (Invalid counts as outcome="invalid"), its warnings by
  // kind (erdma_webhook_warnings_total{kind}; their sum is the number of warnings) and the time
  // spent in handle().
  void record_admission(Outcome outcome, const std::array<uint32_t, kWarningKindCount>& warnings,
                        double seconds) noexcept;
  // A certificate or config reload attempt; `kind` is "cert" or "config".
  void record_reload(bool cert, bool ok) noexcept;
  void set_cert_not_after(int64_t unix_seconds) noexcept { cert_not_after_.set(static_cast<double>(unix_seconds)); }
  void connection_opened() noexcept { open_.add(1); }
  void connection_closed() noexcept { open_.add(-1); }
  void connection_refused() noexcept { refused_.inc(); }
  void connection_refused_peer() noexcept { refused_peer_.inc(); }
  void connection_evicted() noexcept { evicted_.inc(); }
  // Connections waiting for their next request (the ones a newcomer at a cap may evict).
  void set_connections_idle(size_t n) noexcept { idle_.set(static_cast<double>(n)); }
  // The request-body budget (--body-budget): its size, the bytes held now, and the requests
  // answered 429 because their body did not fit.
  void set_body_budget(size_t bytes) noexcept { body_budget_.set(static_cast<double>(bytes)); }
  void set_body_budget_used(size_t bytes) noexcept { body_budget_used_.set(static_cast<double>(bytes)); }
  void body_budget_refused() noexcept { body_budget_refused_.inc(); }

  // Why a TLS handshake failed. untrusted_certificate: the client refused our certificate (an
  // apiserver whose caBundle does not match it); client_certificate: with --client-ca, the client
  // presented no certificate or one that does not verify; protocol: not TLS 1.2+ (or below
  // --tls-min-version) / no shared suite / plain HTTP; timeout; closed: the peer went away (TCP
  // probes, scanners); other.
  enum class HandshakeFailure { UntrustedCertificate, Protocol, Timeout, Closed, Other, ClientCertificate };
  void handshake_failed(HandshakeFailure why) noexcept { handshake_failures_[static_cast<size_t>(why)]->inc(); }

  [[nodiscard]] double open_connections() const noexcept { return open_.value(); }

 private:
  std::array<common::metrics::Counter*, 5> outcomes_{};  // indexed by Outcome
  common::metrics::Histogram& duration_;
  std::array<common::metrics::Counter*, kWarningKindCount> warnings_{};  // indexed by WarningKind
  common::metrics::Gauge& cert_not_after_;
  std::array<common::metrics::Counter*, 4> reloads_{};  // cert ok, cert error, config ok, config error
  common::metrics::Gauge& open_;
  common::metrics::Counter& refused_;
  common::metrics::Counter& refused_peer_;
  common::metrics::Counter& evicted_;
  common::metrics::Gauge& idle_;
  common::metrics::Gauge& body_budget_;
  common::metrics::Gauge& body_budget_used_;
  common::metrics::Counter& body_budget_refused_;
  std::array<common::metrics::Counter*, 6> handshake_failures_{};  // indexed by HandshakeFailure
};

}  // namespace erdma::webhook::server

// Registration of the admission server's series (see server_metrics.hpp).
#include "webhook/server/server_metrics.hpp"

#include "erdma/version.hpp"

namespace erdma::webhook::server {

namespace m = common::metrics;

ServerMetrics::ServerMetrics(m::Registry& r)
    : duration_(r.histogram("erdma_webhook_admission_duration_seconds",
                            "Time spent deciding one admission request (decode, mutate, encode).",
                            m::exponential_buckets(25e-6, 2, 14))),
      cert_not_after_(
          r.gauge("erdma_webhook_tls_cert_not_after_seconds", "Expiry (Unix time) of the serving certificate in use.")),
      open_(r.gauge("erdma_webhook_connections_open", "Open TLS connections on the admission port.")),
      refused_(r.counter("erdma_webhook_connections_refused_total",
                         "New connections closed at once: --max-connections reached and every open connection "
                         "mid-request.")),
      refused_peer_(r.counter("erdma_webhook_connections_peer_refused_total",
                              "New connections closed at once: their peer address held --max-connections-per-peer "
                              "connections, every one mid-request.")),
      evicted_(r.counter("erdma_webhook_connections_evicted_total",
                         "Idle connections closed to make room for a new one (--max-connections or "
                         "--max-connections-per-peer reached).")),
      idle_(r.gauge("erdma_webhook_connections_idle",
                    "Open connections waiting for their next request: the ones a new connection at "
                    "--max-connections or --max-connections-per-peer may close to make room.")),
      body_budget_(r.gauge("erdma_webhook_body_budget_bytes",
                           "--body-budget: the bytes all request bodies being read or served may hold together.")),
      body_budget_used_(r.gauge("erdma_webhook_body_budget_used_bytes",
                                "Bytes of --body-budget held now by request bodies being read or served.")),
      body_budget_refused_(r.counter("erdma_webhook_body_budget_refused_total",
                                     "Requests answered 429 with Retry-After because their body did not fit "
                                     "--body-budget beside the bodies already held.")) {
  const char* help = "Admission requests by outcome (invalid: the body was not a usable AdmissionReview).";
  const char* names[] = {"mutated", "unchanged", "skipped", "rejected", "invalid"};
  const Outcome order[] = {Outcome::Mutated, Outcome::Unchanged, Outcome::Skipped, Outcome::Rejected, Outcome::Invalid};
  for (size_t i = 0; i < 5; ++i) {
    outcomes_[static_cast<size_t>(order[i])] =
        &r.counter("erdma_webhook_admission_requests_total", help, {{"outcome", names[i]}});
  }
  // Every kind is registered at start-up, so each series exists (at 0) before its first warning.
  const char* whelp = "Warnings produced by admission, by kind (the same texts go to the client, the log line and "
                      "the pod's erdma-warnings annotation).";
  for (size_t i = 0; i < kWarningKindCount; ++i) {
    const std::string kind(to_string(static_cast<WarningKind>(i)));
    warnings_[i] = &r.counter("erdma_webhook_warnings_total", whelp, {{"kind", kind}});
  }
  const char* rhelp = "Certificate and config reload attempts by kind and result.";
  reloads_[0] = &r.counter("erdma_webhook_reloads_total", rhelp, {{"kind", "cert"}, {"result", "success"}});
  reloads_[1] = &r.counter("erdma_webhook_reloads_total", rhelp, {{"kind", "cert"}, {"result", "error"}});
  reloads_[2] = &r.counter("erdma_webhook_reloads_total", rhelp, {{"kind", "config"}, {"result", "success"}});
  reloads_[3] = &r.counter("erdma_webhook_reloads_total", rhelp, {{"kind", "config"}, {"result", "error"}});
  const char* hhelp = "TLS handshakes that failed, by reason (untrusted_certificate: the client refused the "
                      "serving certificate, e.g. a caBundle that does not match it; client_certificate: the "
                      "client presented no certificate or one the --client-ca CAs do not verify).";
  const char* reasons[] = {"untrusted_certificate", "protocol", "timeout", "closed", "other", "client_certificate"};
  for (size_t i = 0; i < 6; ++i) {
    handshake_failures_[i] = &r.counter("erdma_webhook_tls_handshake_failures_total", hhelp, {{"reason", reasons[i]}});
  }
  r.gauge("erdma_webhook_build_info", "Build information; the value is always 1.", {{"version", erdma::kVersion}})
      .set(1);
}

void ServerMetrics::record_admission(Outcome outcome, const std::array<uint32_t, kWarningKindCount>& warnings,
                                     double seconds) noexcept {
  outcomes_[static_cast<size_t>(outcome)]->inc();
  for (size_t i = 0; i < kWarningKindCount; ++i) {
    if (warnings[i] > 0) warnings_[i]->inc(warnings[i]);
  }
  duration_.observe(seconds);
}

void ServerMetrics::record_reload(bool cert, bool ok) noexcept { reloads_[(cert ? 0u : 2u) + (ok ? 0u : 1u)]->inc(); }

}  // namespace erdma::webhook::server

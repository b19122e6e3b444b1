// `erdma-webhook serve`'s run loop (see serve_command.hpp): wires the listener, the metrics
// endpoint, the reloader and the signal handling together. Its flags are in serve_options.cpp.
#include "webhook/server/serve_command.hpp"

#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <functional>
#include <ostream>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/http/metrics_server.hpp"
#include "common/listen_address.hpp"
#include "common/log.hpp"
#include "common/metrics.hpp"
#include "common/text.hpp"
#include "erdma/version.hpp"
#include "webhook/config_io/config_file.hpp"
#include "webhook/server/listener.hpp"
#include "webhook/server/reloader.hpp"
#include "webhook/server/server_metrics.hpp"
#include "webhook/server/tls_context.hpp"

namespace erdma::webhook::server {
namespace {

namespace log = common::log;
namespace net = boost::asio;

constexpr int kExitOk = 0;
constexpr int kExitStart = 1;
constexpr int kExitUsage = 2;

unsigned usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return static_cast<unsigned>(n);
  }
  const unsigned n = std::thread::hardware_concurrency();
  return n > 0 ? n : 1;
}

Status write_port_file(const std::string& path, uint16_t https, uint16_t metrics) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << "{\"https\":" << https << ",\"metrics\":" << metrics << "}\n";
    f.close();
    if (!f) return make_error(ErrorCode::Unavailable, "--port-file " + path + ": cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return make_error(ErrorCode::Unavailable, "--port-file " + path + ": cannot rename " + tmp);
  }
  return {};
}

}  // namespace

int run_serve(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  auto first = parse_serve_args(args);
  if (!first) {
    err << "error: " << first.error().message << " (see erdma-webhook serve --help)\n";
    return kExitUsage;
  }
  if (first->help) {
    out << serve_usage();
    return kExitOk;
  }
  auto doc = load_config_document(first->options.config);
  if (!doc) {
    err << "error: " << doc.error().message << "\n";
    return kExitUsage;
  }
  auto parsed = parse_serve_args(args, doc->server);
  if (!parsed) {
    err << "error: " << (doc->server.is_null() ? "" : first->options.config + ": ") << parsed.error().message << "\n";
    return kExitUsage;
  }
  const ServeOptions o = parsed->options;
  std::signal(SIGPIPE, SIG_IGN);  // a peer that vanishes mid-write is an error code, not a signal
  // Each connection is a descriptor: raise the soft limit to the hard one (often 1024 -> 1M) so
  // --max-connections, not EMFILE, is what bounds them.
  if (rlimit nofile{}; getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    (void)setrlimit(RLIMIT_NOFILE, &nofile);
  }
  log::set_level(*log::parse_level(o.log_level));
  if (o.tls_cert.empty() || o.tls_key.empty()) {
    err << "error: --tls-cert and --tls-key are required (see erdma-webhook serve --help)\n";
    return kExitUsage;
  }
  auto https_addr = common::parse_listen_address(o.listen);
  auto metrics_addr = common::parse_listen_address(o.metrics_listen);
  if (!https_addr || !metrics_addr) {
    err << "error: " << (https_addr ? metrics_addr.error().message : https_addr.error().message) << "\n";
    return kExitUsage;
  }
  const unsigned threads = o.threads > 0 ? o.threads : usable_cores();

  // The same settings build every later context: a reload changes the files, never the policy.
  const TlsSettings tls_settings{o.tls_policy, o.client_ca};
  auto creds = load_tls_credentials(o.tls_cert, o.tls_key, unix_now(), tls_settings);
  if (!creds) {
    log::error(o.client_ca.empty() ? "cannot start: TLS certificate refused"
                                   : "cannot start: TLS certificate or client CA refused")
        .kv("error", creds.error().message);
    return kExitStart;
  }

  // Everything the I/O handlers touch is declared before the io_context, so it outlives the
  // handlers the io_context destroys last.
  common::metrics::Registry registry;
  ServerMetrics metrics(registry);
  metrics.set_cert_not_after(creds->info.not_after);
  Current<SslContext> tls(creds->context);
  Current<const Config> config(std::make_shared<const Config>(std::move(doc->config)));
  std::atomic<bool> draining{false};

  net::io_context ioc(static_cast<int>(threads));
  ListenerLimits limits;
  limits.max_body_bytes = o.max_body_bytes;
  limits.body_budget = body_budget_limits(o.body_budget);
  limits.max_connections = o.max_connections;
  limits.idle_timeout = o.idle_timeout;
  limits.max_connections_per_peer = o.max_connections_per_peer;
  limits.idle_timeout_before_review = o.idle_timeout_before_review;
  limits.body_timeout = o.body_timeout;
  Listener listener(ioc, tls, config, metrics, limits);
  if (auto s = listener.listen(*https_addr); !s) {
    log::error("cannot start").kv("error", s.error().message);
    return kExitStart;
  }
  auto not_ready = [&]() -> std::optional<std::string> {
    if (draining.load()) return "shutting down";
    return std::nullopt;
  };
  // The metrics and probe port has an event loop and a thread of its own: however long a review
  // takes, or however many admission connections are open, /healthz answers for the process.
  net::io_context probe_ioc(1);
  auto probe_work = net::make_work_guard(probe_ioc);
  common::http::MetricsServer metrics_server(probe_ioc, common::http::probe_handler(registry, not_ready));
  if (auto s = metrics_server.listen(*metrics_addr); !s) {
    log::error("cannot start").kv("error", s.error().message);
    return kExitStart;
  }
  ReloadEvents events;
  events.cert_loaded = [&](const CertInfo& info) {
    metrics.record_reload(true, true);
    metrics.set_cert_not_after(info.not_after);
    log::info("certificate reloaded")
        .kv("subject", info.subject)
        .kv("key_type", info.key_type)
        .kv("sha256", info.sha256)
        .kv("not_after", format_utc(info.not_after))
        .kv("client_ca", common::join(info.client_ca_subjects, "; "));
  };
  events.config_loaded = [&] {
    metrics.record_reload(false, true);
    log::info("config reloaded").kv("file", o.config);
  };
  events.failed = [&](bool cert, const Error& e) {
    metrics.record_reload(cert, false);
    log::error(cert ? "certificate reload refused; the previous certificate keeps serving"
                    : "config reload refused; the previous config keeps serving")
        .kv("error", e.message);
  };
  Reloader reloader({o.tls_cert, o.tls_key, o.config}, tls, config,
                    [](const std::string& path) { return load_config_file(path); }, std::move(events), tls_settings);
  if (auto s = reloader.start(o.reload_interval); !s) log::warn("reload watch degraded").kv("error", s.error().message);

  log::info("serving")
      .kv("version", erdma::kVersion)
      .kv("listen", https_addr->host)
      .kv("port", static_cast<unsigned>(listener.port()))
      .kv("metrics_port", static_cast<unsigned>(metrics_server.port()))
      .kv("threads", threads)
      .kv("max_body_bytes", static_cast<uint64_t>(o.max_body_bytes))
      .kv("body_budget", static_cast<uint64_t>(o.body_budget))
      .kv("cert_subject", creds->info.subject)
      .kv("cert_key_type", creds->info.key_type)
      .kv("cert_sha256", creds->info.sha256)
      .kv("cert_not_after", format_utc(creds->info.not_after))
      .kv("tls_min_version", to_string(o.tls_policy.min_version))
      .kv("tls12_ciphers", o.tls_policy.min_version == TlsVersion::Tls13 ? std::string() : tls12_cipher_list(o.tls_policy))
      .kv("tls13_ciphers", o.tls_policy.tls13_suites.empty() ? std::string("<OpenSSL defaults>")
                                                             : tls13_cipher_list(o.tls_policy))
      .kv("client_ca", creds->info.client_ca_subjects.empty() ? std::string("<none: client certificates not asked for>")
                                                              : common::join(creds->info.client_ca_subjects, "; "))
      .kv("config", o.config.empty() ? std::string("<defaults>") : o.config);

  // SIGTERM/SIGINT: drain; a second signal stops at once.
  net::signal_set signals(ioc, SIGTERM, SIGINT);
  net::steady_timer drain_timer(ioc);
  const auto grace = o.shutdown_grace;
  std::chrono::steady_clock::time_point deadline;
  std::function<void()> poll_drain = [&] {
    const size_t open = listener.open_connections();
    if (open == 0 || std::chrono::steady_clock::now() >= deadline) {
      if (open == 0) {
        log::info("drained; exiting");
      } else {
        log::warn("shutdown grace period over; closing remaining connections").kv("open", static_cast<uint64_t>(open));
      }
      metrics_server.stop();
      ioc.stop();
      return;
    }
    drain_timer.expires_after(std::chrono::milliseconds(20));
    drain_timer.async_wait([&](boost::system::error_code ec) {
      if (!ec) poll_drain();
    });
  };
  std::function<void(boost::system::error_code, int)> on_signal = [&](boost::system::error_code ec, int sig) {
    if (ec) return;
    if (draining.exchange(true)) {
      log::warn("second signal; stopping now").kv("signal", sig);
      ioc.stop();
      return;
    }
    log::info("draining")
        .kv("signal", sig)
        .kv("open", static_cast<uint64_t>(listener.open_connections()))
        .kv("grace_ms", static_cast<int64_t>(grace.count()));
    listener.drain();
    deadline = std::chrono::steady_clock::now() + grace;
    poll_drain();
    signals.async_wait(on_signal);
  };
  signals.async_wait(on_signal);
  // Last, once SIGTERM/SIGINT drain: whoever waits for this file may signal at once (a signal
  // before the signal_set exists would kill the process without a drain).
  if (!o.port_file.empty()) {
    if (auto s = write_port_file(o.port_file, listener.port(), metrics_server.port()); !s) {
      log::error("cannot start").kv("error", s.error().message);
      return kExitStart;
    }
  }

  // The admission lines of one turn of the event loop go out in one write(2), not one per request;
  // warnings and errors are never held back (see log::set_batching).
  log::set_batching([&ioc] { net::post(ioc, [] { log::flush(); }); });
  std::thread probe_thread([&probe_ioc] { probe_ioc.run(); });
  std::vector<std::thread> pool;
  pool.reserve(threads - 1);
  for (unsigned i = 1; i < threads; ++i) pool.emplace_back([&ioc] { ioc.run(); });
  ioc.run();
  for (auto& t : pool) t.join();
  metrics_server.stop();
  probe_work.reset();
  probe_ioc.stop();
  probe_thread.join();
  log::set_batching(nullptr);  // writes what the last turn left
  reloader.stop();
  return kExitOk;
}

}  // namespace erdma::webhook::server

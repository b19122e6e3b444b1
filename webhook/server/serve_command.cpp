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
#include <optional>
#include <ostream>
#include <thread>
#include <variant>

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

// What `serve` runs with: its options (the flags over the config file's `server` section) and the
// webhook config from the same file.
struct ServeInputs {
  ServeOptions options;
  Config config;
};

// Reads the flags and the config file. Returns the inputs, or the exit status to return with:
// kExitOk after --help (the usage is on `out`), kExitUsage for bad flags or a bad file (the error
// is on `err`).
std::variant<ServeInputs, int> read_inputs(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
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
  return ServeInputs{std::move(parsed->options), std::move(doc->config)};
}

// The process-wide settings a server needs: SIGPIPE ignored, the descriptor limit raised, the log
// level from the options.
void set_up_process(const ServeOptions& o) {
  std::signal(SIGPIPE, SIG_IGN);  // a peer that vanishes mid-write is an error code, not a signal
  // Each connection is a descriptor: raise the soft limit to the hard one (often 1024 -> 1M) so
  // --max-connections, not EMFILE, is what bounds them.
  if (rlimit nofile{}; getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    (void)setrlimit(RLIMIT_NOFILE, &nofile);
  }
  log::set_level(*log::parse_level(o.log_level));
}

struct ListenAddresses {
  common::ListenAddress https;
  common::ListenAddress metrics;
};

// The usage checks that need the whole options: both TLS files named, both listen addresses valid.
// Nothing when one fails; the error is on `err`.
std::optional<ListenAddresses> listen_addresses(const ServeOptions& o, std::ostream& err) {
  if (o.tls_cert.empty() || o.tls_key.empty()) {
    err << "error: --tls-cert and --tls-key are required (see erdma-webhook serve --help)\n";
    return std::nullopt;
  }
  auto https_addr = common::parse_listen_address(o.listen);
  auto metrics_addr = common::parse_listen_address(o.metrics_listen);
  if (!https_addr || !metrics_addr) {
    err << "error: " << (https_addr ? metrics_addr.error().message : https_addr.error().message) << "\n";
    return std::nullopt;
  }
  return ListenAddresses{*std::move(https_addr), *std::move(metrics_addr)};
}

ListenerLimits listener_limits(const ServeOptions& o) {
  ListenerLimits limits;
  limits.max_body_bytes = o.max_body_bytes;
  limits.body_budget = body_budget_limits(o.body_budget);
  limits.max_connections = o.max_connections;
  limits.idle_timeout = o.idle_timeout;
  limits.max_connections_per_peer = o.max_connections_per_peer;
  limits.idle_timeout_before_review = o.idle_timeout_before_review;
  limits.body_timeout = o.body_timeout;
  return limits;
}

// The reloader's callbacks: every reload is counted in `metrics` and logged. `metrics` must outlive
// the reloader.
ReloadEvents reload_events(ServerMetrics& metrics, const std::string& config_path) {
  ReloadEvents events;
  events.cert_loaded = [&metrics](const CertInfo& info) {
    metrics.record_reload(true, true);
    metrics.set_cert_not_after(info.not_after);
    log::info("certificate reloaded")
        .kv("subject", info.subject)
        .kv("key_type", info.key_type)
        .kv("sha256", info.sha256)
        .kv("not_after", format_utc(info.not_after))
        .kv("client_ca", common::join(info.client_ca_subjects, "; "));
  };
  events.config_loaded = [&metrics, config_path] {
    metrics.record_reload(false, true);
    log::info("config reloaded").kv("file", config_path);
  };
  events.failed = [&metrics](bool cert, const Error& e) {
    metrics.record_reload(cert, false);
    log::error(cert ? "certificate reload refused; the previous certificate keeps serving"
                    : "config reload refused; the previous config keeps serving")
        .kv("error", e.message);
  };
  return events;
}

// The start-up line: what is served where, with which certificate and TLS settings.
void log_serving(const ServeOptions& o, const std::string& host, uint16_t port, uint16_t metrics_port, unsigned threads,
                 const CertInfo& cert) {
  log::info("serving")
      .kv("version", erdma::kVersion)
      .kv("listen", host)
      .kv("port", static_cast<unsigned>(port))
      .kv("metrics_port", static_cast<unsigned>(metrics_port))
      .kv("threads", threads)
      .kv("max_body_bytes", static_cast<uint64_t>(o.max_body_bytes))
      .kv("body_budget", static_cast<uint64_t>(o.body_budget))
      .kv("cert_subject", cert.subject)
      .kv("cert_key_type", cert.key_type)
      .kv("cert_sha256", cert.sha256)
      .kv("cert_not_after", format_utc(cert.not_after))
      .kv("tls_min_version", to_string(o.tls_policy.min_version))
      .kv("tls12_ciphers",
          o.tls_policy.min_version == TlsVersion::Tls13 ? std::string() : tls12_cipher_list(o.tls_policy))
      .kv("tls13_ciphers",
          o.tls_policy.tls13_suites.empty() ? std::string("<OpenSSL defaults>") : tls13_cipher_list(o.tls_policy))
      .kv("client_ca", cert.client_ca_subjects.empty() ? std::string("<none: client certificates not asked for>")
                                                       : common::join(cert.client_ca_subjects, "; "))
      .kv("config", o.config.empty() ? std::string("<defaults>") : o.config);
}

// SIGTERM/SIGINT drain the server: the listener stops accepting and `draining` turns the readiness
// probe to "shutting down"; once no connection is open, or `grace` after the signal, the metrics
// server and `ioc` stop. A second signal stops `ioc` at once. Waits from construction on; its
// handlers run on `ioc`, which must outlive it.
class SignalDrain {
 public:
  SignalDrain(net::io_context& ioc, Listener& listener, common::http::MetricsServer& metrics_server,
              std::chrono::milliseconds grace, std::atomic<bool>& draining)
      : ioc_(ioc),
        listener_(listener),
        metrics_server_(metrics_server),
        grace_(grace),
        draining_(draining),
        signals_(ioc, SIGTERM, SIGINT),
        timer_(ioc) {
    wait_for_signal();
  }

 private:
  void wait_for_signal() {
    signals_.async_wait([this](boost::system::error_code ec, int sig) { on_signal(ec, sig); });
  }

  void on_signal(boost::system::error_code ec, int sig) {
    if (ec) return;
    if (draining_.exchange(true)) {
      log::warn("second signal; stopping now").kv("signal", sig);
      ioc_.stop();
      return;
    }
    log::info("draining")
        .kv("signal", sig)
        .kv("open", static_cast<uint64_t>(listener_.open_connections()))
        .kv("grace_ms", static_cast<int64_t>(grace_.count()));
    listener_.drain();
    deadline_ = std::chrono::steady_clock::now() + grace_;
    poll_drain();
    wait_for_signal();
  }

  void poll_drain() {
    const size_t open = listener_.open_connections();
    if (open == 0 || std::chrono::steady_clock::now() >= deadline_) {
      if (open == 0) {
        log::info("drained; exiting");
      } else {
        log::warn("shutdown grace period over; closing remaining connections").kv("open", static_cast<uint64_t>(open));
      }
      metrics_server_.stop();
      ioc_.stop();
      return;
    }
    timer_.expires_after(std::chrono::milliseconds(20));
    timer_.async_wait([this](boost::system::error_code ec) {
      if (!ec) poll_drain();
    });
  }

  net::io_context& ioc_;
  Listener& listener_;
  common::http::MetricsServer& metrics_server_;
  const std::chrono::milliseconds grace_;
  std::atomic<bool>& draining_;
  net::signal_set signals_;
  net::steady_timer timer_;
  std::chrono::steady_clock::time_point deadline_;
};

// Runs the admission loop `ioc` on `threads` threads (the caller's among them) and the probe loop
// on one more until `ioc` stops (a drain or a second signal); then stops the probe side and joins
// every thread.
void run_loops(net::io_context& ioc, unsigned threads, net::io_context& probe_ioc,
               common::http::MetricsServer& metrics_server) {
  // The admission lines of one turn of the event loop go out in one write(2), not one per request;
  // warnings and errors are never held back (see log::set_batching).
  log::set_batching([&ioc] { net::post(ioc, [] { log::flush(); }); });
  auto probe_work = net::make_work_guard(probe_ioc);
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
}

}  // namespace

int run_serve(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  auto inputs = read_inputs(args, out, err);
  if (const int* status = std::get_if<int>(&inputs)) return *status;
  ServeInputs& in = std::get<ServeInputs>(inputs);
  const ServeOptions& o = in.options;
  set_up_process(o);
  const auto addresses = listen_addresses(o, err);
  if (!addresses) return kExitUsage;
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
  Current<const Config> config(std::make_shared<const Config>(std::move(in.config)));
  std::atomic<bool> draining{false};

  net::io_context ioc(static_cast<int>(threads));
  Listener listener(ioc, tls, config, metrics, listener_limits(o));
  if (auto s = listener.listen(addresses->https); !s) {
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
  common::http::MetricsServer metrics_server(probe_ioc, common::http::probe_handler(registry, not_ready));
  if (auto s = metrics_server.listen(addresses->metrics); !s) {
    log::error("cannot start").kv("error", s.error().message);
    return kExitStart;
  }
  Reloader reloader(
      {o.tls_cert, o.tls_key, o.config}, tls, config, [](const std::string& path) { return load_config_file(path); },
      reload_events(metrics, o.config), tls_settings);
  if (auto s = reloader.start(o.reload_interval); !s) log::warn("reload watch degraded").kv("error", s.error().message);
  log_serving(o, addresses->https.host, listener.port(), metrics_server.port(), threads, creds->info);

  SignalDrain drain(ioc, listener, metrics_server, o.shutdown_grace, draining);
  // Last, once SIGTERM/SIGINT drain: whoever waits for this file may signal at once (a signal
  // before the signal_set exists would kill the process without a drain).
  if (!o.port_file.empty()) {
    if (auto s = write_port_file(o.port_file, listener.port(), metrics_server.port()); !s) {
      log::error("cannot start").kv("error", s.error().message);
      return kExitStart;
    }
  }

  run_loops(ioc, threads, probe_ioc, metrics_server);
  reloader.stop();
  return kExitOk;
}

}  // namespace erdma::webhook::server

// Hot reload of the serving certificate/key (with the client CA file, when there is one) and the
// webhook config from their files.
//
// Kubernetes Secret and ConfigMap volumes update by writing a new hidden directory and renaming a
// `..data` symlink onto it (one atomic rename; see notes on atomic_writer). A watch on the file
// itself would follow the old target and go stale, so the reloader watches the *directories* that
// hold the files (inotify) and, as a safety net, re-checks every `interval`. A check compares a
// fingerprint of each file (stat through the symlinks: device, inode, size, mtime, ctime); only a
// changed fingerprint triggers a load. A load that fails (unreadable, garbage, key mismatch,
// expired, invalid config) is refused, logged and counted, and the last good value keeps serving;
// the same bad files are not retried until they change again.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "common/file_watch.hpp"
#include "common/result.hpp"
#include "webhook/core/config.hpp"
#include "webhook/server/current.hpp"
#include "webhook/server/tls_context.hpp"

namespace erdma::webhook::server {

struct ReloadPaths {
  std::string cert;
  std::string key;
  std::string config;  // empty: no config file (defaults), nothing to watch
};

// Called after every load attempt, on the reloader's thread. `cert` tells the kind.
struct ReloadEvents {
  std::function<void(const CertInfo&)> cert_loaded;
  std::function<void(bool cert, const Error&)> failed;
  std::function<void()> config_loaded;
};

class Reloader {
 public:
  using ConfigLoader = std::function<Result<Config>(const std::string& path)>;

  // `tls` and `config` must already hold the values loaded from `paths` (and `tls_settings`) at
  // start-up; the fingerprints taken now are their baseline. `load_config` reads a config file.
  // Every new TLS context is built with `tls_settings` (policy and client CA file), and a change of
  // the client CA file counts as a change of the pair: a CA file that does not load is refused
  // like a bad pair, and the last good context keeps serving.
  Reloader(ReloadPaths paths, Current<SslContext>& tls, Current<const Config>& config, ConfigLoader load_config,
           ReloadEvents events, TlsSettings tls_settings = {});
  ~Reloader();
  Reloader(const Reloader&) = delete;
  Reloader& operator=(const Reloader&) = delete;

  // Starts the watching thread: inotify on the files' directories plus a check every
  // `interval`. A burst of events leads to one check, `settle` after its first event, so a writer
  // that replaces cert and key one after the other is usually seen once (if not, the half-written
  // pair is refused and the next event loads the complete one). Errors: Unavailable if inotify
  // cannot be set up (the periodic check still runs).
  Status start(std::chrono::milliseconds interval, std::chrono::milliseconds settle = std::chrono::milliseconds(100));
  // Stops and joins the thread. Idempotent.
  void stop();

  // One synchronous check: loads whatever changed since the last attempt. Returns how many loads
  // were attempted (0, 1 or 2). Thread-safe (checks are serialised); tests call it directly.
  int check_now();

  // The fingerprint of a path, following symlinks; "missing:<errno>" when it cannot be stat'ed.
  [[nodiscard]] static std::string fingerprint(const std::string& path);

 private:
  void run(std::chrono::milliseconds interval, std::chrono::milliseconds settle);
  void add_watches();
  [[nodiscard]] std::string tls_fingerprint() const;

  ReloadPaths paths_;
  TlsSettings tls_settings_;
  Current<SslContext>& tls_;
  Current<const Config>& config_;
  ConfigLoader load_config_;
  ReloadEvents events_;

  std::mutex check_mu_;
  std::string cert_seen_;    // fingerprints of cert+key(+client CA) at the last load attempt
  std::string config_seen_;  // of the config file at the last load attempt

  std::optional<common::FileWatch> files_;  // made by start(), dropped by stop()
  std::thread thread_;
};

}  // namespace erdma::webhook::server

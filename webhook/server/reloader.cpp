// Certificate and config hot reload (see reloader.hpp).
#include "webhook/server/reloader.hpp"

#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>
#include <set>

namespace erdma::webhook::server {
namespace {

std::string dir_of(const std::string& path) {
  std::string d = std::filesystem::path(path).parent_path().string();
  return d.empty() ? "." : d;
}

// The reloader's thread is a process edge: an exception from a loader (out of memory, a library
// bug) becomes a refused reload instead of std::terminate.
template <class F>
auto guarded(F&& load) -> decltype(load()) {
  try {
    return load();
  } catch (const std::exception& e) {
    return make_error(ErrorCode::Internal, std::string("unexpected error while loading: ") + e.what());
  }
}

}  // namespace

Reloader::Reloader(ReloadPaths paths, Current<SslContext>& tls, Current<const Config>& config, ConfigLoader load_config,
                   ReloadEvents events, TlsSettings tls_settings)
    : paths_(std::move(paths)),
      tls_settings_(std::move(tls_settings)),
      tls_(tls),
      config_(config),
      load_config_(std::move(load_config)),
      events_(std::move(events)) {
  cert_seen_ = tls_fingerprint();
  if (!paths_.config.empty()) config_seen_ = fingerprint(paths_.config);
}

Reloader::~Reloader() { stop(); }

std::string Reloader::tls_fingerprint() const {
  std::string out = fingerprint(paths_.cert) + "|" + fingerprint(paths_.key);
  if (!tls_settings_.client_ca_file.empty()) out += "|" + fingerprint(tls_settings_.client_ca_file);
  return out;
}

std::string Reloader::fingerprint(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "missing:" + std::to_string(errno);
  std::string out;
  out.reserve(96);
  for (long long v :
       {static_cast<long long>(st.st_dev), static_cast<long long>(st.st_ino), static_cast<long long>(st.st_size),
        static_cast<long long>(st.st_mtim.tv_sec), static_cast<long long>(st.st_mtim.tv_nsec),
        static_cast<long long>(st.st_ctim.tv_sec), static_cast<long long>(st.st_ctim.tv_nsec)}) {
    out += std::to_string(v);
    out += ':';
  }
  return out;
}

int Reloader::check_now() {
  std::lock_guard<std::mutex> lock(check_mu_);
  int attempts = 0;
  const std::string cert_now = tls_fingerprint();
  if (cert_now != cert_seen_) {
    cert_seen_ = cert_now;
    ++attempts;
    auto creds = guarded([&] { return load_tls_credentials(paths_.cert, paths_.key, unix_now(), tls_settings_); });
    if (creds) {
      tls_.set(creds->context);
      if (events_.cert_loaded) events_.cert_loaded(creds->info);
    } else if (events_.failed) {
      events_.failed(true, creds.error());
    }
  }
  if (!paths_.config.empty()) {
    const std::string config_now = fingerprint(paths_.config);
    if (config_now != config_seen_) {
      config_seen_ = config_now;
      ++attempts;
      auto cfg = guarded([&] { return load_config_(paths_.config); });
      if (cfg) {
        config_.set(std::make_shared<const Config>(std::move(cfg).value()));
        if (events_.config_loaded) events_.config_loaded();
      } else if (events_.failed) {
        events_.failed(false, cfg.error());
      }
    }
  }
  return attempts;
}

void Reloader::add_watches() {
  std::set<std::string> dirs{dir_of(paths_.cert), dir_of(paths_.key)};
  if (!tls_settings_.client_ca_file.empty()) dirs.insert(dir_of(tls_settings_.client_ca_file));
  if (!paths_.config.empty()) dirs.insert(dir_of(paths_.config));
  constexpr uint32_t kMask = IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM | IN_CLOSE_WRITE | IN_DELETE | IN_ATTRIB |
                             IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR;
  for (const auto& d : dirs) {
    // Adding the same directory again returns the existing watch; a directory that was removed
    // and re-created gets a fresh one here, on the next periodic pass.
    (void)files_->watch_dir(d, kMask);
  }
}

Status Reloader::start(std::chrono::milliseconds interval, std::chrono::milliseconds settle) {
  if (thread_.joinable()) return make_error(ErrorCode::FailedPrecondition, "reloader already started");
  ERDMA_TRY_ASSIGN(files_, common::FileWatch::open());
  Status status;
  if (!files_->has_inotify()) {
    status = make_error(ErrorCode::Unavailable, files_->inotify_error() + "; falling back to the periodic check only");
  } else {
    add_watches();
  }
  thread_ = std::thread([this, interval, settle] { run(interval, settle); });
  return status;
}

void Reloader::stop() {
  if (!thread_.joinable()) return;
  files_->wake();
  thread_.join();
  files_.reset();
}

void Reloader::run(std::chrono::milliseconds interval, std::chrono::milliseconds settle) {
  using clock = std::chrono::steady_clock;
  auto next_periodic = clock::now() + interval;
  bool settling = false;  // an event arrived; check once things have been quiet for `settle`
  clock::time_point settle_until{};
  for (;;) {
    const auto now = clock::now();
    auto deadline = next_periodic;
    if (settling && settle_until < deadline) deadline = settle_until;
    const auto woke = files_->wait(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now));
    if (!woke.error) return;  // cannot happen with valid descriptors
    if (woke.woken) return;   // only stop() wakes this thread
    // Which file an event names does not matter: the fingerprints decide.
    if (!woke.events.empty()) {
      if (!settling) {
        settling = true;
        settle_until = clock::now() + settle;
      }
    }
    const auto t = clock::now();
    if (settling && t >= settle_until) {
      settling = false;
      check_now();
    }
    if (t >= next_periodic) {
      next_periodic = t + interval;
      if (files_->has_inotify()) add_watches();
      check_now();
    }
  }
}

}  // namespace erdma::webhook::server

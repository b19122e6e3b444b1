// Hot reload through the ..data symlink swap that Secret and ConfigMap volumes use.
#include "webhook/server/reloader.hpp"

#include <doctest/doctest.h>
#include <openssl/ssl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <vector>

#include <boost/asio/ssl/context.hpp>

#include "test/eventually.hpp"
#include "test/support.hpp"
#include "test_certs.hpp"
#include "webhook/config_io/config_file.hpp"

namespace erdma::webhook::server {
namespace {

namespace fs = std::filesystem;

int64_t now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// A directory laid out as the kubelet lays out a Secret or ConfigMap volume:
//   ..<stamp>/<files>   ..data -> ..<stamp>   <file> -> ..data/<file>
class ProjectedVolume {
 public:
  // Writes a new payload and switches ..data to it atomically, as the kubelet does.
  void update(const std::vector<std::pair<std::string, std::string>>& files) {
    const fs::path stamp = dir_ / ("..stamp_" + std::to_string(++generation_));
    fs::create_directory(stamp);
    for (const auto& entry : files) {
      // Named copies, not structured bindings: clang 14 cannot capture those.
      const auto& name = entry.first;
      const auto& text = entry.second;
      std::ofstream(stamp / name) << text;
      if (!fs::is_symlink(dir_ / name)) fs::create_symlink(fs::path("..data") / name, dir_ / name);
    }
    fs::create_symlink(stamp.filename(), dir_ / "..data_tmp");
    fs::rename(dir_ / "..data_tmp", dir_ / "..data");
    if (!previous_.empty()) fs::remove_all(previous_);
    previous_ = stamp;
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

 private:
  erdma::testing::TempDir tmp_{"reloader"};
  fs::path dir_{tmp_.path()};
  fs::path previous_;
  int generation_ = 0;
};

struct Seen {
  std::atomic<int> certs{0};
  std::atomic<int> configs{0};
  std::atomic<int> cert_failures{0};
  std::atomic<int> config_failures{0};
  std::string last_sha256;
  std::string last_error;
  ReloadEvents events() {
    ReloadEvents e;
    e.cert_loaded = [this](const CertInfo& info) {
      last_sha256 = info.sha256;
      ++certs;
    };
    e.config_loaded = [this] { ++configs; };
    e.failed = [this](bool cert, const Error& err) {
      last_error = err.message;
      ++(cert ? cert_failures : config_failures);
    };
    return e;
  }
};

Reloader::ConfigLoader file_loader() {
  return [](const std::string& path) { return load_config_file(path); };
}

struct Setup {
  ProjectedVolume tls_volume;
  ProjectedVolume config_volume;
  testing::PemPair first = testing::make_cert({});
  std::unique_ptr<Current<SslContext>> tls;
  std::unique_ptr<Current<const Config>> config;
  Seen seen;
  std::unique_ptr<Reloader> reloader;

  Setup() {
    tls_volume.update({{"tls.crt", first.cert}, {"tls.key", first.key}});
    config_volume.update({{"config.yaml", "excludedNamespaces: [kube-system]\n"}});
    auto creds = load_tls_credentials(tls_volume.path("tls.crt"), tls_volume.path("tls.key"), now());
    REQUIRE(creds.ok());
    tls = std::make_unique<Current<SslContext>>(creds->context);
    auto cfg = load_config_file(config_volume.path("config.yaml"));
    REQUIRE(cfg.ok());
    config = std::make_unique<Current<const Config>>(std::make_shared<const Config>(std::move(cfg).value()));
    reloader = std::make_unique<Reloader>(
        ReloadPaths{tls_volume.path("tls.crt"), tls_volume.path("tls.key"), config_volume.path("config.yaml")}, *tls,
        *config, file_loader(), seen.events());
  }
};

TEST_CASE("nothing changed: nothing is reloaded") {
  Setup s;
  CHECK(s.reloader->check_now() == 0);
  CHECK(s.seen.certs == 0);
}

TEST_CASE("a ..data swap with a new pair replaces the TLS context, open users keep the old one") {
  Setup s;
  const auto before = s.tls->get();
  const auto next = testing::make_cert({});
  s.tls_volume.update({{"tls.crt", next.cert}, {"tls.key", next.key}});
  CHECK(s.reloader->check_now() == 1);
  CHECK(s.seen.certs == 1);
  CHECK(s.tls->get() != before);
  CHECK(before.use_count() >= 1);  // still usable by whoever holds it
  auto expected = make_tls_credentials(next.cert, next.key, now());
  REQUIRE(expected.ok());
  CHECK(s.seen.last_sha256 == expected->info.sha256);
  CHECK(s.reloader->check_now() == 0);  // the same files are not loaded twice
}

TEST_CASE("bad new pairs are refused once each, and the last good context keeps serving") {
  Setup s;
  const auto good = s.tls->get();
  const auto other = testing::make_cert({});
  testing::CertSpec old_spec;
  old_spec.not_before_offset = -7200;
  old_spec.not_after_offset = -60;
  const auto expired = testing::make_cert(old_spec);
  const std::vector<std::pair<const char*, std::pair<std::string, std::string>>> bad = {
      {"garbage", {"not a certificate", "not a key"}},
      {"mismatch", {s.first.cert, other.key}},
      {"expired", {expired.cert, expired.key}},
      {"empty", {"", ""}},
  };
  int failures = 0;
  for (const auto& entry : bad) {
    // Named copies, not structured bindings: clang 14 cannot capture those.
    const auto& name = entry.first;
    const auto& pair = entry.second;
    CAPTURE(name);
    s.tls_volume.update({{"tls.crt", pair.first}, {"tls.key", pair.second}});
    CHECK(s.reloader->check_now() == 1);
    CHECK(s.seen.cert_failures == ++failures);
    CHECK(s.tls->get() == good);
    CHECK(s.reloader->check_now() == 0);  // not retried until the files change again
    CHECK(s.seen.cert_failures == failures);
  }
  // Fixed files are picked up.
  s.tls_volume.update({{"tls.crt", other.cert}, {"tls.key", other.key}});
  CHECK(s.reloader->check_now() == 1);
  CHECK(s.tls->get() != good);
  CHECK(s.seen.certs == 1);
}

TEST_CASE("config: a valid new file replaces the config, an invalid one is refused") {
  Setup s;
  const auto first = s.config->get();
  CHECK(first->excluded_namespaces() == std::vector<std::string>{"kube-system"});
  s.config_volume.update({{"config.yaml", "excludedNamespaces: [kube-system, batch]\n"}});
  CHECK(s.reloader->check_now() == 1);
  CHECK(s.seen.configs == 1);
  const auto second = s.config->get();
  CHECK(second->excluded_namespaces() == std::vector<std::string>{"kube-system", "batch"});
  CHECK(first->excluded_namespaces() == std::vector<std::string>{"kube-system"});  // old holders unaffected

  s.config_volume.update({{"config.yaml", "smcr: {mountPath: relative}\n"}});
  CHECK(s.reloader->check_now() == 1);
  CHECK(s.seen.config_failures == 1);
  CHECK(s.seen.last_error.find("mountPath") != std::string::npos);
  CHECK(s.config->get() == second);

  s.config_volume.update({{"config.yaml", "{ not yaml: ["}});
  CHECK(s.reloader->check_now() == 1);
  CHECK(s.seen.config_failures == 2);
  CHECK(s.config->get() == second);
}

TEST_CASE("the watching thread sees a ..data swap through inotify (periodic check disabled)") {
  Setup s;
  // One hour between periodic checks: only the inotify path can pick the change up in time.
  REQUIRE(s.reloader->start(std::chrono::hours(1), std::chrono::milliseconds(20)).ok());
  const auto next = testing::make_cert({});
  s.tls_volume.update({{"tls.crt", next.cert}, {"tls.key", next.key}});
  // The change normally lands within a few tens of milliseconds.
  CHECK(erdma::testing::eventually([&] { return s.seen.certs > 0; }));
  CHECK(s.seen.certs == 1);
  s.config_volume.update({{"config.yaml", "excludedNamespaces: []\n"}});
  CHECK(erdma::testing::eventually([&] { return s.seen.configs > 0; }));
  CHECK(s.seen.configs == 1);
  s.reloader->stop();
  s.reloader->stop();  // idempotent
}

TEST_CASE("the periodic check alone also picks changes up") {
  Setup s;
  REQUIRE(s.reloader->start(std::chrono::milliseconds(100)).ok());
  const auto next = testing::make_cert({});
  s.tls_volume.update({{"tls.crt", next.cert}, {"tls.key", next.key}});
  CHECK(erdma::testing::eventually([&] { return s.seen.certs > 0; }));
  CHECK(s.seen.certs == 1);
}

TEST_CASE("fingerprints follow symlinks and report missing files") {
  ProjectedVolume v;
  v.update({{"a", "1"}});
  const std::string f1 = Reloader::fingerprint(v.path("a"));
  v.update({{"a", "1"}});
  CHECK(Reloader::fingerprint(v.path("a")) != f1);  // same content, new inode behind ..data
  CHECK(Reloader::fingerprint(v.path("missing")).starts_with("missing:"));
}

TEST_CASE("the client CA file is reloaded with the pair, under the same settings") {
  ProjectedVolume tls_volume;
  ProjectedVolume ca_volume;
  testing::CertSpec ca_spec;
  ca_spec.ca = true;
  ca_spec.common_name = "client-ca-1";
  const auto ca1 = testing::make_cert(ca_spec);
  ca_spec.common_name = "client-ca-2";
  const auto ca2 = testing::make_cert(ca_spec);
  const auto pair = testing::make_cert({});
  tls_volume.update({{"tls.crt", pair.cert}, {"tls.key", pair.key}});
  ca_volume.update({{"ca.crt", ca1.cert}});
  TlsSettings settings;
  settings.policy.min_version = TlsVersion::Tls13;
  settings.client_ca_file = ca_volume.path("ca.crt");
  auto creds = load_tls_credentials(tls_volume.path("tls.crt"), tls_volume.path("tls.key"), now(), settings);
  REQUIRE(creds.ok());
  Current<SslContext> tls(creds->context);
  Current<const Config> config(std::make_shared<const Config>(Config::defaults()));
  Seen seen;
  std::vector<std::string> subjects;
  ReloadEvents events = seen.events();
  events.cert_loaded = [&](const CertInfo& info) {
    subjects = info.client_ca_subjects;
    ++seen.certs;
  };
  Reloader reloader(ReloadPaths{tls_volume.path("tls.crt"), tls_volume.path("tls.key"), ""}, tls, config, file_loader(),
                    std::move(events), settings);
  CHECK(reloader.check_now() == 0);

  // A new CA alone (the pair unchanged) builds a new context that requires it, still TLS 1.3 only.
  const auto first = tls.get();
  ca_volume.update({{"ca.crt", ca2.cert}});
  CHECK(reloader.check_now() == 1);
  CHECK(seen.certs == 1);
  CHECK(tls.get() != first);
  REQUIRE(subjects.size() == 1);
  CHECK(subjects[0].find("client-ca-2") != std::string::npos);
  SSL_CTX* ctx = tls.get()->native_handle();
  CHECK(SSL_CTX_get_min_proto_version(ctx) == TLS1_3_VERSION);
  CHECK((SSL_CTX_get_verify_mode(ctx) & SSL_VERIFY_FAIL_IF_NO_PEER_CERT) != 0);

  // A broken CA file is refused once, and the context built from the last good one keeps serving.
  const auto good = tls.get();
  for (const std::string& broken : {std::string("not a certificate\n"), pair.cert /* a leaf, not a CA */}) {
    ca_volume.update({{"ca.crt", broken}});
    CHECK(reloader.check_now() == 1);
    CHECK(tls.get() == good);
    CHECK(reloader.check_now() == 0);
  }
  CHECK(seen.cert_failures == 2);
  CHECK(seen.last_error.find(ca_volume.path("ca.crt")) != std::string::npos);
  ca_volume.update({{"ca.crt", ca1.cert}});
  CHECK(reloader.check_now() == 1);
  CHECK(tls.get() != good);
  CHECK(seen.certs == 2);
}

TEST_CASE("the watching thread sees a swap of the client CA's own volume") {
  ProjectedVolume tls_volume;
  ProjectedVolume ca_volume;
  testing::CertSpec ca_spec;
  ca_spec.ca = true;
  const auto ca1 = testing::make_cert(ca_spec);
  const auto ca2 = testing::make_cert(ca_spec);
  const auto pair = testing::make_cert({});
  tls_volume.update({{"tls.crt", pair.cert}, {"tls.key", pair.key}});
  ca_volume.update({{"ca.crt", ca1.cert}});
  TlsSettings settings;
  settings.client_ca_file = ca_volume.path("ca.crt");
  auto creds = load_tls_credentials(tls_volume.path("tls.crt"), tls_volume.path("tls.key"), now(), settings);
  REQUIRE(creds.ok());
  Current<SslContext> tls(creds->context);
  Current<const Config> config(std::make_shared<const Config>(Config::defaults()));
  Seen seen;
  Reloader reloader(ReloadPaths{tls_volume.path("tls.crt"), tls_volume.path("tls.key"), ""}, tls, config, file_loader(),
                    seen.events(), settings);
  REQUIRE(reloader.start(std::chrono::hours(1), std::chrono::milliseconds(20)).ok());
  ca_volume.update({{"ca.crt", ca2.cert}});
  const bool reloaded = erdma::testing::eventually([&] { return seen.certs > 0; });
  reloader.stop();
  CHECK(reloaded);
  CHECK(seen.certs == 1);
}

}  // namespace
}  // namespace erdma::webhook::server

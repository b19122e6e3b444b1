// The hook socket of SMC-R claims (see claim_hook_server.hpp).
#include "agent/dra/claim_hook_server.hpp"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/guarded.hpp"
#include "common/log.hpp"

namespace erdma::agent::dra {
namespace log = common::log;
using Clock = std::chrono::steady_clock;

namespace {

int left_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 60000));
}

// 1: ready; 0: the deadline passed; -1: poll failed.
int wait_fd(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int ms = left_ms(deadline);
    if (ms == 0) return 0;
    const int n = ::poll(&p, 1, ms);
    if (n > 0) return 1;
    if (n == 0) return 0;
    if (errno != EINTR) return -1;
  }
}

Error sys_error(const std::string& what) {
  return make_error(ErrorCode::Unavailable, what + ": " + std::strerror(errno));
}

// The whole request, until the hook shuts down its side; an error when it is larger than the
// protocol allows or does not end by the deadline.
Result<std::string> read_request(int fd, Clock::time_point deadline) {
  std::string buf;
  char chunk[16384];
  for (;;) {
    const int ready = wait_fd(fd, POLLIN, deadline);
    if (ready == 0) return make_error(ErrorCode::DeadlineExceeded, "the request did not end in time");
    if (ready < 0) return sys_error("waiting for the request");
    const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n == 0) return buf;
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return sys_error("reading the request");
    }
    buf.append(chunk, static_cast<size_t>(n));
    if (buf.size() > kMaxHookRequestBytes) {
      return make_error(ErrorCode::InvalidArgument,
                        "the request is larger than " + std::to_string(kMaxHookRequestBytes) + " bytes");
    }
  }
}

void write_answer(int fd, const std::string& answer, Clock::time_point deadline) {
  size_t sent = 0;
  while (sent < answer.size()) {
    if (wait_fd(fd, POLLOUT, deadline) != 1) return;
    const ssize_t n = ::send(fd, answer.data() + sent, answer.size() - sent, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return;  // the hook went away: its container starts without the answer
    }
    sent += static_cast<size_t>(n);
  }
}

}  // namespace

ClaimHookServer::ClaimHookServer(std::string socket_path, ClaimHookHandler handler,
                                 std::chrono::milliseconds read_timeout, std::chrono::milliseconds handle_within)
    : path_(std::move(socket_path)),
      handler_(std::move(handler)),
      read_timeout_(read_timeout),
      handle_within_(handle_within) {}

ClaimHookServer::~ClaimHookServer() { stop(); }

Status ClaimHookServer::start() {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path_.empty() || path_.size() >= sizeof addr.sun_path) {
    return make_error(ErrorCode::InvalidArgument, "hook socket " + path_ + ": not a unix socket path (at most " +
                                                      std::to_string(sizeof addr.sun_path - 1) + " bytes)");
  }
  std::memcpy(addr.sun_path, path_.data(), path_.size());
  struct stat st {};
  if (::lstat(path_.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return make_error(ErrorCode::FailedPrecondition,
                        "hook socket " + path_ + ": something that is not a socket is in the way; remove it");
    }
    if (::unlink(path_.c_str()) != 0 && errno != ENOENT) return sys_error("removing the old hook socket " + path_);
  }
  common::UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return sys_error("hook socket " + path_ + ": socket");
  // Only root (the runtime that runs the hook) may connect: 0600 from the start.
  const mode_t old_mask = ::umask(0177);
  const int bound = ::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
  ::umask(old_mask);
  if (bound != 0) return sys_error("hook socket " + path_ + ": bind");
  if (::chmod(path_.c_str(), 0600) != 0) return sys_error("hook socket " + path_ + ": chmod 0600");
  if (::listen(fd.get(), 64) != 0) return sys_error("hook socket " + path_ + ": listen");
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) != 0) return sys_error("hook socket: pipe");
  wake_read_ = common::UniqueFd(pipe_fds[0]);
  wake_write_ = common::UniqueFd(pipe_fds[1]);
  listener_ = std::move(fd);
  thread_ = std::thread([this] { (void)common::run_guarded("CDI hook server", [this] { loop(); }); });
  return {};
}

void ClaimHookServer::stop() {
  if (!thread_.joinable()) return;
  const char byte = 1;
  (void)!::write(wake_write_.get(), &byte, 1);
  thread_.join();
  listener_.reset();
  ::unlink(path_.c_str());
}

void ClaimHookServer::loop() {
  for (;;) {
    pollfd fds[2] = {{listener_.get(), POLLIN, 0}, {wake_read_.get(), POLLIN, 0}};
    const int n = ::poll(fds, 2, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      log::error("CDI hook server: poll failed; SMC-R claims' pods are no longer set up")
          .kv("error", std::strerror(errno));
      return;
    }
    if (fds[1].revents != 0) return;
    if (fds[0].revents == 0) continue;
    common::UniqueFd conn(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!conn.valid()) continue;  // EAGAIN, or the hook gave up already
    serve(std::move(conn));
  }
}

void ClaimHookServer::serve(common::UniqueFd conn) {
  const auto t0 = Clock::now();
  ClaimHookOutcome outcome;
  auto request = read_request(conn.get(), t0 + read_timeout_);
  Result<HookRequest> parsed = request ? parse_hook_request(*request) : Result<HookRequest>(request.error());
  if (!parsed) {
    outcome = {false, parsed.error().message};
    log::warn("CDI hook: request refused").kv("error", parsed.error().message);
  } else {
    const auto deadline = Clock::now() + handle_within_;
    if (!common::run_guarded("CDI hook request", [&] { outcome = handler_(*parsed, deadline); })) {
      outcome = {false, "the agent failed on this request; its log says why"};
    }
  }
  (outcome.ok ? ok_ : errors_).fetch_add(1);
  write_answer(conn.get(), hook_answer(outcome.ok, outcome.text), Clock::now() + std::chrono::seconds(1));
}

}  // namespace erdma::agent::dra

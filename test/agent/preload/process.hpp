// Runs a program with a given environment, its output captured to files, every wait bounded: the
// test harness for loading libsmc-preload.so into real programs.
#pragma once

#include <chrono>
#include <cstdio>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <map>
#include <signal.h>
#include <spawn.h>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "test/eventually.hpp"

namespace erdma::agent::testing {

struct Finished {
  int exit_code = -1;  // -1: killed at the deadline or by a signal
  std::string out;
  std::string err;
};

inline std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

class Process {
 public:
  // Starts argv[0] (an absolute path) with exactly `env`; stdout and stderr go to files in `dir`.
  Process(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env, const std::string& dir,
          const std::string& tag)
      : out_(dir + "/" + tag + ".out"), err_(dir + "/" + tag + ".err") {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, err_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    std::vector<std::string> envs;
    for (const auto& [k, v] : env) envs.push_back(k + "=" + v);
    std::vector<char*> a;
    for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    std::vector<char*> e;
    for (auto& s : envs) e.push_back(s.data());
    e.push_back(nullptr);
    if (::posix_spawn(&pid_, a[0], &fa, nullptr, a.data(), e.data()) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
  }
  ~Process() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  [[nodiscard]] pid_t pid() const { return pid_; }
  [[nodiscard]] std::string out() const { return slurp(out_); }

  // Waits up to `limit`; kills the process if it is still running then.
  Finished wait(std::chrono::milliseconds limit = std::chrono::seconds(60)) {
    Finished f;
    if (pid_ <= 0) return f;
    int status = 0;
    if (!erdma::testing::eventually([&] { return ::waitpid(pid_, &status, WNOHANG) == pid_; }, limit)) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      status = -1;
    }
    reaped_ = true;
    if (status != -1 && WIFEXITED(status)) f.exit_code = WEXITSTATUS(status);
    f.out = slurp(out_);
    f.err = slurp(err_);
    return f;
  }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  std::string out_;
  std::string err_;
};

inline Finished run(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                    const std::string& dir, const std::string& tag) {
  Process p(argv, env, dir, tag);
  return p.wait();
}

}  // namespace erdma::agent::testing

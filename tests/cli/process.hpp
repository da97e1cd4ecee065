// Starts the built binary as a child that a test can signal (SIGKILL,
// SIGINT) while it runs, with stdout and stderr going to files.
#pragma once
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace chunkinv::testing {

class Child {
 public:
  // Runs CHUNKINV_BINARY with `args` in folder `dir`; its stdout and stderr go to dir/<name>.out and .err.
  Child(const std::vector<std::string>& args, const std::string& dir, const std::string& name)
      : out_(dir + "/" + name + ".out"), err_(dir + "/" + name + ".err") {
    std::vector<std::string> argv{CHUNKINV_BINARY};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, err_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addchdir_np(&fa, dir.c_str());
    if (::posix_spawn(&pid_, CHUNKINV_BINARY, &fa, nullptr, cargv.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
  }
  ~Child() {
    if (pid_ > 0 && !waited_) {
      ::kill(pid_, SIGKILL);
      wait();
    }
  }
  bool started() const { return pid_ > 0; }
  void signal(int sig) { ::kill(pid_, sig); }
  // Whether it is still running (reaps it when it has ended).
  bool running() {
    if (waited_) return false;
    int st = 0;
    const pid_t r = ::waitpid(pid_, &st, WNOHANG);
    if (r == pid_) {
      waited_ = true;
      status_ = st;
    }
    return r == 0;
  }
  int wait() {
    if (!waited_) {
      ::waitpid(pid_, &status_, 0);
      waited_ = true;
    }
    return status_;
  }
  std::string err() const { return slurp(err_); }
  std::string out() const { return slurp(out_); }

 private:
  static std::string slurp(const std::string& p) {
    std::ifstream in(p);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }
  pid_t pid_ = -1;
  int status_ = 0;
  bool waited_ = false;
  std::string out_, err_;
};

}  // namespace chunkinv::testing

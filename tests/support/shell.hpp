// Runs a shell command line, as a user would, and captures what it prints
// on stdout (redirect stderr in the command line to capture it too).
#pragma once
#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace chunkinv::testing {

struct ShellResult {
  int status = -1;  // exit status; -1 if it did not exit normally
  std::string out;  // stdout
};

inline ShellResult run_shell(const std::string& command) {
  ShellResult r;
  FILE* p = ::popen(command.c_str(), "r");
  if (!p) return r;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

// The built chunkinv binary, quoted for the shell.
inline std::string binary() { return std::string("'") + CHUNKINV_BINARY + "'"; }

}  // namespace chunkinv::testing

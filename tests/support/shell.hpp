// Runs a shell command line, as a user would, and captures what it prints
// on stdout (redirect stderr in the command line to capture it too); and
// what the tests that drive the built binary share: a fresh directory per
// test, the binary run in it, files read back whole.
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

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

// A fresh, empty directory for the running test:
// <tmp>/chunkinv-<what>-<pid>-<suite>-<test>.
inline std::string test_dir(const std::string& what) {
  namespace fs = std::filesystem;
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const fs::path p = fs::temp_directory_path() / ("chunkinv-" + what + "-" + std::to_string(::getpid()) + "-" +
                                                  info->test_suite_name() + "-" + info->name());
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

// `chunkinv ARGS` run in dir; stdout and stderr together unless redirect says otherwise.
inline ShellResult run_chunkinv_in(const std::string& dir, const std::string& args,
                                   const std::string& redirect = "2>&1") {
  return run_shell("cd '" + dir + "' && " + binary() + " " + args + " " + redirect);
}

// A file's bytes, whole ("" if it cannot be read).
inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline nlohmann::json load_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

}  // namespace chunkinv::testing

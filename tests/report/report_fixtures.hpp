// Reports built in code for the table and check tests, and a way to run the
// built binary and capture what it prints and its exit status.
#pragma once

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "metrics/stats.hpp"
#include "report/report.hpp"
#include "support/shell.hpp"

namespace chunkinv::testing {

// Aggregates `values` the way a run does.
inline Stats stats_of(std::vector<double> values, bool flag = false) { return aggregate(values, flag); }

// A 0/1 metric with `ones` successes out of `n`.
inline Stats flag_stats(uint64_t ones, uint64_t n) {
  std::vector<double> v(n, 0.0);
  for (uint64_t i = 0; i < ones; ++i) v[i] = 1.0;
  return stats_of(v, true);
}

// n values spread log-uniformly around `median` (a factor of 2 either way);
// `nonfinite` of them +inf.
inline Stats error_stats(double median, uint64_t n, uint64_t nonfinite = 0) {
  std::vector<double> v;
  for (uint64_t i = 0; i < n; ++i) {
    const double t = n > 1 ? static_cast<double>(i) / static_cast<double>(n - 1) : 0.5;
    v.push_back(i < n - nonfinite ? median * std::pow(2.0, 2.0 * t - 1.0) : INFINITY);
  }
  return stats_of(v);
}

struct EntrySpec {
  std::string family = "floor";
  int chunk = 16;
  std::string path = "emulated";
  uint64_t samples = 100;
  uint64_t seed = 0;
  double inv_total_median = 1.23e-6;
  double inv_power_median = 8.51e-8;
  uint64_t inv_finite = 100;  // samples with a finite inverse
  double decay_zeros = 0;     // every sample's count
  double power_exponent = 8;
  double power_max = 19.6;
};

inline ReportEntry make_entry(const EntrySpec& s) {
  ReportEntry e;
  e.axes = {{"family", s.family}, {"chunk", s.chunk}, {"dim", 128}, {"path", s.path}};
  if (s.family == "floor" || s.family == "model_like") e.axes["decay_floor"] = -5;
  e.samples = s.samples;
  e.seed = s.seed;
  const uint64_t bad = s.samples - s.inv_finite;
  e.metrics["decay_zeros"] = stats_of(std::vector<double>(s.samples, s.decay_zeros));
  e.metrics["inv_decay_nonfinite"] = stats_of(std::vector<double>(s.samples, s.decay_zeros));
  e.metrics["l_finite"] = flag_stats(s.inv_finite, s.samples);
  e.metrics["inv_finite"] = flag_stats(s.inv_finite, s.samples);
  e.metrics["l_rel_rmse"] = error_stats(3.7e-3, s.samples, bad);
  e.metrics["inv_total_rel_rmse"] = error_stats(s.inv_total_median, s.samples, bad);
  e.metrics["inv_method_only_rel_rmse"] = error_stats(1.4e-8, s.samples, bad);
  e.metrics["inv_gold_l_rel_rmse"] = error_stats(s.inv_power_median, s.samples);
  e.metrics["inverse_residual"] = error_stats(1.0e-6, s.samples, bad);
  e.metrics["highest_power"] = stats_of(std::vector<double>(s.samples, s.power_exponent));
  e.metrics["power_max"] = error_stats(s.power_max, s.samples);
  e.metrics["gold_l_highest_power"] = stats_of(std::vector<double>(s.samples, s.power_exponent));
  e.metrics["gold_l_power_max"] = error_stats(s.power_max, s.samples);
  return e;
}

inline ReportEntry make_gold_entry(const std::string& family, int chunk, uint64_t samples = 100, uint64_t seed = 0) {
  ReportEntry e;
  e.axes = {{"family", family}, {"chunk", chunk}, {"dim", 128}, {"path", "gold"}};
  if (family == "floor" || family == "model_like") e.axes["decay_floor"] = -5;
  e.samples = samples;
  e.seed = seed;
  e.metrics["l_finite"] = flag_stats(samples, samples);
  e.metrics["inv_finite"] = flag_stats(samples, samples);
  e.metrics["inverse_residual"] = error_stats(8e-23, samples);
  e.metrics["inv_max_abs"] = error_stats(1.0, samples);
  return e;
}

// A fresh directory per test, removed at the end.
class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::temp_directory_path() /
            ("chunkinv-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  static int& counter() {
    static int c = 0;
    return c;
  }
  std::filesystem::path path_;
};

inline std::string write_report(const TempDir& dir, const std::string& name, const Report& r) {
  const std::string path = dir.file(name);
  std::ofstream(path) << report_to_json(r).dump(1);
  return path;
}

inline std::string write_text(const TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = dir.file(name);
  std::ofstream(path) << text;
  return path;
}

struct RunResult {
  int status = -1;     // the exit status
  std::string output;  // stdout
  std::string errors;  // stderr
};

// Runs the built binary with `args` (a shell fragment), capturing stdout and stderr.
inline RunResult run_chunkinv(const std::string& args, const TempDir& dir) {
  const std::string err = dir.file("stderr.txt");
  const ShellResult s = run_shell(binary() + " " + args + " 2>'" + err + "'");
  RunResult r;
  r.status = s.status;
  r.output = s.out;
  std::ifstream in(err);
  r.errors.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return r;
}

}  // namespace chunkinv::testing

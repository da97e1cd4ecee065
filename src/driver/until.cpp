#include "driver/until.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.hpp"
#include "core/limits.hpp"
#include "metrics/metrics.hpp"
#include "metrics/stats.hpp"
#include "report/report.hpp"

namespace chunkinv {
namespace {

std::string trimmed(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

std::vector<std::string> flag_metrics() {
  std::vector<std::string> v;
  for (const std::string& n : all_metric_names())
    if (const MetricInfo* m = find_chunk_metric(n); m && m->kind == MetricKind::kFlag) v.push_back(n);
  return v;
}

// The 0/1 metric `name`, by today's name; UsageError otherwise.
std::string flag_metric(const std::string& option, const std::string& text, const std::string& name) {
  const MetricInfo* m = find_chunk_metric(name);  // a run's metrics: seq's o_finite is no stop rule
  if (m && m->kind == MetricKind::kFlag) return m->name;
  const std::vector<std::string> flags = flag_metrics();
  const std::string near = nearest_of(name, flags);
  throw UsageError(fmt::format("{} '{}': {} is not a 0/1 metric{}; a stop rule counts one of: {}", option, text,
                               name.empty() ? "\"\"" : name, near.empty() ? "" : fmt::format(" (did you mean {}?)", near),
                               fmt::join(flags, ", ")));
}

}  // namespace

bool StopRule::met(uint64_t ones, uint64_t n) const {
  switch (kind) {
    case Kind::kFailures: return n - ones >= count;
    case Kind::kSuccesses: return ones >= count;
    case Kind::kRelativeWidth: {
      if (ones == 0 || ones == n) return false;
      const auto [low, high] = wilson95(ones, n);
      const double p = static_cast<double>(ones) / static_cast<double>(n);
      return high - low <= width * std::min(p, 1.0 - p);
    }
  }
  return false;
}

StopRule parse_until(const std::string& text) {
  const auto bad = [&] {
    return UsageError(fmt::format("--until '{}': expected METRIC.failures>=N or METRIC.successes>=N with N from 1 to {} "
                                  "(e.g. inv_finite.failures>=100)",
                                  text, kMaxSamples));
  };
  const std::string s = trimmed(text);
  const size_t dot = s.find('.'), ge = s.find(">=");
  if (dot == std::string::npos || ge == std::string::npos || ge < dot) throw bad();
  const std::string what = trimmed(s.substr(dot + 1, ge - dot - 1)), number = trimmed(s.substr(ge + 2));
  StopRule r;
  if (what == "failures") r.kind = StopRule::Kind::kFailures;
  else if (what == "successes") r.kind = StopRule::Kind::kSuccesses;
  else throw bad();
  if (number.empty() || number.find_first_not_of("0123456789") != std::string::npos || number.size() > 16) throw bad();
  r.count = std::stoull(number);
  if (r.count < 1 || r.count > kMaxSamples) throw bad();
  r.metric = flag_metric("--until", text, trimmed(s.substr(0, dot)));
  r.text = "--until " + s;
  return r;
}

StopRule parse_until_ci(const std::string& text) {
  const auto bad = [&] {
    return UsageError(fmt::format("--until-ci '{}': expected METRIC:WIDTH, WIDTH a number > 0, the 95% Wilson "
                                  "interval's width relative to the rarer share (e.g. inv_finite:0.1)",
                                  text));
  };
  const std::string s = trimmed(text);
  const size_t colon = s.find(':');
  if (colon == std::string::npos) throw bad();
  const std::string number = trimmed(s.substr(colon + 1));
  if (number.empty() || number.find_first_not_of("0123456789.eE+-") != std::string::npos) throw bad();
  errno = 0;
  char* end = nullptr;
  const double w = std::strtod(number.c_str(), &end);
  if (errno != 0 || end != number.c_str() + number.size() || !std::isfinite(w) || !(w > 0)) throw bad();
  StopRule r;
  r.kind = StopRule::Kind::kRelativeWidth;
  r.width = w;
  r.metric = flag_metric("--until-ci", text, trimmed(s.substr(0, colon)));
  r.text = "--until-ci " + s;
  return r;
}

}  // namespace chunkinv

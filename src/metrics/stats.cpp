#include "metrics/stats.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <tuple>

namespace chunkinv {

double quantile_sorted(const std::vector<double>& x, double q) {
  if (x.empty()) return NAN;
  const double h = (static_cast<double>(x.size()) - 1.0) * q;
  const size_t lo = static_cast<size_t>(std::floor(h));
  const size_t hi = std::min(lo + 1, x.size() - 1);
  const double frac = h - static_cast<double>(lo);
  if (frac == 0.0 || lo == hi) return x[lo];
  if (std::isinf(x[lo]) || std::isinf(x[hi])) return INFINITY;  // values are finite or +inf
  return x[lo] + frac * (x[hi] - x[lo]);
}

std::pair<double, double> wilson95(uint64_t successes, uint64_t n) {
  if (n == 0) return {0.0, 1.0};
  const double z = 1.959963984540054;  // two-sided 95% normal quantile
  const double nn = static_cast<double>(n), p = static_cast<double>(successes) / nn;
  const double denom = 1.0 + z * z / nn;
  const double center = (p + z * z / (2.0 * nn)) / denom;
  const double half = z * std::sqrt(p * (1.0 - p) / nn + z * z / (4.0 * nn * nn)) / denom;
  // The interval reaches 0 (or 1) exactly when no (or every) trial succeeded.
  return {successes == 0 ? 0.0 : std::max(0.0, center - half), successes == n ? 1.0 : std::min(1.0, center + half)};
}

Stats aggregate(std::vector<double>& v, bool flag) {
  Stats s;
  s.count = v.size();
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());  // +inf last; metric values are never NaN
  s.min = v.front();
  s.max = v.back();
  s.median = quantile_sorted(v, 0.5);
  s.p10 = quantile_sorted(v, 0.1);
  s.p90 = quantile_sorted(v, 0.9);
  s.p99 = quantile_sorted(v, 0.99);
  s.p999 = quantile_sorted(v, 0.999);
  s.p999999 = quantile_sorted(v, 0.999999);
  double sum = 0.0;
  for (double x : v) {
    if (std::isfinite(x)) {
      sum += x;
      ++s.finite_count;
    }
  }
  s.mean = s.finite_count ? sum / static_cast<double>(s.finite_count) : NAN;
  if (flag) {
    uint64_t ones = 0;
    for (double x : v) ones += (x == 1.0);
    s.has_wilson = true;
    std::tie(s.wilson_low, s.wilson_high) = wilson95(ones, s.count);
  }
  return s;
}

const std::vector<std::string>& stat_names() {
  static const std::vector<std::string> n{"median", "mean", "p10", "p90", "p99", "p999", "p999999", "min", "max", "finite_count"};
  return n;
}

double stat_value(const Stats& s, const std::string& name) {
  if (name == "median") return s.median;
  if (name == "mean") return s.mean;
  if (name == "p10") return s.p10;
  if (name == "p90") return s.p90;
  if (name == "p99") return s.p99;
  if (name == "p999") return s.has_tail ? s.p999 : NAN;
  if (name == "p999999") return s.has_tail ? s.p999999 : NAN;
  if (name == "min") return s.min;
  if (name == "max") return s.max;
  if (name == "finite_count") return static_cast<double>(s.finite_count);
  if (name == "wilson_low") return s.wilson_low;
  if (name == "wilson_high") return s.wilson_high;
  if (name == "samples") return static_cast<double>(s.count);
  throw std::invalid_argument("unknown statistic " + name);
}

bool has_stat(const Stats& s, const std::string& name) {
  if (name == "wilson_low" || name == "wilson_high") return s.has_wilson;
  if (name == "p999" || name == "p999999") return s.has_tail;
  return true;
}

}  // namespace chunkinv

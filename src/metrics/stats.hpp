// Aggregates over samples (SPEC §5): order statistics over all values with
// +inf sorted last, the mean over finite values, and for 0/1 metrics the
// share with a 95% Wilson interval.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace chunkinv {

struct Stats {
  uint64_t count = 0;         // samples
  uint64_t finite_count = 0;  // samples with a finite value
  double median = 0, mean = 0, p10 = 0, p90 = 0, p99 = 0, min = 0, max = 0;
  // The far tail: p99.9 and p99.9999 (quantiles 0.999 and 0.999999). Every
  // run computes them; a report written before they existed lacks them
  // (has_tail false), and they read as absent, not as numbers.
  bool has_tail = true;
  double p999 = 0, p999999 = 0;
  bool has_wilson = false;
  double wilson_low = 0, wilson_high = 0;
};

// Quantile q in [0,1] of sorted values, linear between order statistics
// (type 7 of Hyndman & Fan); inf where either neighbour is inf.
double quantile_sorted(const std::vector<double>& sorted, double q);
// 95% Wilson score interval of `successes` out of `n`.
std::pair<double, double> wilson95(uint64_t successes, uint64_t n);
// Aggregates `values` (sorted in place). `flag` adds the Wilson interval.
Stats aggregate(std::vector<double>& values, bool flag);

// Statistic names in report order, and access by name.
const std::vector<std::string>& stat_names();  // median mean p10 p90 p99 p999 p999999 min max finite_count
// Whether `s` holds statistic `name` (the Wilson interval of a 0/1 metric only, the tail only where written).
bool has_stat(const Stats& s, const std::string& name);
double stat_value(const Stats& s, const std::string& name);

}  // namespace chunkinv

// Per-sample metrics (SPEC §3). Names are part of the interface: the same in
// code, JSON and tables.
#pragma once
#include <string>
#include <vector>

#include "core/matrix.hpp"
#include "paths/path.hpp"

namespace chunkinv {

enum class MetricKind {
  kCount,  // a non-negative integer count (worst sample = max)
  kFlag,   // 0/1; its mean is a share, reported with a Wilson interval
  kError,  // a relative error, +inf when the approximation is non-finite
  kValue,  // any other non-negative value (power magnitude, exponent)
};

struct MetricInfo {
  const char* name;
  MetricKind kind;
  const char* help;
};

// Metrics of an approximate path, in report order.
const std::vector<MetricInfo>& path_metrics();
// Metrics of the gold itself (its own residual and finiteness).
const std::vector<MetricInfo>& gold_metrics();
const MetricInfo* find_metric(const std::string& name);  // either list; nullptr if unknown

// rel_rmse(a, e) = sqrt(mean((a-e)^2)) / (sqrt(mean(e^2)) + 1e-30); +inf if a has a non-finite entry.
double rel_rmse(const Mat& a, const Mat& e);
bool all_finite(const Mat& m);

// One value per path_metrics() entry, same order.
std::vector<double> evaluate_path(const GoldOutput& gold, const PathOutput& out);
// One value per gold_metrics() entry.
std::vector<double> evaluate_gold(const GoldOutput& gold);

}  // namespace chunkinv

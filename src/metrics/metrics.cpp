#include "metrics/metrics.hpp"

#include <cmath>

#include "paths/gold/gold.hpp"

namespace chunkinv {

const std::vector<MetricInfo>& path_metrics() {
  static const std::vector<MetricInfo> m{
      {"decay_zeros", MetricKind::kCount, "count of decay_i == 0"},
      {"inv_decay_nonfinite", MetricKind::kCount, "count of non-finite inv_decay_i"},
      {"l_finite", MetricKind::kFlag, "1 if every entry of the path's L is finite"},
      {"inv_finite", MetricKind::kFlag, "1 if every entry of the path's INV is finite"},
      {"l_rel_rmse", MetricKind::kError, "path L vs gold L"},
      {"inv_total_rel_rmse", MetricKind::kError, "path INV vs gold inverse"},
      {"inv_neumann_only_rel_rmse", MetricKind::kError, "path INV vs exact FP64 inverse of I + path L"},
      {"inv_stable_l_rel_rmse", MetricKind::kError, "the path's Neumann on fp16(gold L) vs gold inverse"},
      {"inverse_residual", MetricKind::kError, "rel_rmse((I + gold L) * path INV, I) in FP64"},
      {"highest_power", MetricKind::kValue, "exponent of the highest power formed"},
      {"power_max", MetricKind::kValue, "max |entry| over L and all powers formed"},
      {"stable_l_highest_power", MetricKind::kValue, "highest power of the run on fp16(gold L)"},
      {"stable_l_power_max", MetricKind::kValue, "power_max of the run on fp16(gold L)"},
  };
  return m;
}

const std::vector<MetricInfo>& gold_metrics() {
  static const std::vector<MetricInfo> m{
      {"l_finite", MetricKind::kFlag, "1 if every entry of the gold L is finite"},
      {"inv_finite", MetricKind::kFlag, "1 if every entry of the gold inverse is finite"},
      {"inverse_residual", MetricKind::kError, "rel_rmse((I + gold L) * gold INV, I) in FP64"},
      {"inv_max_abs", MetricKind::kValue, "max |entry| of the gold inverse"},
  };
  return m;
}

const MetricInfo* find_metric(const std::string& name) {
  for (const auto* list : {&path_metrics(), &gold_metrics()})
    for (const auto& m : *list)
      if (name == m.name) return &m;
  return nullptr;
}

bool all_finite(const Mat& m) {
  for (Eigen::Index i = 0; i < m.size(); ++i)
    if (!std::isfinite(m.data()[i])) return false;
  return true;
}

double rel_rmse(const Mat& a, const Mat& e) {
  if (!all_finite(a)) return INFINITY;
  double err = 0.0, ref = 0.0;
  for (Eigen::Index i = 0; i < a.size(); ++i) {
    const double d = a.data()[i] - e.data()[i];
    err += d * d;
    ref += e.data()[i] * e.data()[i];
  }
  const double n = static_cast<double>(a.size());
  return std::sqrt(err / n) / (std::sqrt(ref / n) + 1e-30);
}

namespace {

double residual(const Mat& gold_l, const Mat& inv) {
  if (!all_finite(inv)) return INFINITY;
  const Eigen::Index c = gold_l.rows();
  const Mat i = Mat::Identity(c, c);
  return rel_rmse((i + gold_l) * inv, i);
}

double max_abs(const Mat& m) {
  double r = 0.0;
  for (Eigen::Index i = 0; i < m.size(); ++i) {
    if (!std::isfinite(m.data()[i])) return INFINITY;
    r = std::fmax(r, std::fabs(m.data()[i]));
  }
  return r;
}

}  // namespace

std::vector<double> evaluate_path(const GoldOutput& gold, const PathOutput& out) {
  double zeros = 0, nonfinite = 0;
  for (double v : out.decay) zeros += (v == 0.0);
  for (double v : out.inv_decay) nonfinite += !std::isfinite(v);
  const bool l_ok = all_finite(out.L);
  const double neumann_only = l_ok ? rel_rmse(out.run.inv, unit_lower_inverse(out.L)) : INFINITY;
  return {zeros,
          nonfinite,
          l_ok ? 1.0 : 0.0,
          all_finite(out.run.inv) ? 1.0 : 0.0,
          rel_rmse(out.L, gold.L),
          rel_rmse(out.run.inv, gold.inv),
          neumann_only,
          rel_rmse(out.stable.inv, gold.inv),
          residual(gold.L, out.run.inv),
          static_cast<double>(out.run.highest_power),
          out.run.power_max,
          static_cast<double>(out.stable.highest_power),
          out.stable.power_max};
}

std::vector<double> evaluate_gold(const GoldOutput& gold) {
  return {all_finite(gold.L) ? 1.0 : 0.0, all_finite(gold.inv) ? 1.0 : 0.0, residual(gold.L, gold.inv),
          max_abs(gold.inv)};
}

}  // namespace chunkinv

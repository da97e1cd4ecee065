#include "downstream/scores.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "metrics/metrics.hpp"

namespace chunkinv {

std::span<const MetricInfo> downstream_metrics() { return sequence_metrics(); }

void RelRmseSum::add(const Mat& a, const Mat& e) {
  finite_ = finite_ && all_finite(a);
  for (Eigen::Index i = 0; i < a.size(); ++i) {
    const double d = a.data()[i] - e.data()[i];
    err2_ += d * d;
    ref2_ += e.data()[i] * e.data()[i];
  }
  n_ += static_cast<uint64_t>(a.size());
}

double RelRmseSum::value() const {
  if (!finite_) return INFINITY;
  const double n = static_cast<double>(n_);
  return std::sqrt(err2_ / n) / (std::sqrt(ref2_ / n) + 1e-30);
}

void VariantScore::add_rows(int first, const Mat& o, const Mat& ref) {
  o_.add(o, ref);
  // A chunk may straddle windows only when the window is not a multiple of it.
  for (Eigen::Index r = 0; r < o.rows();) {
    const int t = first + static_cast<int>(r);
    const int w = t / window_;
    const Eigen::Index n = std::min<Eigen::Index>(o.rows() - r, (w + 1) * window_ - t);
    windows_[w].add(o.middleRows(r, n), ref.middleRows(r, n));
    r += n;
  }
  if (first_nonfinite_ < 0)
    for (Eigen::Index r = 0; r < o.rows(); ++r)
      if (!o.row(r).allFinite()) {
        first_nonfinite_ = first + r;
        break;
      }
}

void VariantScore::add_boundary(const Mat& state, const Mat& ref) { boundary_.push_back(rel_rmse(state, ref)); }
void VariantScore::set_final(const Mat& ht, const Mat& ref) { ht_ = rel_rmse(ht, ref); }

double VariantScore::state_max() const {
  double m = 0;
  for (double e : boundary_) m = std::isnan(e) || e > m ? e : m;
  return m;
}

double VariantScore::state_growth() const {
  // ln(e_b) = a + s b by least squares over the usable boundaries b.
  double n = 0, sb = 0, sy = 0, sbb = 0, sby = 0;
  for (size_t b = 0; b < boundary_.size(); ++b) {
    const double e = boundary_[b];
    if (!(std::isfinite(e) && e > 0)) continue;
    const double x = static_cast<double>(b), y = std::log(e);
    n += 1, sb += x, sy += y, sbb += x * x, sby += x * y;
  }
  if (n < 2) return 1.0;
  return std::exp((n * sby - sb * sy) / (n * sbb - sb * sb));
}

std::vector<double> evaluate_downstream(const VariantScore& total, const VariantScore& inverse_only,
                                        const VariantScore& storage, int tokens) {
  const double o = total.o_rel_rmse(), oi = inverse_only.o_rel_rmse();
  double share = 0;
  if (!std::isfinite(o)) share = std::isfinite(oi) ? 0.0 : 1.0;
  else if (o > 0) share = oi / o;
  std::vector<double> v = {o,
                           oi,
                           storage.o_rel_rmse(),
                           total.ht_rel_rmse(),
                           inverse_only.ht_rel_rmse(),
                           storage.ht_rel_rmse(),
                           total.state_max(),
                           total.state_growth(),
                           total.first_nonfinite() < 0 ? 1.0 : 0.0,
                           static_cast<double>(total.first_nonfinite() < 0 ? tokens : total.first_nonfinite()),
                           share};
  for (size_t w = 0; w < total.windows(); ++w) v.push_back(total.window_rel_rmse(w));
  return v;
}

}  // namespace chunkinv

// The downstream metrics (docs/downstream.md, "Metrics"), declared once, and
// what one sequence's run accumulates to evaluate them: each variant of the
// chunked forward against the recurrence, chunk by chunk.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/matrix.hpp"
#include "metrics/metrics.hpp"

namespace chunkinv {

// The metrics of every downstream entry, in report order (declared with the
// others: metrics/metrics.hpp's sequence_metrics()); then one
// o_rel_rmse_from_<p> per window of positions (window_metric_name).
std::span<const MetricInfo> downstream_metrics();

// SPEC §3's rel_rmse, its sums streamed block by block in row-major order:
// over the blocks of one matrix it equals rel_rmse of the whole (bit for bit).
class RelRmseSum {
 public:
  void add(const Mat& a, const Mat& e);
  double value() const;  // +inf once a had a non-finite entry

 private:
  double err2_ = 0, ref2_ = 0;
  uint64_t n_ = 0;
  bool finite_ = true;
};

// One variant of the chunked forward (total, inverse only, storage) against
// the recurrence over one sequence.
class VariantScore {
 public:
  VariantScore(int tokens, int window) : window_(window), windows_(static_cast<size_t>(tokens / window)) {}
  // o's rows of tokens [first, first + rows), the variant's and the reference's.
  void add_rows(int first, const Mat& o, const Mat& ref);
  // The state carried across a chunk boundary, the variant's and the reference's.
  void add_boundary(const Mat& state, const Mat& ref);
  void set_final(const Mat& ht, const Mat& ref);

  double o_rel_rmse() const { return o_.value(); }
  double window_rel_rmse(size_t w) const { return windows_[w].value(); }
  size_t windows() const { return windows_.size(); }
  double ht_rel_rmse() const { return ht_; }
  double state_max() const;
  double state_growth() const;  // exp of the least-squares slope of ln(error) per boundary
  int64_t first_nonfinite() const { return first_nonfinite_; }  // -1: none

 private:
  int window_;
  RelRmseSum o_;
  std::vector<RelRmseSum> windows_;
  std::vector<double> boundary_;
  int64_t first_nonfinite_ = -1;
  double ht_ = 0;
};

// One value per downstream_metrics() entry, then one per window.
std::vector<double> evaluate_downstream(const VariantScore& total, const VariantScore& inverse_only,
                                        const VariantScore& storage, int tokens);

}  // namespace chunkinv

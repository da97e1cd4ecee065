// The backward in `chunkinv seq` (axis backward=stored|recomputed,
// docs/downstream.md "Backward"): per sequence, the FP64 recurrence's
// gradient and, per path x method, the chunked backward's three variants
// (total, inverse only, storage) scored against it, streamed chunk by
// chunk in reverse: memory O(block) states and O(chunk) gradient rows,
// never O(T) states or gradients. With `device`, the variants' forwards and
// backwards run on the GPU (gpu/chunked_forward.hpp, chunked_backward.hpp:
// the same bits), the FP64 reference on the host.
#pragma once
#include <algorithm>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/matrix.hpp"
#include "downstream/backward.hpp"
#include "downstream/scores.hpp"
#include "downstream/sources.hpp"
#include "methods/method.hpp"
#include "model/metric_info.hpp"
#include "paths/path.hpp"

namespace chunkinv {

class ThreadPool;

// "none" (no backward), "stored" (A as the forward stored it: the forward
// preset's inverse format, then read as the backward preset reads A) or
// "recomputed" (A recomputed by the path x method, read as the method makes it).
const std::vector<std::string>& backward_modes();
// UsageError naming the culprit: an unknown mode, a storage preset without a backward.
void validate_backward(const SeqConfig& c);

// The backward metrics, in report order; then per gradient its windows
// (backward_window_names).
std::span<const MetricInfo> backward_metrics();
std::vector<std::string> backward_window_names(int seq_len, int window);
const MetricInfo& backward_window_info();

// One gradient's error, streamed over rows in any order: total, windows of
// positions and the first non-finite position.
class GradientScore {
 public:
  GradientScore(int tokens, int window) : window_(window), windows_(static_cast<size_t>(tokens / window)) {}
  void add_rows(int first, const Mat& a, const Mat& ref);
  double rel_rmse() const { return all_.value(); }
  double window_rel_rmse(size_t w) const { return windows_[w].value(); }
  size_t windows() const { return windows_.size(); }
  int64_t first_nonfinite() const { return first_nonfinite_; }  // -1: none

 private:
  int window_;
  RelRmseSum all_;
  std::vector<RelRmseSum> windows_;
  int64_t first_nonfinite_ = -1;
};

// The five token gradients of one variant of the chunked backward.
struct GradientScores {
  std::vector<GradientScore> g;  // dq, dk, dv, dg, dbeta
  double dh0 = 0;
  GradientScores(int tokens, int window) : g(5, GradientScore(tokens, window)) {}
  void add(int first, const Gradients& rows, const Gradients& ref);
  int64_t first_nonfinite() const;
};

// One value per backward_metrics() entry, then the windows.
std::vector<double> evaluate_backward(const GradientScores& total, const GradientScores& inverse_only,
                                      const GradientScores& storage, int tokens);

// Every variant's C x C inverse, inverse(v) for v < n, one after another
// into `out` (the layout the GPU's chunked forward and backward take).
template <class F>
const double* pack_inverses(size_t n, int C, F&& inverse, std::vector<double>& out) {
  out.resize(n * size_t(C) * C);
  for (size_t v = 0; v < n; ++v) {
    const Mat& a = inverse(v);
    std::copy(a.data(), a.data() + size_t(C) * C, out.data() + v * C * C);
  }
  return out.data();
}

struct InverseTask {
  size_t path = 0;    // index into the run's paths
  size_t method = 0;  // index into that path's methods
};

// One sequence's backward values per task (evaluate_backward's order).
std::vector<std::vector<double>> run_backward_one(const Sequence& s, const Upstream& up, const SeqConfig& cfg,
                                                  int window, const std::vector<InverseTask>& tasks,
                                                  const std::vector<std::vector<const Method*>>& path_methods,
                                                  std::vector<std::unique_ptr<Path>>& paths, ThreadPool& pool,
                                                  bool device = false);

}  // namespace chunkinv

// What `chunkinv search` maximises, and how a candidate is measured: the
// candidate's sample, its gold, the path's run of the method and the
// metrics, by the same routines the runner uses (compute_gold,
// Path::run_batch, evaluate), so that the objective of a witness is the
// value `run --inputs WITNESS --per-sample` reports for it, bit for bit
// (test SearchCli.WitnessReplaysTheObjectiveBitForBit).
#pragma once
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/thread_pool.hpp"
#include "inputs/family.hpp"
#include "inputs/sample.hpp"
#include "metrics/metrics.hpp"
#include "methods/method.hpp"
#include "paths/path.hpp"

namespace chunkinv {

// An objective: one per-sample metric of the method (maximised), or
// "overflow_margin": the method's largest magnitude diagnostic over the
// largest finite value of its format (Neumann's power_max / 65504 (FP16),
// fwdsub_fp32's inv_max / FLT_MAX); 1 or more, or +inf, is an overflow, and
// an inverse that is not finite counts as +inf.
struct Objective {
  std::string name;
  size_t metric = 0;            // index in method_metrics(method)
  double scale = 1;             // the value is metric / scale
  size_t finite_flag = MetricSet::npos;  // overflow_margin: inv_finite; 0 there gives +inf
  std::string help;             // in words, for the report
};

// UsageError naming the unknown objective with what the method offers.
Objective parse_objective(const std::string& name, const MethodSpec& method);
// The objectives a method offers (its metrics, then overflow_margin where it has one).
std::vector<std::string> objective_names(const MethodSpec& method);

// The objective's value from one sample's metric values (method_metrics order).
// NaN is returned as +inf: a non-finite result is the worst there is.
double objective_value(const Objective& o, const double* metric_values);

// Measures batches of samples on one path with one method.
class Evaluator {
 public:
  // UsageError when the path cannot run the method on `config` (its reason).
  Evaluator(const Configuration& config, const PathChoice& path, const Method& method, const Objective& objective,
            int threads);
  // values[i]: the objective of samples[i]; metrics (when given): every
  // metric of samples[i] at [i * metric_count() + m].
  void evaluate(std::span<const Sample> samples, std::vector<double>& values, std::vector<double>* metrics = nullptr);
  size_t metric_count() const { return set_->size(); }
  const MetricSet& metric_set() const { return *set_; }
  ThreadPool& pool() { return pool_; }

 private:
  PathChoice path_;
  Method method_;
  Objective objective_;
  const MetricSet* set_;
  std::unique_ptr<Path> instance_;
  ThreadPool pool_;
  std::vector<GoldOutput> gold_;
  std::vector<PathOutput> outs_;  // kept from batch to batch (their matrices keep their storage)
};

}  // namespace chunkinv

// Per-sample metrics (SPEC §3). Names are part of the interface: the same in
// code, JSON and tables. Generic metrics apply to every (path, method);
// each method adds its own diagnostics, measured on the path's L and, as
// "gold_l_<name>", on the gold L. Consumers look metrics up by name in a
// MetricSet, never by position.
#pragma once
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/matrix.hpp"
#include "methods/method.hpp"
#include "model/metric_info.hpp"
#include "model/outputs.hpp"

namespace chunkinv {

struct MetricSet {
  std::vector<MetricInfo> infos;  // report order
  static constexpr size_t npos = size_t(-1);
  size_t index(std::string_view name) const;  // npos if absent
  size_t size() const { return infos.size(); }
};

// Generic metrics, then the method's diagnostics, then their gold-L twins.
const MetricSet& method_metrics(const MethodSpec& method);
// The gold's own entry (path gold, method exact): its residual and finiteness.
const MetricSet& reference_metrics();
// Any metric of any report, by its name or an old alias: a method's, the
// gold's, or a seq entry's (sequence_metrics() and the windows); nullptr if unknown.
const MetricInfo* find_metric(const std::string& name);
// Only the metrics a chunk run measures (run --metrics, stop rules).
const MetricInfo* find_chunk_metric(const std::string& name);
// Which way a metric improves (check's verdicts, --worst's order): as seq's
// metrics are declared (o_first_nonfinite: higher, a later first non-finite
// position), else by kind: a 0/1 flag higher, every other kind lower.
enum class Better { kLower, kHigher };
Better better_direction(const MetricInfo& m);
inline bool higher_is_better(const MetricInfo& m) { return better_direction(m) == Better::kHigher; }
// The metrics of every seq entry, in report order (docs/downstream.md); then
// one o_rel_rmse_from_<p> per window of positions (window_metric_name).
std::span<const MetricInfo> sequence_metrics();
// "o_rel_rmse_from_<first>": o's error over positions [first, first + window).
std::string window_metric_name(int first);
const MetricInfo& window_metric_info();  // its kind and help; the name is per window
// The metrics seq -a backward=... adds (docs/downstream.md, "Backward"), in
// report order: per gradient (gradient_names(): dq, dk, dv, dg, dbeta) its
// error, inverse-only and storage errors and inverse share, then dh0's and
// the gradients' finiteness; then one <g>_rel_rmse_from_<p> per gradient and window.
const std::vector<std::string>& gradient_names();
std::span<const MetricInfo> gradient_metrics();
const MetricInfo& gradient_window_metric_info();
// Every chunk metric's name in report order: generic, each method's
// diagnostics and their twins, then the gold's own; each once.
std::vector<std::string> all_metric_names();
// Names metrics had in reports of schema chunkinv.report/1 map to today's.
std::string canonical_metric_name(const std::string& name);

// A run's choice of metrics (run --metrics, a config's "metrics"): a
// comma-separated list of names or old aliases, each made canonical and
// kept once, in the order given; UsageError naming an unknown one, `where`
// naming the option. Empty list: empty vector (every metric).
std::vector<std::string> parse_metric_list(const std::string& list, const std::string& where);
// The entries of `base` whose names are in `names`, in base's order: a set
// that lives as long as the program (one per base and choice). pick[k] is
// its entry k's index in base.
const MetricSet& select_metrics(const MetricSet& base, const std::vector<std::string>& names, std::vector<size_t>* pick);

// rel_rmse(a, e) = sqrt(mean((a-e)^2)) / (sqrt(mean(e^2)) + 1e-30); +inf if a has a non-finite entry.
double rel_rmse(const Mat& a, const Mat& e);
// rel_rmse of a chunk's C x C matrices (the metrics of evaluate and
// evaluate_reference): the same value, its sums in classes
// (fp64::ChunkSums; docs/design.md, "Precision choices").
double chunk_rel_rmse(const Mat& a, const Mat& e);
bool all_finite(const Mat& m);

// One value per method_metrics(method) entry, in that order, into out.
void evaluate(const MethodSpec& method, const GoldOutput& gold, const PathOutput& p, double* out);
// One value per reference_metrics() entry.
void evaluate_reference(const GoldOutput& gold, double* out);

}  // namespace chunkinv

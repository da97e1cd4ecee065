// The worst samples of a report entry (`--worst N --by METRIC`): which
// samples to `inspect` first. Kept as the samples stream, in a bounded heap
// per entry, so that it needs no per-sample values and is the same for any
// thread count, batch size or shard split: the order is total (a value's
// badness, then the sample index), so the N worst of merged shards are the
// N worst of the whole run.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace chunkinv {

// The metric the worst samples are ranked by when none is given.
inline constexpr const char* kDefaultWorstMetric = "inv_total_rel_rmse";

// --worst N and --by METRIC as given (empty: not given): N, 0 when absent;
// UsageError for N outside 1..1000, --by without --worst, an unknown metric
// (naming the nearest). `by` becomes the canonical metric name.
size_t parse_worst(const std::string& n, std::string& by);

struct WorstSample {
  uint64_t index = 0;                    // the sample's index in its configuration
  std::map<std::string, double> values;  // every metric of the entry, for this sample
};

// The N worst samples by one metric, worst first.
struct WorstSamples {
  std::string by;  // the metric
  size_t n = 0;    // how many were asked for (fewer when the entry has fewer samples)
  std::vector<WorstSample> samples;
};

// Whether value a (of sample ia) is worse than b (of ib) by metric `by`:
// non-finite first (a metric's +inf or NaN is a failed sample), then by
// value (higher is worse; for a 0/1 flag, 0 is worse), ties by the lower
// sample index, so the order is total and deterministic.
bool worse_sample(const std::string& by, double a, uint64_t ia, double b, uint64_t ib);

// Keeps the N worst as samples arrive, in any order.
class WorstHeap {
 public:
  WorstHeap() = default;
  WorstHeap(std::string by, size_t n) : by_(std::move(by)), n_(n) {}
  // `value` is the sample's value of `by`; `values` are only built (by
  // `make`) when the sample enters the heap.
  template <typename Make>
  void offer(uint64_t index, double value, Make make) {
    if (n_ == 0) return;
    if (heap_.size() == n_ && !worse_sample(by_, value, index, heap_.front().value, heap_.front().index)) return;
    push({index, value, make()});
  }
  void add(const WorstSamples& w);  // merges another list (a shard's)
  WorstSamples result() const;

 private:
  struct Item {
    uint64_t index;
    double value;
    std::map<std::string, double> values;
  };
  void push(Item item);
  std::string by_;
  size_t n_ = 0;
  std::vector<Item> heap_;  // a max-heap of "least bad" at the front
};

// The worst samples of an entry's per-sample values (table --worst on a
// --per-sample report); empty `samples` when the entry lacks them.
WorstSamples worst_from_per_sample(const std::map<std::string, std::vector<double>>& per_sample,
                                   const std::string& by, size_t n);

// docs/report-schema.md, "worst": {"by", "n", "samples": [{"index", "values"}]}.
nlohmann::json worst_to_json(const WorstSamples& w);
// UsageError naming what is wrong: an index not below `samples`, not
// worst first, an unknown key.
WorstSamples worst_from_json(const nlohmann::json& j, uint64_t samples);

// The command line again, each word quoted for a POSIX shell where it needs it.
std::string shell_command(const std::vector<std::string>& argv);

// The `chunkinv inspect` command that shows sample `index` of the entry
// with these axes and seed (the `file` family by its inputs, a scored
// candidate by its file).
std::vector<std::string> inspect_argv(const nlohmann::json& axes, uint64_t seed, uint64_t index,
                                      const std::string& candidate = "");

struct NamedReport;
// The text block `--worst` prints: per entry with a worst list, its label,
// then one line per sample with its figures and the command that shows it.
// `n` 0: as the entries hold them; `by`: the metric (lists by another are
// recomputed from per-sample values where the report has them).
std::string worst_text(const std::vector<NamedReport>& reports, size_t n, const std::string& by);

}  // namespace chunkinv

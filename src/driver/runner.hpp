// The one sample loop. `run`, `bench` and `inspect` all go through it: for
// each group of points that share a configuration it makes the samples and
// their gold in batches, runs every path once over its methods, evaluates
// the metrics, and hands each batch to a sink (statistics for `run`,
// timings for `bench`, the matrices themselves for `inspect`). Results are a
// pure function of (configuration, seed, sample index): never of the
// command, the thread count or the batch size.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/thread_pool.hpp"
#include "driver/spec.hpp"
#include "driver/until.hpp"
#include "metrics/metrics.hpp"
#include "metrics/sketch.hpp"
#include "paths/path.hpp"
#include "report/report.hpp"

namespace chunkinv {

// One report entry's worth of work: a path running a method, or the gold's
// own entry (the reference path with the exact method).
struct Task {
  size_t path = 0;  // index into the runner's paths
  Method method;
  bool reference = false;
  const MetricSet* metrics = nullptr;    // what the entry reports
  const MetricSet* evaluated = nullptr;  // what evaluate() (or evaluate_reference()) fills: metrics, or more
  std::vector<size_t> pick;              // metrics' entry k is evaluated's entry pick[k]; empty: the same set
  nlohmann::json axes;                   // the entry's axes where its planner named them (a sequence's);
                                         // null: the configuration's, path and method (entry_axes)
};

struct SeqGroup;  // downstream/experiment.hpp: a configuration whose samples are whole sequences

// Metrics a group declares itself (a sequence's: its table, then one per
// window of positions): their names, and the set its tasks point to.
struct GroupMetrics {
  std::vector<std::string> names;
  MetricSet set;  // infos[k].name is names[k]
  GroupMetrics(std::vector<std::string> n, const std::vector<MetricInfo>& infos);
  GroupMetrics(const GroupMetrics&) = delete;
  GroupMetrics& operator=(const GroupMetrics&) = delete;
};

// Points that share a configuration share their samples and gold.
// A group whose sample is a whole sequence (`seq`) carries its sequence
// configuration, for the back-end that runs it (downstream's), and its own
// sample range, seed and metrics; the statistics, checkpoint and stop
// rules around it are the same as for a chunk's.
struct Group {
  Configuration config;  // a sequence's: the configuration of its chunks
  std::vector<Task> tasks;
  std::shared_ptr<const SeqGroup> sequence;  // null: a sample is a chunk
  std::optional<uint64_t> first, count;      // its samples where not the run's (a sequence set's, a shard's part)
  std::optional<uint64_t> seed;              // the seed its entries carry where not the run's (a tensor set: 0)
  std::shared_ptr<const GroupMetrics> metrics;  // where its tasks' metrics are its own
};

struct Plan {
  std::vector<Group> groups;
  std::vector<std::string> skipped;  // each distinct reason once, in order of appearance
};

struct SampleRange {
  uint64_t first = 0;  // samples [first, first + count)
  uint64_t count = 0;
};

struct RunnerOptions {
  int threads = 0;          // 0: all hardware threads
  uint64_t batch = 4096;    // samples per batch (bounds memory; never changes results)
  bool keep_intermediates = false;
  bool progress = false;    // a progress line on stderr (when it is a terminal)
  std::vector<std::string> metrics;  // the metrics the entries report (parse_metric_list); empty: every one
};

// One batch of one group, as the sink sees it.
struct BatchResult {
  const Group* group = nullptr;
  uint64_t first = 0;  // sample index of samples[0]
  uint64_t count = 0;  // samples in the batch (samples.size() where they are chunks)
  std::span<const Sample> samples;
  std::span<const GoldOutput> gold;
  std::vector<std::span<const PathOutput>> outputs;  // per task; empty for the reference
  std::vector<std::vector<double>> values;           // per task: values[i * metrics + m]
  std::vector<BatchTiming> path_timing;              // per runner path (zero where unused)
  std::vector<double> path_wall_ms;                  // per runner path: run_batch's wall time
  double inputs_ms = 0, gold_ms = 0, metrics_ms = 0; // host wall time of this batch's phases
};

class Sink {
 public:
  virtual ~Sink() = default;
  virtual void begin(const Group&, uint64_t /*samples*/) {}
  virtual void consume(const BatchResult& batch) = 0;
  // The statistics' states [task][metric] of `samples` more samples that a
  // back-end folded itself (the GPU pipeline's sketches); a sink that needs
  // the values themselves refuses them.
  virtual void absorb(const Group&, const std::vector<std::vector<SketchState>>& /*states*/, uint64_t /*samples*/) {
    throw std::logic_error("this sink takes per-sample values, not folded states");
  }
  // True once the sink needs no more samples of this group (a stop rule held).
  virtual bool finished() const { return false; }
  virtual void end(const Group&) {}
};

struct StatsOptions;

// One back-end of the sample pipeline (docs/design.md): it runs samples of a
// group through every stage (source, path, method, metrics) and hands what
// they produce to the sink: per-sample values batch by batch (the host's
// loop, Runner), or the statistics' states folded where they were made (the
// GPU pipeline, DevicePipeline). Both give the sink the same bits.
class Backend {
 public:
  virtual ~Backend() = default;
  // Whether it runs `group` whole under these statistics; else a one-line reason.
  virtual bool takes(const Group& group, const StatsOptions& stats, std::string* why) const = 0;
  // Samples `range` of `group`: sink.begin, then its batches or rounds, then sink.end.
  virtual void run(const Group& group, uint64_t seed, SampleRange range, Sink& sink) = 0;
};

// The host back-end: every stage in its host form (the reference), sample by
// sample in batches over a thread pool. It takes every group of chunks.
class Runner final : public Backend {
 public:
  // Creates one instance of every path (GPU paths keep their buffers).
  Runner(std::vector<PathChoice> paths, const RunnerOptions& options);
  // Groups the points and resolves which path runs which method.
  Plan plan(const std::vector<Point>& points) const;
  bool takes(const Group& group, const StatsOptions&, std::string*) const override { return !group.sequence; }
  // Runs samples `range` of `group`; UsageError when a data-backed family
  // holds fewer samples.
  void run(const Group& group, uint64_t seed, SampleRange range, Sink& sink) override;

  const std::vector<PathChoice>& paths() const { return paths_; }
  ThreadPool& pool() { return pool_; }
  const RunnerOptions& options() const { return options_; }
  void set_batch(uint64_t batch) { options_.batch = batch; }  // chosen once the plan's memory is known

 private:
  void add_task(Group& g, size_t path, const Method& method, bool reference, const MetricSet& metrics) const;

  std::vector<PathChoice> paths_;
  std::vector<std::unique_ptr<Path>> instances_;
  // Each path's outputs, kept from batch to batch so that their matrices
  // keep their storage (a sink reads them before the next batch).
  std::vector<std::vector<PathOutput>> outs_;
  RunnerOptions options_;
  ThreadPool pool_;
};

// How a run's values become statistics (docs/design.md, "Statistics that
// stream"). Exact: every value of a group kept, sorted, exact quantiles.
// Sketch: folded as they come into a state of fixed size (metrics/sketch):
// exact counts, min and max, an order-free mean, quantiles within 2^-10.
enum class Quantiles { kExact, kSketch };
// Up to this many samples per configuration, `run` keeps exact quantiles
// unless told otherwise (--quantiles auto).
inline constexpr uint64_t kExactQuantilesUpTo = 1'000'000;

struct StatsOptions {
  bool per_sample = false;  // every value in the report (exact quantiles)
  Quantiles quantiles = Quantiles::kExact;
  bool keep_state = false;  // entries carry the mergeable state (run --shard, --until)
  const StopRule* until = nullptr;  // a group stops when it holds (its samples: the cap)
  // The device back-end (the GPU pipeline, DevicePipeline) for each group it
  // takes (sketch quantiles, no stop rule, no per-sample values, specs it has
  // device forms of); the others, and all where null, run on the host's loop.
  Backend* device = nullptr;
  // The `worst` samples of every entry by metric `worst_by` (report/worst.hpp),
  // kept as they stream; 0: none. Entries without that metric keep none.
  size_t worst = 0;
  std::string worst_by;
};

// The report entries of a run: every group over `samples` samples from
// `first_sample`, aggregated (and per sample when asked).
struct RunResult {
  std::vector<ReportEntry> entries;
  std::vector<std::string> skipped;
  std::vector<size_t> unmet;  // with a stop rule: the groups that reached the cap without it
  std::vector<size_t> on_device;         // the groups the GPU pipeline ran
  std::vector<std::string> on_host_why;  // with a GPU pipeline: why each other group ran on the host (distinct, in order)
};
RunResult run_experiment(const std::vector<Point>& points, const std::vector<PathChoice>& paths, uint64_t samples,
                         uint64_t seed, const RunnerOptions& options, bool per_sample = false,
                         uint64_t first_sample = 0);
RunResult run_experiment(const std::vector<Point>& points, const std::vector<PathChoice>& paths, uint64_t samples,
                         uint64_t seed, const RunnerOptions& options, const StatsOptions& stats,
                         uint64_t first_sample = 0);

// What run_experiment does besides computing, each optional: save as it
// goes and resume from what is saved (driver/checkpoint.hpp), draw a
// progress bar (its total: run_work()), and stop when `stop` returns a
// signal number (polled after each batch; what is done is saved first,
// then signals::Stopped is thrown). Results never depend on any of it.
class Checkpoint;
class ProgressBar;
struct RunControl {
  Checkpoint* checkpoint = nullptr;
  ProgressBar* progress = nullptr;
  std::function<int()> stop;
};
RunResult run_experiment(Runner& runner, const Plan& plan, uint64_t samples, uint64_t seed, bool per_sample,
                         const RunControl& control, uint64_t first_sample = 0);
RunResult run_experiment(Runner& runner, const Plan& plan, uint64_t samples, uint64_t seed, const StatsOptions& stats,
                         const RunControl& control, uint64_t first_sample = 0);
// The same over any host back-end: `host` runs every group the device
// back-end (stats.device) does not take; `paths` name the entries.
RunResult run_experiment(Backend& host, const std::vector<PathChoice>& paths, const Plan& plan, uint64_t samples,
                         uint64_t seed, const StatsOptions& stats, const RunControl& control,
                         uint64_t first_sample = 0);
// Units of work of a run for a progress bar: samples weighted by their cost.
double run_work(const Plan& plan, uint64_t samples);

// Memory a run holds at its peak, estimated before anything is allocated:
// a batch of the group that needs most, every sample's metric values of
// one group (exact quantiles) or its sketches, and with per_sample every
// value of every group in the report.
struct RunMemory {
  uint64_t batch = 0;       // the batch's samples, gold, outputs and values
  uint64_t statistics = 0;  // one group's metric values (all its samples), or its sketches
  uint64_t per_sample = 0;  // the report's per-sample values
  uint64_t total() const { return batch + statistics + per_sample; }
};
RunMemory run_memory(const Plan& plan, uint64_t samples, uint64_t batch, bool per_sample,
                     Quantiles quantiles = Quantiles::kExact);
// Memory of one sample and its gold (inspect --export holds them all).
uint64_t sample_memory(const Configuration& config);

// The axes of a task's report entry: the configuration's, path and method.
nlohmann::json entry_axes(const Group& group, const Task& task, const std::vector<PathChoice>& paths);

}  // namespace chunkinv

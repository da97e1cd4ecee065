// The sample pipeline on the GPU (docs/design.md, "The pipeline on the
// GPU"): for a group it supports, every stage of the host's sample loop runs
// on the device: the inputs drawn by the same Philox counters
// (inputs/device_families), the FP64 gold in the host's operation order and
// the metrics (metrics/device_metrics), the kernel path's own launch, and
// the statistics folded into sketches there (metrics/device_sketch). Only
// the sketches' states come back. They equal, bit for bit, the states the
// host's loop folds from the same samples (StatsSink with sketch
// quantiles), so a report does not depend on which pipeline made it, nor on
// how many devices shared the samples.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "driver/pipeline_work.hpp"
#include "driver/runner.hpp"
#include "metrics/sketch.hpp"

namespace chunkinv {

// Whether `group` can run whole on the GPU; else a one-line reason. It can
// when the build has CUDA and a usable GPU, the family is drawn on the
// device (floor, model_like, weak_decay_correlated), and every entry is the
// gold's own, the gold path with method neumann, or the kernel path
// (any version and padding) with method neumann, all at their defaults.
bool device_pipeline_supports(const Group& group, const std::vector<PathChoice>& paths, std::string* why);

// The devices `--devices` names: "all" (every usable GPU) or indices
// "0,2,...": each once, each a usable device. UsageError otherwise.
std::vector<int> parse_devices(const std::string& text);

// The device back-end: one worker per device, its buffers and sketches kept
// from call to call.
class DevicePipeline final : public Backend {
 public:
  DevicePipeline(std::vector<PathChoice> paths, std::vector<int> devices);
  ~DevicePipeline();
  DevicePipeline(const DevicePipeline&) = delete;
  DevicePipeline& operator=(const DevicePipeline&) = delete;

  // The states [task][metric] (the group's task order, each task's metric
  // order) of samples `range` of `group`. The range is split into one
  // contiguous part per device in device order and the parts' states merged
  // in that order: the result is the states of the samples in index order,
  // whatever the number of devices.
  std::vector<std::vector<SketchState>> fold(const Group& group, uint64_t seed, SampleRange range);

  // A group it can run whole: sketch statistics alone (no stop rule, which
  // is checked sample by sample; no per-sample values, no worst samples) and
  // device_pipeline_supports.
  bool takes(const Group& group, const StatsOptions& stats, std::string* why) const override;
  // fold() in rounds of kRound samples, each absorbed by the sink as it
  // comes, so that a long group is saved, drawn and stoppable as it goes.
  void run(const Group& group, uint64_t seed, SampleRange range, Sink& sink) override;
  static constexpr uint64_t kRound = uint64_t(1) << 24;  // about a second on one H200

  const std::vector<int>& devices() const { return devices_; }

  // Each stage's time, for the roofline (bench --pipeline) and tuning:
  // while on, every batch's stages are timed with events on the worker's
  // stream, a synchronisation a batch, and a device keeps one worker and one
  // stream (the inputs no longer drawn beside the batch before), so the
  // times add up to the wall time but the overlap is lost. Their totals
  // accumulate over fold() calls until set again. CHUNKINV_PIPELINE_STAGES
  // in the environment turns it on from the start and prints each part's
  // times on stderr.
  struct StageTime {
    std::string name;   // as the pipeline names its launches: inputs, gold, kernel, metrics(...), fold
    double ms = 0;      // summed over batches and devices
    uint64_t samples = 0;
  };
  void time_stages(bool on);
  // Stages in the order they run, one line a name (a name that recurs in a
  // batch, as fold does for each entry, summed).
  const std::vector<StageTime>& stage_times() const { return stage_times_; }
  // What a group it takes asks of each stage (the launches it makes and the
  // entries' costlier values), for the work model of docs/roofline.md.
  PipelineWorkShape work_shape(const Group& group) const;
  // At most `samples` a batch (0: by device memory alone, about 2 GiB of
  // buffers a worker): tests take many small batches through the two
  // input sets.
  void set_batch_cap(uint64_t samples) { batch_cap_ = samples; }

  struct Worker;  // one device's stream, buffers and sketches (device_pipeline.cu)

 private:
  std::vector<PathChoice> paths_;
  std::vector<int> devices_;
  uint64_t batch_cap_ = 0;
  bool time_stages_ = false;
  std::vector<StageTime> stage_times_;
  std::vector<std::unique_ptr<Worker>> workers_;
};

}  // namespace chunkinv

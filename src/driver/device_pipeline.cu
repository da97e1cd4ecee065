// The GPU pipeline's workers (driver/device_pipeline.hpp): one a device,
// two above C = 32 (workers_per_device). Per worker and batch, nothing
// copied to the host:
//   1. the inputs of samples [first, first + n): keys (BF16 bits), g, beta
//      and fp16(beta) (inputs/device_families), on the inputs' stream into
//      one of two sets, while the worker's stream takes the batch before;
//   2. the gold L and inverse in FP64, fp16(gold L) and the gold's own
//      metrics (evaluate_reference) (metrics/device_metrics);
//   3. the kernel path's 2n tasks of KernelPath::run_batch's launch, in two
//      launches: the kernel's own L and inverse (tasks [0, n)), then its
//      Neumann inverse of the gold L (tasks [n, 2n), no keys in shared
//      memory, so more of them an SM), left out where no chosen metric
//      reads it (run --metrics, docs/design.md "Chosen metrics");
//   4. each entry's metrics into an [n x M] buffer, folded at once into
//      that entry's sketches (metrics/device_sketch). The gold path's
//      Neumann entry is the run on the gold L: the gold path forms the gold
//      L, and the method on it is the same arithmetic. With both the kernel
//      path's entry and the gold path's, one launch computes the two
//      (metrics_pair_on_device: shared operands and sums) where that pays.
//   2-4 on the worker's stream, after an event that the inputs are drawn.
// After the last batch the sketches' states come back. Stream order orders
// stages 2-4: a stage's buffer is rewritten only by the next batch's same
// stage, after everything before it on the stream; an input set is
// rewritten two batches on, after an event that the kernel (its last
// reader) is done with it.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>

#include <cuda_runtime.h>

#include "core/error.hpp"
#include "core/progress.hpp"
#include "driver/device_pipeline.hpp"
#include "driver/pipeline_work.hpp"
#include "gpu/buffers.cuh"
#include "gpu/check.cuh"
#include "inputs/device_families.hpp"
#include "metrics/device_metrics.hpp"
#include "metrics/device_sketch.hpp"
#include "paths/gpu_paths.hpp"
#include "paths/kernel/kernel_launch.cuh"

namespace chunkinv {

using gpu::detail::DeviceBuffer;

// A batch's inputs, two sets of them: the next batch's are generated on
// the inputs' stream while the worker's stream takes the batch before.
struct InputBuffers {
  DeviceBuffer<uint16_t> keys, beta16;
  DeviceBuffer<double> g, beta;
  cudaEvent_t ready = nullptr, read = nullptr;  // generated; read by the gold and the kernel
};

struct DevicePipeline::Worker {
  int device = 0;
  cudaStream_t stream = nullptr, inputs_stream = nullptr;
  InputBuffers inputs[2];
  DeviceBuffer<uint16_t> gold16, decay, inv_decay, l, inv, sinv;
  DeviceBuffer<double> gold_l, gold_inv, values, values2, reference;
  DeviceBuffer<int> hp;
  DeviceBuffer<float> pmax;
  std::vector<std::unique_ptr<DeviceSketch>> sketches;  // one per task, kept while their metric counts fit

  ~Worker() {
    cudaSetDevice(device);
    for (InputBuffers& b : inputs) {
      if (b.ready) cudaEventDestroy(b.ready);
      if (b.read) cudaEventDestroy(b.read);
    }
    if (inputs_stream) cudaStreamDestroy(inputs_stream);
    if (stream) cudaStreamDestroy(stream);
  }
};

namespace {

// The kernel launch the group's tasks ask for: its version and padding.
struct KernelChoice {
  int version = gpu::kDefaultKernelVersion;
  int pad = 0;
};

bool kernel_task(const Task& t, const std::vector<PathChoice>& paths) {
  return !t.reference && paths[t.path].spec->pipeline_form == PipelineForm::kKernel;
}

// Whether the task's entry reports the metric (run --metrics).
bool reports(const Task& t, const char* name) { return t.metrics->index(name) != MetricSet::npos; }

int option_int(const PathOptions& o, const char* name, int fallback) {
  const auto it = o.find(name);
  return it == o.end() ? fallback : std::stoi(it->second);
}

KernelChoice kernel_choice(const Group& g, const std::vector<PathChoice>& paths) {
  KernelChoice k;
  for (const Task& t : g.tasks) {
    if (!kernel_task(t, paths)) continue;
    k.version = option_int(paths[t.path].options, "version", gpu::kDefaultKernelVersion);
    k.pad = option_int(paths[t.path].options, "pad", 0);
  }
  return k;
}

// What the group's entries ask of the stages (run --metrics): the gold's own
// entry; the method's run on the gold L (the gold path's entry, and the
// kernel path's inv_gold_l and gold_l_* values); each entry's costlier values.
// run_part launches by it, and bench --pipeline's work model counts by it.
PipelineWorkShape work_shape_of(const Group& group, const std::vector<PathChoice>& paths) {
  PipelineWorkShape s;
  s.chunk = group.config.chunk;
  s.dim = group.config.dim;
  s.gate_width = generated_gate_width(group.config);
  if (const auto draw = device_draw_of(group.config, nullptr)) s.family = draw->kind;
  const KernelChoice k = kernel_choice(group, paths);
  s.kernel_version = k.version;
  s.pad = k.pad;
  s.reference = false;
  s.gold_run = false;
  for (const Task& t : group.tasks) {
    s.folded_values += int(t.metrics->size());
    if (t.reference) {
      s.reference = true;
      continue;
    }
    const bool kernel = kernel_task(t, paths);
    PipelineWorkShape::Entry& e = kernel ? s.kernel_entry : s.gold_entry;
    e.present = true;
    e.l_rel_rmse = reports(t, "l_rel_rmse");
    e.method_only = reports(t, "inv_method_only_rel_rmse");
    e.residual = reports(t, "inverse_residual");
    e.l_finite = reports(t, "l_finite");
    if (!kernel) s.gold_run = true;
    else
      for (const char* name : {"inv_gold_l_rel_rmse", "gold_l_highest_power", "gold_l_power_max"})
        s.gold_run |= reports(t, name);
  }
  s.gold_l_fp16 = s.gold_run;
  return s;
}

// Samples per batch: device memory of about 2 GiB per worker for the batch's buffers.
uint64_t batch_samples(const Configuration& c, int gate_width) {
  const uint64_t C = uint64_t(c.chunk), d = uint64_t(c.dim), gw = uint64_t(gate_width);
  const uint64_t per_sample = C * d * 2 + C * gw * (8 + 2 * 2) + C * (8 + 2) + C * C * (2 * 8 + 4 * 2) +
                              uint64_t(gpu::kNeumannMetricCount) * 8 + 2 * (4 + 4);
  return std::clamp<uint64_t>((uint64_t(2) << 30) / per_sample, 1024, uint64_t(1) << 18);
}

// Stage times (DevicePipeline::time_stages): each batch's stages timed with
// events on the worker's stream (a synchronisation per batch), their totals
// kept by name in the order the stages run. Off by default: the events'
// synchronisation would cost overlap between batches.
class StageClock {
 public:
  explicit StageClock(bool on) : on_(on) {}
  ~StageClock() {
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
  }
  // Marks the end of stage `name` (the start of the batch: name null).
  void mark(const char* name, cudaStream_t st) {
    if (!on_) return;
    if (next_ == events_.size()) {
      cudaEvent_t e;
      CUDA_CHECK(cudaEventCreate(&e));
      events_.push_back(e);
      names_.emplace_back();
    }
    if (name) names_[next_] = name;
    CUDA_CHECK(cudaEventRecord(events_[next_++], st));
  }
  // The end of a batch of `samples`: adds each stage's time.
  void batch(uint64_t samples) {
    if (!on_ || next_ == 0) return;
    CUDA_CHECK(cudaEventSynchronize(events_[next_ - 1]));
    for (size_t i = 1; i < next_; ++i) {
      float ms = 0.0f;
      CUDA_CHECK(cudaEventElapsedTime(&ms, events_[i - 1], events_[i]));
      const size_t k = stage(names_[i]);
      times_[k].ms += ms;
      if (!counted_[k]) times_[k].samples += samples;  // a name that recurs in a batch counts its samples once
      counted_[k] = true;
    }
    std::fill(counted_.begin(), counted_.end(), false);
    next_ = 0;
  }
  const std::vector<DevicePipeline::StageTime>& times() const { return times_; }
  void print(int device, int chunk, uint64_t samples) const {
    if (!on_ || samples == 0) return;
    std::string line = "pipeline stages, device " + std::to_string(device) + ", C = " + std::to_string(chunk) + ", " +
                       std::to_string(samples) + " samples, ns a sample:";
    double total = 0.0;
    for (const auto& t : times_) {
      const double ns = t.ms * 1e6 / double(samples);
      total += ns;
      char buf[96];
      std::snprintf(buf, sizeof buf, " %s %.2f,", t.name.c_str(), ns);
      line += buf;
    }
    char buf[64];
    std::snprintf(buf, sizeof buf, " total %.2f", total);
    std::fprintf(stderr, "%s%s\n", line.c_str(), buf);
  }

 private:
  size_t stage(const std::string& name) {
    for (size_t k = 0; k < times_.size(); ++k)
      if (times_[k].name == name) return k;
    times_.push_back({name, 0.0, 0});
    counted_.push_back(false);
    return times_.size() - 1;
  }
  bool on_;
  size_t next_ = 0;
  std::vector<cudaEvent_t> events_;
  std::vector<std::string> names_;
  std::vector<DevicePipeline::StageTime> times_;
  std::vector<bool> counted_;  // times_[k]'s samples added this batch
};

// Workers a device: above C = 32 two, each taking half of a round's part
// of the device (contiguous, merged in order, so the same states), their
// launches filling the tails of each other's; run 91 (docs/notes/gpu-notes.md),
// the peer's work, 8e6 samples at C = 64: 2.28 s against 2.32-2.37 with
// one, 2e7 at C = 32 2.19 against 2.22-2.23; at C = 16 1.72-1.75 against
// 1.68-1.73, so one there. One while the stages are timed.
constexpr int kWorkersPerDevice = 2;
int workers_per_device(int chunk, bool staged) { return chunk > 32 && !staged ? kWorkersPerDevice : 1; }

}  // namespace

DevicePipeline::DevicePipeline(std::vector<PathChoice> paths, std::vector<int> devices)
    : paths_(std::move(paths)), devices_(std::move(devices)),
      time_stages_(std::getenv("CHUNKINV_PIPELINE_STAGES") != nullptr) {
  if (devices_.empty()) throw UsageError("the GPU pipeline: no device to run on");
  for (int i = 0; i < kWorkersPerDevice * int(devices_.size()); ++i) {
    const int d = devices_[size_t(i / kWorkersPerDevice)];
    auto w = std::make_unique<Worker>();
    w->device = d;
    CUDA_CHECK(cudaSetDevice(d));
    CUDA_CHECK(cudaStreamCreateWithFlags(&w->stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&w->inputs_stream, cudaStreamNonBlocking));
    for (InputBuffers& b : w->inputs) {
      CUDA_CHECK(cudaEventCreateWithFlags(&b.ready, cudaEventDisableTiming));
      CUDA_CHECK(cudaEventCreateWithFlags(&b.read, cudaEventDisableTiming));
    }
    workers_.push_back(std::move(w));
  }
}

DevicePipeline::~DevicePipeline() = default;

PipelineWorkShape DevicePipeline::work_shape(const Group& group) const { return work_shape_of(group, paths_); }

namespace {

void run_part(DevicePipeline::Worker&, const Group&, const std::vector<PathChoice>&, uint64_t, SampleRange, uint64_t,
              bool, std::vector<std::vector<SketchState>>&, std::vector<DevicePipeline::StageTime>&);

}  // namespace

std::vector<std::vector<SketchState>> DevicePipeline::fold(const Group& group, uint64_t seed, SampleRange range) {
  // Workers each device takes (workers_ holds kWorkersPerDevice a device, in device order).
  const int per = workers_per_device(group.config.chunk, time_stages_);
  std::vector<Worker*> active;
  for (size_t i = 0; i < workers_.size(); ++i)
    if (int(i % kWorkersPerDevice) < per) active.push_back(workers_[i].get());
  const size_t nd = active.size();
  std::vector<std::vector<std::vector<SketchState>>> parts(nd);
  std::vector<std::vector<StageTime>> times(nd);
  std::vector<std::exception_ptr> errors(nd);
  auto part_range = [&](size_t i) {
    const uint64_t a = range.count * i / nd, b = range.count * (i + 1) / nd;  // floor(i N / D): contiguous, in order
    return SampleRange{range.first + a, b - a};
  };
  auto work = [&](size_t i) {
    try {
      run_part(*active[i], group, paths_, seed, part_range(i), batch_cap_, time_stages_, parts[i], times[i]);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  };
  if (nd == 1) {
    work(0);
  } else {
    std::vector<std::thread> threads;
    for (size_t i = 0; i < nd; ++i) threads.emplace_back(work, i);
    for (auto& t : threads) t.join();
  }
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  for (const auto& part : times)  // by name, in the order the stages first ran
    for (const StageTime& t : part) {
      auto it = std::find_if(stage_times_.begin(), stage_times_.end(),
                             [&](const StageTime& s) { return s.name == t.name; });
      if (it == stage_times_.end()) {
        stage_times_.push_back(t);
      } else {
        it->ms += t.ms;
        it->samples += t.samples;
      }
    }
  // The parts in sample order: merging is exact, and keeps the first zero's sign.
  std::vector<std::vector<SketchState>> out = std::move(parts[0]);
  for (size_t i = 1; i < nd; ++i)
    for (size_t t = 0; t < out.size(); ++t)
      for (size_t m = 0; m < out[t].size(); ++m) out[t][m].merge(parts[i][t][m]);
  return out;
}

namespace {

void run_part(DevicePipeline::Worker& w, const Group& group, const std::vector<PathChoice>& paths, uint64_t seed,
              SampleRange range, uint64_t batch_cap, bool staged, std::vector<std::vector<SketchState>>& states,
              std::vector<DevicePipeline::StageTime>& times) {
  CUDA_CHECK(cudaSetDevice(w.device));
  const Configuration& cfg = group.config;
  const int C = cfg.chunk, d = cfg.dim, gw = generated_gate_width(cfg);
  const size_t csq = size_t(C) * C;
  const KernelChoice kc = kernel_choice(group, paths);
  const int cp = std::max((C + 15) / 16 * 16, kc.pad);
  const gpu::KernelLaunch launch = gpu::plan_launch(cp, d), gold_l_launch = gpu::plan_gold_l_launch(cp, d);
  const uint64_t batch = std::min(batch_samples(cfg, gw), batch_cap ? batch_cap : UINT64_MAX);
  const size_t cap = size_t(std::min<uint64_t>(batch, std::max<uint64_t>(range.count, 1)));
  cudaStream_t st = w.stream;

  // One sketch set per task, its metric count the task's.
  const size_t nt = group.tasks.size();
  if (w.sketches.size() < nt) w.sketches.resize(nt);
  for (size_t t = 0; t < nt; ++t) {
    const int nm = int(group.tasks[t].metrics->size());
    if (int(group.tasks[t].evaluated->size()) !=
        (group.tasks[t].reference ? gpu::kReferenceMetricCount : gpu::kNeumannMetricCount))
      throw std::logic_error("the GPU pipeline: an entry's metrics are not the ones the device computes");
    if (!w.sketches[t] || w.sketches[t]->metrics() != nm) w.sketches[t] = std::make_unique<DeviceSketch>(nm);
    else w.sketches[t]->reset();
  }

  // Inputs on their own stream, two batches' sets, where the stages are not
  // timed (the clock's marks are on the worker's stream).
  const bool overlap = !staged;
  DeviceSampleBuffers ins[2];
  for (int b = 0; b < (overlap ? 2 : 1); ++b) {
    InputBuffers& ib = w.inputs[b];
    ins[b].keys = ib.keys.get(cap * C * d);
    ins[b].g = ib.g.get(cap * C * gw);
    ins[b].beta = ib.beta.get(cap * C);
    ins[b].beta_fp16 = ib.beta16.get(cap * C);
  }
  cudaStream_t in_st = overlap ? w.inputs_stream : st;
  if (overlap) {  // the sets are free once the worker's stream is past its earlier work
    for (InputBuffers& ib : w.inputs) CUDA_CHECK(cudaEventRecord(ib.read, st));
  }
  double* gold_l = w.gold_l.get(cap * csq);
  double* gold_inv = w.gold_inv.get(cap * csq);
  uint16_t* gold16 = w.gold16.get(cap * csq);
  uint16_t* decay = w.decay.get(cap * C * gw);
  uint16_t* inv_decay = w.inv_decay.get(cap * C * gw);
  uint16_t* l = w.l.get(cap * csq);
  uint16_t* inv = w.inv.get(cap * csq);
  uint16_t* sinv = w.sinv.get(cap * csq);
  int* hp = w.hp.get(2 * cap);
  float* pmax = w.pmax.get(2 * cap);
  double* values = w.values.get(cap * gpu::kNeumannMetricCount);
  const PipelineWorkShape shape = work_shape_of(group, paths);
  double* reference = shape.reference ? w.reference.get(cap * gpu::kReferenceMetricCount) : nullptr;
  // One kernel path's entry and one gold path's: their metrics in one launch.
  const auto entries = [&](bool kernel) {
    return std::count_if(group.tasks.begin(), group.tasks.end(),
                         [&](const Task& t) { return !t.reference && kernel_task(t, paths) == kernel; });
  };
  const bool pair = entries(true) == 1 && entries(false) == 1 && gpu::pair_pays(C);
  const bool gold_run = shape.gold_run;
  std::vector<std::vector<int>> columns(nt);  // each task's values in the rows the device writes
  for (size_t t = 0; t < nt; ++t)
    for (size_t k : group.tasks[t].pick) columns[t].push_back(int(k));
  double* values2 = pair ? w.values2.get(cap * gpu::kNeumannMetricCount) : nullptr;

  timeline("GPU pipeline: buffers and sketches ready");
  StageClock clock(staged);
  for (uint64_t done = 0, k = 0; done < range.count; ++k) {
    const int n = int(std::min<uint64_t>(cap, range.count - done));
    const int b = overlap ? int(k & 1) : 0;
    const DeviceSampleBuffers& in = ins[b];
    InputBuffers& ib = w.inputs[b];
    clock.mark(nullptr, st);
    if (overlap) CUDA_CHECK(cudaStreamWaitEvent(in_st, ib.read, 0));
    generate_on_device(cfg, seed, range.first + done, n, in, in_st);
    if (overlap) {
      CUDA_CHECK(cudaEventRecord(ib.ready, in_st));
      CUDA_CHECK(cudaStreamWaitEvent(st, ib.ready, 0));
    }
    clock.mark("inputs", st);

    gpu::GoldOnDevice go;
    go.n = n;
    go.chunk = C;
    go.dim = d;
    go.gate_width = gw;
    go.keys = in.keys;
    go.g = in.g;
    go.beta = in.beta;
    go.gold_l = gold_l;
    go.gold_inv = gold_inv;
    go.gold_l_fp16 = gold_run ? gold16 : nullptr;
    go.reference = reference;
    gpu::gold_on_device(go, st);
    clock.mark("gold", st);

    // The kernel: its L and inverse, and its inverse of the gold L.
    gpu::KernelArgs a{};
    a.n = n;
    a.chunk = C;
    a.dim = d;
    a.cp = cp;
    a.npow = 0;
    a.with_keys = true;
    a.l_only = false;
    a.warp_smem = launch.warp_smem;
    a.keys = in.keys;
    a.gate_width = gw;
    a.g = in.g;
    a.beta = in.beta_fp16;
    a.gold_l = gold16;
    a.decay = decay;
    a.inv_decay = inv_decay;
    a.l = l;
    a.inv = inv;
    a.gold_l_inv = sinv;
    a.highest_power = hp;
    a.power_max = pmax;
    a.powers = nullptr;
    // The whole samples, then the runs on the gold L, each launch with the
    // shared memory its tasks use (the runs hold no keys: more warps an SM).
    auto run = [&](const gpu::KernelArgs& args, const gpu::KernelLaunch& l) {
      if (kc.version == 2) gpu::launch_kernel_path_v2(args, n, st);
      else gpu::launch_kernel_path(args, l, n, st);
    };
    a.task_end = n;
    run(a, launch);
    if (gold_run) {
      gpu::KernelArgs b = a;
      b.task_first = n;
      b.task_end = 2 * n;
      b.warp_smem = gold_l_launch.warp_smem;
      run(b, gold_l_launch);
    }
    if (overlap) CUDA_CHECK(cudaEventRecord(ib.read, st));  // the last reader of the inputs
    clock.mark("kernel", st);

    const gpu::GoldRead gold{n, C, gold_l, gold_inv};
    // The kernel path's entry and the gold path's, as the device holds them.
    gpu::PathOnDevice kernel_entry;
    kernel_entry.decays = C * gw;
    kernel_entry.decay = decay;
    kernel_entry.inv_decay = inv_decay;
    kernel_entry.l_fp16 = l;
    kernel_entry.inv = inv;
    kernel_entry.highest_power = hp;
    kernel_entry.power_max = pmax;
    if (gold_run) {
      kernel_entry.gold_l_inv = sinv;
      kernel_entry.gold_l_highest_power = hp + n;
      kernel_entry.gold_l_power_max = pmax + n;
    }
    gpu::PathOnDevice gold_entry;  // the gold L, and the method's run on it
    gold_entry.l_f64 = gold_l;
    gold_entry.inv = sinv;
    gold_entry.highest_power = hp + n;
    gold_entry.power_max = pmax + n;
    gold_entry.gold_l_inv = sinv;
    gold_entry.gold_l_highest_power = hp + n;
    gold_entry.gold_l_power_max = pmax + n;
    for (auto [e, asked] : {std::pair{&kernel_entry, &shape.kernel_entry}, std::pair{&gold_entry, &shape.gold_entry}}) {
      e->l_rel_rmse = asked->l_rel_rmse;  // the costlier values only where asked for
      e->method_only = asked->method_only;
      e->residual = asked->residual;
      e->l_finite = asked->l_finite;
    }
    if (pair) {
      gpu::metrics_pair_on_device(gold, kernel_entry, gold_entry, values, values2, st);
      clock.mark("metrics(kernel, gold)", st);
    }
    for (size_t t = 0; t < nt; ++t) {
      const Task& task = group.tasks[t];
      const double* v = values;
      if (task.reference) {  // the gold's stage computed them
        v = reference;
      } else if (pair) {
        v = kernel_task(task, paths) ? values : values2;
      } else {
        const bool kernel = kernel_task(task, paths);
        gpu::metrics_on_device(gold, kernel ? kernel_entry : gold_entry, values, st);
        clock.mark(kernel ? "metrics(kernel)" : "metrics(gold)", st);
      }
      const int row = task.reference ? gpu::kReferenceMetricCount : gpu::kNeumannMetricCount;
      w.sketches[t]->fold(v, size_t(n), st, row, columns[t]);
      clock.mark("fold", st);
    }
    clock.batch(uint64_t(n));
    if (done == 0) timeline("GPU pipeline: first batch queued");
    done += uint64_t(n);
  }
  if (std::getenv("CHUNKINV_PIPELINE_STAGES")) clock.print(w.device, C, range.count);
  times = clock.times();
  timeline("GPU pipeline: last batch queued");
  states.assign(nt, {});
  for (size_t t = 0; t < nt; ++t)
    for (int m = 0; m < w.sketches[t]->metrics(); ++m) states[t].push_back(w.sketches[t]->state(m));
  timeline("GPU pipeline: sketches back");
}

}  // namespace

}  // namespace chunkinv

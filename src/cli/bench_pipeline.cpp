// chunkinv bench --pipeline: the GPU pipeline of `run --pipeline device`,
// stage by stage, against the device's peak rates (docs/roofline.md). For
// each configuration:
//   1. the first --validate samples through the device pipeline and through
//      the host's loop: their report entries (sketch quantiles, with their
//      states) must be equal bit for bit, or nothing is timed;
//   2. the stages timed apart (DevicePipeline::time_stages: events around
//      each launch, one stream), ns a sample each;
//   3. the pipeline as `run` drives it (stages overlapped), --repeat runs
//      of --samples samples, wall time, the median;
//   4. each stage's work a sample (driver/pipeline_work: FLOPs by precision,
//      bytes) and its floor at the device's peaks (driver/roofline): which
//      resource bounds it, and how far the measured time is from that bound.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "api/run.hpp"
#include "cli/bench.hpp"
#include "cli/commands.hpp"
#include "core/error.hpp"
#include "core/output_file.hpp"
#include "driver/device_pipeline.hpp"
#include "driver/roofline.hpp"
#include "driver/runner.hpp"
#include "driver/spec.hpp"
#include "gpu/gpu.hpp"
#include "metrics/metrics.hpp"
#include "report/report.hpp"

namespace chunkinv::cli {
namespace {

constexpr uint64_t kDefaultSamples = uint64_t(1) << 22;
constexpr uint64_t kDefaultValidate = 4096;

nlohmann::json work_json(const StageWork& w) {
  return {{"fp64_flop", w.fp64}, {"fp64_mma_flop", w.fp64_mma}, {"fp16_mma_flop", w.fp16_mma}, {"fp32_flop", w.fp32},
          {"bytes", w.bytes}};
}

nlohmann::json floor_json(const StageFloor& f) {
  return {{"ns", f.ns},           {"bound", f.bound},         {"fp64_ns", f.fp64_ns}, {"fp64_mma_ns", f.fp64_mma_ns},
          {"fp16_mma_ns", f.fp16_mma_ns}, {"fp32_ns", f.fp32_ns}, {"memory_ns", f.memory_ns}};
}

// The entries' names, path/method, as the report gives them.
std::vector<std::string> entry_names(const Group& g, const std::vector<PathChoice>& paths) {
  std::vector<std::string> names;
  for (const Task& t : g.tasks) {
    const auto ax = entry_axes(g, t, paths);
    names.push_back(ax["path"].get<std::string>() + "/" + ax["method"].get<std::string>());
  }
  return names;
}

}  // namespace

void bench_pipeline(const BenchArgs& a) {
  if (!a.cpu_samples_text.empty() || !a.batch_text.empty() || !a.seq_len_text.empty() || !a.heads_text.empty() ||
      !a.key_dim_text.empty() || !a.value_dim_text.empty() || !a.block_text.empty() || !a.gating.empty() ||
      !a.initial_state.empty() || !a.kernel_version_text.empty() || !a.chunk_text.empty() || !a.variants_text.empty() ||
      !a.storage.empty() || !a.max_memory.empty())
    throw UsageError("bench --pipeline takes -a, --paths, --metrics, --samples, --validate, --repeat, --seed, --threads, "
                     "--format, -o and -q");
  const uint64_t samples = a.samples_text.empty() ? kDefaultSamples : a.samples;
  const uint64_t validate = a.validate_text.empty() ? kDefaultValidate : a.validate;
  if (validate == 0) throw UsageError("bench --pipeline: --validate 0: the pipeline is checked before it is timed");
  ExperimentSpec spec;  // the axes are read (and refused) first, then the GPU looked for
  spec.grids.push_back({{"family", "model_like"}, {"dim", 128}, {"chunk", {16, 32, 64}}});
  for (const auto& ax : a.axes) apply_axis(spec, ax);
  const std::vector<Point> points = expand(spec);
  RunnerOptions ro;
  ro.threads = a.threads;
  ro.metrics = parse_metric_list(a.metrics, "--metrics");
  std::vector<PathChoice> paths = parse_paths(a.paths == "all" ? "gold,kernel" : a.paths);
  if (const std::string why = gpu::unavailable_reason(); !why.empty())
    throw UsageError("bench --pipeline: no CUDA GPU: " + why);
  Runner runner(std::move(paths), ro);
  const Plan plan = runner.plan(points);
  if (plan.groups.empty()) throw UsageError("bench --pipeline: no configuration to run");
  for (const Group& g : plan.groups)
    if (std::string why; !device_pipeline_supports(g, runner.paths(), &why))
      throw UsageError(fmt::format("bench --pipeline: {} cannot run on the GPU pipeline: {}", api::describe(g.config), why));
  std::optional<OutputFile> out;  // a bad destination fails now, not after the timings
  if (!a.output.empty()) out.emplace(a.output);

  const gpu::DeviceInfo device = gpu::devices().at(0);
  const std::optional<DevicePeaks> peaks = device_peaks(device);
  DevicePipeline dp(runner.paths(), {device.index});
  const bool text = !a.quiet && a.format == "text" && !(out && out->to_stdout());
  nlohmann::json configs = nlohmann::json::array();
  bool all_equal = true;
  if (text) {
    fmt::print("bench --pipeline: {} (cc {}.{}), {} SMs at {:.0f} MHz", device.name, device.cc_major, device.cc_minor,
               device.multiprocessors, device.clock_khz / 1e3);
    if (peaks)
      fmt::print("; peaks FP64 {:.1f} TFLOP/s, FP64 MMA {:.1f}, FP16 MMA {:.0f}, memory {:.2f} TB/s\n", peaks->fp64 * 1e-12,
                 peaks->fp64_mma * 1e-12, peaks->fp16_mma * 1e-12, peaks->bytes * 1e-12);
    else
      fmt::print("; no published rates for this architecture: no floors\n");
  }

  for (const Group& g : plan.groups) {
    const std::vector<std::string> names = entry_names(g, runner.paths());
    // 1. The device's report entries against the host loop's.
    Plan one;
    one.groups.push_back(g);
    StatsOptions so;
    so.quantiles = Quantiles::kSketch;
    so.keep_state = true;
    const RunResult host = run_experiment(runner, one, validate, a.seed, so, RunControl{});
    so.device = &dp;
    const RunResult on_device = run_experiment(runner, one, validate, a.seed, so, RunControl{});
    size_t equal = 0;
    for (size_t i = 0; i < host.entries.size() && i < on_device.entries.size(); ++i)
      equal += entry_to_json(host.entries[i]) == entry_to_json(on_device.entries[i]);
    const bool validated = on_device.on_device.size() == 1 && equal == host.entries.size() &&
                           host.entries.size() == on_device.entries.size();
    all_equal &= validated;
    nlohmann::json c = {{"config", api::describe(g.config)},
                        {"chunk", g.config.chunk},
                        {"dim", g.config.dim},
                        {"family", g.config.family},
                        {"entries", names},
                        {"metrics", a.metrics.empty() ? "every one" : a.metrics},
                        {"validate", {{"samples", validate}, {"entries", host.entries.size()}, {"equal", equal},
                                      {"on_device", on_device.on_device.size() == 1}}}};
    if (text)
      fmt::print("\n{}: {}; {}\n  validated: the first {} samples' {} report entries {} the host loop's ({} of {} equal)\n",
                 api::describe(g.config), fmt::join(names, ", "), a.metrics.empty() ? "every metric" : "metrics " + a.metrics,
                 validate, host.entries.size(), validated ? "equal" : "DIFFER FROM", equal, host.entries.size());
    if (!validated) {
      configs.push_back(c);
      continue;
    }

    // 2. Each stage timed apart.
    dp.time_stages(true);
    dp.fold(g, a.seed, {0, samples});
    const std::vector<DevicePipeline::StageTime> times = dp.stage_times();
    dp.time_stages(false);

    // 3. The pipeline as run drives it.
    std::vector<double> runs_ms;
    for (int r = 0; r < a.repeat; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      dp.fold(g, a.seed, {0, samples});
      runs_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    const double median_ms = median_of(runs_ms), rate = double(samples) / (median_ms * 1e-3);

    // 4. The roofline.
    const PipelineWorkShape shape = dp.work_shape(g);
    nlohmann::json stages = nlohmann::json::array();
    double total_floor_ns = 0;
    StageWork total_work;
    if (text)
      fmt::print("  end to end: {:.3e} samples/s (median of {} runs of {} samples, {:.1f} ms; stages overlapped)\n"
                 "  {:<22} {:>9} {:>7} {:>9} {:<9} {:>9} {:>11} {:>8}\n",
                 rate, runs_ms.size(), samples, median_ms, "stage (timed apart)", "ns/sample", "share", "floor ns",
                 "bound", "of floor", "FP64 TFLOP/s", "GB/s");
    double staged_ns = 0;
    for (const auto& t : times) staged_ns += t.ms * 1e6 / double(t.samples);
    for (const auto& t : times) {
      const double ns = t.ms * 1e6 / double(t.samples);
      std::optional<StageWork> counted;  // no work model for this shape (docs/roofline.md): the time alone
      try {
        counted = stage_work(t.name, shape);
      } catch (const std::invalid_argument&) {
      }
      const StageWork w = counted.value_or(StageWork{});
      nlohmann::json s = {{"name", t.name}, {"ns", ns}, {"samples", t.samples}, {"work", work_json(w)}};
      total_work += w;
      const double fp64_tflops = (w.fp64 + w.fp64_mma) / ns * 1e-3, gbs = w.bytes / ns;
      s["fp64_tflops"] = num(fp64_tflops);
      s["gb_per_s"] = num(gbs);
      if (peaks && counted) {
        const StageFloor f = stage_floor(w, *peaks);
        total_floor_ns += f.ns;
        s["floor"] = floor_json(f);
        s["fraction_of_floor"] = num(f.ns / ns);
        if (text)
          fmt::print("  {:<22} {:>9.2f} {:>6.1f}% {:>9.2f} {:<9} {:>8.1f}% {:>11.2f} {:>8.0f}\n", t.name, ns,
                     100 * ns / staged_ns, f.ns, f.bound, 100 * f.ns / ns, fp64_tflops, gbs);
      } else if (text) {
        fmt::print("  {:<22} {:>9.2f} {:>6.1f}% {:>9} {:<9} {:>9} {:>11.2f} {:>8.0f}\n", t.name, ns, 100 * ns / staged_ns,
                   "-", "-", "-", fp64_tflops, gbs);
      }
      stages.push_back(s);
    }
    c["samples"] = samples;
    c["runs_ms"] = runs_ms;
    c["median_ms"] = num(median_ms);
    c["samples_per_s"] = num(rate);
    c["stages"] = stages;
    c["staged_ns"] = num(staged_ns);
    c["work"] = work_json(total_work);
    if (peaks) {
      const StageFloor f = stage_floor(total_work, *peaks);
      c["floor"] = floor_json(f);
      c["sum_of_stage_floors_ns"] = total_floor_ns;
    }
    if (text) {
      fmt::print("  {:<22} {:>9.2f} {:>7} {:>9.2f}\n", "total", staged_ns, "", total_floor_ns);
      fmt::print("  overlapped: {:.2f} ns a sample, {:.1f}% of the stages timed apart\n", 1e9 / rate,
                 100 * (1e9 / rate) / staged_ns);
    }
    configs.push_back(c);
  }

  nlohmann::json j = {{"devices", device_names()}, {"configurations", configs}, {"seed", a.seed}, {"repeat", a.repeat}};
  if (peaks)
    j["peaks"] = {{"fp64_flops", peaks->fp64},     {"fp64_mma_flops", peaks->fp64_mma}, {"fp16_mma_flops", peaks->fp16_mma},
                  {"fp32_flops", peaks->fp32},     {"bytes_per_s", peaks->bytes},       {"clock_khz", device.clock_khz},
                  {"memory_clock_khz", device.memory_clock_khz}, {"memory_bus_bits", device.memory_bus_bits}};
  if (out) out->commit(j.dump(1) + "\n");
  if (!a.quiet && a.format == "json" && !(out && out->to_stdout())) fmt::print("{}\n", j.dump(1));
  if (!all_equal) {
    std::fprintf(stderr, "bench --pipeline: the device pipeline's report differs from the host loop's; not timed\n");
    set_exit_status(1);
  }
}

}  // namespace chunkinv::cli

// The GPU pipeline (driver/device_pipeline) against the host's sample loop:
// the same report, bit for bit (every statistic and every sketch state), for
// every family it draws and both gatings; the same states whatever the
// number of workers the samples are split over; and, without a GPU, the
// one-line refusals of `run --pipeline` and `--devices`.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "driver/device_pipeline.hpp"
#include "driver/runner.hpp"
#include "driver/spec.hpp"
#include "gpu/gpu_test_common.hpp"
#include "metrics/stats.hpp"
#include "support/shell.hpp"

using namespace chunkinv;

namespace {

std::vector<Point> points_of(const std::vector<std::string>& axes) {
  ExperimentSpec spec;
  for (const auto& a : axes) apply_axis(spec, a);
  return expand(spec);
}

bool same(double a, double b) { return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof a) == 0; }

// The entries of one run through the host's loop or the GPU pipeline.
RunResult run_with(const std::vector<Point>& points, const std::vector<PathChoice>& paths, uint64_t samples,
                   uint64_t seed, Backend* device, uint64_t first = 0, const std::string& metrics = "") {
  RunnerOptions opt;
  opt.batch = 512;
  opt.metrics = parse_metric_list(metrics, "--metrics");
  Runner runner(paths, opt);
  const Plan plan = runner.plan(points);
  StatsOptions stats;
  stats.quantiles = Quantiles::kSketch;
  stats.keep_state = true;
  stats.device = device;
  return run_experiment(runner, plan, samples, seed, stats, RunControl{}, first);
}

// Counts the statistics and states that differ, naming the first few.
size_t differences(const std::vector<ReportEntry>& host, const std::vector<ReportEntry>& dev, const std::string& what) {
  size_t differ = 0, compared = 0;
  EXPECT_EQ(host.size(), dev.size()) << what;
  for (size_t e = 0; e < std::min(host.size(), dev.size()); ++e) {
    EXPECT_EQ(host[e].axes, dev[e].axes) << what;
    EXPECT_EQ(host[e].samples, dev[e].samples) << what;
    EXPECT_EQ(host[e].metrics.size(), dev[e].metrics.size()) << what;
    for (const auto& [name, hs] : host[e].metrics) {
      const Stats& ds = dev[e].metrics.at(name);
      for (const std::string& stat : stat_names()) {
        ++compared;
        if (!same(stat_value(hs, stat), stat_value(ds, stat)) && ++differ <= 5)
          ADD_FAILURE() << what << " " << host[e].axes.dump() << " " << name << "." << stat << ": host "
                        << stat_value(hs, stat) << ", device " << stat_value(ds, stat);
      }
      ++compared;
      if (!(host[e].state.at(name) == dev[e].state.at(name)) && ++differ <= 5)
        ADD_FAILURE() << what << " " << host[e].axes.dump() << " " << name << ": the sketch states differ";
    }
  }
  std::printf("%s: %zu of %zu statistics and states differ\n", what.c_str(), differ, compared);
  return differ;
}

// A back-end that folds the statistics itself, as the GPU pipeline does, made
// of the host's loop: each round's states from a run of its own over that
// range of samples. Through run_experiment it must give the host loop's
// report, so the path of folded states (rounds, the sink, the merge) is
// checked on every machine, GPU or not.
class FoldingBackend final : public Backend {
 public:
  FoldingBackend(std::vector<PathChoice> paths, uint64_t round) : paths_(std::move(paths)), round_(round) {}
  bool takes(const Group&, const StatsOptions& o, std::string* why) const override {
    if (o.quantiles == Quantiles::kSketch) return true;
    *why = "folds sketches only";
    return false;
  }
  void run(const Group& g, uint64_t seed, SampleRange range, Sink& sink) override {
    sink.begin(g, range.count);
    for (uint64_t r = 0; r < range.count; r += round_) {
      const uint64_t k = std::min(round_, range.count - r);
      Runner runner(paths_, RunnerOptions{});
      Plan plan;
      plan.groups = {g};
      StatsOptions stats;
      stats.quantiles = Quantiles::kSketch;
      stats.keep_state = true;
      const RunResult part = run_experiment(runner, plan, k, seed, stats, RunControl{}, range.first + r);
      std::vector<std::vector<SketchState>> states(g.tasks.size());
      for (size_t t = 0; t < g.tasks.size(); ++t)
        for (const MetricInfo& m : g.tasks[t].metrics->infos) states[t].push_back(part.entries.at(t).state.at(m.name));
      sink.absorb(g, states, k);
    }
    sink.end(g);
  }

 private:
  std::vector<PathChoice> paths_;
  uint64_t round_;
};

TEST(Backend, AFoldingBackEndGivesTheHostLoopsReport) {
  const auto paths = parse_paths("gold,emulated");
  const auto points = points_of({"family=[model_like,floor]", "chunk=[16,24]", "method=[neumann,fwdsub_fp32]"});
  const RunResult host = run_with(points, paths, 1000, 9, nullptr, 17);
  FoldingBackend folding(paths, 300);  // rounds of 300, 300, 300, 100
  const RunResult folded = run_with(points, paths, 1000, 9, &folding, 17);
  EXPECT_EQ(folded.on_device.size(), 4u);
  EXPECT_EQ(differences(host.entries, folded.entries, "folded in rounds"), 0u);
  // The exact statistics are the host's alone: the back-end says why, and the host's loop runs every group.
  RunnerOptions opt;
  Runner runner(paths, opt);
  StatsOptions exact;
  exact.device = &folding;
  const RunResult r = run_experiment(runner, runner.plan(points), 50, 9, exact, RunControl{}, 0);
  EXPECT_TRUE(r.on_device.empty());
  ASSERT_EQ(r.on_host_why.size(), 1u);
  EXPECT_EQ(r.on_host_why[0], "folds sketches only");
}

TEST(DevicePipelineGpu, ReportIsTheHostLoopsBitForBit) {
  CHUNKINV_REQUIRE_GPU();
  const auto paths = parse_paths("gold,kernel");
  DevicePipeline device(paths, {0});
  const char* const families[] = {"family=floor", "family=model_like", "family=weak_decay_correlated"};
  for (const char* fam : families) {
    for (const char* gating : {"", "gating=channel"}) {
      if (std::string(fam) == "family=weak_decay_correlated" && *gating) continue;  // it takes no gating axis
      for (int chunk : {2, 16, 33, 64}) {
        std::vector<std::string> axes{fam, "chunk=" + std::to_string(chunk), "dim=" + std::string(chunk == 64 ? "128" : "32")};
        if (*gating) axes.push_back(gating);
        if (std::string(fam) == "family=floor") axes.push_back("decay_floor=[-3,-8]");
        const auto points = points_of(axes);
        const uint64_t n = chunk == 64 ? 600 : 1500;
        const RunResult host = run_with(points, paths, n, 11, nullptr, 3);
        const RunResult dev = run_with(points, paths, n, 11, &device, 3);
        EXPECT_EQ(dev.on_device.size(), points.size()) << "every group on the device";
        EXPECT_EQ(differences(host.entries, dev.entries, std::string(fam) + " " + gating + " C=" + std::to_string(chunk)),
                  0u);
      }
    }
  }
}

// At scale: the sizes where the host loop and the pipeline once parted
// (issue 42: C = 24 at 3 x 10^5 samples, C = 64 at 10^5; an FP16 mma whose
// result is subnormal, modelled with one rounding where the hardware makes
// two). CHUNKINV_PIPELINE_SCALE_SAMPLES sets the samples per configuration
// (default 4,000, seconds; scripts/gpu.sh runs 10^6) and
// CHUNKINV_PIPELINE_SCALE_SEEDS the seeds (default 31337).
TEST(DevicePipelineGpu, AtScaleEqualsTheHostLoop) {
  CHUNKINV_REQUIRE_GPU();
  const char* n_env = std::getenv("CHUNKINV_PIPELINE_SCALE_SAMPLES");
  const char* seeds_env = std::getenv("CHUNKINV_PIPELINE_SCALE_SEEDS");
  const uint64_t n = n_env && *n_env ? std::stoull(n_env) : 4000;
  std::vector<uint64_t> seeds;
  for (std::string rest = seeds_env && *seeds_env ? seeds_env : "31337"; !rest.empty();) {
    const size_t comma = rest.find(',');
    seeds.push_back(std::stoull(rest.substr(0, comma)));
    rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
  }
  const auto paths = parse_paths("gold,kernel");
  DevicePipeline device(paths, {0});
  for (uint64_t seed : seeds)
    for (int chunk : {16, 24, 32, 48, 64}) {
      const auto points = points_of({"family=model_like", "chunk=" + std::to_string(chunk), "decay_floor=-2"});
      const RunResult host = run_with(points, paths, n, seed, nullptr);
      const RunResult dev = run_with(points, paths, n, seed, &device);
      EXPECT_EQ(dev.on_device.size(), points.size()) << "every group on the device";
      EXPECT_EQ(differences(host.entries, dev.entries,
                            "model_like C=" + std::to_string(chunk) + " seed " + std::to_string(seed) + ", " +
                                std::to_string(n) + " samples"),
                0u);
    }
}

// One path alone: its entry's metrics by themselves (the pipeline pairs
// the kernel path's entry with the gold path's only when both are there).
TEST(DevicePipelineGpu, OnePathAloneIsTheHostLoopsBitForBit) {
  CHUNKINV_REQUIRE_GPU();
  for (const char* which : {"kernel", "gold"}) {
    const auto paths = parse_paths(which);
    DevicePipeline device(paths, {0});
    for (int chunk : {5, 16, 64}) {
      const auto points = points_of({"family=model_like", "chunk=" + std::to_string(chunk), "dim=32"});
      const RunResult host = run_with(points, paths, 800, 12, nullptr, 3);
      const RunResult dev = run_with(points, paths, 800, 12, &device, 3);
      EXPECT_EQ(dev.on_device.size(), points.size()) << "every group on the device";
      EXPECT_EQ(differences(host.entries, dev.entries, std::string(which) + " alone C=" + std::to_string(chunk)), 0u);
    }
  }
}

// run --metrics: the device leaves out the work of the metrics not asked
// for (the runs on the gold L, the exact inverse of I + path L, the
// residual, the L error) and folds only the chosen values; they are the
// host's, bit for bit. The host test Run.ChosenMetricsAreTheFullRunsOwn
// holds the host's chosen values to the full run's.
TEST(DevicePipelineGpu, ChosenMetricsAreTheHostLoopsBitForBit) {
  CHUNKINV_REQUIRE_GPU();
  const char* const choices[] = {
      "inv_total_rel_rmse,inv_finite",                   // no run on the gold L, no solve, no residual
      "inv_method_only_rel_rmse,power_max",              // the solve alone
      "inverse_residual,l_rel_rmse,decay_zeros",         // the residual and the L error
      "inv_stable_l_rel_rmse,gold_l_power_max,inv_max_abs",  // the runs on the gold L, the gold's own
  };
  for (const char* which : {"kernel", "gold,kernel"}) {
    const auto paths = parse_paths(which);
    DevicePipeline device(paths, {0});
    for (const char* choice : choices) {
      if (std::string(which) == "kernel" && std::string(choice).find("inv_max_abs") != std::string::npos) continue;
      for (int chunk : {5, 16, 33, 64}) {
        const auto points = points_of({"family=model_like", "chunk=" + std::to_string(chunk), "dim=32"});
        const RunResult host = run_with(points, paths, 700, 13, nullptr, 3, choice);
        const RunResult dev = run_with(points, paths, 700, 13, &device, 3, choice);
        EXPECT_EQ(dev.on_device.size(), points.size()) << "every group on the device";
        EXPECT_EQ(differences(host.entries, dev.entries,
                              std::string(which) + " --metrics " + choice + " C=" + std::to_string(chunk)),
                  0u);
      }
    }
  }
}

TEST(DevicePipelineGpu, WorkersDoNotChangeTheStates) {
  CHUNKINV_REQUIRE_GPU();
  const auto paths = parse_paths("gold,kernel");
  const auto points = points_of({"family=model_like", "chunk=16", "dim=128"});
  Runner runner(paths, RunnerOptions{});
  const Plan plan = runner.plan(points);
  ASSERT_EQ(plan.groups.size(), 1u);
  // Several workers on one device split the samples as several devices do.
  std::vector<int> many{0, 0, 0};
  for (const gpu::DeviceInfo& d : gpu::devices())
    if (d.index > 0) many.push_back(d.index);
  DevicePipeline one(paths, {0}), split(paths, many);
  const SampleRange range{(uint64_t(1) << 33) + 5, 100003};
  const auto a = one.fold(plan.groups[0], 4, range);
  const auto b = split.fold(plan.groups[0], 4, range);
  ASSERT_EQ(a.size(), b.size());
  size_t differ = 0;
  for (size_t t = 0; t < a.size(); ++t)
    for (size_t m = 0; m < a[t].size(); ++m) differ += !(a[t][m] == b[t][m]);
  std::printf("%zu workers against 1: %zu of %zu states differ\n", many.size(), differ, a.size() * a[0].size());
  EXPECT_EQ(differ, 0u);
  // And in two calls (the rounds of a long group), merged.
  auto c = one.fold(plan.groups[0], 4, {range.first, 40000});
  const auto d = one.fold(plan.groups[0], 4, {range.first + 40000, range.count - 40000});
  for (size_t t = 0; t < c.size(); ++t)
    for (size_t m = 0; m < c[t].size(); ++m) {
      c[t][m].merge(d[t][m]);
      EXPECT_TRUE(c[t][m] == a[t][m]) << t << "/" << m;
    }
}

// Batches of 1,000 samples: each batch's inputs are generated into one of
// two sets on their own stream while the worker's stream takes the batch
// before; the states are those of one batch a worker (C = 64 has two
// workers, each with half the range), which they would not be if a set
// were overwritten before the gold and the kernel had read it.
TEST(DevicePipelineGpu, SmallBatchesDoNotChangeTheStates) {
  CHUNKINV_REQUIRE_GPU();
  const auto paths = parse_paths("gold,kernel");
  for (int chunk : {16, 64}) {
    const auto points = points_of({"family=model_like", "chunk=" + std::to_string(chunk), "dim=128"});
    Runner runner(paths, RunnerOptions{});
    const Plan plan = runner.plan(points);
    ASSERT_EQ(plan.groups.size(), 1u);
    DevicePipeline whole(paths, {0}), small(paths, {0});
    small.set_batch_cap(1000);
    const SampleRange range{77, 15500};
    const auto a = whole.fold(plan.groups[0], 6, range);
    const auto b = small.fold(plan.groups[0], 6, range);
    ASSERT_EQ(a.size(), b.size());
    size_t differ = 0, states = 0;
    for (size_t t = 0; t < a.size(); ++t)
      for (size_t m = 0; m < a[t].size(); ++m, ++states) differ += !(a[t][m] == b[t][m]);
    std::printf("C = %d, batches of 1,000 against one a worker: %zu of %zu states differ\n", chunk, differ, states);
    EXPECT_EQ(differ, 0u) << "C = " << chunk;
  }
}

TEST(DevicePipelineCli, ShardsOfAPipelineRunMergeToTheHostRun) {
  CHUNKINV_REQUIRE_GPU();
  const std::string dir = chunkinv::testing::test_dir("pipeline");
  const std::string base = "run -a family=model_like -a chunk=32 --samples 30000 --paths gold,kernel -q --quantiles sketch ";
  ASSERT_EQ(chunkinv::testing::run_chunkinv_in(dir, base + "--pipeline host -o host.json").status, 0);
  ASSERT_EQ(chunkinv::testing::run_chunkinv_in(dir, base + "--pipeline device --shard 1/2 -o s1.json").status, 0);
  ASSERT_EQ(chunkinv::testing::run_chunkinv_in(dir, base + "--pipeline device --shard 2/2 -o s2.json").status, 0);
  ASSERT_EQ(chunkinv::testing::run_chunkinv_in(dir, "merge s1.json s2.json -o merged.json").status, 0);
  const auto h = chunkinv::testing::load_json(dir + "/host.json"), m = chunkinv::testing::load_json(dir + "/merged.json");
  ASSERT_EQ(h["results"].size(), m["results"].size());
  for (size_t e = 0; e < h["results"].size(); ++e) {
    EXPECT_EQ(h["results"][e]["axes"], m["results"][e]["axes"]);
    EXPECT_EQ(h["results"][e]["metrics"], m["results"][e]["metrics"]) << h["results"][e]["axes"].dump();
  }
  EXPECT_EQ(chunkinv::testing::load_json(dir + "/s1.json")["meta"]["pipeline"]["on_device"].size(), 1u);
}

TEST(DevicePipelineCli, RefusalsAreOneLine) {
  const std::string dir = chunkinv::testing::test_dir("pipeline");
  const auto bogus = chunkinv::testing::run_chunkinv_in(dir, "run -a family=floor --samples 10 --pipeline gpu -q");
  EXPECT_EQ(bogus.status, 2);
  EXPECT_NE(bogus.out.find("--pipeline gpu: must be auto, host or device"), std::string::npos) << bogus.out;
  const auto both = chunkinv::testing::run_chunkinv_in(dir, "run -a family=floor --samples 10 --pipeline host --devices 0 -q");
  EXPECT_EQ(both.status, 2);
  EXPECT_NE(both.out.find("--devices with --pipeline host"), std::string::npos) << both.out;
  if (!gpu::unavailable_reason().empty()) {
    // Without a GPU: asked for, refused in one line, nothing written.
    const auto dev = chunkinv::testing::run_chunkinv_in(dir, "run -a family=floor --samples 10 --pipeline device -q -o r.json");
    EXPECT_EQ(dev.status, 2);
    EXPECT_NE(dev.out.find("cannot run on the GPU pipeline"), std::string::npos) << dev.out;
    EXPECT_EQ(std::count(dev.out.begin(), dev.out.end(), '\n'), 1) << dev.out;
    const auto devs = chunkinv::testing::run_chunkinv_in(dir, "run -a family=floor --samples 10 --devices all -q");
    EXPECT_EQ(devs.status, 2);
    EXPECT_NE(devs.out.find("--devices all:"), std::string::npos) << devs.out;
  } else {
    const auto bad = chunkinv::testing::run_chunkinv_in(dir, "run -a family=floor --samples 10 --devices 0,x -q");
    EXPECT_EQ(bad.status, 2);
    EXPECT_NE(bad.out.find("\"x\" is not a device index"), std::string::npos) << bad.out;
    const auto twice = chunkinv::testing::run_chunkinv_in(dir, "run -a family=floor --samples 10 --devices 0,0 -q");
    EXPECT_NE(twice.out.find("device 0 is named twice"), std::string::npos) << twice.out;
    const auto raw = chunkinv::testing::run_chunkinv_in(dir, "run -a family=kda --samples 10 --pipeline device -q");
    EXPECT_EQ(raw.status, 2);
    EXPECT_NE(raw.out.find("raw inputs"), std::string::npos) << raw.out;
  }
}

TEST(DevicePipeline, WhatItTakesAndWhy) {
  const auto paths = parse_paths("gold,emulated");
  Runner runner(paths, RunnerOptions{});
  const Plan plan = runner.plan(points_of({"family=floor", "chunk=16"}));
  std::string why;
  EXPECT_FALSE(device_pipeline_supports(plan.groups.at(0), runner.paths(), &why));
  EXPECT_FALSE(why.empty());
  if (gpu::unavailable_reason().empty()) {
    EXPECT_NE(why.find("path emulated"), std::string::npos) << why;
  }
}

// bench --pipeline: the device's report entries checked against the host
// loop's, then each stage timed beside its floor; without a GPU one line,
// exit 2, nothing written. Bad options are one line either way.
TEST(DevicePipelineCli, BenchPipelineValidatesThenTimesEachStage) {
  const std::string dir = chunkinv::testing::test_dir("bench-pipeline");
  const auto r = chunkinv::testing::run_chunkinv_in(
      dir, "bench --pipeline -a chunk=[16,64] --samples 20000 --validate 500 --repeat 2 -q -o r.json");
  if (!gpu::unavailable_reason().empty()) {
    EXPECT_EQ(r.status, 2) << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
    EXPECT_NE(r.out.find("needs a CUDA GPU"), std::string::npos) << r.out;  // the kernel path's own refusal
    EXPECT_FALSE(std::filesystem::exists(dir + "/r.json"));
  } else {
    ASSERT_EQ(r.status, 0) << r.out;
    const auto j = chunkinv::testing::load_json(dir + "/r.json");
    ASSERT_EQ(j["configurations"].size(), 2u);
    for (const auto& c : j["configurations"]) {
      EXPECT_EQ(c["validate"]["equal"], c["validate"]["entries"]) << c.dump();
      EXPECT_EQ(c["validate"]["entries"], 3);  // the gold's, the gold path's and the kernel's
      EXPECT_EQ(c["runs_ms"].size(), 2u);
      std::vector<std::string> names;
      for (const auto& s : c["stages"]) {
        names.push_back(s["name"]);
        EXPECT_GT(s["ns"].get<double>(), 0.0) << s.dump();
        EXPECT_EQ(s["samples"], 20000) << s.dump();
        EXPECT_TRUE(s.contains("floor")) << s.dump();
      }
      // In the order they first ran (the gold's own entry folds before the others' metrics run: C = 64's
      // order is inputs, gold, kernel, fold, metrics(gold), metrics(kernel)); a fold recurs under one name.
      ASSERT_GE(names.size(), 5u);
      EXPECT_EQ(names[0], "inputs");
      EXPECT_EQ(names[1], "gold");
      EXPECT_EQ(names[2], "kernel");
      EXPECT_EQ(std::count(names.begin(), names.end(), "fold"), 1) << c.dump();
    }
  }
  for (const char* bad : {"bench --pipeline --metrics nope", "bench --pipeline -a family=kda", "bench --pipeline --chunk 16",
                          "bench --pipeline --recurrence", "bench --metrics inv_finite",
                          "bench --pipeline --paths gold,emulated", "bench --pipeline --validate 0"}) {
    const auto b = chunkinv::testing::run_chunkinv_in(dir, std::string(bad) + " -o bad.json");
    EXPECT_EQ(b.status, 2) << bad << ": " << b.out;
    EXPECT_EQ(std::count(b.out.begin(), b.out.end(), '\n'), 1) << bad << ": " << b.out;
    EXPECT_FALSE(std::filesystem::exists(dir + "/bad.json")) << bad;
  }
}

}  // namespace

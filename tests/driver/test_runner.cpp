// The driver and `chunkinv run`: determinism, the floor family's exact
// overflow facts, the report end to end, and bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include <csignal>

#include "core/signals.hpp"
#include "driver/checkpoint.hpp"
#include "driver/runner.hpp"
#include "driver/spec.hpp"
#include "inputs/family.hpp"
#include "core/error.hpp"
#include "gpu/gpu.hpp"
#include "metrics/stats.hpp"
#include "report/merge.hpp"
#include "report/report.hpp"
#include "support/shell.hpp"

using namespace chunkinv;
namespace fs = std::filesystem;

namespace {

struct Proc {
  int status;
  std::string out;
};

// Runs the built binary; stdout and stderr together.
Proc sh(const std::string& args) {
  const auto r = chunkinv::testing::run_shell(chunkinv::testing::binary() + " " + args + " 2>&1");
  return {r.status, r.out};
}

fs::path temp_dir() {
  fs::path d = fs::temp_directory_path() / ("chunkinv_test_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

std::vector<Point> configs_of(const std::vector<std::string>& axes) {
  ExperimentSpec spec;
  for (const auto& a : axes) apply_axis(spec, a);
  return expand(spec);
}

const Stats& metric(const std::vector<ReportEntry>& r, int chunk, const std::string& path, const std::string& name) {
  for (const auto& e : r)
    if (e.axes["chunk"] == chunk && e.axes["path"] == path) return e.metrics.at(name);
  throw std::runtime_error("no entry");
}

}  // namespace

TEST(Run, FloorOverflowFactsAtFloorMinus5) {
  // exp(-5 C) leaves FP32/BF16 range past C=17: the article's exact counts.
  const auto cfg = configs_of({"family=floor", "chunk=[16,17,18,19,32]", "decay_floor=-5"});
  RunnerOptions opt;
  opt.threads = 2;
  const auto r = run_experiment(cfg, parse_paths("emulated"), 5, 0, opt).entries;
  for (int c : {16, 17}) {
    EXPECT_EQ(metric(r, c, "emulated", "decay_zeros").max, 0);
    EXPECT_EQ(metric(r, c, "emulated", "inv_finite").mean, 1);
  }
  EXPECT_EQ(metric(r, 18, "emulated", "decay_zeros").max, 1);
  EXPECT_EQ(metric(r, 18, "emulated", "decay_zeros").min, 1);
  EXPECT_EQ(metric(r, 18, "emulated", "inv_decay_nonfinite").max, 1);
  EXPECT_EQ(metric(r, 18, "emulated", "inv_finite").mean, 1);
  EXPECT_EQ(metric(r, 19, "emulated", "decay_zeros").max, 2);
  EXPECT_EQ(metric(r, 19, "emulated", "inv_decay_nonfinite").max, 2);
  EXPECT_EQ(metric(r, 19, "emulated", "inv_finite").mean, 0);
  EXPECT_EQ(metric(r, 32, "emulated", "decay_zeros").max, 15);
  EXPECT_EQ(metric(r, 32, "emulated", "inv_decay_nonfinite").max, 15);
  EXPECT_EQ(metric(r, 32, "emulated", "inv_finite").mean, 0);
}

TEST(Run, SameResultsForAnyThreadCountAndBatchSize) {
  const auto cfg = configs_of({"family=[floor,model_like,weak_decay_correlated]", "chunk=[8,17]", "dim=32"});
  RunnerOptions a, b, c;
  a.threads = 1;
  b.threads = 3;
  b.batch = 7;
  c.threads = 2;
  c.batch = 1;
  const auto ra = run_experiment(cfg, parse_paths("gold,emulated"), 23, 5, a, true).entries;
  const auto rb = run_experiment(cfg, parse_paths("gold,emulated"), 23, 5, b, true).entries;
  const auto rc = run_experiment(cfg, parse_paths("gold,emulated"), 23, 5, c, true).entries;
  Report pa, pb, pc;
  pa.results = ra;
  pb.results = rb;
  pc.results = rc;
  EXPECT_EQ(report_to_json(pa).dump(), report_to_json(pb).dump());
  EXPECT_EQ(report_to_json(pa).dump(), report_to_json(pc).dump());
}

// run --metrics: an entry reports the chosen metrics it has, each with the
// statistics the full run gives it, bit for bit; an entry with none of them
// is left out; the plan refuses a metric no entry has.
TEST(Run, ChosenMetricsAreTheFullRunsOwn) {
  const auto cfg = configs_of({"family=[floor,model_like]", "chunk=[8,17]", "dim=32", "method=[neumann,fwdsub_fp32]"});
  const auto paths = parse_paths("gold,emulated");
  RunnerOptions all, some;
  all.threads = some.threads = 2;
  some.metrics = parse_metric_list("inv_total_rel_rmse,inv_stable_l_rel_rmse,inv_max_abs,inv_max", "--metrics");
  EXPECT_EQ(some.metrics[1], "inv_gold_l_rel_rmse") << "an old alias is taken by today's name";
  const auto full = run_experiment(cfg, paths, 40, 3, all, true).entries;
  const auto chosen = run_experiment(cfg, paths, 40, 3, some, true).entries;
  auto same = [](double a, double b) { return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof a) == 0; };
  size_t kept = 0, compared = 0;
  for (const ReportEntry& f : full) {
    std::vector<std::string> want;
    for (const auto& [name, st] : f.metrics)
      if (std::find(some.metrics.begin(), some.metrics.end(), name) != some.metrics.end()) want.push_back(name);
    const auto c = std::find_if(chosen.begin(), chosen.end(), [&](const ReportEntry& e) { return e.axes == f.axes; });
    if (want.empty()) {
      EXPECT_EQ(c, chosen.end()) << "an entry with none of the metrics is left out: " << f.axes.dump();
      continue;
    }
    ASSERT_NE(c, chosen.end()) << f.axes.dump();
    ++kept;
    EXPECT_EQ(c->metrics.size(), want.size()) << f.axes.dump();
    for (const std::string& name : want)
      for (const std::string& stat : stat_names()) {
        ++compared;
        EXPECT_TRUE(same(stat_value(f.metrics.at(name), stat), stat_value(c->metrics.at(name), stat)))
            << f.axes.dump() << " " << name << "." << stat;
      }
  }
  EXPECT_EQ(kept, chosen.size());
  EXPECT_EQ(kept, 20u) << "at 2 x 2 points, the gold's own entry (inv_max_abs) and four (path, method) entries";
  EXPECT_GT(compared, 300u);
  // The gold's own metric alone: only the gold's own entries are left.
  RunnerOptions own;
  own.metrics = {"inv_max_abs"};
  const auto only = run_experiment(cfg, paths, 5, 3, own, true).entries;
  EXPECT_EQ(only.size(), 4u);
  for (const ReportEntry& e : only) EXPECT_EQ(e.axes["method"], "exact") << e.axes.dump();
  // The gold's own metric without the gold path: no entry has it.
  RunnerOptions gold_own;
  gold_own.metrics = {"inv_max_abs"};
  Runner r(parse_paths("emulated"), gold_own);
  EXPECT_THROW(r.plan(cfg), UsageError);
  EXPECT_THROW(parse_metric_list("inv_total_rel_rmse,,inv_finite", "--metrics"), UsageError);
}

TEST(Run, SampleIsAPureFunctionOfSeedAndIndex) {
  Configuration cfg{"model_like", 16, 128, {{"decay_floor", -5.0}}};
  const Family& f = find_family("model_like");
  const Sample a = f.make(cfg, 9, 1234), b = f.make(cfg, 9, 1234), c = f.make(cfg, 9, 1235);
  EXPECT_EQ(a.keys, b.keys);
  EXPECT_EQ(a.g, b.g);
  EXPECT_NE(a.keys, c.keys);
  // Keys are BF16 and (before rounding) unit: the rounded norm is within 1%.
  double n2 = 0;
  for (int k = 0; k < 128; ++k) n2 += a.key(0, k) * a.key(0, k);
  EXPECT_NEAR(n2, 1.0, 0.01);
  for (double g : a.g) EXPECT_TRUE(g < 0 && g > -5);
}

TEST(RunCli, TinyRunWritesAParsableReport) {
  const fs::path out = temp_dir() / "tiny.json";
  const Proc p = sh("run -a family=floor -a 'chunk=[8,19]' -a dim=32 --samples 4 --seed 1 --paths gold,emulated "
                    "--threads 2 -o " + out.string());
  ASSERT_EQ(p.status, 0) << p.out;
  EXPECT_NE(p.out.find("| Chunk"), std::string::npos) << "a summary table on stdout";
  std::ifstream in(out);
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["schema"], "chunkinv.report/2");
  EXPECT_EQ(j["meta"]["seed"], 1);
  EXPECT_TRUE(j["meta"]["argv"].is_array());
  EXPECT_TRUE(j["meta"]["paths"].contains("emulated"));
  // 2 chunks x (the gold's own entry, neumann on the gold L, neumann on the emulated L)
  ASSERT_EQ(j["results"].size(), 6u);
  EXPECT_EQ(j["results"][0]["axes"]["path"], "gold");
  EXPECT_EQ(j["results"][0]["axes"]["method"], "exact");
  EXPECT_TRUE(j["results"][0]["metrics"].contains("inv_max_abs"));
  EXPECT_EQ(j["results"][1]["axes"]["path"], "gold");
  EXPECT_EQ(j["results"][1]["axes"]["method"], "neumann");
  const auto& e = j["results"][5];
  EXPECT_EQ(e["axes"]["path"], "emulated");
  EXPECT_EQ(e["axes"]["method"], "neumann");
  EXPECT_EQ(e["axes"]["chunk"], 19);
  EXPECT_EQ(e["samples"], 4);
  EXPECT_EQ(e["metrics"]["inv_total_rel_rmse"]["median"], "inf");  // non-finite as a string
  EXPECT_EQ(e["metrics"]["inv_finite"]["mean"], 0);
  EXPECT_TRUE(e["metrics"]["inv_finite"].contains("wilson_high"));
  const Report r = read_report(out.string());  // and it reads back
  EXPECT_EQ(r.results.size(), 6u);
  fs::remove_all(out.parent_path());
}

TEST(RunCli, ThreadCountDoesNotChangeTheResults) {
  const fs::path d = temp_dir();
  const std::string common = "run -a family=model_like -a 'chunk=[16,33]' -a dim=64 --samples 40 -q ";
  ASSERT_EQ(sh(common + "--threads 1 -o " + (d / "a.json").string()).status, 0);
  ASSERT_EQ(sh(common + "--threads 2 -o " + (d / "b.json").string()).status, 0);
  std::ifstream a(d / "a.json"), b(d / "b.json");
  EXPECT_EQ(nlohmann::json::parse(a)["results"], nlohmann::json::parse(b)["results"]);
  fs::remove_all(d);
}

TEST(RunCli, BadInputExits2WithOneLineAndNoReport) {
  const fs::path d = temp_dir();
  const fs::path out = d / "r.json";
  auto write = [&](const char* name, const char* text) {
    std::ofstream(d / name) << text;
    return (d / name).string();
  };
  struct Case {
    std::string args, expect;
  };
  const std::vector<Case> cases{
      {write("bad.json", "{\"experiments\": [ {\"family\": \"floor\" "), "not valid JSON"},
      {write("key.json", "{\"sampels\": 3, \"experiments\": [{\"family\": \"floor\"}]}"), "did you mean \"samples\""},
      {write("axis.json", "{\"experiments\": [{\"family\": \"floor\", \"chunks\": 8}]}"), "did you mean \"chunk\""},
      {"-a chunk=65", "chunk = 65 must be a whole number from 2 to 64"},
      {"-a chunk=1", "chunk = 1 must be a whole number from 2 to 64"},
      {"-a decay_floor=0", "decay_floor = 0 must be a finite number < 0"},
      {"-a decay_floor=0.5", "decay_floor = 0.5 must be"},
      {"-a family=flor", "did you mean \"floor\""},
      {"-a family=nonesuch", "unknown family \"nonesuch\""},
      {"--paths gold,emulatd", "did you mean \"emulated\""},
      {"-a chunkk=8", "did you mean \"chunk\""},
      {"-a chunk=8 --metrics inv_fnite", "--metrics inv_fnite: unknown metric \"inv_fnite\""},
      {"-a chunk=8 --paths emulated --metrics inv_max_abs", "add gold to --paths"},
      {"-a chunk=8 --metrics inv_total_rel_rmse --until 'inv_finite.failures>=3'",
       "the stop rule's metric inv_finite is not one of --metrics"},
      {write("metrics.json", "{\"metrics\": \"inv_finite\", \"experiments\": [{\"family\": \"floor\"}]}"),
       "\"metrics\" = \"inv_finite\" must be a non-empty list"},
      {write("metric.json", "{\"metrics\": [\"inv_fin\"], \"experiments\": [{\"family\": \"floor\"}]}"),
       "unknown metric \"inv_fin\""},
  };
  for (const auto& c : cases) {
    const Proc p = sh("run " + c.args + " --samples 2 -q -o " + out.string());
    EXPECT_EQ(p.status, 2) << c.args << "\n" << p.out;
    EXPECT_NE(p.out.find(c.expect), std::string::npos) << c.args << "\n" << p.out;
    EXPECT_EQ(std::count(p.out.begin(), p.out.end(), '\n'), 1) << "one line: " << p.out;
    EXPECT_FALSE(fs::exists(out)) << c.args;
  }
  // A GPU path where there is no usable GPU: one line naming the path and why.
  if (const std::string why = gpu::unavailable_reason(); !why.empty()) {
    for (const char* path : {"kernel", "cublas", "all,kernel"}) {
      const Proc p = sh(std::string("run -a chunk=8 --samples 2 -q --paths ") + path + " -o " + out.string());
      EXPECT_EQ(p.status, 2) << p.out;
      EXPECT_NE(p.out.find("needs a CUDA GPU: " + why), std::string::npos) << p.out;
      EXPECT_EQ(std::count(p.out.begin(), p.out.end(), '\n'), 1) << p.out;
      EXPECT_FALSE(fs::exists(out));
    }
  }
  // An unwritable output path: named, exit 2, nothing written, nothing computed.
  const Proc p = sh("run -a chunk=8 --samples 2 -q -o /nonexistent-dir/r.json");
  EXPECT_EQ(p.status, 2) << p.out;
  EXPECT_NE(p.out.find("/nonexistent-dir/r.json"), std::string::npos) << p.out;
  for (const auto& entry : fs::directory_iterator(d))
    EXPECT_EQ(entry.path().extension(), ".json") << "no temporary left behind: " << entry.path();
  fs::remove_all(d);
}

TEST(Run, MethodAxisPutsFwdsubNextToNeumannOnTheGoldAndTheEmulatedL) {
  const auto points = configs_of({"family=model_like", "chunk=16", "dim=32", "method=[neumann,fwdsub_fp32]"});
  ASSERT_EQ(points.size(), 2u);
  RunnerOptions opt;
  opt.threads = 2;
  const auto r = run_experiment(points, parse_paths("gold,emulated"), 12, 3, opt, true).entries;
  auto entry = [&](const char* path, const char* method) -> const ReportEntry& {
    for (const auto& e : r)
      if (e.axes["path"] == path && e.axes["method"] == method) return e;
    throw std::runtime_error(std::string("no entry ") + path + "/" + method);
  };
  ASSERT_EQ(r.size(), 5u);  // gold/exact, then per method: gold, emulated
  EXPECT_EQ(r[0].axes["method"], "exact");
  const ReportEntry& gf = entry("gold", "fwdsub_fp32");
  const ReportEntry& gn = entry("gold", "neumann");
  const ReportEntry& ef = entry("emulated", "fwdsub_fp32");
  // On the exact L, FP32 substitution is orders of magnitude closer than FP16 Neumann.
  EXPECT_LT(gf.metrics.at("inv_total_rel_rmse").max * 100, gn.metrics.at("inv_total_rel_rmse").median);
  // Each method's own diagnostics, and only its own.
  EXPECT_TRUE(ef.metrics.count("inv_max") && ef.metrics.count("gold_l_inv_max"));
  EXPECT_FALSE(ef.metrics.count("power_max"));
  EXPECT_TRUE(entry("emulated", "neumann").metrics.count("power_max"));
  // The method on the gold L is the same computation wherever it is asked for.
  EXPECT_EQ(ef.per_sample.at("inv_gold_l_rel_rmse"), gf.per_sample.at("inv_total_rel_rmse"));
  EXPECT_EQ(entry("emulated", "neumann").per_sample.at("inv_gold_l_rel_rmse"), gn.per_sample.at("inv_total_rel_rmse"));
}

TEST(Run, APathSaysWhichMethodsItCannotRunAndWhy) {
  const auto points = configs_of({"family=floor", "chunk=16", "method=fwdsub_fp32"});
  std::string why;
  EXPECT_FALSE(find_path("kernel").supports(points[0].config, points[0].method, &why));
  EXPECT_NE(why.find("no GPU form of method fwdsub_fp32"), std::string::npos) << why;
  EXPECT_TRUE(find_path("kernel").supports(points[0].config, method_of(default_method()), &why));
  EXPECT_TRUE(find_path("emulated").supports(points[0].config, points[0].method, &why));
  // Path options are parsed and checked where the path is named.
  EXPECT_THROW(parse_paths("emulated:version=2"), UsageError);
  EXPECT_THROW(parse_paths("gold:x"), UsageError);
  if (gpu::unavailable_reason().empty()) {
    EXPECT_EQ(parse_paths("kernel:version=1").at(0).options.at("version"), "1");
    EXPECT_THROW(make_path(parse_paths("kernel:version=3").at(0)), UsageError);
  }
}

TEST(RunCli, RunInspectAndBenchMeasureTheSameSample) {
  const fs::path d = temp_dir();
  const std::string axes = "-a family=model_like -a chunk=16 -a dim=32 -a 'method=[neumann,fwdsub_fp32]' --seed 4 ";
  ASSERT_EQ(sh("run " + axes + "--samples 3 --per-sample --paths gold,emulated -q -o " + (d / "r.json").string()).status, 0);
  const Proc ins = sh("inspect " + axes + "--index 2 --format json --paths gold,emulated");
  ASSERT_EQ(ins.status, 0) << ins.out;
  const auto j = nlohmann::json::parse(ins.out);
  std::ifstream in(d / "r.json");
  const auto rep = nlohmann::json::parse(in);
  size_t compared = 0;
  for (const auto& e : rep["results"]) {
    if (e["axes"]["method"] == "exact") continue;
    const auto& m = j["paths"][e["axes"]["path"].get<std::string>()]["methods"][e["axes"]["method"].get<std::string>()];
    for (const auto& [name, values] : e["per_sample"].items()) {
      EXPECT_EQ(values[2], m["metrics"][name]) << e["axes"].dump() << " " << name;
      ++compared;
    }
  }
  EXPECT_GT(compared, 40u);
  const Proc b = sh("bench " + axes + "--samples 4 --repeat 1 --validate 0 --format json --paths gold,emulated");
  ASSERT_EQ(b.status, 0) << b.out;
  const auto bj = nlohmann::json::parse(b.out.substr(b.out.find('{')));
  ASSERT_EQ(bj["results"].size(), 5u);  // the same tasks as the report's, the gold's own entry once
  for (const auto& row : bj["results"]) EXPECT_GT(row["samples_per_s"].get<double>(), 0) << row.dump();
  EXPECT_EQ(bj["methods_timed_apart"], true) << "each method timed in runs of its own";
  std::set<std::string> rows;
  for (const auto& row : bj["results"]) EXPECT_TRUE(rows.insert(row["axes"].dump()).second) << row["axes"].dump();
  const Proc s = sh("run " + axes + "--samples 2 --paths emulated,gold --list-methods");
  EXPECT_NE(s.out.find("fwdsub_fp32:"), std::string::npos) << s.out;
  fs::remove_all(d);
}

// A run stopped after any batch (inside a configuration, at its last batch,
// between two) and resumed from its checkpoint with other threads and
// batches gives the uninterrupted run's entries, per sample included.
TEST(Run, SameResultsAtEveryResumePoint) {
  const auto cfg = configs_of({"family=[floor,model_like]", "chunk=[8,17]", "dim=32"});
  const auto paths = parse_paths("gold,emulated");
  RunnerOptions whole;
  whole.threads = 1;
  Report want;
  want.results = run_experiment(cfg, paths, 23, 5, whole, true).entries;
  const fs::path d = temp_dir() / "resume-points";
  fs::create_directories(d);
  // 4 configurations of 23 samples in batches of 4: 6 batches each, 24 in all.
  for (int stop_after : {1, 5, 6, 7, 13, 18, 24}) {
    const std::string file = (d / ("c" + std::to_string(stop_after))).string();
    const nlohmann::json identity = {{"case", stop_after}};
    {
      RunnerOptions o;
      o.threads = 2;
      o.batch = 4;
      Runner runner(paths, o);
      auto ck = Checkpoint::create(file, identity, nlohmann::json::object());
      ck->interval_s = stop_after % 2 ? 0 : 1000;  // every batch saved, or only when stopping
      int batches = 0;
      const RunControl stop{ck.get(), nullptr, [&] { return ++batches == stop_after ? SIGINT : 0; }};
      EXPECT_THROW(run_experiment(runner, runner.plan(cfg), 23, 5, true, stop), signals::Stopped) << stop_after;
      EXPECT_EQ(batches, stop_after);
    }
    RunnerOptions o;
    o.threads = 3;
    o.batch = 7;
    Runner runner(paths, o);
    auto ck = Checkpoint::open(file, identity, Checkpoint::layout_of(runner.plan(cfg), paths, 23, false));
    EXPECT_EQ(ck->groups_finished(), size_t((stop_after - 1) / 6)) << stop_after;
    const RunControl resume{ck.get(), nullptr, nullptr};
    Report got;
    got.results = run_experiment(runner, runner.plan(cfg), 23, 5, true, resume).entries;
    EXPECT_EQ(report_to_json(want).dump(), report_to_json(got).dump()) << "stopped after batch " << stop_after;
  }
  EXPECT_THROW(Checkpoint::open((d / "c1").string(), {{"case", 2}}, {}), UsageError);
  fs::remove_all(d);
}

// The shards of a run, each on its own threads and batches, merged: the
// unsharded run's entries bit for bit, with sketch quantiles and with exact
// ones from per-sample values.
TEST(Run, SameResultsForAnyShardSplit) {
  const auto cfg = configs_of({"family=[floor,model_like,weak_decay_correlated]", "chunk=[8,17]", "dim=32"});
  const auto paths = parse_paths("gold,emulated");
  const uint64_t samples = 23;
  for (const bool per_sample : {false, true}) {
    StatsOptions whole_stats;
    whole_stats.per_sample = per_sample;
    whole_stats.quantiles = per_sample ? Quantiles::kExact : Quantiles::kSketch;
    RunnerOptions one;
    one.threads = 1;
    Report want;
    want.results = run_experiment(cfg, paths, samples, 5, one, whole_stats).entries;
    for (const uint64_t n : {1, 2, 3, 7, 23}) {
      std::vector<ShardReport> shards;
      for (uint64_t i = n; i >= 1; --i) {  // in any order
        RunnerOptions o;
        o.threads = int(1 + i % 3);
        o.batch = 1 + i % 5;
        StatsOptions st = whole_stats;
        st.keep_state = true;
        const auto [first, count] = shard_span({i, n}, samples);
        ShardReport r{"shard" + std::to_string(i), {}};
        r.report.results = run_experiment(cfg, paths, count, 5, o, st, first).entries;
        r.report.meta["shard"] = shard_meta({i, n}, samples, {{"samples", samples}, {"seed", 5}});
        shards.push_back(std::move(r));
      }
      const Report got = merge_shards(shards);
      EXPECT_EQ(report_to_json(want)["results"].dump(), report_to_json(got)["results"].dump())
          << n << " shards" << (per_sample ? ", per sample" : "");
    }
  }
}

// Streaming statistics saved as their state: a run stopped after any batch
// and resumed on other threads and batches gives the uninterrupted entries.
TEST(Run, SameSketchResultsAtEveryResumePoint) {
  const auto cfg = configs_of({"family=[floor,model_like]", "chunk=[8,17]", "dim=32"});
  const auto paths = parse_paths("gold,emulated");
  StatsOptions st;
  st.quantiles = Quantiles::kSketch;
  st.keep_state = true;
  RunnerOptions whole;
  whole.threads = 1;
  Report want;
  want.results = run_experiment(cfg, paths, 23, 5, whole, st).entries;
  const fs::path d = temp_dir() / "sketch-resume-points";
  fs::create_directories(d);
  for (int stop_after : {1, 5, 6, 7, 13, 24}) {
    const std::string file = (d / ("c" + std::to_string(stop_after))).string();
    const nlohmann::json identity = {{"case", stop_after}};
    {
      RunnerOptions o;
      o.threads = 2;
      o.batch = 4;
      Runner runner(paths, o);
      auto ck = Checkpoint::create(file, identity, nlohmann::json::object());
      ck->interval_s = stop_after % 2 ? 0 : 1000;  // a state after every batch, or only when stopping
      int batches = 0;
      const RunControl stop{ck.get(), nullptr, [&] { return ++batches == stop_after ? SIGINT : 0; }};
      EXPECT_THROW(run_experiment(runner, runner.plan(cfg), 23, 5, st, stop), signals::Stopped) << stop_after;
    }
    RunnerOptions o;
    o.threads = 3;
    o.batch = 7;
    Runner runner(paths, o);
    auto ck = Checkpoint::open(file, identity, Checkpoint::layout_of(runner.plan(cfg), paths, 23, false));
    const RunControl resume{ck.get(), nullptr, nullptr};
    Report got;
    got.results = run_experiment(runner, runner.plan(cfg), 23, 5, st, resume).entries;
    EXPECT_EQ(report_to_json(want).dump(), report_to_json(got).dump()) << "stopped after batch " << stop_after;
  }
  fs::remove_all(d);
}

// A stop rule is checked after every sample in index order: the run stops
// at the same sample whatever the threads and batches, the first sample
// after which every entry has the failures asked for.
TEST(Run, StopRuleStopsAtTheSameSampleWhateverTheBatch) {
  const auto cfg = configs_of({"family=model_like", "chunk=[32,48]", "dim=32"});
  const auto paths = parse_paths("emulated");
  RunnerOptions one;
  one.threads = 1;
  const auto all = run_experiment(cfg, paths, 600, 2, one, true).entries;  // every sample's values
  const StopRule rule = parse_until("inv_finite.failures>=5");
  std::vector<uint64_t> want;
  for (const ReportEntry& e : all) {
    const std::vector<double>& f = e.per_sample.at("inv_finite");
    uint64_t failures = 0, n = 0;
    while (n < f.size() && failures < 5) failures += f[n++] == 0.0;
    want.push_back(n);
  }
  ASSERT_LT(want[0], 600u) << "model_like C=32 fails often enough for the rule to hold";
  EXPECT_EQ(want[1], 5u) << "every C=48 inverse overflows";
  std::string first;
  for (const auto& [threads, batch] : {std::pair{1, 1}, {3, 7}, {2, 256}}) {
    RunnerOptions o;
    o.threads = threads;
    o.batch = uint64_t(batch);
    StatsOptions st;
    st.quantiles = Quantiles::kSketch;
    st.keep_state = true;
    st.until = &rule;
    const RunResult r = run_experiment(cfg, paths, 600, 2, o, st);
    ASSERT_EQ(r.entries.size(), 2u);
    for (size_t i = 0; i < 2; ++i) EXPECT_EQ(r.entries[i].samples, want[i]) << threads << " threads, batch " << batch;
    EXPECT_TRUE(r.unmet.empty());
    Report rep;
    rep.results = r.entries;
    if (first.empty()) first = report_to_json(rep).dump();
    EXPECT_EQ(first, report_to_json(rep).dump()) << threads << " threads, batch " << batch;
  }
  // A cap below the rule: every sample to the cap, and the configuration named.
  StatsOptions st;
  st.quantiles = Quantiles::kSketch;
  st.until = &rule;
  const RunResult capped = run_experiment(cfg, paths, want[0] - 1, 2, one, st);
  EXPECT_EQ(capped.entries[0].samples, want[0] - 1);
  EXPECT_EQ(capped.unmet, std::vector<size_t>{0});
}

// Memory is estimated before anything is allocated: more samples, a larger
// batch or per-sample values need more, and a batch is bounded by samples.
TEST(Run, MemoryEstimateGrowsWithWhatIsHeld) {
  RunnerOptions o;
  o.threads = 1;
  Runner runner(parse_paths("gold,emulated"), o);
  const Plan small = runner.plan(configs_of({"chunk=16", "dim=32"})), big = runner.plan(configs_of({"chunk=64", "dim=128"}));
  EXPECT_LT(run_memory(small, 1000, 100, false).total(), run_memory(small, 2000, 100, false).total());
  EXPECT_LT(run_memory(small, 1000, 100, false).batch, run_memory(small, 1000, 200, false).batch);
  EXPECT_EQ(run_memory(small, 10, 100, false).batch, run_memory(small, 10, 10, false).batch);
  EXPECT_LT(run_memory(small, 1000, 100, false).total(), run_memory(small, 1000, 100, true).total());
  EXPECT_LT(run_memory(small, 1000, 100, false).batch, run_memory(big, 1000, 100, false).batch);
  // At C=64, d=128 a sample's keys alone are 64 KiB: a batch of 4096 holds more than 4096 of them.
  EXPECT_GT(run_memory(big, 4096, 4096, false).batch, 4096u * 64 * 128 * 8);
  // Sketch quantiles: the same memory for 10^6 samples as for 10^12.
  EXPECT_EQ(run_memory(small, 1000000, 4096, false, Quantiles::kSketch).total(),
            run_memory(small, 1000000000000, 4096, false, Quantiles::kSketch).total());
  EXPECT_LT(run_memory(small, 1000000, 4096, false, Quantiles::kSketch).total(),
            run_memory(small, 1000000, 4096, false).total());
}

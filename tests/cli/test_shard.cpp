// `run --shard i/n` and `chunkinv merge` through the binary: the merged
// shards are the unsharded run (bit for bit with sketch quantiles and with
// --per-sample; counts, min and max bit for bit and quantiles within the
// stated bound against today's exact default); refusals are one line, exit
// 2, and leave no output. `--quantiles` and the stop rules from the command
// line.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "metrics/sketch.hpp"
#include "report/report.hpp"
#include "support/shell.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using Proc = chunkinv::testing::ShellResult;
using chunkinv::testing::load_json;

std::string temp_dir() { return chunkinv::testing::test_dir("shard"); }
Proc sh(const std::string& dir, const std::string& args) { return chunkinv::testing::run_chunkinv_in(dir, args); }
json load(const std::string& p) { return load_json(p); }

double number(const json& j) { return chunkinv::number_from_json(j); }

const std::string kRun =
    "run -a 'family=[floor,model_like]' -a 'chunk=[16,19,33]' -a dim=16 --samples 200 --seed 3 --paths gold,emulated -q ";

void expect_one_line_exit_2(const Proc& p, const std::string& expect, const std::string& what) {
  EXPECT_EQ(p.status, 2) << what << "\n" << p.out;
  EXPECT_NE(p.out.find(expect), std::string::npos) << what << "\n" << p.out;
  EXPECT_EQ(std::count(p.out.begin(), p.out.end(), '\n'), 1) << what << ": one line\n" << p.out;
}

}  // namespace

TEST(ShardCli, MergedShardsAreTheUnshardedRun) {
  const std::string dir = temp_dir();
  ASSERT_EQ(sh(dir, kRun + "--quantiles sketch -o sketch.json").status, 0);
  ASSERT_EQ(sh(dir, kRun + "-o exact.json").status, 0);
  for (int i = 1; i <= 3; ++i)
    ASSERT_EQ(sh(dir, kRun + "--shard " + std::to_string(i) + "/3 --threads " + std::to_string(i) + " --batch " +
                          std::to_string(7 * i) + " -o s" + std::to_string(i) + ".json")
                  .status,
              0);
  const Proc m = sh(dir, "merge s2.json s3.json s1.json -o all.json");
  ASSERT_EQ(m.status, 0) << m.out;
  EXPECT_NE(m.out.find("merged 3 shards (200 samples per configuration) into all.json"), std::string::npos) << m.out;
  const json sketch = load(dir + "/sketch.json"), exact = load(dir + "/exact.json"), all = load(dir + "/all.json");
  EXPECT_EQ(sketch["results"], all["results"]) << "bit for bit, the same quantile mode";
  EXPECT_EQ(all["meta"]["quantiles"]["mode"], "sketch");
  EXPECT_EQ(exact["meta"]["quantiles"]["mode"], "exact") << "200 samples: exact quantiles, as before";
  EXPECT_FALSE(exact["results"][0].contains("quantiles"));
  EXPECT_FALSE(exact["results"][0].contains("state"));
  const json s1 = load(dir + "/s1.json");
  EXPECT_EQ(s1["meta"]["shard"]["index"], 1);
  EXPECT_EQ(s1["meta"]["shard"]["samples"], 66);
  EXPECT_EQ(s1["results"][0]["samples"], 66);
  EXPECT_TRUE(s1["results"][0].contains("state"));

  // Against today's exact default: counts, min and max bit for bit; quantiles
  // within 2^-10 (interpolation rounding aside); the mean to rounding.
  ASSERT_EQ(exact["results"].size(), all["results"].size());
  size_t compared = 0;
  for (size_t e = 0; e < all["results"].size(); ++e) {
    const json& a = exact["results"][e];
    const json& b = all["results"][e];
    ASSERT_EQ(a["axes"], b["axes"]);
    EXPECT_EQ(a["samples"], b["samples"]);
    for (const auto& [name, st] : a["metrics"].items()) {
      const json& sk = b["metrics"][name];
      for (const char* k : {"min", "max", "finite_count"}) EXPECT_EQ(st[k], sk[k]) << name << " " << k;
      for (const char* k : {"median", "p10", "p90", "p99"}) {
        const double x = number(st[k]), y = number(sk[k]);
        if (x == y) continue;
        EXPECT_LE(std::fabs(x - y), chunkinv::kSketchRelativeError * std::fabs(x) * (1 + 1e-9)) << name << " " << k;
        ++compared;
      }
      const double mx = number(st["mean"]), my = number(sk["mean"]);
      if (std::isfinite(mx)) {
        EXPECT_LE(std::fabs(mx - my), 1e-12 * std::fabs(mx)) << name;
      }
      if (st.contains("wilson_low")) {
        EXPECT_EQ(st["wilson_low"], sk["wilson_low"]) << name;
      }
    }
  }
  EXPECT_GT(compared, 50u) << "quantiles of errors differ in their last bits: the sketch was compared";

  // With --per-sample the shards keep every value: the merge is the exact run.
  ASSERT_EQ(sh(dir, kRun + "--per-sample -o ps.json").status, 0);
  for (int i = 1; i <= 2; ++i)
    ASSERT_EQ(sh(dir, kRun + "--per-sample --shard " + std::to_string(i) + "/2 -o p" + std::to_string(i) + ".json").status, 0);
  ASSERT_EQ(sh(dir, "merge p1.json p2.json -q -o pall.json").status, 0);
  EXPECT_EQ(load(dir + "/ps.json")["results"], load(dir + "/pall.json")["results"]);
  fs::remove_all(dir);
}

TEST(ShardCli, RefusalsAreOneLineExitTwoAndLeaveNothing) {
  const std::string dir = temp_dir();
  const std::string small = "run -a family=floor -a chunk=16 -a dim=16 --samples 10 -q ";
  const struct {
    std::string args, expect;
  } runs[] = {
      {"--shard 3/2", "--shard 3/2: must be i/n, shard i of n with 1 <= i <= n"},
      {"--shard 0/0", "--shard 0/0: must be i/n"},
      {"--shard 1/x", "--shard 1/x: must be i/n"},
      {"--shard 1/11", "--shard 1/11: 11 shards of 10 samples; at most 10 shards"},
      {"--shard 1/2 --until 'inv_finite.failures>=3'", "--shard with a stop rule"},
      {"--until 'inv_finite.failures>3'", "--until 'inv_finite.failures>3': expected METRIC.failures>=N"},
      {"--until 'inv_finite.failures>='", "expected METRIC.failures>=N"},
      {"--until 'l_rel_rmse.failures>=3'", "l_rel_rmse is not a 0/1 metric"},
      {"--until-ci inv_finite:-1", "--until-ci 'inv_finite:-1': expected METRIC:WIDTH"},
      {"--until-ci inv_finite:0.1 --until 'inv_finite.failures>=1'", "give one stop rule"},
      {"--quantiles approx", "--quantiles approx: must be auto, exact or sketch"},
      {"--quantiles sketch --exact-quantiles", "give one of them"},
      {"--shard 1/2 --exact-quantiles", "--shard with exact quantiles needs --per-sample"},
  };
  for (const auto& c : runs) {
    expect_one_line_exit_2(sh(dir, small + c.args + " -o r.json"), c.expect, c.args);
    EXPECT_FALSE(fs::exists(dir + "/r.json")) << c.args;
  }
  // Shards of two runs (other seeds), a shard twice, one missing, a report
  // that is no shard, a hostile shard (a state edited), a shard as output.
  for (const char* s : {"1/2", "2/2"})
    ASSERT_EQ(sh(dir, small + "--shard " + std::string(s) + " -o a" + s[0] + ".json").status, 0);
  ASSERT_EQ(sh(dir, small + "--shard 2/2 --seed 9 -o b2.json").status, 0);
  ASSERT_EQ(sh(dir, small + "--shard 2/2 --metrics inv_finite -o c2.json").status, 0);
  ASSERT_EQ(sh(dir, small + "-o whole.json").status, 0);
  json hostile = load(dir + "/a2.json");
  hostile["results"][1]["state"]["metrics"]["inv_finite"]["zeros"] = 4;
  std::ofstream(dir + "/h2.json") << hostile.dump();
  const struct {
    std::string args, expect;
  } merges[] = {
      {"a1.json b2.json", "b2.json is a shard of another run than a1.json (seed: 0 there, 9 here)"},
      {"a1.json a2.json a2.json", "a2.json and a2.json are both shard 2/2 (overlapping shards)"},
      {"a1.json c2.json", "c2.json is a shard of another run than a1.json (metrics:"},
      {"a2.json", "shard 1/2 is missing"},
      {"a1.json whole.json", "whole.json is not a shard of a run"},
      {"a1.json h2.json", "report h2.json: results[1]: state.inv_finite:"},
      {"a1.json nonesuch.json", "nonesuch.json"},
  };
  for (const auto& c : merges) {
    expect_one_line_exit_2(sh(dir, "merge " + c.args + " -o all.json"), c.expect, c.args);
    EXPECT_FALSE(fs::exists(dir + "/all.json")) << c.args;
  }
  // A shard of another build (its commit edited in): refused, with the way
  // out; --across-commits takes it, the same results, each commit listed.
  json other_build = load(dir + "/a2.json");
  other_build["meta"]["shard"]["run"]["git_commit"] = "0123456789ab";
  std::ofstream(dir + "/o2.json") << other_build.dump();
  expect_one_line_exit_2(sh(dir, "merge a1.json o2.json -o all.json"),
                         "o2.json is a shard of another run than a1.json (git_commit: ", "another build");
  expect_one_line_exit_2(sh(dir, "merge a1.json o2.json -o all.json"), "merge with --across-commits)", "the way out");
  EXPECT_FALSE(fs::exists(dir + "/all.json"));
  ASSERT_EQ(sh(dir, "merge a1.json a2.json -q -o same.json").status, 0);
  const Proc across = sh(dir, "merge --across-commits o2.json a1.json -q -o across.json");
  ASSERT_EQ(across.status, 0) << across.out;
  const json same = load(dir + "/same.json"), both = load(dir + "/across.json");
  EXPECT_EQ(same["results"], both["results"]);
  ASSERT_EQ(both["meta"]["merged"]["git_commits"].size(), 2u);
  EXPECT_EQ(both["meta"]["merged"]["git_commits"][1], "0123456789ab");
  EXPECT_EQ(both["meta"]["merged"]["git_commits"][0], load(dir + "/a1.json")["meta"]["shard"]["run"]["git_commit"]);
  EXPECT_FALSE(same["meta"]["merged"].contains("git_commits"));
  expect_one_line_exit_2(sh(dir, "merge --across-commits a1.json b2.json -o all.json"), "(seed: 0 there, 9 here)",
                         "--across-commits and another seed");
  expect_one_line_exit_2(sh(dir, "merge a1.json a2.json -o a1.json"), "is also an input", "shard as output");
  expect_one_line_exit_2(sh(dir, "merge a1.json a2.json -o /nonexistent-dir/all.json"), "/nonexistent-dir/all.json",
                         "unwritable");
  for (const auto& e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
  fs::remove_all(dir);
}

TEST(ShardCli, QuantileModeAndStopRulesFromTheCommandLine) {
  const std::string dir = temp_dir();
  // auto: exact up to 10^6 samples per configuration, sketch beyond.
  Proc p = sh(dir, "run -a chunk=8 -a dim=8 --samples 1000000 --dry-run");
  EXPECT_NE(p.out.find("quantiles: exact"), std::string::npos) << p.out;
  p = sh(dir, "run -a chunk=8 -a dim=8 --samples 1000001 --dry-run");
  EXPECT_NE(p.out.find("quantiles: sketch (relative error below 0.0977%)"), std::string::npos) << p.out;
  p = sh(dir, "run -a chunk=8 -a dim=8 --samples 1000001 --per-sample --max-memory 64G --dry-run");
  EXPECT_NE(p.out.find("quantiles: exact"), std::string::npos) << p.out;
  p = sh(dir, "run -a chunk=8 -a dim=8 --samples 1000 --shard 2/4 --dry-run");
  EXPECT_NE(p.out.find("shard 2/4: samples 250 to 499"), std::string::npos) << p.out;
  EXPECT_NE(p.out.find("quantiles: sketch"), std::string::npos) << p.out;
  // 10^12 samples in sketch mode fit where exact quantiles would need terabytes.
  p = sh(dir, "run -a chunk=8 -a dim=8 --samples 1e12 --max-memory 1G --dry-run");
  EXPECT_EQ(p.status, 0) << p.out;
  p = sh(dir, "run -a chunk=8 -a dim=8 --samples 1e12 --exact-quantiles --max-memory 1G --dry-run");
  EXPECT_EQ(p.status, 2) << p.out;
  EXPECT_NE(p.out.find("sketch quantiles need memory independent of the samples"), std::string::npos) << p.out;

  // A stop rule: the same stop whatever the threads and batch; the rule and
  // the configurations that reached the cap in the report's meta.
  const std::string until = "run -a family=model_like -a 'chunk=[32,48]' -a dim=32 --samples 400 --paths emulated "
                            "--until 'inv_finite.failures>=5' -q ";
  ASSERT_EQ(sh(dir, until + "--threads 1 --batch 1 -o u1.json").status, 0);
  ASSERT_EQ(sh(dir, until + "--threads 2 -o u2.json").status, 0);
  const json u1 = load(dir + "/u1.json"), u2 = load(dir + "/u2.json");
  EXPECT_EQ(u1["results"], u2["results"]);
  EXPECT_EQ(u1["results"][1]["samples"], 5) << "every C=48 inverse overflows: five samples, five failures";
  EXPECT_LT(u1["results"][0]["samples"].get<int>(), 400);
  EXPECT_EQ(u1["meta"]["until"]["rule"], "--until inv_finite.failures>=5");
  EXPECT_EQ(u1["meta"]["until"]["unmet"], json::array());
  EXPECT_TRUE(u1["results"][0].contains("state")) << "a stop rule's entries carry their state";
  // The share of a configuration that never fails cannot be known to a relative width: capped, named.
  p = sh(dir, "run -a family=floor -a chunk=8 -a dim=16 --samples 50 --paths emulated --until-ci inv_finite:0.5 -o c.json");
  ASSERT_EQ(p.status, 0) << p.out;
  EXPECT_NE(p.out.find("1 of 1 configurations reached the cap of 50 samples without it"), std::string::npos) << p.out;
  const json c = load(dir + "/c.json");
  EXPECT_EQ(c["results"][0]["samples"], 50);
  EXPECT_EQ(c["meta"]["until"]["unmet"].size(), 1u);
  fs::remove_all(dir);
}

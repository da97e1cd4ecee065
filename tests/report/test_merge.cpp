// Shards and their merge (report/merge): the split covers every sample
// once; merged shards give the whole run's statistics; shards of another
// run, a shard twice or missing, and edited or hostile reports are refused
// naming the culprit. A state read from a report is checked as strictly
// as the rest of it.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "report/merge.hpp"
#include "report/report.hpp"

using namespace chunkinv;
using nlohmann::json;

namespace {

// Sample i's values: an error with a wide range and a 0/1 flag.
double error_of(uint64_t i) { return i % 13 == 0 ? INFINITY : std::ldexp(1.0 + double(i % 7) / 7, -int(i % 40)); }
double flag_of(uint64_t i) { return i % 13 == 0 ? 0.0 : 1.0; }

// The entries of samples [first, first + count) of two configurations.
std::vector<ReportEntry> entries(uint64_t first, uint64_t count, bool per_sample, bool with_state = true) {
  std::vector<ReportEntry> out;
  for (int chunk : {16, 32}) {
    ReportEntry e;
    e.axes = {{"family", "floor"}, {"chunk", chunk}, {"dim", 32}, {"decay_floor", -5}, {"path", "emulated"},
              {"method", "neumann"}};
    e.samples = count;
    e.seed = 4;
    e.sketch = !per_sample;
    for (const auto& [name, fn, flag] : {std::tuple{"inv_total_rel_rmse", &error_of, false},
                                         std::tuple{"inv_finite", &flag_of, true}}) {
      StreamStats st;
      std::vector<double> v;
      for (uint64_t i = first; i < first + count; ++i) {
        st.add(fn(i * chunk));
        v.push_back(fn(i * chunk));
      }
      if (with_state) e.state[name] = st.state();
      if (per_sample) e.per_sample[name] = v;
      e.metrics[name] = per_sample ? aggregate(v, flag) : st.state().stats(flag);
    }
    out.push_back(std::move(e));
  }
  return out;
}

const json kRun = {{"experiment", "test"}, {"seed", 4}, {"samples", 1000}};

ShardReport shard(uint64_t i, uint64_t n, bool per_sample = false, json run = kRun) {
  const uint64_t total = run["samples"].get<uint64_t>();
  const auto [first, count] = shard_span({i, n}, total);
  ShardReport r{"s" + std::to_string(i) + ".json", {}};
  r.report.results = entries(first, count, per_sample);
  r.report.meta = {{"seed", 4}, {"started", "2026-01-0" + std::to_string(i) + "T00:00:00Z"}};
  r.report.meta["shard"] = shard_meta({i, n}, total, run);
  return r;
}

std::string refusal(const std::vector<ShardReport>& shards) {
  try {
    merge_shards(shards);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(merged)";
}

}  // namespace

TEST(Shard, SplitsCoverEverySampleOnceInOrder) {
  for (uint64_t samples : {1, 2, 7, 1000, 1000003}) {
    for (uint64_t n : {1, 2, 3, 7, 64}) {
      if (n > samples) continue;
      uint64_t next = 0;
      for (uint64_t i = 1; i <= n; ++i) {
        const auto [first, count] = shard_span({i, n}, samples);
        EXPECT_EQ(first, next);
        EXPECT_GE(count, samples / n);
        EXPECT_LE(count, samples / n + 1);
        next = first + count;
      }
      EXPECT_EQ(next, samples);
    }
  }
  // No overflow at the largest sample count.
  EXPECT_EQ(shard_span({3, 3}, kMaxSamples).first + shard_span({3, 3}, kMaxSamples).second, kMaxSamples);
  EXPECT_EQ(parse_shard("2/8").index, 2u);
  EXPECT_EQ(parse_shard("2/8").count, 8u);
  for (const char* bad : {"3/2", "0/0", "0/4", "1/0", "1", "/", "1/", "/4", "a/b", "-1/4", "1/4/2", " 1/4", "1.0/4",
                          "1/10000000000000000"})
    EXPECT_THROW(parse_shard(bad), UsageError) << bad;
}

TEST(Shard, MergedShardsGiveTheWholeRunsStatistics) {
  for (bool per_sample : {false, true}) {
    const std::vector<ReportEntry> whole = entries(0, 1000, per_sample, false);
    const Report merged = merge_shards({shard(3, 4, per_sample), shard(1, 4, per_sample), shard(4, 4, per_sample),
                                        shard(2, 4, per_sample)});
    Report want;
    want.results = whole;
    EXPECT_EQ(report_to_json(want)["results"], report_to_json(merged)["results"]) << per_sample;
    EXPECT_EQ(merged.meta["samples"], 1000);
    EXPECT_FALSE(merged.meta.contains("shard"));
    EXPECT_EQ(merged.meta["merged"]["shards"], 4);
    EXPECT_EQ(merged.meta["started"], "2026-01-01T00:00:00Z") << "the earliest start";
  }
  EXPECT_NO_THROW(merge_shards({shard(1, 1)}));
}

TEST(Shard, MergeRefusesWhatIsNotOneWholeRun) {
  ShardReport not_shard = shard(1, 2);
  not_shard.report.meta.erase("shard");
  EXPECT_NE(refusal({not_shard, shard(2, 2)}).find("s1.json is not a shard of a run (no meta.shard"), std::string::npos);
  json other = kRun;
  other["seed"] = 5;
  EXPECT_NE(refusal({shard(1, 2), shard(2, 2, false, other)}).find("s2.json is a shard of another run than s1.json (seed: 4 there, 5 here)"),
            std::string::npos)
      << refusal({shard(1, 2), shard(2, 2, false, other)});
  EXPECT_NE(refusal({shard(1, 2), shard(2, 3)}).find("not the same split"), std::string::npos);
  EXPECT_NE(refusal({shard(1, 3), shard(2, 3), shard(2, 3), shard(3, 3)}).find("are both shard 2/3 (overlapping shards)"),
            std::string::npos);
  EXPECT_NE(refusal({shard(1, 3), shard(3, 3)}).find("shard 2/3 is missing"), std::string::npos);
  EXPECT_NE(refusal({}).find("no reports"), std::string::npos);
  // Edited: a range that is not the shard's, entries of another configuration,
  // an entry without its state, per-sample values in one shard only.
  ShardReport moved = shard(2, 2);
  moved.report.meta["shard"]["first"] = 499;
  EXPECT_NE(refusal({shard(1, 2), moved}).find("covers samples [500, 1000), not [499, 999)"), std::string::npos)
      << refusal({shard(1, 2), moved});
  ShardReport renamed = shard(2, 2);
  renamed.report.results[1].axes["chunk"] = 48;
  EXPECT_NE(refusal({shard(1, 2), renamed}).find("s2.json results[1]"), std::string::npos);
  ShardReport stateless = shard(2, 2);
  stateless.report.results[0].state.clear();
  EXPECT_NE(refusal({shard(1, 2), stateless}).find("carries no \"state\""), std::string::npos);
  EXPECT_NE(refusal({shard(1, 2, true), shard(2, 2, false)}).find("per-sample values"), std::string::npos);
  ShardReport fewer = shard(2, 2);
  fewer.report.results.pop_back();
  EXPECT_NE(refusal({shard(1, 2), fewer}).find("has 1 entries"), std::string::npos);
  ShardReport hostile = shard(1, 2);
  hostile.report.meta["shard"]["count"] = "2";
  EXPECT_NE(refusal({hostile, shard(2, 2)}).find("meta.shard.count is missing or not a whole number"), std::string::npos);
}

TEST(Shard, ShardsOfTwoBuildsMergeOnlyWhenAskedTo) {
  json a = kRun, b = kRun;
  a["git_commit"] = "aaaaaaaaaaaa";
  b["git_commit"] = "bbbbbbbbbbbb";
  const std::vector<ShardReport> two = {shard(1, 3, false, a), shard(3, 3, false, b), shard(2, 3, false, a)};
  const std::string why = refusal(two);
  EXPECT_NE(why.find("s3.json is a shard of another run than s1.json (git_commit: \"aaaaaaaaaaaa\" there, "
                     "\"bbbbbbbbbbbb\" here; shards of builds known to give the same values merge with "
                     "--across-commits)"),
            std::string::npos)
      << why;
  const Report merged = merge_shards(two, {.across_commits = true});
  Report want;
  want.results = entries(0, 1000, false, false);
  EXPECT_EQ(report_to_json(want)["results"], report_to_json(merged)["results"]);
  EXPECT_EQ(merged.meta["merged"]["git_commits"], json({"aaaaaaaaaaaa", "aaaaaaaaaaaa", "bbbbbbbbbbbb"}))
      << "in shard order";
  // Only the commit may differ; and one commit needs no list.
  json seed = b;
  seed["seed"] = 5;
  const std::string other = refusal({shard(1, 2, false, a), shard(2, 2, false, seed)});
  EXPECT_NE(other.find("(seed: 4 there, 5 here)"), std::string::npos) << other;
  EXPECT_EQ(other.find("--across-commits"), std::string::npos) << other;
  EXPECT_THROW(merge_shards({shard(1, 2, false, a), shard(2, 2, false, seed)}, {.across_commits = true}), UsageError);
  EXPECT_FALSE(merge_shards({shard(1, 2, false, a), shard(2, 2, false, a)}, {.across_commits = true})
                   .meta["merged"]
                   .contains("git_commits"));
}

TEST(Shard, StatesReadBackAndHostileStatesAreRefused) {
  Report r;
  r.results = entries(0, 100, false);
  const json good = report_to_json(r);
  const Report back = parse_report(good.dump(), "r.json");
  ASSERT_EQ(back.results.size(), 2u);
  EXPECT_TRUE(back.results[0].sketch);
  EXPECT_TRUE(back.results[0].state.at("inv_total_rel_rmse") == r.results[0].state.at("inv_total_rel_rmse"));
  EXPECT_EQ(report_to_json(back).dump(), good.dump());
  struct Case {
    std::function<void(json&)> edit;
    std::string expect;
  };
  const std::vector<Case> cases{
      {[](json& s) { s["count"] = 99; }, "\"count\" (the samples) = 99"},
      {[](json& s) { s["zeros"] = 1; }, "may not add up to more than the samples"},
      {[](json& s) { s["pos_inf"] = 0; }, "the state's counts add up to 92, not to the samples (100)"},
      {[](json& s) { s["pos"][1] = 0; }, "a bucket's count must be a whole number from 1"},
      {[](json& s) { s["pos"][2] = 0; }, "a key step must be a whole number from 1"},
      {[](json& s) { s["pos"][0] = kSketchKeyMax + 1; }, "the first key must be a whole number"},
      {[](json& s) { s["pos"].push_back(1); }, "must be a list [key, count, key step, count, ...]"},
      {[](json& s) { s["sum"] = "0x12"; }, "lower-case hexadecimal"},
      {[](json& s) { s["sum"] = 12; }, "\"sum\" must be a string"},
      {[](json& s) { s["max"] = 1e-300; }, "min <= max"},
      {[](json& s) { s["max"] = 1.0; }, "do not fit the counts of -inf and +inf"},
      {[](json& s) { s["min"] = "nan"; }, "NaN exactly when every value is NaN"},
      {[](json& s) { s["extra"] = 1; }, "unknown key \"extra\""},
      {[](json& s) { s.erase("neg"); }, "\"neg\" is missing"},
      {[](json& s) { s["pos"][1] = 1e30; }, "a bucket's count"},
  };
  for (const Case& c : cases) {
    json j = good;
    c.edit(j["results"][0]["state"]["metrics"]["inv_total_rel_rmse"]);
    try {
      parse_report(j.dump(), "r.json");
      ADD_FAILURE() << "accepted: " << c.expect;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(c.expect), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("results[0]: state.inv_total_rel_rmse"), std::string::npos) << e.what();
    }
  }
  json j = good;
  j["results"][0]["state"]["format"] = "chunkinv.sketch/0";
  EXPECT_THROW(parse_report(j.dump(), "r.json"), UsageError);
  j = good;
  j["results"][0]["state"]["metrics"].erase("inv_finite");
  EXPECT_THROW(parse_report(j.dump(), "r.json"), UsageError);
  j = good;
  j["results"][0]["quantiles"] = "approximate";
  EXPECT_THROW(parse_report(j.dump(), "r.json"), UsageError);
}

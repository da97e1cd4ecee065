// The worst samples (--worst N --by METRIC): the bounded heap keeps exactly
// the N worst of all it was offered, in a total order (non-finite first,
// then the value, then the lower index), whatever the order of offers or
// the split into shards; the runner's lists, in exact and sketch mode, for
// any thread count, batch and shard split, equal the slow reference: every
// per-sample value sorted.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <tuple>

#include "core/error.hpp"
#include "driver/runner.hpp"
#include "driver/spec.hpp"
#include "report/report.hpp"
#include "report/table.hpp"
#include "report/worst.hpp"

using namespace chunkinv;

namespace {

// The slow, obvious reference: every (value, index) sorted by the order, the first n kept.
std::vector<uint64_t> reference_worst(const std::string& by, const std::vector<double>& v, size_t n) {
  std::vector<uint64_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](uint64_t a, uint64_t b) { return worse_sample(by, v[a], a, v[b], b); });
  idx.resize(std::min(n, idx.size()));
  return idx;
}

std::vector<uint64_t> indices(const WorstSamples& w) {
  std::vector<uint64_t> out;
  for (const auto& s : w.samples) out.push_back(s.index);
  return out;
}

WorstSamples heap_of(const std::string& by, const std::vector<double>& v, size_t n, const std::vector<uint64_t>& order) {
  WorstHeap h(by, n);
  for (uint64_t i : order) h.offer(i, v[i], [&] { return std::map<std::string, double>{{by, v[i]}}; });
  return h.result();
}

std::vector<Point> configs_of(const std::vector<std::string>& axes) {
  ExperimentSpec spec;
  for (const auto& a : axes) apply_axis(spec, a);
  return expand(spec);
}

}  // namespace

TEST(Worst, OrderIsNonFiniteThenValueThenIndex) {
  const std::string e = "inv_total_rel_rmse";
  EXPECT_TRUE(worse_sample(e, INFINITY, 9, 1e9, 0));
  EXPECT_TRUE(worse_sample(e, NAN, 9, 1e9, 0));
  EXPECT_TRUE(worse_sample(e, 2e-3, 9, 1e-3, 0));
  EXPECT_TRUE(worse_sample(e, 1e-3, 3, 1e-3, 4)) << "ties go to the lower index";
  EXPECT_FALSE(worse_sample(e, 1e-3, 4, 1e-3, 4));
  EXPECT_TRUE(worse_sample(e, INFINITY, 3, INFINITY, 4));
  // A 0/1 flag is worst at 0.
  EXPECT_TRUE(worse_sample("inv_finite", 0, 9, 1, 0));
  EXPECT_FALSE(worse_sample("inv_finite", 1, 0, 0, 9));
}

TEST(Worst, HeapKeepsTheNWorstInAnyOrderOfOffers) {
  std::mt19937_64 rng(7);
  std::vector<double> v(500);
  for (auto& x : v) x = double(rng() % 50) * 1e-4;  // many ties
  v[17] = v[300] = INFINITY;
  std::vector<uint64_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  for (size_t n : {1, 5, 64, 600}) {
    const auto want = reference_worst("l_rel_rmse", v, n);
    EXPECT_EQ(indices(heap_of("l_rel_rmse", v, n, order)), want) << n;
    std::shuffle(order.begin(), order.end(), rng);
    EXPECT_EQ(indices(heap_of("l_rel_rmse", v, n, order)), want) << n << " shuffled";
  }
  EXPECT_EQ(reference_worst("l_rel_rmse", v, 2), (std::vector<uint64_t>{17, 300}));
}

TEST(Worst, MergedShardsAreTheWholeRunsWorst) {
  std::mt19937_64 rng(3);
  std::vector<double> v(300);
  for (auto& x : v) x = double(rng() % 20);
  for (size_t shards : {2, 3, 7}) {
    WorstHeap merged("decay_zeros", 10);
    for (size_t s = 0; s < shards; ++s) {
      std::vector<uint64_t> part;
      for (uint64_t i = s * v.size() / shards; i < (s + 1) * v.size() / shards; ++i) part.push_back(i);
      merged.add(heap_of("decay_zeros", v, 10, part));
    }
    EXPECT_EQ(indices(merged.result()), reference_worst("decay_zeros", v, 10)) << shards;
  }
}

TEST(Worst, JsonRoundTripsAndRefusesWhatCannotBe) {
  WorstSamples w{"inv_total_rel_rmse", 3, {{54, {{"inv_total_rel_rmse", INFINITY}, {"inv_finite", 0}}},
                                           {95, {{"inv_total_rel_rmse", 2e-3}, {"inv_finite", 1}}}}};
  const auto j = worst_to_json(w);
  EXPECT_EQ(j["samples"][0]["values"]["inv_total_rel_rmse"], "inf");
  const WorstSamples back = worst_from_json(j, 100);
  EXPECT_EQ(indices(back), (std::vector<uint64_t>{54, 95}));
  EXPECT_EQ(back.n, 3u);
  auto bad = j;
  std::swap(bad["samples"][0], bad["samples"][1]);
  EXPECT_THROW(worst_from_json(bad, 100), UsageError) << "not worst first";
  bad = j;
  bad["samples"][1]["index"] = 54;
  EXPECT_THROW(worst_from_json(bad, 100), UsageError) << "a sample twice";
  bad = j;
  bad["extra"] = 1;
  EXPECT_THROW(worst_from_json(bad, 100), UsageError);
  EXPECT_THROW(worst_from_json(j, 1), UsageError) << "more samples than the entry has";
}

TEST(Worst, ParseWorstChecksTheOptions) {
  std::string by;
  EXPECT_EQ(parse_worst("", by), 0u);
  EXPECT_EQ(parse_worst("5", by), 5u);
  EXPECT_EQ(by, kDefaultWorstMetric);
  by = "inv_stable_l_rel_rmse";
  EXPECT_EQ(parse_worst("2", by), 2u);
  EXPECT_EQ(by, "inv_gold_l_rel_rmse") << "an old alias is taken by today's name";
  by = "inv_totl_rel_rmse";
  try {
    parse_worst("2", by);
    ADD_FAILURE() << "an unknown metric";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean inv_total_rel_rmse"), std::string::npos) << e.what();
  }
  by = "l_rel_rmse";
  EXPECT_THROW(parse_worst("", by), UsageError) << "--by without --worst";
  by.clear();
  EXPECT_THROW(parse_worst("0", by), UsageError);
  EXPECT_THROW(parse_worst("1001", by), UsageError);
}

TEST(Worst, InspectCommandIsQuotedAndNamesTheSample) {
  const nlohmann::json axes = {{"family", "model_like"}, {"chunk", 32}, {"dim", 128}, {"decay_floor", -5.5},
                               {"path", "emulated"},     {"method", "neumann"}};
  EXPECT_EQ(shell_command(inspect_argv(axes, 7, 54)),
            "chunkinv inspect --family model_like -a chunk=32 -a decay_floor=-5.5 -a dim=128 -a method=neumann "
            "--paths emulated --seed 7 --sample 54 --brief");
  const nlohmann::json file = {{"family", "file"}, {"inputs", "my tokens's.safetensors"}, {"chunk", 64}, {"dim", 128},
                               {"tail", "pad"},    {"path", "candidate"}, {"method", "neumann"}};
  EXPECT_EQ(shell_command(inspect_argv(file, 0, 2, "out.npz")),
            "chunkinv inspect --inputs 'my tokens'\\''s.safetensors' --candidate out.npz -a chunk=64 -a method=neumann "
            "-a tail=pad --sample 2 --brief");
  // A newline, a tab or a byte that is not UTF-8 keeps the command on one
  // line: $'...' with \xNN, which the shell reads back to the same bytes.
  EXPECT_EQ(shell_command({"chunkinv", "--inputs", "new\nline's\\x\xff.npz", "tab\there", "é.npz"}),
            "chunkinv --inputs $'new\\x0aline\\'s\\\\x\\xff.npz' $'tab\\x09here' 'é.npz'");
}

// The runner's lists against the reference over its own per-sample values:
// exact and sketch quantiles, threads, batches, and shards merged.
TEST(Worst, RunnerListsAreTheReferencesForAnySplit) {
  const auto cfg = configs_of({"family=model_like", "chunk=32", "dim=32", "decay_floor=-8"});
  const auto paths = parse_paths("gold,emulated");
  const uint64_t n = 120;
  RunnerOptions one;
  one.threads = 1;
  StatsOptions per;
  per.per_sample = true;
  const auto full = run_experiment(cfg, paths, n, 4, one, per).entries;

  std::vector<std::vector<ReportEntry>> runs;
  for (const auto& [threads, batch, sketch] : std::vector<std::tuple<int, int, bool>>{{1, 4096, false}, {2, 7, false}, {2, 5, true}, {1, 1, true}}) {
    RunnerOptions o;
    o.threads = threads;
    o.batch = uint64_t(batch);
    StatsOptions s;
    s.quantiles = sketch ? Quantiles::kSketch : Quantiles::kExact;
    s.worst = 6;
    s.worst_by = "inv_total_rel_rmse";
    runs.push_back(run_experiment(cfg, paths, n, 4, o, s).entries);
  }
  // Three shards of 40 samples, merged as `merge` merges them.
  std::vector<WorstHeap> merged;
  for (uint64_t first = 0; first < n; first += 40) {
    StatsOptions s;
    s.worst = 6;
    s.worst_by = "inv_total_rel_rmse";
    const auto part = run_experiment(cfg, paths, 40, 4, one, s, first).entries;
    merged.resize(part.size(), WorstHeap("inv_total_rel_rmse", 6));
    for (size_t e = 0; e < part.size(); ++e)
      if (part[e].worst) merged[e].add(*part[e].worst);
  }
  size_t checked = 0;
  for (size_t e = 0; e < full.size(); ++e) {
    const auto it = full[e].per_sample.find("inv_total_rel_rmse");
    if (it == full[e].per_sample.end()) {
      for (const auto& r : runs) EXPECT_FALSE(r[e].worst) << "an entry without the metric keeps no list";
      continue;
    }
    const auto want = reference_worst("inv_total_rel_rmse", it->second, 6);
    for (const auto& r : runs) {
      ASSERT_TRUE(r[e].worst);
      EXPECT_EQ(indices(*r[e].worst), want) << r[e].axes.dump();
      // Each sample's figures are its per-sample values.
      for (const auto& s : r[e].worst->samples)
        EXPECT_EQ(s.values.at("l_rel_rmse"), full[e].per_sample.at("l_rel_rmse")[s.index]);
    }
    EXPECT_EQ(indices(merged[e].result()), want) << "shards";
    EXPECT_EQ(indices(worst_from_per_sample(full[e].per_sample, "inv_total_rel_rmse", 6)), want) << "from per-sample values";
    ++checked;
  }
  EXPECT_GT(checked, 0u);
}

TEST(Worst, TextListsEachSampleWithItsCommand) {
  Report r;
  ReportEntry e;
  e.axes = {{"family", "floor"}, {"chunk", 16}, {"dim", 128}, {"decay_floor", -5}, {"path", "emulated"}, {"method", "neumann"}};
  e.samples = 4;
  e.per_sample["inv_total_rel_rmse"] = {1e-3, INFINITY, 3e-3, 2e-3};
  e.per_sample["inv_finite"] = {1, 0, 1, 1};
  r.results.push_back(e);
  const std::string text = worst_text({{"r.json", r}}, 2, "inv_total_rel_rmse");
  EXPECT_NE(text.find("floor chunk=16 decay_floor=-5 dim=128 method=neumann, path emulated (4 samples): the 2 worst by inv_total_rel_rmse"),
            std::string::npos) << text;
  EXPECT_NE(text.find("  sample 1: inv_total_rel_rmse inf, inv_finite 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  sample 2: inv_total_rel_rmse 3.00e-3, inv_finite 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("chunkinv inspect --family floor -a chunk=16 -a decay_floor=-5 -a dim=128 -a method=neumann "
                      "--paths emulated --seed 0 --sample 1 --brief"),
            std::string::npos) << text;
}

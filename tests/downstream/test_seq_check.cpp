// `check` and `table` know every seq metric and which way it improves:
// o_finite and o_first_nonfinite are better higher, the errors, the state's
// growth and the inverse's share lower; a seq report whose o_finite drops
// is WORSE through the command.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "downstream/scores.hpp"
#include "metrics/metrics.hpp"
#include "metrics/stats.hpp"
#include "report/compare.hpp"
#include "report/report.hpp"
#include "support/shell.hpp"
#include "support/usage_error.hpp"

namespace chunkinv {
namespace {

using nlohmann::json;

TEST(SeqMetrics, EveryMetricIsKnownWithItsDirection) {
  for (const MetricInfo& m : downstream_metrics()) {
    const MetricInfo* found = find_metric(m.name);
    ASSERT_NE(found, nullptr) << m.name;
    EXPECT_EQ(found, &m) << m.name << ": the one declaration";
    EXPECT_EQ(find_chunk_metric(m.name), nullptr) << m.name << ": a run does not measure it";
  }
  const auto higher = [](const char* n) { return higher_is_better(*find_metric(n)); };
  EXPECT_TRUE(higher("o_finite"));
  EXPECT_TRUE(higher("o_first_nonfinite"));
  for (const char* n : {"o_rel_rmse", "o_rel_rmse_inverse_only", "o_rel_rmse_storage", "ht_rel_rmse",
                        "ht_rel_rmse_inverse_only", "ht_rel_rmse_storage", "state_rel_rmse_max", "state_growth_per_chunk",
                        "o_inverse_share", "o_rel_rmse_from_0", "o_rel_rmse_from_4096"})
    EXPECT_FALSE(higher(n)) << n;
  // The windows: o_rel_rmse_from_<p>, p a whole number.
  EXPECT_EQ(find_metric(window_metric_name(480)), &window_metric_info());
  for (const char* n : {"o_rel_rmse_from_", "o_rel_rmse_from_x", "o_rel_rmse_from_012", "o_rel_rmse_from_-1"})
    EXPECT_EQ(find_metric(n), nullptr) << n;
  // The chunk's own metrics keep theirs.
  EXPECT_TRUE(higher("inv_finite"));
  EXPECT_FALSE(higher("inv_total_rel_rmse"));
  // A run's --metrics takes none of them.
  EXPECT_HAS(testing::usage_error([] { parse_metric_list("o_finite", "--metrics"); }), "unknown metric \"o_finite\"");
}

// The backward's metrics (seq -a backward=...) too: every metric of a
// backward report is known, grad_finite and grad_first_nonfinite better
// higher, the gradients' errors and their windows lower.
TEST(SeqMetrics, TheBackwardsMetricsAreKnownWithTheirDirection) {
  const std::string dir = testing::test_dir("seq-check-bwd");
  const auto ok = testing::run_chunkinv_in(dir, "seq -a seq_len=64 -a chunk=16 -a dim=8 -a value_dim=8 -a window=32 "
                                                "-a method=neumann -a backward=stored --paths gold --samples 2 -q -o b.json");
  ASSERT_EQ(ok.status, 0) << ok.out;
  const Report r = read_report(dir + "/b.json");
  ASSERT_EQ(r.results.size(), 1u);
  size_t gradients = 0;
  for (const auto& [name, st] : r.results[0].metrics) {
    const MetricInfo* m = find_metric(name);
    ASSERT_NE(m, nullptr) << name;
    const bool later_is_better = name == "grad_finite" || name == "grad_first_nonfinite" || name == "o_finite" ||
                                 name == "o_first_nonfinite";
    EXPECT_EQ(higher_is_better(*m), later_is_better) << name;
    gradients += name.starts_with("dq_") || name.starts_with("dbeta_");
  }
  EXPECT_TRUE(r.results[0].metrics.count("dq_rel_rmse_from_32"));
  EXPECT_GT(gradients, 8u);
  EXPECT_EQ(find_metric("dq_rel_rmse_from_032"), nullptr);
  std::filesystem::remove_all(dir);
}

// A real seq report and the same with o finite in fewer sequences (and
// earlier): check says WORSE for o_finite and o_first_nonfinite, through
// the command and its exit status.
TEST(SeqMetrics, CheckSaysWorseWhenOFiniteDrops) {
  const std::string dir = testing::test_dir("seq-check");
  const auto ok = testing::run_chunkinv_in(
      dir, "seq -a seq_len=128 -a chunk=16 -a dim=8 -a value_dim=8 -a method=neumann --paths gold --samples 4 -q -o a.json");
  ASSERT_EQ(ok.status, 0) << ok.out;
  Report a = read_report(dir + "/a.json");
  ASSERT_EQ(a.results.size(), 1u);
  // Every metric of a seq entry is known to check and table.
  for (const auto& [name, st] : a.results[0].metrics) EXPECT_NE(find_metric(name), nullptr) << name;
  ASSERT_EQ(a.results[0].metrics.at("o_finite").mean, 1.0);
  Report b = a;
  std::vector<double> finite{1, 0, 1, 1}, first{128, 40, 128, 128};
  b.results[0].metrics["o_finite"] = aggregate(finite, true);
  b.results[0].metrics["o_first_nonfinite"] = aggregate(first, false);
  {
    std::ofstream f(dir + "/b.json");
    f << report_to_json(b).dump(1) << "\n";
  }
  const CheckResult r = compare_reports(a, b, default_check_rules());
  const auto verdict = [&](const char* metric, const char* stat) {
    for (const Comparison& c : r.figures)
      if (c.metric == metric && c.statistic == stat) return c.verdict;
    ADD_FAILURE() << metric << " " << stat << " not compared";
    return Verdict::kSame;
  };
  EXPECT_EQ(verdict("o_finite", "mean"), Verdict::kWorse);
  EXPECT_EQ(verdict("o_first_nonfinite", "min"), Verdict::kWorse);
  EXPECT_EQ(verdict("o_rel_rmse_inverse_only", "median"), Verdict::kSame);  // compared at all
  EXPECT_EQ(verdict("o_rel_rmse_from_0", "median"), Verdict::kSame);
  const CheckResult back = compare_reports(b, a, default_check_rules());
  for (const Comparison& c : back.figures)
    if (c.metric == "o_finite" || c.metric == "o_first_nonfinite") {
      EXPECT_EQ(c.verdict, Verdict::kBetter) << c.metric;
    }

  const auto check = testing::run_chunkinv_in(dir, "check -b a.json b.json");
  EXPECT_EQ(check.status, 1) << check.out;
  bool row = false;
  std::istringstream lines(check.out);
  for (std::string line; std::getline(lines, line);)
    if (line.find("| o_finite ") != std::string::npos && line.find("| mean ") != std::string::npos)
      row = line.find("WORSE") != std::string::npos;
  EXPECT_TRUE(row) << check.out;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace chunkinv

// Every metric on hand-made outputs, metric sets and old names, and the aggregates.
#include <gtest/gtest.h>

#include <cmath>

#include "inputs/family.hpp"
#include "metrics/fp64_order.hpp"
#include "metrics/metrics.hpp"
#include "metrics/stats.hpp"

using namespace chunkinv;

TEST(Metrics, RelRmseOnHandMadeMatrices) {
  Mat e(2, 2), a(2, 2);
  e << 1, 0, 0, 1;
  a << 1, 0, 0, 3;
  // sqrt(mean((a-e)^2)) = sqrt(4/4) = 1; sqrt(mean(e^2)) = sqrt(2/4).
  EXPECT_DOUBLE_EQ(rel_rmse(a, e), 1.0 / std::sqrt(0.5));
  EXPECT_EQ(rel_rmse(e, e), 0.0);
  a(0, 1) = NAN;
  EXPECT_TRUE(std::isinf(rel_rmse(a, e)));
  a(0, 1) = -INFINITY;
  EXPECT_TRUE(std::isinf(rel_rmse(a, e)));
  EXPECT_EQ(rel_rmse(Mat::Zero(2, 2), Mat::Zero(2, 2)), 0.0);  // the 1e-30 guard
}

// A chunk metric's sums in classes (fp64::ChunkSums): the lower triangle's
// packed index k mod 8, each class in order, then ((p0 + p4) + (p2 + p6)) +
// ((p1 + p5) + (p3 + p7)); then the upper classes. Here the order shows:
// the three squared errors of 2^-54 at k = 0, 4 (class 0 and 4) and k = 2
// (class 2) meet in the first half and make 1.5 * 2^-53, which moves the
// total off 1 (k = 1 in the second half); in data order each is added to 1
// on its own and rounds away.
TEST(Metrics, ChunkRelRmseAddsInClasses) {
  Mat a = Mat::Zero(3, 3);
  const Mat e = Mat::Zero(3, 3);
  a(0, 0) = 0x1p-27;  // k = 0
  a(1, 0) = 1;        // k = 1
  a(1, 1) = 0x1p-27;  // k = 2
  a(2, 1) = 0x1p-27;  // k = 4
  fp64::ChunkSums classes;
  fp64::RelRmse data;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) {
      classes.add(3, i, j, a(i, j), e(i, j));
      data.add(a(i, j), e(i, j));
    }
  EXPECT_EQ(classes.sums().err, 1 + 0x1p-52);
  EXPECT_EQ(data.err, 1.0);
  EXPECT_EQ(chunk_rel_rmse(a, e), classes.value(3));
  EXPECT_EQ(rel_rmse(a, e), data.value(9));
  // The upper classes' total is added after the lower one's: 2^-54 above
  // the diagonal rounds away against 1 + 2^-52 (a quarter of a unit), where in
  // the lower classes' first half it would have counted.
  a(0, 2) = 0x1p-27;
  fp64::ChunkSums upper;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) upper.add(3, i, j, a(i, j), e(i, j));
  EXPECT_EQ(upper.sums().err, 1 + 0x1p-52);
  EXPECT_EQ(chunk_rel_rmse(a, e), upper.value(3));
  a(0, 2) = NAN;
  EXPECT_TRUE(std::isinf(chunk_rel_rmse(a, e)));
}

TEST(Metrics, EveryPathMetricOnAHandMadeOutput) {
  GoldOutput gold;
  gold.L = Mat::Zero(2, 2);
  gold.L(1, 0) = 0.5;
  gold.inv = unit_lower_inverse(gold.L);  // [[1,0],[-0.5,1]]
  PathOutput out;
  out.l.decay = {1.0, 0.0};
  out.l.inv_decay = {1.0, INFINITY};
  out.l.L = gold.L;
  out.l.L(1, 0) = 0.25;
  out.on_path_l.inv = Mat::Identity(2, 2);
  out.on_path_l.inv(1, 0) = -0.25;
  out.on_path_l.diagnostics = {1, 0.25};
  out.on_gold_l.inv = gold.inv;
  out.on_gold_l.diagnostics = {1, 0.5};
  const MethodSpec& neumann = find_method("neumann");
  const MetricSet& set = method_metrics(neumann);
  std::vector<double> v(set.size());
  evaluate(neumann, gold, out, v.data());
  auto at = [&](const char* n) -> double {
    const size_t i = set.index(n);
    if (i == MetricSet::npos) ADD_FAILURE() << n;
    return i == MetricSet::npos ? NAN : v[i];
  };
  EXPECT_EQ(at("decay_zeros"), 1);
  EXPECT_EQ(at("inv_decay_nonfinite"), 1);
  EXPECT_EQ(at("l_finite"), 1);
  EXPECT_EQ(at("inv_finite"), 1);
  // L: error 0.25 in one of 4 entries over rms of 0.5 in one of 4 entries.
  EXPECT_DOUBLE_EQ(at("l_rel_rmse"), 0.5);
  // INV: error 0.25 at (1,0); reference rms sqrt((1 + 0.25 + 1)/4).
  EXPECT_DOUBLE_EQ(at("inv_total_rel_rmse"), std::sqrt(0.0625 / 4) / std::sqrt(2.25 / 4));
  EXPECT_EQ(at("inv_method_only_rel_rmse"), 0.0);  // INV is the exact inverse of I + path L
  EXPECT_EQ(at("inv_gold_l_rel_rmse"), 0.0);
  // (I + gold L) * INV = [[1,0],[0.25,1]]: error 0.25 in one entry of 4 over rms sqrt(2/4).
  EXPECT_DOUBLE_EQ(at("inverse_residual"), std::sqrt(0.0625 / 4) / std::sqrt(0.5));
  EXPECT_EQ(at("highest_power"), 1);
  EXPECT_EQ(at("power_max"), 0.25);
  EXPECT_EQ(at("gold_l_highest_power"), 1);
  EXPECT_EQ(at("gold_l_power_max"), 0.5);
  out.l.L(1, 0) = NAN;
  out.on_path_l.inv(1, 0) = NAN;
  evaluate(neumann, gold, out, v.data());
  EXPECT_EQ(at("l_finite"), 0);
  EXPECT_EQ(at("inv_finite"), 0);
  EXPECT_EQ(at("inv_total_rel_rmse"), INFINITY);
  EXPECT_EQ(at("inv_method_only_rel_rmse"), INFINITY);
  EXPECT_EQ(at("inverse_residual"), INFINITY);
}

TEST(Metrics, SetsAreGenericPlusEachMethodsDiagnosticsAndOldNamesStillResolve) {
  const MetricSet& f = method_metrics(find_method("fwdsub_fp32"));
  EXPECT_NE(f.index("inv_total_rel_rmse"), MetricSet::npos);
  EXPECT_NE(f.index("inv_max"), MetricSet::npos);
  EXPECT_NE(f.index("gold_l_inv_max"), MetricSet::npos);
  EXPECT_EQ(f.index("power_max"), MetricSet::npos) << "Neumann's diagnostics are Neumann's alone";
  EXPECT_EQ(canonical_metric_name("inv_gold_l_rel_rmse"), "inv_gold_l_rel_rmse");
  EXPECT_EQ(canonical_metric_name("gold_l_power_max"), "gold_l_power_max");
  EXPECT_EQ(canonical_metric_name("inv_method_only_rel_rmse"), "inv_method_only_rel_rmse");
  ASSERT_NE(find_metric("inv_gold_l_rel_rmse"), nullptr);
  EXPECT_STREQ(find_metric("inv_gold_l_rel_rmse")->name, "inv_gold_l_rel_rmse");
  EXPECT_NE(find_metric("inv_max_abs"), nullptr);  // the gold's own
  EXPECT_EQ(find_metric("inv_nonesuch"), nullptr);
}

TEST(Stats, MedianSortsInfinityLastAndMeanSkipsIt) {
  std::vector<double> v{3, INFINITY, 1, 2, INFINITY};
  const Stats s = aggregate(v, false);
  EXPECT_EQ(s.median, 3);
  EXPECT_EQ(s.min, 1);
  EXPECT_TRUE(std::isinf(s.max));
  EXPECT_EQ(s.mean, 2);
  EXPECT_EQ(s.finite_count, 3u);
  EXPECT_TRUE(std::isinf(s.p90));
  std::vector<double> w{INFINITY, INFINITY, 1};
  EXPECT_TRUE(std::isinf(aggregate(w, false).median));
  std::vector<double> x{1, 2, 3, 4};
  EXPECT_EQ(aggregate(x, false).median, 2.5);
  EXPECT_DOUBLE_EQ(quantile_sorted({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, 0.1), 2.0);
}

TEST(Stats, WilsonInterval) {
  // 94 of 100: the 95% Wilson interval is [0.875, 0.972] (to 3 digits).
  auto [lo, hi] = wilson95(94, 100);
  EXPECT_NEAR(lo, 0.8752, 5e-4);
  EXPECT_NEAR(hi, 0.9722, 5e-4);
  auto [l0, h0] = wilson95(0, 3);
  EXPECT_EQ(l0, 0.0);
  EXPECT_NEAR(h0, 0.5615, 5e-4);
  std::vector<double> flags{1, 1, 0, 1};
  const Stats s = aggregate(flags, true);
  EXPECT_EQ(s.mean, 0.75);
  EXPECT_TRUE(s.has_wilson);
  EXPECT_LT(s.wilson_low, 0.75);
  EXPECT_GT(s.wilson_high, 0.75);
}

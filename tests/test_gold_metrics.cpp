// The gold against exact arithmetic properties, every metric on hand-made
// matrices, and the aggregates.
#include <gtest/gtest.h>

#include <cmath>

#include "inputs/family.hpp"
#include "metrics/metrics.hpp"
#include "metrics/stats.hpp"
#include "paths/gold/gold.hpp"

using namespace chunkinv;

TEST(Gold, ResidualBelow1e13AtChunk48) {
  for (const char* fam : {"model_like", "weak_decay_correlated", "floor"}) {
    Configuration cfg{fam, 48, 128, {}};
    for (const auto& p : find_family(fam).params()) cfg.params[p.name] = p.default_value;
    for (uint64_t i = 0; i < 20; ++i) {
      const Sample s = find_family(fam).make(cfg, 0, i);
      const GoldOutput g = compute_gold(s);
      const auto v = evaluate_gold(g);
      EXPECT_LT(v[2], 1e-13) << fam << " sample " << i;  // inverse_residual
      EXPECT_EQ(v[1], 1.0);
    }
  }
}

TEST(Gold, LIsTheDefinitionEntryByEntry) {
  Sample s;
  s.chunk = 3;
  s.dim = 2;
  s.keys = {1, 0, 0.5, 0.5, 0, 1};
  s.g = {-1, -2, -3};
  s.beta = {0.1, 0.2, 0.3};
  const GoldOutput g = compute_gold(s);
  EXPECT_DOUBLE_EQ(g.L(1, 0), 0.2 * 0.5 * std::exp(-2.0));
  EXPECT_DOUBLE_EQ(g.L(2, 0), 0.3 * 0.0 * std::exp(-5.0));
  EXPECT_DOUBLE_EQ(g.L(2, 1), 0.3 * 0.5 * std::exp(-3.0));
  EXPECT_EQ(g.L(0, 1), 0.0);
  const Mat i3 = Mat::Identity(3, 3);
  EXPECT_LT(((i3 + g.L) * g.inv - i3).norm(), 1e-15);
}

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

TEST(Metrics, EveryPathMetricOnAHandMadeOutput) {
  GoldOutput gold;
  gold.L = Mat::Zero(2, 2);
  gold.L(1, 0) = 0.5;
  gold.inv = unit_lower_inverse(gold.L);  // [[1,0],[-0.5,1]]
  PathOutput out;
  out.decay = {1.0, 0.0};
  out.inv_decay = {1.0, INFINITY};
  out.L = gold.L;
  out.L(1, 0) = 0.25;
  out.run.inv = Mat::Identity(2, 2);
  out.run.inv(1, 0) = -0.25;
  out.run.highest_power = 1;
  out.run.power_max = 0.25;
  out.stable.inv = gold.inv;
  out.stable.highest_power = 1;
  out.stable.power_max = 0.5;
  const auto v = evaluate_path(gold, out);
  ASSERT_EQ(v.size(), path_metrics().size());
  auto at = [&](const char* n) -> double {
    for (size_t i = 0; i < v.size(); ++i)
      if (std::string(path_metrics()[i].name) == n) return v[i];
    ADD_FAILURE() << n;
    return NAN;
  };
  EXPECT_EQ(at("decay_zeros"), 1);
  EXPECT_EQ(at("inv_decay_nonfinite"), 1);
  EXPECT_EQ(at("l_finite"), 1);
  EXPECT_EQ(at("inv_finite"), 1);
  // L: error 0.25 in one of 4 entries over rms of 0.5 in one of 4 entries.
  EXPECT_DOUBLE_EQ(at("l_rel_rmse"), 0.5);
  // INV: error 0.25 at (1,0); reference rms sqrt((1 + 0.25 + 1)/4).
  EXPECT_DOUBLE_EQ(at("inv_total_rel_rmse"), std::sqrt(0.0625 / 4) / std::sqrt(2.25 / 4));
  EXPECT_EQ(at("inv_neumann_only_rel_rmse"), 0.0);  // INV is the exact inverse of I + path L
  EXPECT_EQ(at("inv_stable_l_rel_rmse"), 0.0);
  // (I + gold L) * INV = [[1,0],[0.25,1]]: error 0.25 in one entry of 4 over rms sqrt(2/4).
  EXPECT_DOUBLE_EQ(at("inverse_residual"), std::sqrt(0.0625 / 4) / std::sqrt(0.5));
  EXPECT_EQ(at("highest_power"), 1);
  EXPECT_EQ(at("power_max"), 0.25);
  EXPECT_EQ(at("stable_l_highest_power"), 1);
  EXPECT_EQ(at("stable_l_power_max"), 0.5);
  out.L(1, 0) = NAN;
  out.run.inv(1, 0) = NAN;
  const auto w = evaluate_path(gold, out);
  EXPECT_EQ(w[2], 0);  // l_finite
  EXPECT_EQ(w[3], 0);  // inv_finite
  EXPECT_TRUE(std::isinf(w[6]));  // neumann-only of a non-finite L
  EXPECT_TRUE(std::isinf(w[8]));  // residual
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

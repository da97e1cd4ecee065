// The gold: FP64 L entry by entry as SPEC §2 defines it, and its inverse.
#include <gtest/gtest.h>

#include <cmath>

#include "inputs/family.hpp"
#include "metrics/metrics.hpp"
#include "paths/gold/gold.hpp"

using namespace chunkinv;

TEST(Gold, ResidualBelow1e13AtChunk48) {
  for (const char* fam : {"model_like", "weak_decay_correlated", "floor"}) {
    Configuration cfg{fam, 48, 128, {}};
    for (const auto& p : find_family(fam).params()) cfg.params[p.name] = p.default_value;
    for (uint64_t i = 0; i < 20; ++i) {
      const Sample s = find_family(fam).make(cfg, 0, i);
      const GoldOutput g = compute_gold(s);
      const MetricSet& set = reference_metrics();
      std::vector<double> v(set.size());
      evaluate_reference(g, v.data());
      EXPECT_LT(v[set.index("inverse_residual")], 1e-13) << fam << " sample " << i;
      EXPECT_EQ(v[set.index("inv_finite")], 1.0);
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


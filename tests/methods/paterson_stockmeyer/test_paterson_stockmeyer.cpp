// paterson_stockmeyer: the documented order on a hand-made case, every s
// equal in real arithmetic, FP64 on random cases, the known inverse, and
// overflow.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/fp.hpp"
#include "methods/method_cases.hpp"

using namespace chunkinv;
using namespace chunkinv::testing;

TEST(PatersonStockmeyer, HandMadeCaseInTheDocumentedOrder) {
  // C = 4, s = 2: B = I + N, G = N^2, m = 2: X = B + G B. Here G has G20 = n21 n10 and
  // G31 = n32 n21 only, so X(3,0) = fp32(n30 + fmaf(G31, B10, 0)) and X(2,0) = fp32(0 + G20).
  Mat l = Mat::Zero(4, 4);
  // Values for which (n32 n21) n10 and n32 (n21 n10) round differently in FP32.
  l(1, 0) = double(1.0f / 7);
  l(2, 1) = double(0.1f);
  l(3, 2) = double(0.1f);  // and L(3,0) = 0, so that nothing is added to the product at (3,0)
  const float n10 = -(1.0f / 7), n21 = -0.1f, n32 = -0.1f, n30 = 0.0f;
  const float g31 = std::fmaf(n32, n21, 0.0f), g20 = std::fmaf(n21, n10, 0.0f);
  const float gb30 = std::fmaf(g31, n10, 0.0f);
  ASSERT_NE(gb30, std::fmaf(n32, g20, 0.0f));  // B G would round differently
  const InverseRun r = with("paterson_stockmeyer:s=2").invert(l, true);
  EXPECT_EQ(r.inv(3, 0), double(n30 + gb30));
  EXPECT_EQ(r.inv(2, 0), double(0.0f + g20));
  EXPECT_EQ(r.diagnostics[0], double(1.0f / 7));  // power_max over N and N^2
  EXPECT_EQ(r.intermediates.at(1).label, "N^2");
}

TEST(PatersonStockmeyer, EveryBabyStepCountIsTheSameInverse) {
  const Mat l = random_strict_lower(40, 0.5, 4, 0.8);
  const Mat exact = unit_lower_inverse(l.unaryExpr([](double v) { return fp32(v); }));
  for (int s = 2; s <= 8; ++s) {
    const std::string m = "paterson_stockmeyer:s=" + std::to_string(s);
    EXPECT_LT(rel(with(m.c_str()).invert(l, false).inv, exact), bound(40, kUFP32, series_growth(l))) << m;
  }
}

TEST(PatersonStockmeyer, CloseToFp64OnRandomCases) {
  expect_within_series_bound({{"paterson_stockmeyer", kUFP32, fp32},
                              {"paterson_stockmeyer:precision=tf32", kUTF32, fp32},
                              {"paterson_stockmeyer:precision=bf16:s=3", kUBF16, bf16}});
}

TEST(PatersonStockmeyer, ExactOnTheKnownInverseAtEveryChunk) {
  expect_exact_on_known_inverse({"paterson_stockmeyer", "paterson_stockmeyer:s=2", "paterson_stockmeyer:s=7:precision=bf16"});
}

TEST(PatersonStockmeyer, OverflowShowsInTheDiagnostics) {
  Mat l = Mat::Zero(8, 8);
  for (int i = 1; i < 8; ++i) l(i, i - 1) = 1e15;
  const InverseRun r = with("paterson_stockmeyer").invert(l, false);
  EXPECT_TRUE(std::isinf(r.diagnostics[0]));  // N^3 holds 1e45
  EXPECT_TRUE(std::isinf(r.diagnostics[1]));
  EXPECT_FALSE(std::isfinite(r.inv(7, 0)));
}

// doubling: the documented order on a hand-made case, FP64 on random cases
// in each precision, the known inverse, the powers' growth that breaks it
// (power_max far above the inverse), and overflow.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/fp.hpp"
#include "methods/method_cases.hpp"

using namespace chunkinv;
using namespace chunkinv::testing;

TEST(Doubling, HandMadeCaseInTheDocumentedOrder) {
  // C = 4, N = -L: S = I + N; P = N N; S = S + P S (covers N^0..N^3; 4 = C stops the loop).
  Mat l = Mat::Zero(4, 4);
  // Values for which (n32 n21) n10 and n32 (n21 n10) round differently in FP32.
  l(1, 0) = double(1.0f / 7);
  l(2, 1) = double(0.1f);
  l(3, 2) = double(0.1f);  // and L(3,0) = 0, so that nothing is added to the product at (3,0)
  const InverseRun r = with("doubling").invert(l, true);
  const float n10 = -(1.0f / 7), n21 = -0.1f, n32 = -0.1f, n30 = 0.0f;
  const float p20 = std::fmaf(n21, n10, 0.0f), p31 = std::fmaf(n32, n21, 0.0f);
  // (P S)(3,0) = fmaf(P31, S10, fmaf(P30 = 0, S00, 0)); S(3,0) = fp32(n30 + that).
  const float ps30 = std::fmaf(p31, n10, 0.0f);
  ASSERT_NE(ps30, std::fmaf(n32, p20, 0.0f));  // S P would round differently
  EXPECT_EQ(r.inv(3, 0), double(n30 + ps30));
  EXPECT_EQ(r.inv(2, 0), double(0.0f + p20));
  EXPECT_EQ(r.diagnostics[0], double(1.0f / 7));  // power_max: |N| above |N^2|
  ASSERT_EQ(r.intermediates.size(), 3u);      // N, N^2, S
  EXPECT_EQ(r.intermediates[1].label, "N^2");
}

TEST(Doubling, CloseToFp64OnRandomCases) {
  expect_within_series_bound({{"doubling", kUFP32, fp32}, {"doubling:precision=tf32", kUTF32, fp32},
                              {"doubling:precision=bf16", kUBF16, bf16}});
}

TEST(Doubling, ExactOnTheKnownInverseAtEveryChunk) {
  expect_exact_on_known_inverse({"doubling", "doubling:precision=tf32", "doubling:precision=bf16"});
}

TEST(Doubling, PowersFarAboveTheInverseCostAccuracy) {
  // L = 0.9 everywhere below the diagonal: (I + L)^-1 has -0.9 (0.1)^(i-j-1) below it, at most 1,
  // while N^16 = (-0.9)^16 J^16 holds binomial coefficients near 1e7 (J: ones below the diagonal).
  Mat l = Mat::Zero(32, 32);
  for (int i = 1; i < 32; ++i)
    for (int j = 0; j < i; ++j) l(i, j) = 0.9;
  const InverseRun r = with("doubling").invert(l, false);
  const Mat exact = unit_lower_inverse(l.unaryExpr([](double v) { return fp32(v); }));
  EXPECT_GT(r.diagnostics[0], 1e3 * exact.cwiseAbs().maxCoeff());  // power_max
  EXPECT_GT(rel(r.inv, exact), 1e3 * rel(with("fla_solve_tril").invert(l, false).inv, exact));
}

TEST(Doubling, OverflowShowsInTheDiagnostics) {
  Mat l = Mat::Zero(8, 8);
  for (int i = 1; i < 8; ++i) l(i, i - 1) = 1e15;
  const InverseRun r = with("doubling").invert(l, false);
  EXPECT_TRUE(std::isinf(r.diagnostics[0]));  // N^4 holds 1e60
  EXPECT_TRUE(std::isinf(r.diagnostics[1]));
  EXPECT_FALSE(std::isfinite(r.inv(7, 0)));
}

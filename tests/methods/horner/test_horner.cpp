// horner: the documented nesting on a hand-made case, FP64 on random cases,
// the known inverse, its small intermediates where doubling's powers are
// large, and overflow.
#include <gtest/gtest.h>

#include <cmath>

#include "core/fp.hpp"
#include "methods/method_cases.hpp"

using namespace chunkinv;
using namespace chunkinv::testing;

TEST(Horner, HandMadeCaseInTheDocumentedOrder) {
  // C = 4: X = I + N; X = I + N X; X = I + N X. Entry (3,0) after the last step:
  // fp32(0 + fmaf(n32, X20, fmaf(n31, X10, fmaf(n30, X00, 0)))).
  Mat l = Mat::Zero(4, 4);
  // Values for which (n32 n21) n10 and n32 (n21 n10) round differently in FP32.
  l(1, 0) = double(1.0f / 7);
  l(2, 1) = double(0.1f);
  l(3, 2) = double(0.1f);  // and L(3,0) = 0, so that nothing is added to the product at (3,0)
  const float n10 = -(1.0f / 7), n21 = -0.1f, n32 = -0.1f, n30 = 0.0f;
  // After step 2 (X = I + N (I + N)): X10 = n10, X20 = n21 n10, X21 = n21, X30 = n30 + n32*0, ...
  const float x2_10 = n10, x2_20 = std::fmaf(n21, n10, 0.0f);
  const float x3_30 = std::fmaf(n32, x2_20, std::fmaf(0.0f, x2_10, std::fmaf(n30, 1.0f, 0.0f)));
  ASSERT_NE(x3_30, std::fmaf(std::fmaf(n32, n21, 0.0f), n10, 0.0f));  // X N would round differently
  const InverseRun r = with("horner").invert(l, false);
  EXPECT_EQ(r.inv(3, 0), double(0.0f + x3_30));
  EXPECT_EQ(r.inv(2, 0), double(0.0f + x2_20));
  EXPECT_EQ(r.inv(1, 0), double(n10));
}

TEST(Horner, CloseToFp64OnRandomCases) {
  expect_within_series_bound({{"horner", kUFP32, fp32}, {"horner:precision=tf32", kUTF32, fp32},
                              {"horner:precision=bf16", kUBF16, bf16}});
}

TEST(Horner, ExactOnTheKnownInverseAtEveryChunk) {
  expect_exact_on_known_inverse({"horner", "horner:precision=tf32", "horner:precision=bf16"});
}

TEST(Horner, SurvivesWhereDoublingAndPatersonStockmeyerDoNot) {
  // L = 0.9 below the diagonal: the inverse is at most 1, N^16 holds ~1e7. Horner's partial sums
  // reach the same magnitude as doubling's powers (work_max), yet its result stays accurate.
  Mat l = Mat::Zero(32, 32);
  for (int i = 1; i < 32; ++i)
    for (int j = 0; j < i; ++j) l(i, j) = 0.9;
  const Mat exact = unit_lower_inverse(l.unaryExpr([](double v) { return fp32(v); }));
  const InverseRun h = with("horner").invert(l, false), d = with("doubling").invert(l, false),
                   p = with("paterson_stockmeyer").invert(l, false);
  EXPECT_GT(h.diagnostics[0], 1e6);                        // work_max
  EXPECT_GT(h.diagnostics[0], 0.1 * d.diagnostics[1]);     // as large as doubling's
  EXPECT_GT(rel(d.inv, exact), 0.01);
  EXPECT_GT(rel(p.inv, exact), 0.01);
  EXPECT_LT(rel(h.inv, exact), 1e-6);
}

TEST(Horner, OverflowShowsInTheDiagnostics) {
  Mat l = Mat::Zero(8, 8);
  for (int i = 1; i < 8; ++i) l(i, i - 1) = 1e15;
  const InverseRun r = with("horner").invert(l, false);
  EXPECT_TRUE(std::isinf(r.diagnostics[0]));
  EXPECT_FALSE(std::isfinite(r.inv(7, 0)));
}

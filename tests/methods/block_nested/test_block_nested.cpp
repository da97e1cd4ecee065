// block_nested: the documented order on a hand-made case across the 4-row
// seam, FP64 on random cases, the known inverse at every chunk (one, two and
// three level-3 factors), and its accuracy where doubling fails.
#include <gtest/gtest.h>

#include <cmath>

#include "core/fp.hpp"
#include "methods/method_cases.hpp"

using namespace chunkinv;
using namespace chunkinv::testing;

TEST(BlockNested, HandMadeCaseAcrossTheFourRowSeam) {
  // L(5,4) = 0.3 inside the second 4-row block, L(4,3) = 0.7 across the seam (level 2):
  // M2(5,3) = fmaf(A54, L2(4,3), 0) = fmaf(-0.3, -0.7, 0); B(5,3) = fp32(0 + (M2 A)(5,3)) = M2(5,3).
  Mat l = Mat::Zero(8, 8);
  l(1, 0) = 0.1;
  l(5, 4) = 0.3;
  l(4, 3) = 0.7;
  const InverseRun r = with("block_nested").invert(l, true);
  EXPECT_EQ(r.inv(5, 3), double(std::fmaf(-0.3f, -0.7f, 0.0f)));
  EXPECT_EQ(r.inv(4, 3), double(-0.7f));
  EXPECT_EQ(r.inv(1, 0), double(-0.1f));
  EXPECT_EQ(r.inv(5, 2), 0.0);
  ASSERT_EQ(r.intermediates.size(), 2u);  // C = 8: one 8-row block, no level 3
  EXPECT_EQ(r.diagnostics[0], 1.0);       // work_max: the unit diagonal
}

TEST(BlockNested, CloseToFp64OnRandomCases) {
  expect_within_series_bound({{"block_nested", kUFP32, fp32}, {"block_nested:precision=tf32", kUTF32, fp32},
                              {"block_nested:precision=bf16", kUBF16, bf16}});
}

TEST(BlockNested, ExactOnTheKnownInverseAtEveryChunk) {
  expect_exact_on_known_inverse({"block_nested", "block_nested:precision=bf16"});
}

TEST(BlockNested, SurvivesWhereDoublingDoesNot) {
  // L = 0.9 below the diagonal at C = 32 (issue #55420's failure mode): the nested form is
  // within FP32 rounding of the inverse, doubling is not.
  Mat l = Mat::Zero(32, 32);
  for (int i = 1; i < 32; ++i)
    for (int j = 0; j < i; ++j) l(i, j) = 0.9;
  const Mat exact = unit_lower_inverse(l.unaryExpr([](double v) { return fp32(v); }));
  const InverseRun n = with("block_nested").invert(l, false);
  EXPECT_LT(rel(n.inv, exact), bound(32, kUFP32, substitution_growth(l)));
  EXPECT_GT(rel(with("doubling").invert(l, false).inv, exact), 1e4 * rel(n.inv, exact));
}

TEST(BlockNested, OverflowShowsInTheDiagnostics) {
  Mat l = Mat::Zero(8, 8);
  for (int i = 1; i < 8; ++i) l(i, i - 1) = 1e15;
  const InverseRun r = with("block_nested").invert(l, false);
  EXPECT_TRUE(std::isinf(r.diagnostics[0]));
  EXPECT_FALSE(std::isfinite(r.inv(7, 0)));
}

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
  struct Case {
    const char* method;
    double u;
    double (*round)(double);
  };
  for (const Case k : {Case{"block_nested", kUFP32, fp32}, Case{"block_nested:precision=tf32", kUTF32, fp32},
                       Case{"block_nested:precision=bf16", kUBF16, bf16}})
    for (uint64_t seed = 0; seed < 8; ++seed) {
      const int c = 2 + int(seed * 9 % (k.u == kUBF16 ? 8 : 63));
      const Mat l = random_strict_lower(c, 0.5, seed, 0.8);
      const double tol = bound(c, k.u, series_growth(l));
      ASSERT_LT(tol, 0.3) << "the bound must be able to fail";
      EXPECT_LT(rel(with(k.method).invert(l, false).inv, unit_lower_inverse(l.unaryExpr(k.round))), tol)
          << k.method << " C=" << c;
    }
}

TEST(BlockNested, ExactOnTheKnownInverseAtEveryChunk) {
  for (int c = 2; c <= 64; ++c)
    for (const char* m : {"block_nested", "block_nested:precision=bf16"})
      EXPECT_TRUE(with(m).invert(ones_inverse_case(c), false).inv == all_ones_lower(c)) << m << " C=" << c;
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

// fla_solve_tril: the documented order on hand-made cases (substitution and
// both merges, ieee and tf32), FP64 on random cases, the known inverse,
// padding invariance, and the overflow diagnostic.
#include <gtest/gtest.h>

#include <cmath>

#include "core/fp.hpp"
#include "methods/method_cases.hpp"
#include "methods/precision.hpp"

using namespace chunkinv;
using namespace chunkinv::testing;

TEST(FlaSolveTril, DiagonalSubstitutionInTheDocumentedOrder) {
  // Row 2: X20 = fp32(-A20 + fp32(-A21 * X10)) (every other term of the sum is 0), X10 = -A10.
  Mat l = Mat::Zero(3, 3);
  l(1, 0) = 0.1;
  l(2, 0) = 0.3;
  l(2, 1) = 0.7;
  const InverseRun r = with("fla_solve_tril").invert(l, true);
  const float x10 = -0.1f;
  const float s = 0.0f + (-0.7f) * x10;
  const float x20 = -0.3f + s;
  EXPECT_EQ(r.inv(1, 0), double(x10));
  EXPECT_EQ(r.inv(2, 0), double(x20));
  EXPECT_EQ(r.inv(2, 1), double(-0.7f));
  EXPECT_EQ(r.inv(0, 1), 0.0);
  EXPECT_EQ(r.inv.rows(), 3);
  ASSERT_EQ(r.diagnostics.size(), 2u);
  EXPECT_EQ(r.diagnostics[0], 1.0);  // diag_inv_max: the unit diagonal dominates
  EXPECT_EQ(r.intermediates.at(0).label, "A = fp32(L)");
  EXPECT_EQ(r.intermediates.at(1).label, "Ai[0:16,0:16]");
}

TEST(FlaSolveTril, SubstitutionSumsInTheKernelsTree) {
  // Row 8, column 0: products p1 = 1, p3 = p7 = 2^-24. The kernel's tree adds
  // (q3 + q7) = 2^-23 first, then 1: S = 1 + 2^-23, the exact value. Summed
  // k ascending (1 + 2^-24 + 2^-24, two ties to even), or in any tree that
  // meets 1 before the other two, S would be 1.
  Mat l = Mat::Zero(9, 9);
  l(1, 0) = 1.0;
  l(3, 0) = 0x1p-12;
  l(7, 0) = 0x1p-12;
  l(8, 1) = 1.0;
  l(8, 3) = 0x1p-12;
  l(8, 7) = 0x1p-12;
  EXPECT_EQ(with("fla_solve_tril").invert(l, false).inv(8, 0), 1.0 + 0x1p-23);
  EXPECT_EQ(unit_lower_inverse(l)(8, 0), 1.0 + 0x1p-23);
}

TEST(FlaSolveTril, SubstitutionFusesRowKWithRowKPlus8) {
  // Row 10, column 0: q1 = fma(a1, X10, fp32(a9 * X90)) with a1 X10 =
  // (1 + 2^-15)^2 = 1 + 2^-14 + 2^-30 and a9 X90 = -1: the FMA keeps 2^-30,
  // S = 2^-14 + 2^-30. A product rounded first (k ascending, or a tree of
  // rounded products) loses it: 2^-14.
  Mat l = Mat::Zero(11, 11);
  l(1, 0) = 1.0 + 0x1p-15;  // X10 = -(1 + 2^-15)
  l(9, 0) = 1.0;            // X90 = -1
  l(10, 1) = 1.0 + 0x1p-15; // a1 = -(1 + 2^-15)
  l(10, 9) = -1.0;          // a9 = 1
  EXPECT_EQ(with("fla_solve_tril").invert(l, false).inv(10, 0), 0x1p-14 + 0x1p-30);
}

TEST(FlaSolveTril, MergeOf32InTheDocumentedOrderIeeeAndTf32) {
  // One entry in each diagonal block next to the seam and one across it:
  // A(15,14) = b, A(17,16) = c, A(16,15) = a.  Ai21 = -dot(dot(Ai22, A21), Ai11).
  const double a = 0.1, b = 0.3, c = 0.7;
  Mat l = Mat::Zero(32, 32);
  l(15, 14) = b;
  l(17, 16) = c;
  l(16, 15) = a;
  const float af = float(a), bf = float(b), cf = float(c);
  {
    const Mat inv = with("fla_solve_tril").invert(l, false).inv;
    // dot(Ai22, A21): column 15 = (a, -c a); times Ai11 (column 14 of row 15 is -b).
    const float p0 = af, p1 = std::fmaf(-cf, af, 0.0f);
    EXPECT_EQ(inv(16, 15), -double(p0));
    EXPECT_EQ(inv(17, 15), -double(p1));
    EXPECT_EQ(inv(16, 14), -double(std::fmaf(p0, -bf, 0.0f)));
    EXPECT_EQ(inv(17, 14), -double(std::fmaf(p1, -bf, 0.0f)));
    EXPECT_EQ(inv(17, 16), -double(cf));
  }
  {
    const Mat inv = with("fla_solve_tril:precision=tf32").invert(l, false).inv;
    auto t = [](double x) { return round_to(x, Format{10, -126, 0x1.FFCp127}); };
    const double p0 = t(af), p1 = fp32(t(-cf) * t(af));  // products of TF32 values are exact in FP32
    EXPECT_EQ(inv(16, 15), -p0);
    EXPECT_EQ(inv(17, 15), -t(p1));  // the outer dot rounds p1 to TF32 too
    EXPECT_EQ(inv(16, 14), -fp32(t(p0) * t(-bf)));
    EXPECT_EQ(inv(17, 14), -fp32(t(p1) * t(-bf)));
    EXPECT_NE(inv(17, 14), with("fla_solve_tril").invert(l, false).inv(17, 14));  // tf32 is coarser
    EXPECT_EQ(inv(17, 16), -double(cf));  // the diagonal blocks do not depend on the merge's precision
  }
}

TEST(FlaSolveTril, MergeOf64SumsTheBlockRowLeftToRight) {
  // A(32,31), A(31,16), A(16,15) chain row 32 to column 15 through three blocks: INV(32,15) comes
  // from Ai31 = -Ai33 (A31 Ai11 + A32 Ai21), through Ai21; powers of two keep every step exact.
  Mat l = Mat::Zero(64, 64);
  l(32, 31) = 0.5;
  l(31, 16) = 0.25;
  l(16, 15) = 2.0;
  const Mat inv = with("fla_solve_tril").invert(l, false).inv;
  EXPECT_TRUE((inv - unit_lower_inverse(l)).cwiseAbs().maxCoeff() == 0.0);
  EXPECT_EQ(inv(32, 15), -0.5 * 0.25 * 2.0);
}

TEST(FlaSolveTril, Substitution64InTheTwoWarpTree) {
  // Row 14, column 0, products p1 = 1, p5 = p13 = 2^-24. One warp (C <= 32)
  // pairs rows k and k + 8: q5 = fma(p5, p13) = 2^-23 meets q1 = 1 exactly,
  // S = 1 + 2^-23. Two warps (C = 64) pair rows k and k + 4: v1 = fma(p1,
  // p5) = 1 + 2^-24 rounds to 1 (a tie, to even), and 2^-24 from the other
  // warp is lost again: S = 1.
  for (int c : {16, 64}) {
    Mat l = Mat::Zero(c, c);
    l(1, 0) = 1.0;       // X10 = -1
    l(5, 0) = 0x1p-12;   // X50 = -2^-12
    l(13, 0) = 0x1p-12;  // X13,0 = -2^-12
    l(14, 1) = 1.0;
    l(14, 5) = 0x1p-12;
    l(14, 13) = 0x1p-12;
    EXPECT_EQ(with("fla_solve_tril").invert(l, false).inv(14, 0), c == 64 ? 1.0 : 1.0 + 0x1p-23) << "C = " << c;
    EXPECT_EQ(unit_lower_inverse(l)(14, 0), 1.0 + 0x1p-23);
  }
}

TEST(FlaSolveTril, MergeOf64IsOneChainOverTheBlockRow) {
  // Ai31 = 0 - Ai33 (A31 Ai11; A32 Ai21) with the diagonal blocks the
  // identity: INV(32, 0) = 0 - fma(A32(32,16), Ai21(16,0), A31(32,0)) =
  // -((1 + 2^-15)^2 - 1) = -(2^-14 + 2^-30), the exact value. Two dots summed
  // would round the product first: -(2^-14).
  Mat l = Mat::Zero(64, 64);
  l(16, 0) = -(1.0 + 0x1p-15);  // Ai21(16, 0) = 1 + 2^-15
  l(32, 16) = 1.0 + 0x1p-15;
  l(32, 0) = -1.0;
  EXPECT_EQ(with("fla_solve_tril").invert(l, false).inv(32, 0), -(0x1p-14 + 0x1p-30));
  EXPECT_EQ(unit_lower_inverse(l)(32, 0), -(0x1p-14 + 0x1p-30));
}

TEST(FlaSolveTril, ZeroBlocksOfTheMergeArePositiveZeros) {
  // Triton negates a tensor as 0 - x: a merge block whose products are all
  // zero is +0, never -0 (the diagonal blocks' zeros are +0 after + I too).
  for (int c : {32, 64}) {
    Mat l = Mat::Zero(c, c);
    l(3, 1) = 0.5;
    l(c - 1, c - 2) = 0.25;
    const Mat inv = with("fla_solve_tril").invert(l, false).inv;
    for (Eigen::Index i = 0; i < inv.size(); ++i)
      if (inv.data()[i] == 0.0) {
        EXPECT_FALSE(std::signbit(inv.data()[i])) << "C = " << c << " element " << i;
      }
  }
}

TEST(FlaSolveTril, CloseToFp64OnRandomCases) {
  for (const char* m : {"fla_solve_tril", "fla_solve_tril:precision=tf32"}) {
    const double u = std::string(m).find("tf32") != std::string::npos ? kUTF32 : kUFP32;
    for (uint64_t seed = 0; seed < 12; ++seed) {
      const int c = 2 + int(seed * 5 % 63);  // 2..62, every padding regime
      const Mat l = random_strict_lower(c, 1.0, seed, 0.8);
      const Mat exact = unit_lower_inverse(l.unaryExpr([](double v) { return fp32(v); }));
      const double tol = bound(c, u, substitution_growth(l));
      ASSERT_LT(tol, 0.3) << "the bound must be able to fail";
      EXPECT_LT(rel(with(m).invert(l, false).inv, exact), tol) << m << " seed " << seed << " C=" << c;
    }
  }
}

TEST(FlaSolveTril, ExactOnTheKnownInverseAtEveryChunk) {
  expect_exact_on_known_inverse({"fla_solve_tril", "fla_solve_tril:precision=tf32"});
}

TEST(FlaSolveTril, PaddingIsInvisible) {
  // C = 20 pads to 32; the same L inside 24, 32 columns gives the same bits.
  const Mat l = random_strict_lower(20, 1.0, 7, 0.8);
  const Mat small = with("fla_solve_tril").invert(l, false).inv;
  for (int c : {24, 32}) {
    const Mat big = with("fla_solve_tril").invert(prec::pad(l, c), false).inv;
    EXPECT_TRUE(big.topLeftCorner(20, 20) == small) << c;
  }
}

TEST(FlaSolveTril, OverflowShowsInTheDiagnostics) {
  // A chain of 1e20 overflows FP32 by the third row of the first block.
  Mat l = Mat::Zero(16, 16);
  for (int i = 1; i < 4; ++i) l(i, i - 1) = 1e20;
  const InverseRun r = with("fla_solve_tril").invert(l, false);
  EXPECT_TRUE(std::isinf(r.diagnostics[0]));
  EXPECT_TRUE(std::isinf(r.diagnostics[1]));
  EXPECT_FALSE(std::isfinite(r.inv(3, 0)));
  // Finite input, finite inverse: the diagnostics are the largest magnitudes.
  const InverseRun ok = with("fla_solve_tril").invert(ones_inverse_case(40), false);
  EXPECT_EQ(ok.diagnostics[0], 1.0);
  EXPECT_EQ(ok.diagnostics[1], 1.0);
}

// blockwise: the documented order on hand-made cases (FMA substitution, one
// BF16 merge on the tensor-core model), FP64 on random cases for every block
// and precision, the known inverse, padding invariance, and overflow.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/fp.hpp"
#include "methods/blockwise/params.hpp"
#include "methods/method_cases.hpp"
#include "methods/precision.hpp"

using namespace chunkinv;
using namespace chunkinv::testing;

TEST(Blockwise, DiagonalSubstitutionIsOneFmaPerUpdate) {
  // Step s = 0 sets X[r][0] = -A[r][0]; step s = 1 then X[2][0] = fmaf(-A21, X10, X20).
  // These values round differently with a separate product and sum.
  const float a10 = 0.1f, a20 = 0.1f, a21 = 1.0f / 3;
  Mat l = Mat::Zero(3, 3);
  l(1, 0) = a10;
  l(2, 0) = a20;
  l(2, 1) = a21;
  const float fused = std::fmaf(-a21, -a10, -a20), product = a21 * a10;
  ASSERT_NE(fused, -a20 + product);
  for (const char* m : {"blockwise:precision=fp32", "blockwise:precision=fp32:block=16"}) {
    const InverseRun r = with(m).invert(l, true);
    EXPECT_EQ(r.inv(1, 0), double(-a10)) << m;
    EXPECT_EQ(r.inv(2, 0), double(fused)) << m;
    EXPECT_EQ(r.inv(2, 1), double(-a21)) << m;
    EXPECT_EQ(r.intermediates.at(1).label, std::string(m).find("16") != std::string::npos ? "X[0:16,0:16]" : "X[0:8,0:8]");
  }
}

TEST(Blockwise, Bf16MergeInTheDocumentedOrder) {
  // b = 8, C = 16: A(7,6) = b in the top block, A(9,8) = c in the bottom one, A(8,7) = a across.
  // T = bf16(-(Dinv C)), INV21 = bf16(T Ainv), every value BF16, products on the mma model.
  const double a = bf16(0.1), b = bf16(0.3), c = bf16(0.7);
  Mat l = Mat::Zero(16, 16);
  l(7, 6) = 0.3;
  l(9, 8) = 0.7;
  l(8, 7) = 0.1;
  const InverseRun r = with("blockwise").invert(l, true);
  // Dinv C, column 7: (a, -c a); products of two BF16 values are exact in FP32.
  const double t0 = bf16(-a), t1 = bf16(c * a);
  EXPECT_EQ(r.inv(8, 7), bf16(t0 * 1.0));
  EXPECT_EQ(r.inv(9, 7), bf16(t1));
  EXPECT_EQ(r.inv(8, 6), bf16(t0 * -b));
  EXPECT_EQ(r.inv(9, 6), bf16(t1 * -b));
  EXPECT_EQ(r.inv(9, 8), -c);
  EXPECT_EQ(r.inv(7, 6), -b);
  // T itself is rounded to BF16 before the second product (visible here: c a is not a BF16 value).
  ASSERT_NE(bf16(c * a), c * a);
  const Intermediate* t = nullptr;
  for (const Intermediate& m : r.intermediates)
    if (m.label == "T[8:16,0:8]") t = &m;
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->m(1, 7), bf16(c * a));
  EXPECT_EQ(t->m(0, 7), -a);
}

TEST(Blockwise, CloseToFp64OnRandomCases) {
  struct Case {
    const char* method;
    double u;
  };
  for (const Case k : {Case{"blockwise", kUBF16}, Case{"blockwise:block=16", kUBF16},
                       Case{"blockwise:precision=fp32", kUFP32}, Case{"blockwise:precision=tf32:block=16", kUTF32}}) {
    const bool bf = std::string(k.method).find("precision") == std::string::npos;
    for (uint64_t seed = 0; seed < 10; ++seed) {
      const int c = 2 + int(seed * 7 % (bf ? 8 : 63));  // BF16's bound only means something for short chunks
      const Mat l = random_strict_lower(c, 1.0, seed, 0.8);
      const Mat in = bf ? Mat(l.unaryExpr([](double v) { return bf16(v); })) : Mat(l.unaryExpr([](double v) { return fp32(v); }));
      const double tol = bound(c, k.u, substitution_growth(l));
      ASSERT_LT(tol, 0.2) << "the bound must be able to fail";
      EXPECT_LT(rel(with(k.method).invert(l, false).inv, unit_lower_inverse(in)), tol) << k.method << " C=" << c;
    }
  }
}

TEST(Blockwise, Bf16IsFarCoarserThanFp32) {
  // The BF16 form is the coarsest: its error on a random chunk is far above FP32's.
  const Mat l = random_strict_lower(48, 1.0, 3, 0.8);
  const Mat in32 = l.unaryExpr([](double v) { return fp32(v); });
  const double e16 = rel(with("blockwise").invert(l, false).inv, unit_lower_inverse(l.unaryExpr([](double v) { return bf16(v); })));
  const double e32 = rel(with("blockwise:precision=fp32").invert(l, false).inv, unit_lower_inverse(in32));
  EXPECT_GT(e16, 100 * e32);
  EXPECT_GT(e32, 0.0);
}

TEST(Blockwise, ExactOnTheKnownInverseAtEveryChunk) {
  expect_exact_on_known_inverse({"blockwise", "blockwise:block=16", "blockwise:precision=fp32", "blockwise:precision=tf32"});
}

TEST(Blockwise, PaddingIsInvisible) {
  const Mat l = random_strict_lower(20, 1.0, 5, 0.8);
  for (const char* m : {"blockwise", "blockwise:block=16:precision=fp32"}) {
    const Mat small = with(m).invert(l, false).inv;
    for (int c : {25, 32}) EXPECT_TRUE(with(m).invert(prec::pad(l, c), false).inv.topLeftCorner(20, 20) == small) << m << c;
  }
}

TEST(Blockwise, OverflowShowsInTheDiagnostics) {
  Mat l = Mat::Zero(8, 8);
  for (int i = 1; i < 4; ++i) l(i, i - 1) = 1e20;
  for (const char* m : {"blockwise", "blockwise:precision=fp32"}) {
    const InverseRun r = with(m).invert(l, false);
    EXPECT_TRUE(std::isinf(r.diagnostics[0])) << m;  // diag_inv_max
    EXPECT_TRUE(std::isinf(r.diagnostics[1])) << m;  // work_max
    EXPECT_FALSE(std::isfinite(r.inv(3, 0))) << m;
  }
  // An overflow in a merge only: finite diagonal blocks, infinite product.
  Mat m = Mat::Zero(16, 16);
  m(8, 7) = 1e30;
  m(7, 6) = 1e30;
  const InverseRun r = with("blockwise:precision=fp32").invert(m, false);
  EXPECT_TRUE(std::isfinite(r.diagnostics[0]));
  EXPECT_TRUE(std::isinf(r.diagnostics[1]));
}

// The typed parameters, made once from the axis value, as the CPU reference
// and the GPU form read them.
TEST(Blockwise, TypedParametersFromTheAxisValue) {
  const BlockwiseParams d = method_of(find_method("blockwise")).params<BlockwiseParams>();
  EXPECT_EQ(d.block, 8);
  EXPECT_EQ(d.arith, prec::Arith::kBF16Mma);
  const BlockwiseParams p = parse_method("blockwise:block=16:precision=tf32").params<BlockwiseParams>();
  EXPECT_EQ(p.block, 16);
  EXPECT_EQ(p.arith, prec::Arith::kTF32);
  EXPECT_EQ(parse_method("blockwise:precision=fp32").params<BlockwiseParams>().arith, prec::Arith::kFP32);
}

// flashkda_v2: the documented order on hand-made cases (one FMA per update,
// the BF16 merge with -D rounded), a second model written differently (row
// by row, block products) agreeing bit for bit, `blockwise` on BF16-valued
// L, FP64 on random cases, the known inverse, padding, overflow; the FMA
// where the torch reference rounds twice. flashkda_v1: `neumann` itself.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "arith/tensor_core.hpp"
#include "core/fp.hpp"
#include "methods/method_cases.hpp"
#include "methods/precision.hpp"

using namespace chunkinv;
using namespace chunkinv::testing;

namespace {

const Intermediate* find(const InverseRun& r, const std::string& label) {
  for (const Intermediate& m : r.intermediates)
    if (m.label == label) return &m;
  return nullptr;
}

Mat to_fp32(const Mat& m) { return m.unaryExpr([](double v) { return fp32(v); }); }
Mat to_bf16(const Mat& m) { return m.unaryExpr([](double v) { return bf16(v); }); }

// ---- A second model of flashkda_v2, written independently of the method ----

// One 8x8 diagonal block, row by row: X[r][p] starts at -A[r][p] and takes
// the terms s = p+1 .. r-1 in ascending order, one fused FP32 FMA each; the
// column-oriented loop of SPEC §2 performs the same operations in another order.
Mat block_inverse_by_rows(const Mat& a, int r0) {
  float x[8][8] = {};
  for (int r = 0; r < 8; ++r) {
    x[r][r] = 1.0f;
    for (int p = 0; p < r; ++p) {
      float v = -float(a(r0 + r, r0 + p));
      for (int s = p + 1; s < r; ++s) v = std::fma(-float(a(r0 + r, r0 + s)), x[s][p], v);
      x[r][p] = v;
    }
  }
  Mat out(8, 8);
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 8; ++j) out(i, j) = x[i][j];
  return out;
}

// h x h product on the tensor-core model with k zero-padded to whole 16-blocks.
Mat tc_product(const Mat& a, const Mat& b) {
  const int h = int(a.cols()), k = (h + 15) / 16 * 16;
  Mat ap = Mat::Zero(a.rows(), k), bp = Mat::Zero(k, b.cols());
  ap.leftCols(h) = a;
  bp.topRows(h) = b;
  return tc::matmul_bf16_f32(ap, bp);
}

// The whole inverse: block rows of the merge only, INV21 = bf16(bf16(-(Xb C)) Xa).
Mat flashkda_v2_by_blocks(const Mat& l_in) {
  const int c = int(l_in.rows());
  int n = 8;
  while (n < c) n *= 2;
  const Mat l = prec::pad(to_fp32(l_in), n);
  Mat inv = Mat::Zero(n, n);
  for (int r0 = 0; r0 < n; r0 += 8) inv.block(r0, r0, 8, 8) = to_bf16(block_inverse_by_rows(l, r0));
  for (int h = 8; h < n; h *= 2)
    for (int t = 0; t < n; t += 2 * h) {
      const Mat xa = inv.block(t, t, h, h), xb = inv.block(t + h, t + h, h, h);
      const Mat d = tc_product(xb, to_bf16(l.block(t + h, t, h, h)));
      inv.block(t + h, t, h, h) = to_bf16(tc_product(to_bf16(-d), xa));
    }
  return inv.topLeftCorner(c, c);
}

// FP32 strict-lower L with entries in [-scale/2, scale/2] decaying by `decay` per diagonal.
Mat random_fp32(int c, double scale, uint64_t seed, double decay) {
  return to_fp32(random_strict_lower(c, scale, seed, decay));
}

}  // namespace

TEST(FlashkdaV2, IdentityOnZero) {
  for (int c = 2; c <= 64; ++c) {
    const InverseRun r = with("flashkda_v2").invert(Mat::Zero(c, c), false);
    EXPECT_TRUE(r.inv == Mat::Identity(c, c)) << "C=" << c;
    EXPECT_EQ(r.diagnostics, (std::vector<double>{1.0, 1.0})) << "C=" << c;
  }
}

TEST(FlashkdaV2, ExactOnTheKnownInverseAtEveryChunk) { expect_exact_on_known_inverse({"flashkda_v2"}); }

TEST(FlashkdaV2, DiagonalSubstitutionIsOneFmaPerUpdate) {
  // s = 0 sets X[r][0] = -A[r][0]; s = 1 then X[2][0] = fmaf(-A21, X10, X20), rounded once.
  const float a10 = 0.1f, a20 = 0.1f, a21 = 1.0f / 3;
  Mat l = Mat::Zero(3, 3);
  l(1, 0) = a10;
  l(2, 0) = a20;
  l(2, 1) = a21;
  const float fused = std::fmaf(-a21, -a10, -a20);
  ASSERT_NE(fused, -a20 + a21 * a10);
  const InverseRun r = with("flashkda_v2").invert(l, true);
  const Intermediate* x = find(r, "X[0:8,0:8]");
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(x->m(2, 0), double(fused));
  EXPECT_EQ(x->m(1, 0), double(-a10));
  EXPECT_EQ(r.inv(2, 0), bf16(fused));  // the output is BF16
  EXPECT_EQ(r.inv(2, 1), bf16(-a21));
  EXPECT_EQ(r.diagnostics[0], 1.0);  // diag_inv_max: the unit diagonal dominates
  EXPECT_EQ(r.intermediates.at(0).label, "L (FP32)");
}

TEST(FlashkdaV2, FusedUpdateIsWhatSetsItApartFromFwdsubFp32) {
  // The substitution takes the terms of X[r][p] in fwdsub_fp32's order (s
  // ascending); they differ only in the FMA, where fwdsub_fp32 rounds the
  // product first. On random 8x8 blocks that shows in some entries.
  int differ = 0, same = 0;
  for (uint64_t seed = 0; seed < 50; ++seed) {
    const Mat l = random_fp32(8, 2.0, seed, 1.0);
    const InverseRun v2 = with("flashkda_v2").invert(l, true);
    const Mat plain = with("fwdsub_fp32").invert(l, false).inv;
    const Mat& x = find(v2, "X[0:8,0:8]")->m;
    for (int i = 0; i < 8; ++i)
      for (int j = 0; j < i; ++j) (x(i, j) == plain(i, j) ? same : differ)++;
  }
  EXPECT_GT(differ, 0);
  EXPECT_GT(same, differ);  // and most entries agree: the order is the same
}

TEST(FlashkdaV2, MergeInTheDocumentedOrder) {
  // C = 16: A(7,6) = b in the top block, A(9,8) = c in the bottom one, A(8,7) = a across,
  // FP32 values that are not BF16. D = P M, O = bf16(-D) P, INV = P + bf16(O).
  const double a = double(0.1f), b = double(0.3f), c = double(0.7f);
  Mat l = Mat::Zero(16, 16);
  l(7, 6) = b;
  l(9, 8) = c;
  l(8, 7) = a;
  const InverseRun r = with("flashkda_v2").invert(l, true);
  const double pa = bf16(a), pb = bf16(-b), pc = bf16(-c);  // M(8,7), P(7,6), P(9,8)
  // D(8,7) = M(8,7), D(9,7) = P(9,8) M(8,7): products of BF16 values, exact in FP32.
  const Intermediate* d = find(r, "D[0:16,0:16]");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->m(8, 7), pa);
  EXPECT_EQ(d->m(9, 7), pc * pa);
  EXPECT_EQ(d->m(0, 0), 0.0);  // rows 0..7 of P M are zero
  // -D is rounded to BF16 before the second product (visible: pc * pa is not a BF16 value).
  ASSERT_NE(bf16(pc * pa), pc * pa);
  const double t8 = bf16(-pa), t9 = bf16(-pc * pa);
  EXPECT_EQ(r.inv(8, 7), bf16(t8));
  EXPECT_EQ(r.inv(9, 7), bf16(t9));
  EXPECT_EQ(r.inv(8, 6), bf16(t8 * pb));
  EXPECT_EQ(r.inv(9, 6), bf16(t9 * pb));
  EXPECT_EQ(r.inv(9, 8), pc);
  EXPECT_EQ(r.inv(7, 6), pb);
  EXPECT_EQ(r.inv(8, 8), 1.0);
  EXPECT_EQ(r.inv(6, 7), 0.0);
  const Intermediate* o = find(r, "O[0:16,0:16]");
  ASSERT_NE(o, nullptr);
  EXPECT_EQ(o->m(9, 6), t9 * pb);  // O before its BF16 rounding
  EXPECT_EQ(find(r, "P[0:16,0:16]")->m(9, 8), pc);
  ASSERT_NE(find(r, "X[8:16,8:16]"), nullptr);
  EXPECT_EQ(find(r, "X[8:16,8:16]")->m(1, 0), -c);  // the diagonal blocks see the FP32 L
}

TEST(FlashkdaV2, AgreesBitForBitWithASecondModelWrittenByBlocks) {
  // C = 16 (FlashKDA's own chunk) on 400 random FP32 L of three magnitudes,
  // and every padding regime of the generalisation on fewer.
  const double scales[] = {0.5, 2.0, 8.0};
  for (uint64_t seed = 0; seed < 400; ++seed) {
    const Mat l = random_fp32(16, scales[seed % 3], seed, 0.9);
    const Mat got = with("flashkda_v2").invert(l, false).inv;
    ASSERT_TRUE(got == flashkda_v2_by_blocks(l)) << "seed " << seed;
  }
  for (int c : {2, 7, 8, 9, 17, 31, 32, 33, 48, 64})
    for (uint64_t seed = 0; seed < 12; ++seed) {
      const Mat l = random_fp32(c, scales[seed % 3], 1000 + seed, 0.9);
      ASSERT_TRUE(with("flashkda_v2").invert(l, false).inv == flashkda_v2_by_blocks(l)) << "C=" << c << " seed " << seed;
    }
}

TEST(FlashkdaV2, IsBlockwiseOnBf16ValuedLButNotOnFp32L) {
  // cuDNN's blockwise (block 8, BF16) merges by block substitution with the same
  // two rounded products; it rounds L to BF16 before its substitution, where
  // FlashKDA v2 keeps FP32. On an L of BF16 values the two are the same bits.
  int differ = 0;
  for (int c = 2; c <= 64; ++c) {
    const Mat l = random_fp32(c, 1.0, 77 + c, 0.9);
    EXPECT_TRUE(with("flashkda_v2").invert(to_bf16(l), false).inv == with("blockwise").invert(to_bf16(l), false).inv)
        << "C=" << c;
    differ += !(with("flashkda_v2").invert(l, false).inv == with("blockwise").invert(l, false).inv);
  }
  EXPECT_GT(differ, 30);
}

TEST(FlashkdaV2, CloseToFp64OnWellConditionedRandomCases) {
  // BF16 operands and output: the floor is BF16's own rounding of the exact
  // inverse (the whole error at C <= 8, where the output is bf16(X)); the
  // merges' three BF16 roundings (P, M, -D) touch only the off-diagonal
  // blocks and add less than that floor again (measured here: 1.09x to 1.25x it).
  for (int c : {8, 16, 17, 32, 48, 64})
    for (uint64_t seed = 0; seed < 6; ++seed) {
      const Mat l = random_fp32(c, 0.5, 500 + seed, 0.8);
      const Mat exact = unit_lower_inverse(l);
      const double err = rel(with("flashkda_v2").invert(l, false).inv, exact);
      EXPECT_LT(err, 1e-2) << "C=" << c << " seed " << seed;
      const double floor = rel(to_bf16(exact), exact);
      EXPECT_LT(err, 2 * floor) << "C=" << c << " seed " << seed;
      EXPECT_GT(err, 0.5 * floor) << "C=" << c << " seed " << seed;
    }
}

TEST(FlashkdaV2, PaddingIsInvisible) {
  const Mat l = random_fp32(20, 1.0, 5, 0.8);
  const Mat small = with("flashkda_v2").invert(l, false).inv;
  for (int c : {25, 32}) EXPECT_TRUE(with("flashkda_v2").invert(prec::pad(l, c), false).inv.topLeftCorner(20, 20) == small) << c;
}

TEST(FlashkdaV2, OverflowShowsInTheDiagnostics) {
  Mat l = Mat::Zero(16, 16);
  for (int i = 1; i < 4; ++i) l(i, i - 1) = 1e20;
  const InverseRun r = with("flashkda_v2").invert(l, false);
  EXPECT_TRUE(std::isinf(r.diagnostics[0]));  // diag_inv_max
  EXPECT_TRUE(std::isinf(r.diagnostics[1]));  // work_max
  EXPECT_FALSE(std::isfinite(r.inv(3, 0)));
  // An overflow in the merge only: finite diagonal blocks, infinite D.
  Mat m = Mat::Zero(16, 16);
  m(8, 7) = 1e30;
  m(9, 8) = 1e30;
  const InverseRun q = with("flashkda_v2").invert(m, false);
  EXPECT_EQ(q.diagnostics[0], fp32(1e30));
  EXPECT_TRUE(std::isinf(q.diagnostics[1]));
}

TEST(FlashkdaV2, FusedFmaWhereTheTorchReferenceRoundsTwice) {
  // FlashKDA's torch reference forms each update in FP64 and rounds it to FP32;
  // the kernel's fmaf rounds once. X20 + (-A21) X10 = (1 + 2^-23) + (1 + 2^-23) 2^-24 (1 - 2^-23)
  // = 1 + 2^-23 + 2^-24 - 2^-70: just below the midpoint, so one rounding gives
  // 1 + 2^-23; FP64 first drops 2^-70 and the tie then goes to even, 1 + 2^-22.
  const double one_up = 1.0 + 0x1p-23;
  Mat l = Mat::Zero(3, 3);
  l(1, 0) = -0x1p-24 * (1.0 - 0x1p-23);
  l(2, 0) = -one_up;
  l(2, 1) = -one_up;
  const float x10 = -float(l(1, 0)), x20 = -float(l(2, 0)), s21 = -float(l(2, 1));
  const float twice = float(double(x20) + double(s21) * double(x10));
  ASSERT_EQ(twice, float(1.0 + 0x1p-22));
  const InverseRun r = with("flashkda_v2").invert(l, true);
  EXPECT_EQ(find(r, "X[0:8,0:8]")->m(2, 0), one_up);
  // On random FP32 blocks the two roundings agree: a difference needs the FP64 sum
  // to land on an FP32 midpoint (about 2^-28 of the updates with a wide exponent gap).
  int differ = 0;
  for (uint64_t seed = 0; seed < 20000; ++seed) {
    const Mat a = random_fp32(8, 2.0, seed, 0.9);
    const Mat x = block_inverse_by_rows(a, 0);
    float y[8][8] = {};
    for (int s = 0; s < 7; ++s)
      for (int row = s + 1; row < 8; ++row) {
        const double scale = -float(a(row, s));
        for (int p = 0; p < s; ++p) y[row][p] = float(double(y[row][p]) + scale * double(y[s][p]));
        y[row][s] = float(scale);
      }
    for (int i = 0; i < 8; ++i)
      for (int j = 0; j < i; ++j) differ += x(i, j) != double(y[i][j]);
  }
  EXPECT_EQ(differ, 0);
}

TEST(FlashkdaV1, IsNeumannBitForBit) {
  const MethodSpec& v1 = find_method("flashkda_v1");
  const MethodSpec& neumann = find_method("neumann");
  EXPECT_EQ(v1.invert, neumann.invert);  // one function, one set of diagnostics
  EXPECT_EQ(v1.diagnostics.data(), neumann.diagnostics.data());
  for (int c : {2, 8, 16, 17, 32, 48, 64})
    for (uint64_t seed = 0; seed < 4; ++seed) {
      const Mat l = random_strict_lower(c, 0.5, 300 + seed, 0.8);
      const InverseRun a = with("flashkda_v1").invert(l, true), b = with("neumann").invert(l, true);
      ASSERT_TRUE(a.inv.allFinite()) << "C=" << c;
      EXPECT_TRUE(a.inv == b.inv) << "C=" << c;
      EXPECT_EQ(a.diagnostics, b.diagnostics) << "C=" << c;
      ASSERT_EQ(a.intermediates.size(), b.intermediates.size());
    }
}

TEST(FlashkdaMethods, RegisteredBeforeExactEachWithItsVersionsL) {
  const std::vector<std::string> names = method_names();
  ASSERT_GE(names.size(), 4u);
  EXPECT_EQ(names.front(), "neumann");
  const std::vector<std::string> tail(names.end() - 3, names.end());
  EXPECT_EQ(tail, (std::vector<std::string>{"flashkda_v1", "flashkda_v2", "exact"}));
  // Each takes the L its FlashKDA version forms: v1 FP16 (as neumann), v2 FP32.
  EXPECT_EQ(find_method("flashkda_v1").l_storage, LStorage::kFp16);
  EXPECT_EQ(find_method("flashkda_v2").l_storage, LStorage::kFp32);
}

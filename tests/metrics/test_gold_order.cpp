// The plain loops of metrics/fp64_order.hpp against the Eigen operations they
// stand for (methods/exact.cpp's unit_lower_inverse, metrics.cpp's rel_rmse),
// bit for bit, and the residual product's fast form (k = j .. i) against its
// definition (every k): the GPU runs these loops, so this is what makes its
// gold and metrics the CPU's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/fp.hpp"
#include "gpu/gpu_test_common.hpp"
#include "methods/method.hpp"
#include "metrics/fp64_order.hpp"
#include "metrics/metrics.hpp"
#include "model/outputs.hpp"

using namespace chunkinv;
using gputest::same_double;
using Rng = gputest::TestRng;

namespace {

int count_differing(const Mat& a, const Mat& b) {
  int n = 0;
  for (Eigen::Index e = 0; e < a.size(); ++e) n += !same_double(a.data()[e], b.data()[e]);
  return n;
}

// Entry kinds of an extreme matrix: ordinary, tiny, huge, zeros of both
// signs, subnormal, inf, NaN.
double extreme_value(Rng& rng) {
  switch (rng.integer(12)) {
    case 0: return 0.0;
    case 1: return -0.0;
    case 2: return rng.normal() * 1e300;
    case 3: return rng.normal() * 1e-300;
    case 4: return rng.normal() * 0x1p-1060;  // subnormal
    case 5: return rng.integer(2) ? INFINITY : -INFINITY;
    case 6: return NAN;
    case 7: return rng.normal() * 65504.0;
    default: return rng.normal();
  }
}

// Strictly lower C x C: normal entries times 10^scale, or extreme entries.
Mat strict_lower(int C, Rng& rng, int kind) {
  Mat l = Mat::Zero(C, C);
  const double scale = std::pow(10.0, rng.integer(9) - 4);
  for (int i = 0; i < C; ++i)
    for (int j = 0; j < i; ++j) {
      if (kind == 0) l(i, j) = rng.normal() * scale;
      else if (kind == 1) l(i, j) = (rng.integer(8) == 0) ? extreme_value(rng) : rng.normal() * scale;
      else l(i, j) = fp16(rng.normal() * scale);  // FP16 values, as a path's L
    }
  return l;
}

Mat plain_inverse(const Mat& l, bool skip) {
  const int C = int(l.rows());
  Mat x(C, C);
  for (int c = 0; c < C; ++c) {
    const int first = skip ? (c & ~31) : 0;
    fp64::unit_lower_solve_column(
        C, c, first, [&](int i, int j) { return l(i, j); }, [&](int i) -> double& { return x(i, c); });
  }
  return x;
}

// (I + L) B by fp64::residual_entry: over every k, or (lower) over k = j .. i
// on and below the diagonal and +0 above it.
Mat plain_product(const Mat& l, const Mat& b, bool lower) {
  const int C = int(l.rows());
  Mat p(C, C);
  auto lf = [&](int r, int k) { return l(r, k); };
  auto bf = [&](int k, int c) { return b(k, c); };
  for (int i = 0; i < C; ++i)
    for (int j = 0; j < C; ++j)
      p(i, j) = !lower ? fp64::residual_entry(i, j, 0, C, lf, bf) : j <= i ? fp64::residual_entry(i, j, j, i + 1, lf, bf) : 0.0;
  return p;
}

constexpr int kPerSize = 50;  // matrices per chunk size and kind: 63 x 50 x 3 = 9,450 each

// B of the residual tests: normals, or with extremes, an extreme value
// (extreme_value's kinds) at about one entry in six.
Mat residual_operand(int C, Rng& rng, bool extremes) {
  Mat b(C, C);
  for (int i = 0; i < C; ++i)
    for (int j = 0; j < C; ++j) b(i, j) = extremes && rng.integer(6) == 0 ? extreme_value(rng) : rng.normal();
  return b;
}

}  // namespace

TEST(GoldOrder, UnitLowerSolveIsEigensBitForBit) {
  Rng rng(11);
  int differing = 0, matrices = 0;
  for (int C = 2; C <= 64; ++C)
    for (int t = 0; t < kPerSize; ++t)
      for (int kind = 0; kind < 3; ++kind) {
        const Mat l = strict_lower(C, rng, kind);
        const int d = count_differing(plain_inverse(l, false), unit_lower_inverse(l));
        differing += d != 0;
        ++matrices;
        if (d) ADD_FAILURE() << "C=" << C << " kind " << kind << ": " << d << " entries differ";
      }
  std::printf("unit-lower solve: %d of %d matrices differ from Eigen\n", differing, matrices);
  EXPECT_EQ(differing, 0);
}

TEST(GoldOrder, SkippingTheZeroHeadOfAColumnIsExactOnFiniteMatrices) {
  // first = c & ~31 (the GPU's: one warp's first column) and first = c.
  Rng rng(12);
  int differing = 0;
  for (int C = 2; C <= 64; ++C)
    for (int t = 0; t < kPerSize; ++t) {
      const Mat l = strict_lower(C, rng, t % 2 == 0 ? 0 : 2);
      const Mat ref = unit_lower_inverse(l);
      differing += count_differing(plain_inverse(l, true), ref) != 0;
      Mat x(C, C);
      for (int c = 0; c < C; ++c)
        fp64::unit_lower_solve_column(
            C, c, c, [&](int i, int j) { return l(i, j); }, [&](int i) -> double& { return x(i, c); });
      differing += count_differing(x, ref) != 0;
    }
  EXPECT_EQ(differing, 0);
}

TEST(GoldOrder, ResidualEntryIsTheFusedChainOfIPlusL) {
  // residual_entry(i, j, 0, C) against the same chain written out on the
  // matrix I + L as Eigen forms it, on L and B of every kind (inf and NaN
  // included): one std::fma a term, k ascending, from +0.
  Rng rng(13);
  long differing = 0, entries = 0;
  for (int C = 2; C <= 64; C += 3)
    for (int t = 0; t < 6; ++t) {
      const Mat l = strict_lower(C, rng, t % 3);
      const Mat b = residual_operand(C, rng, t == 1);
      const Mat a = Mat::Identity(C, C) + l;
      const Mat p = plain_product(l, b, false);
      for (int i = 0; i < C; ++i)
        for (int j = 0; j < C; ++j) {
          double r = 0.0;
          for (int k = 0; k < C; ++k) r = std::fma(a(i, k), b(k, j), r);
          differing += !same_double(p(i, j), r);
          ++entries;
        }
    }
  std::printf("(I + L) * B: %ld of %ld entries differ from the chain on I + L\n", differing, entries);
  EXPECT_EQ(differing, 0);
}

TEST(GoldOrder, ResidualFastFormIsTheDefinitionOnFiniteLowerOperands) {
  // Over k = j .. i (and +0 above the diagonal) against every k, bit for bit
  // with the signs of zeros, where L is finite and strictly lower and B
  // finite and +-0 above its diagonal: L of normal, extreme-but-finite
  // (huge, tiny, subnormal, zeros of both signs) and FP16 entries, B of
  // normals, FP16 values and -0 or +0 above the diagonal. This is what
  // lets the host take the fast form and the GPU's tiles start at k = 8J.
  Rng rng(14);
  long differing = 0, entries = 0;
  for (int C = 2; C <= 64; ++C)
    for (int t = 0; t < 12; ++t) {
      Mat l = strict_lower(C, rng, t % 3);
      for (Eigen::Index e = 0; e < l.size(); ++e)
        if (!std::isfinite(l.data()[e])) l.data()[e] = rng.integer(2) ? -0.0 : 0x1p-1070;
      Mat b(C, C);
      for (int i = 0; i < C; ++i)
        for (int j = 0; j < C; ++j)
          b(i, j) = j > i ? (rng.integer(2) ? -0.0 : 0.0) : t % 2 ? fp16(rng.normal()) : rng.normal() * std::exp2(rng.integer(40) - 20);
      const Mat full = plain_product(l, b, false), fast = plain_product(l, b, true);
      differing += count_differing(full, fast);
      entries += full.size();
    }
  std::printf("(I + L) * B over k = j .. i: %ld of %ld entries differ from every k\n", differing, entries);
  EXPECT_EQ(differing, 0);
  EXPECT_GT(entries, 1000000);
}

TEST(GoldOrder, RelRmseAndResidualAreTheMetricsBitForBit) {
  Rng rng(15);
  int differing = 0;
  for (int C = 2; C <= 64; ++C)
    for (int t = 0; t < 20; ++t) {
      GoldOutput gold;
      gold.L = strict_lower(C, rng, t % 4 == 3 ? 1 : 0);
      gold.inv = unit_lower_inverse(gold.L);
      Mat a = gold.inv.unaryExpr([](double v) { return fp16(v); });
      if (t % 5 == 4) a(rng.integer(C), rng.integer(C)) = INFINITY;
      fp64::ChunkSums r;
      for (int i = 0; i < C; ++i)
        for (int j = 0; j < C; ++j) r.add(C, i, j, a(i, j), gold.inv(i, j));
      differing += !same_double(r.value(C), chunk_rel_rmse(a, gold.inv));
      // evaluate_reference's residual: the product by its definition, then rel_rmse against I.
      double ref[4];
      evaluate_reference(gold, ref);
      bool inv_finite = all_finite(gold.inv);
      double residual = INFINITY;
      if (inv_finite) {
        const Mat p = plain_product(gold.L, gold.inv, false);
        fp64::ChunkSums q;
        for (int i = 0; i < C; ++i)
          for (int j = 0; j < C; ++j) q.add(C, i, j, p(i, j), i == j ? 1.0 : 0.0);
        residual = q.value(C);
      }
      differing += !same_double(residual, ref[2]);
    }
  EXPECT_EQ(differing, 0);
}

TEST(GoldOrder, BitPatternValuesAreExact) {
  for (int b = 0; b < 65536; ++b) {
    const uint16_t u = uint16_t(b);
    ASSERT_TRUE(same_double(fp64::fp16_value(u), fp16_from_bits(u))) << b;
    ASSERT_TRUE(same_double(fp64::bf16_value(u), bf16_from_bits(u))) << b;
  }
  EXPECT_EQ(fp64::min0(-0.0), 0.0);
  EXPECT_TRUE(std::signbit(fp64::min0(-0.0)));
  EXPECT_TRUE(std::isnan(fp64::min0(NAN)));
  EXPECT_EQ(fp64::min0(3.0), 0.0);
  EXPECT_EQ(fp64::min0(-3.0), -3.0);
}

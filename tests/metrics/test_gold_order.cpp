// The plain loops of metrics/fp64_order.hpp against the Eigen operations they
// stand for (methods/exact.cpp's unit_lower_inverse, metrics.cpp's residual
// product and rel_rmse), bit for bit: the GPU runs these loops, so this is
// what makes its gold and metrics the CPU's.
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

Mat plain_product(const Mat& l, const Mat& b, bool skip) {
  const int C = int(l.rows());
  Mat p(C, C);
  for (int i = 0; i < C; ++i)
    for (int j = 0; j < C; ++j)
      p(i, j) = fp64::unit_plus_times(
          C, i, j, skip ? i + 1 : C, [&](int r, int k) { return l(r, k); }, [&](int k, int c) { return b(k, c); });
  return p;
}

Mat eigen_product(const Mat& l, const Mat& b) {
  const Eigen::Index c = l.rows();
  const Mat i = Mat::Identity(c, c);
  return (i + l) * b;  // as metrics.cpp's residual()
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

TEST(GoldOrder, ResidualProductIsEigensBitForBit) {
  Rng rng(13);
  int differing = 0, matrices = 0;
  for (int C = 2; C <= 64; ++C)
    for (int t = 0; t < kPerSize; ++t)
      for (int kind = 0; kind < 3; ++kind) {
        const Mat l = strict_lower(C, rng, kind);
        Mat b(C, C);
        for (int i = 0; i < C; ++i)
          for (int j = 0; j < C; ++j)
            b(i, j) = (kind == 1 && rng.integer(10) == 0) ? extreme_value(rng) : (j > i && t % 2 ? 0.0 : rng.normal());
        const int d = count_differing(plain_product(l, b, false), eigen_product(l, b));
        differing += d != 0;
        ++matrices;
        if (d) ADD_FAILURE() << "C=" << C << " kind " << kind << ": " << d << " entries differ";
      }
  std::printf("(I + L) * B: %d of %d matrices differ from Eigen\n", differing, matrices);
  EXPECT_EQ(differing, 0);
}

TEST(GoldOrder, ResidualProductSkipsZeroTermsUpToTheSignOfZero) {
  Rng rng(14);
  int differing = 0;
  for (int C = 2; C <= 64; ++C)
    for (int t = 0; t < kPerSize; ++t) {
      const Mat l = strict_lower(C, rng, t % 3);  // inf and NaN in L too: they are never skipped
      Mat b(C, C);
      for (int i = 0; i < C; ++i)
        for (int j = 0; j < C; ++j) b(i, j) = (j > i && t % 2) ? 0.0 : fp16(rng.normal());
      const Mat p = plain_product(l, b, true), q = eigen_product(l, b);
      for (Eigen::Index e = 0; e < p.size(); ++e) {
        const double u = p.data()[e], v = q.data()[e];
        differing += !(u == v || (std::isnan(u) && std::isnan(v)));
      }
    }
  EXPECT_EQ(differing, 0);
}

TEST(GoldOrder, LowerResidualEntryIsTheGeneralOneBitForBit) {
  // unit_plus_times_lower against unit_plus_times(..., i + 1, ...) on
  // strictly lower L of every kind (extreme values, zeros of both signs, inf
  // and NaN included) and B of every kind, every entry, every k_begin <= j.
  Rng rng(15);
  long differing = 0, entries = 0;
  for (int C = 2; C <= 64; ++C)
    for (int t = 0; t < 4; ++t) {
      const Mat l = strict_lower(C, rng, t % 3);
      const Mat b = residual_operand(C, rng, t == 1);
      auto lf = [&](int r, int k) { return l(r, k); };
      auto bf = [&](int k, int c) { return b(k, c); };
      for (int i = 0; i < C; ++i)
        for (int j = 0; j < C; ++j)
          for (int k_begin : {0, j / 2, j}) {
            const double want = fp64::unit_plus_times(C, i, j, k_begin, i + 1, lf, bf);
            const double got = fp64::unit_plus_times_lower(C, i, j, k_begin, lf, bf);
            differing += !same_double(got, want);
            ++entries;
          }
    }
  std::printf("lower residual entries: %ld of %ld differ from the general form\n", differing, entries);
  EXPECT_EQ(differing, 0);
}

TEST(GoldOrder, LowerResidualWalkIsTheLowerFormBitForBit) {
  // unit_plus_times_lower_walk (pointers along row i of L and column j of B,
  // B row-major or packed by rows) against unit_plus_times_lower with
  // k_begin = j, every entry on or below the diagonal, C = 7..64, the same
  // kinds of L and B as above.
  Rng rng(16);
  long differing = 0, entries = 0;
  for (int C = 7; C <= 64; ++C)
    for (int t = 0; t < 4; ++t) {
      const Mat l = strict_lower(C, rng, t % 3);
      const Mat b = residual_operand(C, rng, t == 1);
      std::vector<double> rows(size_t(C) * C), packed(size_t(C) * (C + 1) / 2), lrow(static_cast<size_t>(C));
      for (int i = 0; i < C; ++i)
        for (int j = 0; j < C; ++j) {
          rows[size_t(i) * C + j] = b(i, j);
          if (j <= i) packed[size_t(i) * (i + 1) / 2 + j] = b(i, j);
        }
      auto lf = [&](int r, int k) { return l(r, k); };
      auto bf = [&](int k, int c) { return b(k, c); };
      for (int i = 0; i < C; ++i) {
        for (int k = 0; k < C; ++k) lrow[k] = l(i, k);
        for (int j = 0; j <= i; ++j) {
          const double want = fp64::unit_plus_times_lower(C, i, j, j, lf, bf);
          const double* r0 = rows.data();
          const double* p0 = packed.data();
          const double by_rows = fp64::unit_plus_times_lower_walk(C, i, j, lrow.data(), r0 + size_t(j) * C + j,
                                                                   r0 + size_t(i) * C + j, fp64::StrideStep{C});
          const double by_packed =
              fp64::unit_plus_times_lower_walk(C, i, j, lrow.data(), p0 + size_t(j) * (j + 1) / 2 + j,
                                               p0 + size_t(i) * (i + 1) / 2 + j, fp64::PackedRowsStep{});
          differing += !same_double(by_rows, want) + !same_double(by_packed, want);
          entries += 2;
        }
      }
    }
  std::printf("lower residual walks: %ld of %ld differ from the lower form\n", differing, entries);
  EXPECT_EQ(differing, 0);
  EXPECT_GT(entries, 100000);
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
      fp64::RelRmse r;
      for (Eigen::Index e = 0; e < a.size(); ++e) r.add(a.data()[e], gold.inv.data()[e]);
      differing += !same_double(r.value(int(a.size())), rel_rmse(a, gold.inv));
      // evaluate_reference's residual: the plain product with skipped zeros, then rel_rmse against I.
      double ref[4];
      evaluate_reference(gold, ref);
      bool inv_finite = all_finite(gold.inv);
      double residual = INFINITY;
      if (inv_finite) {
        const Mat p = plain_product(gold.L, gold.inv, true);
        fp64::RelRmse q;
        for (int i = 0; i < C; ++i)
          for (int j = 0; j < C; ++j) q.add(p(i, j), i == j ? 1.0 : 0.0);
        residual = q.value(C * C);
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

// The tensor-core model on hand-computed cases, and the emulated path's
// structure (padding invariance, decays) against slow obvious references.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "core/fp.hpp"
#include "core/rng.hpp"
#include "inputs/family.hpp"
#include "arith/decay.hpp"
#include "paths/emulated/emulated.hpp"
#include "arith/tensor_core.hpp"
#include "paths/gold/gold.hpp"

using namespace chunkinv;

namespace {
double dot(std::initializer_list<double> a, std::initializer_list<double> b, double c, tc::Accum acc) {
  double av[16] = {}, bv[16] = {};
  std::copy(a.begin(), a.end(), av);
  std::copy(b.begin(), b.end(), bv);
  return tc::dot16(av, bv, 1, c, acc);
}
}  // namespace

TEST(TensorCore, ExactWhenNothingIsShiftedOut) {
  EXPECT_EQ(dot({1, 2, 3}, {4, 5, 6}, 0.5, tc::Accum::kFP32), 32.5);
  EXPECT_EQ(dot({1, 2, 3}, {4, 5, 6}, 0.5, tc::Accum::kFP16), 32.5);
}

TEST(TensorCore, SmallTermsAreTruncatedAt25BitsBelowTheLargest) {
  // emax = 0 (the term 1.0): a term of 2^-25 survives, 2^-26 is truncated away.
  EXPECT_EQ(dot({1, 0x1p-25}, {1, 1}, 0, tc::Accum::kFP32), 1.0);  // survives alignment, lost by FP32 truncation
  EXPECT_EQ(dot({1, 0x1p-23}, {1, 1}, 0, tc::Accum::kFP32), 1.0 + 0x1p-23);
  // Two halves of the FP32 ulp add up when they survive alignment...
  EXPECT_EQ(dot({1, 0x1p-24, 0x1p-24}, {1, 1, 1}, 0, tc::Accum::kFP32), 1.0 + 0x1p-23);
  // ...but not when each is below 2^(emax-25).
  EXPECT_EQ(dot({1, 0x1p-26, 0x1p-26, 0x1p-26, 0x1p-26}, {1, 1, 1, 1, 1}, 0, tc::Accum::kFP32), 1.0);
  // Truncation is toward zero for negative terms: 1 - 2^-26 - ... stays 1 (both parts truncated).
  EXPECT_EQ(dot({1, -0x1.8p-26}, {1, 1}, 0, tc::Accum::kFP32), 1.0);
  // The FP32 result is truncated: 1 + 1.5 * 2^-23 -> 1 + 2^-23.
  EXPECT_EQ(dot({1, 0x1.8p-23}, {1, 1}, 0, tc::Accum::kFP32), 1.0 + 0x1p-23);
}

TEST(TensorCore, AlignmentUsesTheNominalExponentOfProducts) {
  // 1.5 * 1.5 = 2.25 has nominal exponent 0 (true exponent 1): terms down to
  // 2^-25 survive. 2.25 - 1.875 + 2^-25 = 0.375 + 2^-25, exact in FP32.
  EXPECT_EQ(dot({1.5, -1.0, 0x1p-25}, {1.5, 1.875, 1}, 0, tc::Accum::kFP32), 0.375 + 0x1p-25);
  // The same 2.25 as 1.125 * 2 has nominal exponent 1: the term is cut.
  EXPECT_EQ(dot({1.125, -1.0, 0x1p-25}, {2.0, 1.875, 1}, 0, tc::Accum::kFP32), 0.375);
}

TEST(TensorCore, Fp16AccumulatorRoundsToNearestEvenAndZeroIsPositive) {
  // 1 + 2^-11 is a tie between 1 and 1 + 2^-10: even is 1.
  EXPECT_EQ(dot({1, 0x1p-11}, {1, 1}, 0, tc::Accum::kFP16), 1.0);
  EXPECT_EQ(dot({1, 0x1.8p-11}, {1, 1}, 0, tc::Accum::kFP16), 1.0 + 0x1p-10);
  const double z = dot({1, -1}, {1, 1}, 0, tc::Accum::kFP16);
  EXPECT_EQ(z, 0.0);
  EXPECT_FALSE(std::signbit(z));
  EXPECT_FALSE(std::signbit(dot({-0x1p-30}, {1}, 0, tc::Accum::kFP16)));  // rounds to zero: +0
  EXPECT_TRUE(std::isinf(dot({256, 256}, {256, 1}, 0, tc::Accum::kFP16)));  // 65792 overflows FP16
}

// Three m16n8k16 FP16 results of tiny sums (every product's nominal
// exponent at most -23), with the operands and the hardware's result as the
// H200 gave them (GpuNeumannReplay on model_like C = 24 and 64, decay floor
// -2, seed 31337, samples 195447, 84687 and 92038; C = 0). Aligned to the
// largest product alone, their exact sums (1.4999998, 0.5000001 and
// -0.5000002 times 2^-24) round to 1, 1 and -1 units of 2^-24; the hardware
// holds the alignment at 2^kFp16AlignFloor, truncates the terms at 2^(floor -
// 25), and gives 2, 0 and +0.
TEST(TensorCore, Fp16TinySumsAreAlignedNoLowerThanTheFloor) {
  struct Case {
    uint16_t a[16], b[16], hardware, largest_only;
  };
  const Case cases[] = {
      {{0x0000, 0x0000, 0x0000, 0x8002, 0x8003, 0x0000, 0x0005, 0x0010, 0x8008, 0x8061, 0x8105, 0x8030, 0x84b9,
        0x0bce, 0x1654, 0x99cc},
       {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x05b7, 0x0219, 0x02e6, 0x8075},
       0x0002, 0x0001},
      {{0x806d, 0x0022, 0x8094, 0x0373, 0x091f, 0x0780, 0x0c35, 0x995f, 0, 0, 0, 0, 0, 0, 0, 0},
       {0x9081, 0x9228, 0x91bf, 0x0858, 0x0067, 0x068c, 0x807a, 0x801a, 0x0006, 0x8002, 0x0001, 0x8000, 0x0000,
        0x0000, 0x8000, 0x0000},
       0x0000, 0x0001},
      {{0x0000, 0x8000, 0x0000, 0x8000, 0x0000, 0x0001, 0x0004, 0x8009, 0x8020, 0x005b, 0x83d1, 0x0c4b, 0x853e,
        0x144c, 0x995f, 0x0000},
       {0, 0, 0, 0, 0, 0, 0, 0, 0x16d6, 0x930e, 0x05cb, 0x83e7, 0x0817, 0x005d, 0x8013, 0x8009},
       0x0000, 0x8001},
  };
  for (const Case& c : cases) {
    double a[16], b[16];
    for (int k = 0; k < 16; ++k) a[k] = fp16_from_bits(c.a[k]), b[k] = fp16_from_bits(c.b[k]);
    EXPECT_EQ(fp16_bits(tc::dot16(a, b, 1, 0.0, tc::Accum::kFP16)), c.hardware);
    const int none = std::numeric_limits<int>::min();
    EXPECT_EQ(fp16_bits(tc::dot16_aligned(a, b, 1, 0.0, tc::Accum::kFP16, none)), c.largest_only);
  }
}

TEST(TensorCore, NonFiniteInputs) {
  EXPECT_TRUE(std::isnan(dot({INFINITY}, {0}, 0, tc::Accum::kFP32)));  // inf * 0
  EXPECT_TRUE(std::isnan(dot({INFINITY, -INFINITY}, {1, 1}, 0, tc::Accum::kFP32)));
  EXPECT_EQ(dot({INFINITY, 1}, {1, 1}, 0, tc::Accum::kFP32), INFINITY);
  EXPECT_EQ(dot({1}, {1}, -INFINITY, tc::Accum::kFP16), -INFINITY);
  EXPECT_TRUE(std::isnan(dot({1}, {1}, NAN, tc::Accum::kFP16)));
}

TEST(TensorCore, MatmulChainsKBlocksThroughTheAccumulator) {
  // 1x32 times 32x1 padded to 16x32 and 32x16: first block gives 1, the second
  // adds 2^-24 which the FP32 truncation after the first block cannot hold.
  Mat a = Mat::Zero(16, 32), b = Mat::Zero(32, 16);
  a(0, 0) = 1;
  b(0, 0) = 1;
  a(0, 16) = 0x1p-24;
  b(16, 0) = 1;
  a(0, 17) = 0x1p-24;
  b(17, 0) = 1;
  // One block holding all three would give 1 + 2^-23; chained, block 2 alone
  // is 2^-23 and C = 1 aligns with it exactly: 1 + 2^-23.
  EXPECT_EQ(tc::matmul_bf16_f32(a, b)(0, 0), 1.0 + 0x1p-23);
  a(0, 17) = 0;  // now block 2 is 2^-24 alone: 1 + 2^-24 truncates to 1
  EXPECT_EQ(tc::matmul_bf16_f32(a, b)(0, 0), 1.0);
}

namespace {

// The slow, obvious product: every output element's k-blocks chained through
// C by tc::dot16 on the matrices as they are (B read down its columns), no
// block skipped.
Mat chained_dots(const Mat& a, const Mat& b, tc::Accum acc) {
  Mat d(a.rows(), b.cols());
  for (Eigen::Index i = 0; i < a.rows(); ++i)
    for (Eigen::Index j = 0; j < b.cols(); ++j) {
      double c = 0.0;
      for (Eigen::Index blk = 0; blk < a.cols() / 16; ++blk)
        c = tc::dot16(a.data() + i * a.cols() + blk * 16, b.data() + blk * 16 * b.cols() + j, int(b.cols()), c, acc);
      d(i, j) = c;
    }
  return d;
}

bool same_bits(double x, double y) { return std::memcmp(&x, &y, sizeof x) == 0 || (std::isnan(x) && std::isnan(y)); }

}  // namespace

// The product's fast form (operands laid out once with their exponents, zero
// blocks skipped, finite blocks without the special-value scan) against the
// chained dots: random shapes, zeros and zero blocks, subnormals, values near
// the format's largest, infinities and NaNs, both accumulators; and the L
// product's lower form likewise.
TEST(TensorCore, MatmulIsTheChainedDotsBitForBit) {
  std::mt19937_64 gen(7);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  size_t compared = 0, special = 0;
  for (tc::Accum acc : {tc::Accum::kFP32, tc::Accum::kFP16}) {
    const Format f = acc == tc::Accum::kFP32 ? kBF16 : kFP16;
    const int top = acc == tc::Accum::kFP32 ? 60 : 8;  // largest exponent drawn (FP16's products overflow above)
    for (int trial = 0; trial < 48; ++trial) {
      const int m = 16 * (1 + trial % 3), k = 16 * (1 + (trial / 3) % 4), n = 16 * (1 + trial % 2);
      const double zeros = trial % 4 == 0 ? 0.6 : 0.2, bad = trial % 6 == 5 ? 0.01 : 0.0;
      auto draw = [&](Eigen::Index rows, Eigen::Index cols) {
        Mat x(rows, cols);
        for (Eigen::Index i = 0; i < x.size(); ++i) {
          const double r = u(gen);
          double v;
          if (r < zeros) v = 0.0;
          else if (r < zeros + bad) v = u(gen) < 0.5 ? (u(gen) < 0.5 ? INFINITY : -INFINITY) : NAN;
          else v = std::ldexp(1.0 + u(gen), int(f.emin - 12 + u(gen) * (top - f.emin + 12))) * (u(gen) < 0.5 ? -1 : 1);
          x.data()[i] = round_to(v, f);
        }
        if (trial % 5 == 1) x.block(0, 0, std::min<Eigen::Index>(rows, 16), 16).setZero();  // a whole zero block
        return x;
      };
      const Mat a = draw(m, k), b = draw(k, n);
      const Mat fast = acc == tc::Accum::kFP32 ? tc::matmul_bf16_f32(a, b) : tc::matmul_f16(a, b);
      const Mat slow = chained_dots(a, b, acc);
      if (acc == tc::Accum::kFP32) {  // the L product's form: rows of a against rows of b2, below the diagonal
        const Mat b2 = draw(m + trial % 3, k), lower = tc::lower_products_bf16_f32(a, b2);
        const Mat all = chained_dots(a, b2.transpose(), acc);
        for (Eigen::Index i = 0; i < m; ++i)
          for (Eigen::Index j = 0; j < b2.rows(); ++j)
            ASSERT_TRUE(same_bits(lower(i, j), j < i ? all(i, j) : 0.0)) << "trial " << trial << " L(" << i << ", " << j << ")";
      }
      for (Eigen::Index i = 0; i < fast.size(); ++i) {
        ASSERT_TRUE(same_bits(fast.data()[i], slow.data()[i]))
            << "trial " << trial << " element " << i << ": " << fast.data()[i] << " vs " << slow.data()[i];
        ++compared;
        special += !std::isfinite(slow.data()[i]) || slow.data()[i] == 0.0;
      }
    }
  }
  EXPECT_GT(special, compared / 20) << "the draws reach zeros and non-finite results";
  EXPECT_LT(special, compared / 2);
}

TEST(Decay, ReferenceIsBf16OfFtzExp2) {
  EXPECT_EQ(exp2_ftz_bf16_reference(0.0f), 1.0);
  EXPECT_EQ(exp2_ftz_bf16_reference(-126.0f), 0x1p-126);
  EXPECT_EQ(exp2_ftz_bf16_reference(-126.5f), 0.0);  // subnormal result flushed
  EXPECT_TRUE(std::isinf(exp2_ftz_bf16_reference(128.0f)));
  EXPECT_EQ(exp2_ftz_bf16_reference(127.0f), 0x1p127);
  // Against libm for many inputs (bf16 of a correctly rounded FP32).
  const Rng rng(3, 0, Stream::kUser);
  for (int i = 0; i < 100000; ++i) {
    const float x = static_cast<float>((rng.uniform(i) - 0.5) * 240);
    const double want = bf16(ftz32(static_cast<double>(static_cast<float>(std::exp2(static_cast<double>(x))))));
    ASSERT_EQ(exp2_ftz_bf16_reference(x), want) << x;
  }
}

// Rounding to BF16/FP16 against an independent bit-level reference, over all
// 65536 patterns of each format and the midpoints between neighbours.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>

#include "core/bf16_divider.hpp"
#include "core/fp.hpp"

using namespace chunkinv;

namespace {

// Independent reference: FP32 -> BF16 by the classic integer trick (round to
// nearest even on the upper 16 bits of the FP32 pattern).
uint16_t bf16_bits_of_float(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7FFFFFFF) > 0x7F800000) return 0x7FC0;
  const uint32_t lsb = (u >> 16) & 1;
  u += 0x7FFF + lsb;
  return static_cast<uint16_t>(u >> 16);
}

float float_of_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace

TEST(Formats, Bf16DecodeEncodeAllPatterns) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const double v = bf16_from_bits(static_cast<uint16_t>(b));
    // Same value as the FP32 with those upper bits.
    const float f = float_of_bits(b << 16);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(v));
      continue;
    }
    ASSERT_EQ(v, static_cast<double>(f)) << std::hex << b;
    ASSERT_EQ(std::signbit(v), std::signbit(f));
    ASSERT_EQ(bf16(v), v) << "a BF16 value rounds to itself " << std::hex << b;
    ASSERT_EQ(bf16_bits(v), b) << std::hex << b;
  }
}

TEST(Formats, Bf16RoundingMatchesBitReferenceAtMidpointsAndBetween) {
  // Every FP32 pattern whose low 16 bits are 0x8000 (ties), 0x7FFF, 0x8001, 0x0001, 0xFFFF.
  const uint32_t lows[] = {0x8000, 0x7FFF, 0x8001, 0x0001, 0xFFFF, 0x4000};
  for (uint32_t hi = 0; hi < 65536; ++hi) {
    for (uint32_t lo : lows) {
      const float f = float_of_bits((hi << 16) | lo);
      if (std::isnan(f)) continue;
      const uint16_t want = bf16_bits_of_float(f);
      const double got = bf16(static_cast<double>(f));
      ASSERT_EQ(bf16_bits(got), want) << std::hexfloat << f;
    }
  }
}

TEST(Formats, Fp16AllPatternsRoundTripAndMidpoints) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const double v = fp16_from_bits(static_cast<uint16_t>(b));
    const int e = (b >> 10) & 31;
    const int m = b & 1023;
    if (e == 31) {
      EXPECT_EQ(std::isnan(v), m != 0);
      if (m == 0) {
        EXPECT_TRUE(std::isinf(v));
      }
      continue;
    }
    // Independent value: subnormal m * 2^-24, normal (1024 + m) * 2^(e-25).
    const double want = (e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25)) * ((b & 0x8000) ? -1 : 1);
    ASSERT_EQ(v, want) << std::hex << b;
    ASSERT_EQ(fp16(v), v);
    ASSERT_EQ(fp16_bits(v), b) << std::hex << b;
    // The midpoint to the next larger magnitude rounds to the even neighbour.
    if (e < 30 || m < 1023) {
      const double next = fp16_from_bits(static_cast<uint16_t>(b + 1));
      const double mid = (v + next) / 2;  // exact in double
      const double r = fp16(mid);
      const bool b_even = (b & 1) == 0;
      ASSERT_EQ(r, b_even ? v : next) << "tie at " << std::hex << b;
      // Just above and below the midpoint.
      ASSERT_EQ(fp16(std::nextafter(mid, 2 * next)), next);
      ASSERT_EQ(fp16(std::nextafter(mid, v - (next - v))), v);
    }
  }
}

TEST(Formats, OverflowSubnormalsAndNaN) {
  EXPECT_EQ(fp16(65504.0), 65504.0);
  EXPECT_EQ(fp16(65519.99), 65504.0);
  EXPECT_TRUE(std::isinf(fp16(65520.0)));  // the tie above the largest value overflows
  EXPECT_TRUE(std::isinf(fp16(-1e6)) && fp16(-1e6) < 0);
  EXPECT_EQ(fp16(std::ldexp(1.0, -24)), std::ldexp(1.0, -24));  // smallest subnormal
  EXPECT_EQ(fp16(std::ldexp(1.0, -25)), 0.0);                    // tie to even (zero)
  EXPECT_EQ(fp16(std::ldexp(1.5, -25)), std::ldexp(1.0, -24));
  EXPECT_TRUE(std::signbit(fp16(-std::ldexp(1.0, -26))));        // rounds to -0
  EXPECT_TRUE(std::isnan(fp16(NAN)));
  EXPECT_TRUE(std::isinf(bf16(0x1.FFp127)));                      // above max BF16, rounds up
  EXPECT_EQ(bf16(0x1.FEp127), 0x1.FEp127);
  EXPECT_EQ(bf16(std::ldexp(1.0, -133)), std::ldexp(1.0, -133));  // smallest BF16 subnormal
  EXPECT_EQ(bf16(std::ldexp(1.0, -134)), 0.0);
  // Truncation (the FP32 accumulator's output).
  EXPECT_EQ(round_to(1.0 + std::ldexp(1.0, -24) * 1.9, kFP32, Rounding::kTowardZero), 1.0);
  EXPECT_EQ(round_to(-(1.0 + std::ldexp(1.0, -23) * 1.5), kFP32, Rounding::kTowardZero), -(1.0 + std::ldexp(1.0, -23)));
  EXPECT_EQ(ftz32(std::ldexp(1.0, -127)), 0.0);
  EXPECT_EQ(ftz32(std::ldexp(1.0, -126)), std::ldexp(1.0, -126));
}

namespace {

// Whether a and b are the same double, NaN matching any NaN.
bool same_value(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::memcmp(&a, &b, sizeof a) == 0;
}

}  // namespace

// Bf16Divider against the division it replaces: quotients spread over the
// whole range, quotients placed within +-40 units of BF16 midpoints (the
// band where the shortcut must give way to the division; exact ties
// included), and zeros, infinities, NaN and subnormals.
TEST(Formats, Bf16DividerIsTheDivisionRounded) {
  std::mt19937_64 gen(7);
  std::uniform_real_distribution<double> unit(1.0, 2.0);
  std::uniform_int_distribution<int> expo(-140, 140), small(-40, 40), mant(0, 127);
  int checked = 0, near = 0;
  int fast = 0;
  auto check = [&](double x, double y) {
    const Bf16Divider by(y);
    const double want = round_to(x / y, kBF16), got = by(x);
    ASSERT_TRUE(same_value(got, want)) << std::hexfloat << x << " / " << y << ": " << got << " against " << want;
    // Its bits where the product decides them: the pattern of the value.
    uint16_t bits = 0;
    if (by.fast_bits(x, bits)) {
      ASSERT_EQ(bits, bf16_bits(want)) << std::hexfloat << x << " / " << y;
      ++fast;
    }
    ++checked;
  };
  for (int n = 0; n < 200000; ++n) {
    const double y = std::ldexp(unit(gen), expo(gen)) * (n & 1 ? -1 : 1);
    check(std::ldexp(unit(gen), expo(gen)) * (n & 2 ? -1 : 1), y);
    // A midpoint m between BF16 neighbours of a random binade, moved k units of
    // its double's last place; x = m y rounded, so x / y is within a unit of it.
    const int e = std::uniform_int_distribution<int>(-125, 126)(gen), k = small(gen);
    const double m = std::ldexp(1.0 + (2 * mant(gen) + 1) * 0x1p-8, e);
    const double t = std::ldexp(std::ldexp(m, -e) + k * 0x1p-52, e);
    check(t * y, y);
    near += (k >= -20 && k <= 20);
    // A power-of-two y makes x / y exactly the midpoint: a tie, to even.
    const double p = std::ldexp(1.0, expo(gen));
    check(m * p, p);
  }
  const double odd[] = {0.0, -0.0, 0x1p-1074, -0x1p-1030, 0x1p-1022, 0x1p1022, 0x1.fffffffffffffp1023, 1e300,
                        INFINITY, -INFINITY, NAN, 1.0, -3.0, 0x1p-126, 0x1.FEp127, 0x1.FFp127};
  for (double x : odd)
    for (double y : odd) check(x, y);
  EXPECT_GT(near, 80000);
  EXPECT_EQ(checked, 3 * 200000 + 16 * 16);
  EXPECT_GT(fast, 200000);  // the quotients in BF16's normal range away from midpoints (257,492 of them)
}

// Rounding to BF16/FP16 against an independent bit-level reference, over all
// 65536 patterns of each format and the midpoints between neighbours.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>

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

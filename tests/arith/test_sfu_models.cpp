// The CPU models of the SFU instructions (arith/activation.hpp) against the
// hardware: a committed set of measured results (sfu_measured.inc), and the
// decay's table of measured BF16 roundings (arith/decay_exceptions.inc),
// which the ex2 model must reproduce without it. The exhaustive check on
// every input is the GPU test tests/gpu/test_sfu_models.cpp.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>

#include "arith/activation.hpp"
#include "arith/decay.hpp"
#include "core/detmath.hpp"
#include "core/fp.hpp"

using namespace chunkinv;

namespace {

enum class SfuOp { kTanh, kRsqrt, kEx2 };
struct Measured {
  SfuOp op;
  uint32_t x, y;
};
constexpr Measured kMeasured[] = {
#include "sfu_measured.inc"
};

float model(SfuOp op, float x) {
  switch (op) {
    case SfuOp::kTanh: return tanh_approx_model(x);
    case SfuOp::kRsqrt: return rsqrt_approx_model(x);
    case SfuOp::kEx2: return ex2_approx_model(x);
  }
  return NAN;
}

// Entries of the measured set for `op`, and how many the model misses.
struct Tally {
  int entries = 0, differ = 0;
};
Tally tally(SfuOp op) {
  Tally t;
  for (const Measured& m : kMeasured) {
    if (m.op != op) continue;
    ++t.entries;
    const uint32_t got = std::bit_cast<uint32_t>(model(op, std::bit_cast<float>(m.x)));
    if (got != m.y) {
      ++t.differ;
      if (t.differ <= 5) std::printf("  x %08X: hardware %08X, model %08X\n", m.x, m.y, got);
    }
  }
  return t;
}

struct DecayException {
  uint32_t x_bits;
  uint16_t bf16_bits;
};
constexpr DecayException kDecayExceptions[] = {
#include "arith/decay_exceptions.inc"
};

struct TanhBf16 {
  uint16_t x_bf16;
  uint32_t y_bits;
};
constexpr TanhBf16 kTanhBf16[] = {
#include "arith/tanh_bf16_exceptions.inc"
};

}  // namespace

TEST(SfuModels, TanhIsTheHardwareOnEveryMeasuredInput) {
  const Tally t = tally(SfuOp::kTanh);
  EXPECT_EQ(t.entries, 1040);
  EXPECT_EQ(t.differ, 0);
}

// `chunkinv calibrate-activation` measured tanh.approx.f32 on every BF16
// value: the hardware is the correctly rounded tanh (detmath's) except on the
// 3,650 values of tanh_bf16_exceptions.inc. The model, which uses neither,
// must give the same bits on all of them: the binades the dumps of
// sfu_measured.inc do not cover (|x| < 2^-20, |x| >= 32, the negatives) included.
TEST(SfuModels, TanhModelReproducesTheMeasuredBf16Values) {
  ASSERT_EQ(std::size(kTanhBf16), 3650u);
  size_t next = 0;
  int checked = 0, differ = 0;
  for (uint32_t v = 0; v < 65536; ++v) {
    const float x = std::bit_cast<float>(v << 16);
    if (!std::isfinite(x)) continue;
    uint32_t want;
    if (next < std::size(kTanhBf16) && kTanhBf16[next].x_bf16 == v) want = kTanhBf16[next++].y_bits;
    else want = std::bit_cast<uint32_t>(static_cast<float>(detmath::tanh(static_cast<double>(x))));
    ++checked;
    if (std::bit_cast<uint32_t>(tanh_approx_model(x)) != want) {
      if (++differ <= 5) std::printf("  x %08X: hardware %08X, model %08X\n", v << 16, want,
                                     std::bit_cast<uint32_t>(tanh_approx_model(x)));
    }
  }
  EXPECT_EQ(next, std::size(kTanhBf16));  // the table is sorted and every entry was met
  EXPECT_EQ(checked, 65280);
  EXPECT_EQ(differ, 0);
}

TEST(SfuModels, RsqrtIsTheHardwareOnEveryMeasuredInput) {
  const Tally t = tally(SfuOp::kRsqrt);
  EXPECT_EQ(t.entries, 1024);  // 8 of each of the 128 table intervals
  EXPECT_EQ(t.differ, 0);
}

TEST(SfuModels, Ex2IsTheHardwareOnEveryMeasuredInput) {
  const Tally t = tally(SfuOp::kEx2);
  EXPECT_EQ(t.entries, 800);
  EXPECT_EQ(t.differ, 0);
}

// Every input where the hardware's BF16 decay differs from that of the
// correctly rounded 2^x, measured by `chunkinv calibrate-decay` over
// |x| <= 470: the FP32 model rounded to BF16 gives the hardware's value.
TEST(SfuModels, Ex2ModelReproducesEveryMeasuredDecayException) {
  ASSERT_GT(std::size(kDecayExceptions), 1000u);
  int differ = 0;
  for (const DecayException& e : kDecayExceptions) {
    const double y = bf16(ftz32(static_cast<double>(ex2_approx_model(std::bit_cast<float>(e.x_bits)))));
    differ += bf16_bits(y) != e.bf16_bits;
  }
  EXPECT_EQ(differ, 0);
}

TEST(SfuModels, SpecialInputs) {
  EXPECT_EQ(rsqrt_approx_model(1.0f), 1.0f);
  EXPECT_EQ(rsqrt_approx_model(0x1p-126f), 0x1p63f);
  EXPECT_EQ(rsqrt_approx_model(0x1p-127f), INFINITY);   // .ftz: the subnormal is a zero
  EXPECT_EQ(rsqrt_approx_model(-0.0f), -INFINITY);
  EXPECT_EQ(rsqrt_approx_model(INFINITY), 0.0f);
  EXPECT_TRUE(std::isnan(rsqrt_approx_model(-1.0f)));
  for (float x : {1.5f, 3.0f, 0.7f, 1e-30f, 1e30f}) EXPECT_EQ(rsqrt_approx_model(4.0f * x), rsqrt_approx_model(x) * 0.5f) << x;
  EXPECT_EQ(ex2_approx_model(0.0f), 1.0f);
  EXPECT_EQ(ex2_approx_model(0x1p-140f), 1.0f);         // a subnormal input is a zero
  for (int i = -126; i < 128; ++i) EXPECT_EQ(ex2_approx_model(float(i)), std::ldexp(1.0f, i)) << i;
  EXPECT_EQ(ex2_approx_model(-127.0f), 0.0f);           // below FLT_MIN: flushed
  EXPECT_EQ(ex2_approx_model(128.0f), INFINITY);
  EXPECT_EQ(ex2_approx_model(-INFINITY), 0.0f);
  EXPECT_TRUE(std::isnan(ex2_approx_model(NAN)));
  EXPECT_EQ(tanh_approx_model(0x1p-9f), 0x1p-9f);       // below 2^-8: x itself
  EXPECT_EQ(tanh_approx_model(-0.0f), -0.0f);
  EXPECT_EQ(tanh_approx_model(8.0f), 1.0f);             // from 8 on: +-1
  EXPECT_EQ(tanh_approx_model(-INFINITY), -1.0f);
  for (float x : {0.01f, 0.3f, 1.7f, 5.0f}) EXPECT_EQ(tanh_approx_model(-x), -tanh_approx_model(x)) << x;
}

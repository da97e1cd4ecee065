// The GPU paths' fast FP64 -> FP16 packing against core/fp.hpp (CPU only).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>

#include "core/fp.hpp"
#include "gpu/pack.hpp"
#include "gpu/gpu_test_common.hpp"

using namespace chunkinv;

TEST(GpuHostConvert, Fp16BitsMatchCoreRounding) {
  gputest::TestRng rng(99);
  size_t n = 0, bad = 0;
  auto check = [&](double x) {
    ++n;
    const uint16_t want = fp16_bits(fp16(x)), got = gpu::fp16_bits_rn(x);
    if (want != got && bad++ < 10) std::printf("  x = %a: core 0x%04x, fast 0x%04x\n", x, want, got);
  };
  // Every FP16 value, the midpoints between neighbours and one double either side.
  for (uint32_t b = 0; b < 0x7C00; ++b) {
    const double v = fp16_from_bits(uint16_t(b)), w = fp16_from_bits(uint16_t(b + 1));
    for (double s : {1.0, -1.0}) {
      const double m = s * (v + w) / 2;
      check(s * v);
      check(m);
      check(std::nextafter(m, 0.0));
      check(std::nextafter(m, INFINITY));
      check(std::nextafter(m, -INFINITY));
    }
  }
  // Random doubles over the range that matters and far beyond it.
  for (int i = 0; i < 2000000; ++i) check(rng.normal() * std::exp2(rng.uniform(-40, 20)));
  for (double x : {0.0, -0.0, 65504.0, 65519.99, 65520.0, 1e300, -1e-300, double(INFINITY), -double(INFINITY),
                   0x1p-24, 0x1p-25, 0x1.0000000000001p-25, 0x1p-14, 0x1.ffcp-15})
    check(x);
  EXPECT_EQ(gpu::fp16_bits_rn(NAN), 0x7E00);
  std::printf("fast FP64 -> FP16 packing: %zu of %zu values differ from fp16_bits(fp16(x))\n", bad, n);
  EXPECT_EQ(bad, 0u);
}

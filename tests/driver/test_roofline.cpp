// The device peaks and stage floors of bench --pipeline (driver/roofline):
// the peaks of sm_90 from its clocks, and a floor set by its largest
// resource time.
#include <gtest/gtest.h>

#include "driver/roofline.hpp"

using namespace chunkinv;

namespace {

// An H100 SXM as the CUDA runtime describes it: 132 SMs at 1,980 MHz, HBM3 at
// 2,619 MHz over 5,120 bits.
gpu::DeviceInfo h100() {
  gpu::DeviceInfo d;
  d.name = "NVIDIA H100 80GB HBM3";
  d.cc_major = 9;
  d.cc_minor = 0;
  d.multiprocessors = 132;
  d.clock_khz = 1'980'000;
  d.memory_clock_khz = 2'619'000;
  d.memory_bus_bits = 5120;
  return d;
}

}  // namespace

TEST(Roofline, PeaksOfAnH100AreItsPublishedRates) {
  const auto p = device_peaks(h100());
  ASSERT_TRUE(p.has_value());
  EXPECT_NEAR(p->fp64 * 1e-12, 33.45, 0.01);      // NVIDIA: 34 TFLOP/s
  EXPECT_NEAR(p->fp64_mma * 1e-12, 66.9, 0.01);   // 67
  EXPECT_NEAR(p->fp16_mma * 1e-12, 1070.5, 0.1);  // 989 dense at the lower clock NVIDIA quotes it at
  EXPECT_NEAR(p->fp32 * 1e-12, 66.9, 0.01);       // 67
  EXPECT_NEAR(p->bytes * 1e-12, 3.352, 0.001);    // 3.35 TB/s
}

TEST(Roofline, NoPeaksWithoutClocksOrForAnotherArchitecture) {
  gpu::DeviceInfo d = h100();
  d.cc_major = 8;
  EXPECT_FALSE(device_peaks(d).has_value());
  d = h100();
  d.clock_khz = 0;
  EXPECT_FALSE(device_peaks(d).has_value());
  d = h100();
  d.memory_bus_bits = 0;
  EXPECT_FALSE(device_peaks(d).has_value());
}

TEST(Roofline, TheFloorIsTheSlowestResource) {
  const DevicePeaks p{1e12, 2e12, 1e15, 4e12, 1e12};  // FLOP/s and bytes/s
  StageWork w;
  w.fp64 = 3000;      // 3 ns
  w.fp64_mma = 2000;  // 1 ns
  w.bytes = 5000;     // 5 ns
  StageFloor f = stage_floor(w, p);
  EXPECT_DOUBLE_EQ(f.fp64_ns, 3.0);
  EXPECT_DOUBLE_EQ(f.fp64_mma_ns, 1.0);
  EXPECT_DOUBLE_EQ(f.memory_ns, 5.0);
  EXPECT_DOUBLE_EQ(f.ns, 5.0);
  EXPECT_EQ(f.bound, "memory");
  w.fp64 = 8000;
  f = stage_floor(w, p);
  EXPECT_DOUBLE_EQ(f.ns, 8.0);
  EXPECT_EQ(f.bound, "FP64");
  w = StageWork{};
  w.fp16_mma = 1e7;  // 10 ns
  w.fp32 = 4e4;      // 10 ns, not above: the first resource named keeps it
  f = stage_floor(w, p);
  EXPECT_DOUBLE_EQ(f.ns, 10.0);
  EXPECT_EQ(f.bound, "FP16 MMA");
  EXPECT_EQ(stage_floor(StageWork{}, p).bound, "");
}

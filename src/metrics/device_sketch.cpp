// The host side of DeviceSketch, in every build: the state a download
// makes (tested on the CPU against StreamStats through an emulation of the
// device's accumulators), and the class of a build without CUDA. The
// kernels and the class are in metrics/device_sketch.cu.
#include "metrics/device_sketch.hpp"

#include "core/error.hpp"

namespace chunkinv {
namespace device_sketch {

SketchState Image::state() const {
  SketchState s;
  s.count = count;
  s.nan = scalars[kNan];
  s.neg_inf = scalars[kNegInf];
  s.pos_inf = scalars[kPosInf];
  s.zeros = scalars[kZeros];
  if (count > s.nan) {  // some value is not NaN
    // StreamStats keeps the first of tied extremes: where one is zero, the
    // first zero folded (the sample indices of both signs' first zeros).
    const double zero = scalars[kFirstNegZero] < scalars[kFirstPosZero] ? -0.0 : 0.0;
    s.min = from_ordered_key(scalars[kMinKey]);
    s.max = from_ordered_key(scalars[kMaxKey]);
    if (s.min == 0) s.min = zero;
    if (s.max == 0) s.max = zero;
  }
  for (int slot = 0; slot < 2 * kShifts; ++slot) {
    const uint64_t lo = sums[2 * size_t(slot)], hi = sums[2 * size_t(slot) + 1];
    if (lo | hi) s.sum.add_units(hi, lo, slot % kShifts, slot < kShifts);
  }
  for (size_t i = 0; i < pages.size(); ++i) {
    const bool negative = pages[i] < kPages;
    std::vector<SketchBucket>& out = negative ? s.neg : s.pos;
    const int32_t first = (negative ? pages[i] : pages[i] - kPages) * kPageKeys + kSketchKeyMin;
    for (int j = 0; j < kPageKeys; ++j)
      if (const uint64_t c = page_counts[i * kPageKeys + size_t(j)]) out.push_back({first + j, c});
  }
  return s;
}

}  // namespace device_sketch

#ifndef CHUNKINV_HAVE_CUDA
struct DeviceSketch::Impl {};

DeviceSketch::DeviceSketch(int) { throw UsageError("the device sketch: this build has no CUDA support"); }
DeviceSketch::~DeviceSketch() = default;
int DeviceSketch::metrics() const { return 0; }
uint64_t DeviceSketch::count() const { return 0; }
void DeviceSketch::fold(const double*, size_t, void*) {}
void DeviceSketch::fold(const double*, size_t, void*, int, std::span<const int>) {}
void DeviceSketch::fold_host(const double*, size_t) {}
SketchState DeviceSketch::state(int) const { return {}; }
void DeviceSketch::reset() {}
#endif

}  // namespace chunkinv

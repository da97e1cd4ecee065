// DeviceSketch against StreamStats, bit for bit (SketchState::operator==).
// On the CPU: the arithmetic the kernel shares with the host (keys, scales,
// significands, order keys) against sketch_key and the values themselves;
// ExactSum::add_units against ExactSum::add; and an emulation of the
// device's accumulators (warp groups of 32 samples, 128-bit sums with
// carries, first zeros by stream index) whose download image makes the
// state StreamStats has. On the GPU: the kernel on the adversarial families
// of test_sketch.cpp in several batches, signed zeros in every order,
// halves merged, state between folds, reset, and the rate the pipeline
// needs.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "gpu/gpu_test_common.hpp"
#include "metrics/device_sketch.hpp"
#include "metrics/sketch_families.hpp"
#include "metrics/exact_sum.hpp"
#include "metrics/sketch.hpp"

#ifdef CHUNKINV_HAVE_CUDA
#include <cuda_runtime.h>
#endif

using namespace chunkinv;
namespace ds = chunkinv::device_sketch;

namespace {

bool same(double a, double b) { return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b); }

// test_sketch.cpp's adversarial families, and the signs and non-finite
// values they lack.
using chunkinv::testing::ValueFamily;

std::vector<ValueFamily> adversarial() {
  using U = std::uniform_real_distribution<double>;
  using I = std::uniform_int_distribution<int>;
  std::vector<ValueFamily> v = chunkinv::testing::adversarial_values();
  v.insert(v.end(), {
      {"one value", [](std::mt19937_64&) { return 1.5; }},  // every lane of every warp in one bucket: the most contended
      {"largest significands", [](std::mt19937_64& r) { return std::nextafter(0x1p-1000 * double(I(1, 2)(r)), 0.0); }},
      {"signed zeros, NaN, infinities", [](std::mt19937_64& r) {
         static const double v[] = {0.0, -0.0, NAN, INFINITY, -INFINITY, 0x1p-1074, -0x1p-1074, DBL_MAX, -DBL_MAX, 1.0, -1.0};
         return v[I(0, 10)(r)];
       }},
      {"rare -0 among positives", [](std::mt19937_64& r) { return I(0, 999)(r) ? U(0, 4)(r) : -0.0; }},
  });
  return v;
}

// The values of `families.size()` metrics over n samples, sample-major.
std::vector<double> draw(const std::vector<ValueFamily>& families, size_t n, std::mt19937_64& rng) {
  std::vector<double> v(n * families.size());
  for (size_t s = 0; s < n; ++s)
    for (size_t m = 0; m < families.size(); ++m) v[s * families.size() + m] = families[m].draw(rng);
  return v;
}

// The device's accumulators for one metric, emulated: samples in warp
// groups of 32 as the kernel takes them, a group's significands of one
// scale added at once into 128 bits with the kernel's carry rule.
class Emulated {
 public:
  void fold(const double* values, size_t n, size_t metrics, size_t m) {
    for (size_t w = 0; w < n; w += 32) {
      std::map<int32_t, uint64_t> group;  // slot -> sum of significands
      for (size_t s = w; s < std::min(n, w + 32); ++s) {
        const uint64_t u = std::bit_cast<uint64_t>(values[s * metrics + m]), a = u & ~ds::kSignBit;
        if (a > ds::kInfBits) {
          ++image_.scalars[ds::kNan];
          continue;
        }
        const uint64_t k = ds::ordered_key(u);
        image_.scalars[ds::kMinKey] = std::min(image_.scalars[ds::kMinKey], k);
        image_.scalars[ds::kMaxKey] = std::max(image_.scalars[ds::kMaxKey], k);
        if (a == ds::kInfBits) {
          ++image_.scalars[u >> 63 ? ds::kNegInf : ds::kPosInf];
        } else if (a == 0) {
          ++image_.scalars[ds::kZeros];
          uint64_t& first = image_.scalars[u >> 63 ? ds::kFirstNegZero : ds::kFirstPosZero];
          first = std::min(first, image_.count + s);
        } else {
          ++hist_[ds::bucket_index(u)];
          group[ds::sum_index(u)] += ds::significand(a);
        }
      }
      for (const auto& [slot, total] : group) {
        uint64_t& lo = sums_[2 * size_t(slot)];
        const uint64_t old = lo;
        lo += total;
        if (lo < old) ++sums_[2 * size_t(slot) + 1];
      }
    }
    image_.count += n;
  }
  ds::Image image() const {
    ds::Image im = image_;
    im.sums = sums_;
    for (const auto& [index, c] : hist_) {
      const int32_t page = index / ds::kPageKeys;
      if (im.pages.empty() || im.pages.back() != page) {
        im.pages.push_back(page);
        im.page_counts.resize(im.page_counts.size() + ds::kPageKeys);
      }
      im.page_counts[(im.pages.size() - 1) * ds::kPageKeys + size_t(index % ds::kPageKeys)] = c;
    }
    return im;
  }
  bool carried() const {  // whether some 128-bit sum reached its high word
    for (size_t i = 1; i < sums_.size(); i += 2)
      if (sums_[i]) return true;
    return false;
  }

 private:
  ds::Image image_;
  std::vector<uint64_t> sums_ = std::vector<uint64_t>(size_t{2} * ds::kShifts * 2);
  std::map<int32_t, uint64_t> hist_;  // histogram slot -> count
};

SketchState stream_state(const std::vector<double>& v, size_t metrics, size_t m) {
  StreamStats s;
  for (size_t i = m; i < v.size(); i += metrics) s.add(v[i]);
  return s.state();
}

}  // namespace

// ---- CPU: what the kernel computes, and what the host makes of it ----

TEST(DeviceSketchLayout, BucketKeysAreSketchKeys) {
  std::mt19937_64 rng(11);
  std::vector<double> xs = {0x1p-1074, 0x3p-1074, std::nextafter(DBL_MIN, 0.0), DBL_MIN, DBL_MAX, 1.0, 1.5};
  for (int e = -1074; e <= 1023; ++e) {  // every scale, on and beside bucket edges
    const double x = std::ldexp(1.0, e);
    xs.push_back(x);
    xs.push_back(std::nextafter(x, INFINITY));
    if (e > -1074) xs.push_back(std::nextafter(x, 0.0));
    xs.push_back(x * (1 + 0x1p-10));
  }
  for (int i = 0; i < 200000; ++i) xs.push_back(std::bit_cast<double>(rng() >> 1));
  for (double x : xs) {
    if (!std::isfinite(x) || x == 0) continue;
    const uint64_t a = std::bit_cast<uint64_t>(x);
    ASSERT_EQ(ds::bucket_key(a), sketch_key(x)) << x;
    ASSERT_EQ(ds::bucket_index(a), ds::kKeys + sketch_key(x) - kSketchKeyMin) << x;
    ASSERT_EQ(ds::bucket_index(a | ds::kSignBit), sketch_key(x) - kSketchKeyMin) << x;
    // The scale and significand rebuild the value exactly, as ExactSum reads it.
    ASSERT_LT(ds::significand(a), uint64_t{1} << 53);
    ASSERT_TRUE(same(std::ldexp(double(ds::significand(a)), ds::sum_shift(a) - 1074), x)) << x;
    ASSERT_GE(ds::sum_shift(a), 0);
    ASSERT_LT(ds::sum_shift(a), ds::kShifts);
    ASSERT_EQ(ds::sum_index(a), ds::kShifts + ds::sum_shift(a));
    ASSERT_EQ(ds::sum_index(a | ds::kSignBit), ds::sum_shift(a));
    // A bucket's values share a scale: the kernel's two votes nest.
    ASSERT_EQ(ds::sum_shift(std::bit_cast<uint64_t>(sketch_lower(sketch_key(x)))), ds::sum_shift(a)) << x;
  }
  EXPECT_EQ(ds::bucket_index(std::bit_cast<uint64_t>(DBL_MAX)), 2 * ds::kKeys - 1);
  EXPECT_EQ(ds::bucket_index(std::bit_cast<uint64_t>(-0x1p-1074)), 0);
}

TEST(DeviceSketchLayout, OrderKeysSortAsTheDoublesWithZerosAsOne) {
  std::vector<double> xs = {-INFINITY, -DBL_MAX, -1.0, -DBL_MIN, -0x1p-1074, -0.0, 0.0, 0x1p-1074, DBL_MIN, 1.0, DBL_MAX, INFINITY};
  std::mt19937_64 rng(3);
  for (int i = 0; i < 2000; ++i) {
    const double x = std::bit_cast<double>(rng());
    if (!std::isnan(x)) xs.push_back(x);
  }
  for (double x : xs) {
    const uint64_t kx = ds::ordered_key(std::bit_cast<uint64_t>(x));
    EXPECT_TRUE(same(ds::from_ordered_key(kx), x == 0 ? 0.0 : x)) << x;
    EXPECT_NE(kx, ds::kScalarInit[ds::kMinKey]);
    EXPECT_NE(kx, ds::kScalarInit[ds::kMaxKey]);
    for (double y : {-HUGE_VAL, -1.0, -0.0, 0.0, 0x1p-1074, 2.0, HUGE_VAL}) {
      const uint64_t ky = ds::ordered_key(std::bit_cast<uint64_t>(y));
      ASSERT_EQ(kx < ky, x < y) << x << " " << y;
      ASSERT_EQ(kx == ky, x == y) << x << " " << y;
    }
  }
}

TEST(DeviceSketchHost, AddUnitsIsTheSumOfTheValues) {
  // Significands of one scale summed in 128 bits (with carries into the
  // high word) give what adding the values one by one gives.
  std::mt19937_64 rng(17);
  for (int shift : {0, 1, 31, 32, 33, 500, 1021, 1022, 1100, 2013, 2045}) {
    for (bool negative : {false, true}) {
      ExactSum one_by_one, at_once;
      uint64_t lo = 0, hi = 0;
      for (int i = 0; i < 5000; ++i) {
        // Large significands so that 2^11 of them pass 2^64.
        uint64_t m = (uint64_t{1} << 52) | (rng() & ds::kFraction);
        if (shift == 0 && i % 2) m &= ds::kFraction;  // subnormals share scale 0 with exponent 1
        const double x = std::ldexp(double(m), shift - 1074);
        ASSERT_TRUE(std::isfinite(x));
        one_by_one.add(negative ? -x : x);
        const uint64_t old = lo;
        lo += m;
        if (lo < old) ++hi;
      }
      ASSERT_GT(hi, 0u);
      at_once.add_units(hi, lo, shift, negative);
      EXPECT_TRUE(at_once == one_by_one) << shift << " " << negative;
      EXPECT_EQ(at_once.to_hex(), one_by_one.to_hex());
      EXPECT_TRUE(same(at_once.value(), one_by_one.value()));
    }
  }
  // Exactly the integer hi * 2^64 + lo shifted: in hexadecimal, shifts by 4 are zeros appended.
  for (int shift : {0, 4, 32, 64, 1000, 2044}) {
    ExactSum s;
    s.add_units(0x123456789abcdefull, 0xfedcba9876543210ull, shift, false);
    EXPECT_EQ(s.to_hex(), "123456789abcdeffedcba9876543210" + std::string(size_t(shift / 4), '0'));
    s.add_units(0x123456789abcdefull, 0xfedcba9876543210ull, shift, true);
    EXPECT_EQ(s.to_hex(), "0");
  }
  ExactSum odd;
  odd.add_units(0, 1, 2047, false);  // the top of the range: limb 63 bit 31
  EXPECT_EQ(odd.to_hex(), "8" + std::string(511, '0'));
  EXPECT_THROW(odd.add_units(0, 1, 2048, false), std::invalid_argument);
  EXPECT_THROW(odd.add_units(0, 1, -1, false), std::invalid_argument);
}

TEST(DeviceSketchHost, EmulatedAccumulatorsMakeTheStreamState) {
  std::mt19937_64 rng(2026);
  const std::vector<ValueFamily> families = adversarial();
  const size_t metrics = families.size();
  bool carried = false;
  for (std::vector<size_t> batches : {std::vector<size_t>{1}, {3, 17}, {1000, 1, 20011, 31}, {40000}}) {
    std::vector<Emulated> device(metrics);
    std::vector<StreamStats> host(metrics);
    for (size_t n : batches) {
      const std::vector<double> v = draw(families, n, rng);
      for (size_t m = 0; m < metrics; ++m) {
        device[m].fold(v.data(), n, metrics, m);
        for (size_t s = 0; s < n; ++s) host[m].add(v[s * metrics + m]);
        EXPECT_TRUE(device[m].image().state() == host[m].state()) << families[m].name << " after " << n;
      }
    }
    for (const Emulated& d : device) carried = carried || d.carried();
  }
  EXPECT_TRUE(carried) << "some sum passes 2^64: the carry is exercised";
  // No values; NaN only.
  EXPECT_TRUE(Emulated().image().state() == StreamStats().state());
  Emulated nan_only;
  const double nans[] = {NAN, NAN};
  nan_only.fold(nans, 2, 1, 0);
  StreamStats host;
  host.add(NAN);
  host.add(NAN);
  EXPECT_TRUE(nan_only.image().state() == host.state());
}

TEST(DeviceSketchHost, AZeroExtremeTakesTheSignOfTheFirstZero) {
  // StreamStats keeps the first of tied extremes, so the sign of a zero min
  // or max depends on the order of -0 and +0: the device keeps the stream
  // index of each sign's first zero to give the same.
  const std::vector<std::vector<double>> orders = {
      {0.0, -0.0}, {-0.0, 0.0}, {NAN, -0.0, 2.0, 0.0}, {3.0, 0.0, -0.0, 0.0}, {-0.0, -0.0}, {-1.0, -0.0, 0.0}, {-0.0, 1.0, 0.0}};
  for (const std::vector<double>& v : orders) {
    // In one batch, and one value per batch.
    Emulated one, each;
    one.fold(v.data(), v.size(), 1, 0);
    for (const double& x : v) each.fold(&x, 1, 1, 0);
    const SketchState want = stream_state(v, 1, 0);
    EXPECT_TRUE(one.image().state() == want);
    EXPECT_TRUE(each.image().state() == want);
  }
  EXPECT_TRUE(std::signbit(stream_state({-0.0, 0.0}, 1, 0).min));
  EXPECT_FALSE(std::signbit(stream_state({0.0, -0.0}, 1, 0).min));
  EXPECT_TRUE(std::signbit(stream_state({-1.0, -0.0, 0.0}, 1, 0).max));
}

// ---- GPU: the kernel ----

namespace {

// Folds `v` (samples x families) into a DeviceSketch and into StreamStats
// in batches of the given sizes; every metric's state is compared after
// every batch.
void expect_stream_states(const std::vector<ValueFamily>& families, const std::vector<size_t>& batches, std::mt19937_64& rng) {
  const size_t metrics = families.size();
  DeviceSketch device(static_cast<int>(metrics));
  std::vector<StreamStats> host(metrics);
  for (size_t n : batches) {
    const std::vector<double> v = draw(families, n, rng);
    device.fold_host(v.data(), n);
    for (size_t m = 0; m < metrics; ++m) {
      for (size_t s = 0; s < n; ++s) host[m].add(v[s * metrics + m]);
      const SketchState got = device.state(int(m)), want = host[m].state();
      EXPECT_TRUE(got == want) << families[m].name << " after a batch of " << n << ": count " << got.count << "/"
                               << want.count << " nan " << got.nan << "/" << want.nan << " zeros " << got.zeros
                               << "/" << want.zeros << " min " << got.min << "/" << want.min << " max " << got.max
                               << "/" << want.max << " sum " << got.sum.to_hex() << "/" << want.sum.to_hex()
                               << " buckets " << got.pos.size() << "+" << got.neg.size() << "/" << want.pos.size()
                               << "+" << want.neg.size();
    }
  }
  EXPECT_EQ(device.count(), host[0].state().count);
}

}  // namespace

TEST(DeviceSketchGpu, EqualsStreamStatsOnAdversarialFamiliesInBatches) {
  CHUNKINV_REQUIRE_GPU();
  std::mt19937_64 rng(7);
  expect_stream_states(adversarial(), {1, 31, 33, 1000, 20011, 250000, 3}, rng);
}

TEST(DeviceSketchGpu, ALargeBatchStridesOverEveryBlock) {
  // More samples than one pass of the grid: each thread takes several.
  CHUNKINV_REQUIRE_GPU();
  std::mt19937_64 rng(8);
  const std::vector<ValueFamily> all = adversarial();
  const std::vector<ValueFamily> some = {all[0], all[4], all[7], all[11], all[14]};
  expect_stream_states(some, {3000000, 1}, rng);
}

TEST(DeviceSketchGpu, SignedZerosFollowTheStreamOrderAcrossBatches) {
  CHUNKINV_REQUIRE_GPU();
  // Zeros of both signs, first in the first, a later or the last batch;
  // metric 1 is the same negated (a zero max).
  for (size_t at : {size_t{0}, size_t{5}, size_t{70000}, size_t{99999}}) {
    for (bool negative_first : {false, true}) {
      std::vector<double> v(2 * 100000);
      for (size_t s = 0; s < 100000; ++s) {
        const double x = s < at ? 1.0 + double(s % 7) : s == at ? (negative_first ? -0.0 : 0.0)
                                                     : s % 3 ? 2.0 : (s % 2 ? 0.0 : -0.0);
        v[2 * s] = x;
        v[2 * s + 1] = -x;
      }
      DeviceSketch device(2);
      for (size_t first = 0; first < 100000; first += 30000)
        device.fold_host(v.data() + 2 * first, std::min<size_t>(30000, 100000 - first));
      for (size_t m = 0; m < 2; ++m) {
        const SketchState want = stream_state(v, 2, m), got = device.state(int(m));
        EXPECT_TRUE(got == want) << "zero at " << at << " metric " << m << ": min " << got.min << "/" << want.min
                                 << " max " << got.max << "/" << want.max;
      }
    }
  }
}

TEST(DeviceSketchGpu, HalvesMergedEqualTheWhole) {
  CHUNKINV_REQUIRE_GPU();
  std::mt19937_64 rng(9);
  const std::vector<ValueFamily> families = adversarial();
  const size_t metrics = families.size(), n = 60001, half = 29989;
  const std::vector<double> v = draw(families, n, rng);
  DeviceSketch whole(static_cast<int>(metrics)), first(static_cast<int>(metrics)), second(static_cast<int>(metrics));
  whole.fold_host(v.data(), n);
  first.fold_host(v.data(), half);
  second.fold_host(v.data() + half * metrics, n - half);
  for (size_t m = 0; m < metrics; ++m) {
    SketchState merged = first.state(int(m));
    merged.merge(second.state(int(m)));  // in stream order: a zero extreme keeps the first half's sign
    EXPECT_TRUE(merged == whole.state(int(m))) << families[m].name;
    EXPECT_TRUE(merged == stream_state(v, metrics, m)) << families[m].name;
    // Resuming from a saved state: the saved one merged with the rest.
    StreamStats resumed(first.state(int(m)));
    for (size_t s = half; s < n; ++s) resumed.add(v[s * metrics + m]);
    EXPECT_TRUE(resumed.state() == merged) << families[m].name;
  }
}

TEST(DeviceSketchGpu, StateBetweenFoldsAndReset) {
  CHUNKINV_REQUIRE_GPU();
  std::mt19937_64 rng(10);
  const std::vector<ValueFamily> families = adversarial();
  const size_t metrics = families.size();
  DeviceSketch device(static_cast<int>(metrics));
  EXPECT_TRUE(device.state(0) == StreamStats().state());
  std::vector<double> v = draw(families, 5000, rng);
  device.fold_host(v.data(), 5000);
  device.state(3);  // reading changes nothing
  device.fold_host(v.data(), 5000);
  for (size_t m = 0; m < metrics; ++m) {
    std::vector<double> twice = v;
    twice.insert(twice.end(), v.begin(), v.end());
    EXPECT_TRUE(device.state(int(m)) == stream_state(twice, metrics, m)) << families[m].name;
  }
  device.reset();
  EXPECT_EQ(device.count(), 0u);
  for (size_t m = 0; m < metrics; ++m) EXPECT_TRUE(device.state(int(m)) == StreamStats().state());
  v = draw(families, 777, rng);
  device.fold_host(v.data(), 777);
  for (size_t m = 0; m < metrics; ++m) EXPECT_TRUE(device.state(int(m)) == stream_state(v, metrics, m)) << families[m].name;
  EXPECT_THROW(device.state(int(metrics)), UsageError);
}

// The rate is printed for the notes, never asserted: speed is the bench's to judge.
TEST(DeviceSketchGpu, ALargeFoldEqualsTheHostsAndItsRateIsPrinted) {
  // The pipeline's rate: 2e7 samples x 13 metrics a second, in batches of
  // 10^6 already on the device. Metrics of the kinds a run has: a few hot
  // buckets (flags, counts, one value), lognormal errors, zeros, +inf.
  CHUNKINV_REQUIRE_GPU();
#ifdef CHUNKINV_HAVE_CUDA
  std::mt19937_64 rng(12);
  const std::vector<ValueFamily> all = adversarial();
  const std::vector<ValueFamily> families = {all[4], all[5], all[7], all[8], all[11], all[4], all[5],
                                        all[7], all[8], all[11], all[3], all[6], all[14]};
  const size_t metrics = families.size(), n = 1000000;
  const std::vector<double> v = draw(families, n, rng);
  double* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, v.size() * sizeof(double)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d, v.data(), v.size() * sizeof(double), cudaMemcpyHostToDevice), cudaSuccess);
  DeviceSketch device(static_cast<int>(metrics));
  device.fold(d, n);  // warm-up
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const int batches = 20;
  const auto t0 = std::chrono::steady_clock::now();
  for (int b = 0; b < batches; ++b) device.fold(d, n);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto s0 = std::chrono::steady_clock::now();
  std::vector<SketchState> states;
  for (size_t m = 0; m < metrics; ++m) states.push_back(device.state(int(m)));
  const double state_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s0).count();
  cudaFree(d);
  const double rate = double(batches) * double(n) / seconds;
  std::printf("device sketch: %.3g samples x %zu metrics a second (%.3f ms a batch of 10^6); state() of all %zu: %.2f ms\n",
              rate, metrics, 1e3 * seconds / batches, metrics, state_ms);
  ::testing::Test::RecordProperty("samples_per_second", std::to_string(rate));
  for (size_t m = 0; m < metrics; ++m) {
    StreamStats one;
    for (size_t s = 0; s < n; ++s) one.add(v[s * metrics + m]);
    SketchState want;
    for (int b = 0; b <= batches; ++b) want.merge(one.state());
    EXPECT_TRUE(states[m] == want) << families[m].name;
  }
#endif
}

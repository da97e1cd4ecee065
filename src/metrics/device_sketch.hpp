// Metric values folded into SketchStates on the GPU: the state of each
// metric, after any number of folds, is the one a host StreamStats has
// after `add`ing the same values batch by batch in sample order, bit for
// bit (SketchState::operator==): metrics/sketch.hpp, docs/design.md
// "Statistics that stream".
//
// What the device holds, per metric (fixed at construction, whatever the
// number of values folded):
// - a dense histogram of every sketch key, one uint64 count per key and
//   sign: 2 x 2,149,376 x 8 B = 34.4 MB (550 MB for 16 metrics, 0.4% of an
//   H200). Dense because any bounded sparse scheme either loses values or
//   must be sized for the dense worst case anyway (2^-1074..2^1023 touches
//   every page), and because an index computed from the bits needs no
//   allocation on the device. state() downloads only the touched pages:
//   a scan kernel flags the pages of 128 keys holding a count (StreamStats'
//   pages), a gather kernel packs them;
// - the exact sum as 128-bit integers, one per sign and scale: the finite
//   doubles of biased exponent e are m * 2^(max(e - 1, 0) - 1074) with an
//   integer m < 2^53, so the sum of the m of one scale (below 2^117 for
//   2^64 values) is exact; ExactSum::add_units turns it into the host's
//   sum (2 x 2046 x 16 B = 65 KB);
// - counts of NaN, -inf, +inf and zeros; min and max as order-preserving
//   integer keys (zeros as +0); the stream index of the first +0 and of the
//   first -0.
//
// Min and max of StreamStats keep the first value in stream order among
// those equal to the extreme (`x < min_` replaces, a tie does not): where
// the extreme is zero, its sign is the sign of the first zero folded, which
// depends on the order of -0 and +0 (and so does SketchState::merge's:
// merge in stream order). The device keeps that order: a sample's index in
// the stream is the samples folded before its batch plus its index in it.
//
// Contention: a warp aggregates its 32 values with __match_any_sync, one
// atomic per distinct bucket and per distinct scale (a constant metric
// costs one histogram atomic per warp, not 32); counts, min, max and the
// first zeros accumulate in registers and reach global memory once per
// block. (Alternatives rejected: a shared-memory cache of hot keys costs a
// flush per block and a policy for misses; sorting costs scratch and
// passes over O(n); the warp vote is enough: the pipeline's 2.6e8 values
// a second (2e7 samples x 13 metrics) are far below what spread or
// aggregated atomics sustain.)
//
// The interface is plain C++; a build without CUDA has the class, whose
// constructor throws UsageError.
#pragma once
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "metrics/sketch.hpp"

#ifndef CHUNKINV_HD
#ifdef __CUDACC__
#define CHUNKINV_HD __host__ __device__
#else
#define CHUNKINV_HD
#endif
#endif

namespace chunkinv {

// The device layout of one metric, and the arithmetic on a value's bits
// that the kernel and the host tests share.
namespace device_sketch {

inline constexpr int32_t kKeys = kSketchKeyMax - kSketchKeyMin + 1;  // 2,149,376 sketch keys per sign
inline constexpr int kPageKeys = 128;                               // a page: as StreamStats' pages
inline constexpr int32_t kPages = kKeys / kPageKeys;                // 16,792 per sign
static_assert(kKeys % kPageKeys == 0 && kSketchKeyMin % kPageKeys == 0, "pages are StreamStats' pages");
inline constexpr int kShifts = 2046;  // scales 2^(shift - 1074) of finite significands, shift in [0, 2045]

// Per-metric scalars on the device, in this order.
enum Scalar { kNan, kNegInf, kPosInf, kZeros, kMinKey, kMaxKey, kFirstPosZero, kFirstNegZero, kScalars };
// Their values before any fold: the neutral element of each reduction.
inline constexpr std::array<uint64_t, kScalars> kScalarInit = {0, 0, 0, 0, ~uint64_t{0}, 0, ~uint64_t{0}, ~uint64_t{0}};

inline constexpr uint64_t kSignBit = uint64_t{1} << 63;
inline constexpr uint64_t kInfBits = uint64_t{0x7FF} << 52;
inline constexpr uint64_t kFraction = (uint64_t{1} << 52) - 1;

CHUNKINV_HD inline uint64_t bits_of(double x) {
#ifdef __CUDA_ARCH__
  return static_cast<uint64_t>(__double_as_longlong(x));
#else
  return std::bit_cast<uint64_t>(x);
#endif
}
CHUNKINV_HD inline double double_of(uint64_t u) {
#ifdef __CUDA_ARCH__
  return __longlong_as_double(static_cast<long long>(u));
#else
  return std::bit_cast<double>(u);
#endif
}

// sketch_key of a finite non-zero magnitude with bits a (sign clear): its
// top 22 bits; a subnormal scaled by 2^64 first (exact), keys below 2^10.
CHUNKINV_HD inline int32_t bucket_key(uint64_t a) {
  constexpr int kDrop = 52 - kSketchBits;
  if (a >> 52 == 0) return static_cast<int32_t>(bits_of(double_of(a) * 0x1p64) >> kDrop) - (64 << kSketchBits);
  return static_cast<int32_t>(a >> kDrop);
}
// The histogram slot of a finite non-zero value with bits u: the negative
// keys first, then the positive ones.
CHUNKINV_HD inline int32_t bucket_index(uint64_t u) {
  return (u >> 63 ? 0 : kKeys) + bucket_key(u & ~kSignBit) - kSketchKeyMin;
}
// A finite non-zero magnitude with bits a is significand(a) * 2^(sum_shift(a) - 1074).
CHUNKINV_HD inline int sum_shift(uint64_t a) {
  const int e = static_cast<int>(a >> 52);
  return e > 0 ? e - 1 : 0;
}
CHUNKINV_HD inline uint64_t significand(uint64_t a) {
  return a >> 52 ? (a & kFraction) | (uint64_t{1} << 52) : a & kFraction;
}
// The sum slot of a finite non-zero value with bits u: negative scales
// first, then positive ones.
CHUNKINV_HD inline int32_t sum_index(uint64_t u) { return (u >> 63 ? 0 : kShifts) + sum_shift(u & ~kSignBit); }
// Non-NaN values as unsigned integers in the order of <, both zeros as +0
// (the sign of a zero extreme is read from the first zeros instead).
CHUNKINV_HD inline uint64_t ordered_key(uint64_t u) {
  if ((u & ~kSignBit) == 0) u = 0;
  return u >> 63 ? ~u : u | kSignBit;
}
CHUNKINV_HD inline double from_ordered_key(uint64_t k) { return double_of(k >> 63 ? k & ~kSignBit : ~k); }

// What state(m) downloads for one metric, and the host state it makes.
struct Image {
  uint64_t count = 0;                          // values folded, NaN included (counted on the host)
  std::array<uint64_t, kScalars> scalars = kScalarInit;
  std::vector<uint64_t> sums;                  // [slot][lo, hi], slot = sum_index: 2 x kShifts x 2 words
  std::vector<int32_t> pages;                  // touched pages of the histogram (slot / kPageKeys), ascending
  std::vector<uint64_t> page_counts;           // kPageKeys counts per touched page, in that order
  SketchState state() const;
};

}  // namespace device_sketch

class DeviceSketch {
 public:
  // For `metrics` metrics, on the current CUDA device; allocates
  // metrics x 34.5 MB and 2.2 MB of staging for state(). Throws UsageError
  // in a build without CUDA, std::runtime_error on a CUDA failure.
  explicit DeviceSketch(int metrics);
  ~DeviceSketch();
  DeviceSketch(const DeviceSketch&) = delete;
  DeviceSketch& operator=(const DeviceSketch&) = delete;

  int metrics() const;
  uint64_t count() const;  // samples folded since construction or reset()

  // Folds n samples: d_values[s * metrics() + m] is metric m of sample s,
  // in device memory, read on `stream` (a cudaStream_t; null: the default
  // stream). Asynchronous: d_values must stay valid until the stream has
  // run the fold. Folds must run in the order they are called (one stream,
  // or streams the caller orders): the sample order decides the sign of a
  // zero min or max.
  void fold(const double* d_values, size_t n, void* stream = nullptr);
  // The same from rows of `stride` values: metric m folds d_values[s *
  // stride + columns[m]] (columns: one per metric, at most kMaxColumns;
  // empty: column m, stride >= metrics()). std::logic_error otherwise.
  static constexpr int kMaxColumns = 32;
  void fold(const double* d_values, size_t n, void* stream, int stride, std::span<const int> columns);
  // Test hook: the same from host memory (uploaded, folded, and synchronized).
  void fold_host(const double* values, size_t n);

  // The state of metric m over everything folded: waits for the latest
  // fold's stream, downloads the counts, sums and touched pages. A saved
  // state goes on as saved.merge(state(m)) of the folds after it, exactly
  // as StreamStats(saved) would.
  SketchState state(int m) const;

  // Back to no values; waits for the latest fold.
  void reset();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace chunkinv

// Statistics that stream: a metric's values folded one by one into a state
// whose size does not grow with their number, and which merges exactly
// (docs/design.md, "Statistics that stream").
//
// - counts (all, NaN, -inf, +inf, zeros), min and max: exact;
// - the mean: an exact sum of the finite values (metrics/exact_sum), rounded
//   once, divided by the finite count: the same bits in any order or split;
// - quantiles: a log-bucketed histogram of the finite non-zero magnitudes.
//   A bucket is the values that share sign, exponent and the top
//   kSketchBits = 10 bits of the significand (HDR style, read from the bits,
//   so the same on every machine); subnormals are bucketed as if normal.
//   An order statistic is estimated by its bucket's least magnitude,
//   clamped to [min, max]: relative error below 2^-10 (0.098%), and exact
//   for values of at most 11 significant bits (counts below 2048, 0/1 flags,
//   powers of two). A quantile interpolates two estimated order statistics
//   as the exact one does (type 7), so its relative error is below 2^-10
//   too when they have the same sign (every metric here is >= 0).
// Non-finite values are counted apart, never bucketed. Bucket counts are
// integers: a merged state equals the state of all the values, bit for bit.
// The slow obvious reference beside it is aggregate() (metrics/stats): every
// value kept and sorted, exact quantiles.
#pragma once
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "metrics/exact_sum.hpp"
#include "metrics/stats.hpp"

namespace chunkinv {

inline constexpr int kSketchBits = 10;
// The bound on the relative error of a sketch quantile: 2^-10.
inline constexpr double kSketchRelativeError = 1.0 / (1 << kSketchBits);
// Bucket keys of finite non-zero magnitudes: from the least subnormal to the
// largest double.
inline constexpr int32_t kSketchKeyMin = -(51 << kSketchBits);
inline constexpr int32_t kSketchKeyMax = (2047 << kSketchBits) - 1;

// The bucket of a finite magnitude a > 0, and the least magnitude in bucket `key`.
int32_t sketch_key(double a);
double sketch_lower(int32_t key);

struct SketchBucket {
  int32_t key = 0;
  uint64_t count = 0;
  bool operator==(const SketchBucket&) const = default;
};

// A metric's values, folded: what a report carries so that shards merge.
struct SketchState {
  uint64_t count = 0;  // every value
  uint64_t nan = 0, neg_inf = 0, pos_inf = 0, zeros = 0;
  double min = NAN, max = NAN;        // over the values that are not NaN; NaN when none
  ExactSum sum;                       // of the finite values
  std::vector<SketchBucket> neg, pos; // magnitudes of negative and positive finite values, keys ascending

  uint64_t finite() const { return count - nan - neg_inf - pos_inf; }
  void merge(const SketchState& other);
  // The k-th value in ascending order (-inf, negatives, zeros, positives,
  // +inf, NaN last), estimated as above; exact for k = 0 (min) and the last
  // value that is not NaN (max).
  double order_statistic(uint64_t k) const;
  // Type 7 (linear between order statistics), as quantile_sorted.
  double quantile(double q) const;
  // The report's statistics: exact counts, min, max; mean = round(sum) /
  // finite; sketch quantiles; with `flag` the Wilson interval of the values
  // equal to 1.
  Stats stats(bool flag) const;
  bool operator==(const SketchState& other) const;
};

// Values as they come: O(1) per value, memory bounded by the buckets that
// are touched (pages of 128 counts, an eighth of a binade), never by the
// number of values.
class StreamStats {
 public:
  StreamStats() = default;
  explicit StreamStats(const SketchState& from);  // goes on from a saved state
  void add(double x);
  SketchState state() const;

 private:
  // Bucket counts, page by page from page `first` on; a page is allocated
  // when a value first falls in it.
  struct Pages {
    int32_t first = 0;
    std::vector<std::unique_ptr<uint64_t[]>> pages;
    void add(int32_t key, uint64_t n);
    void buckets(std::vector<SketchBucket>& out) const;
  };
  uint64_t count_ = 0, nan_ = 0, neg_inf_ = 0, pos_inf_ = 0, zeros_ = 0;
  double min_ = NAN, max_ = NAN;
  ExactSum sum_;
  Pages neg_, pos_;
};

}  // namespace chunkinv

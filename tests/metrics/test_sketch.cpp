// The sketch against the slow obvious reference (every value sorted, exact
// quantiles: quantile_sorted, aggregate) on adversarial distributions: a
// wide dynamic range, subnormals, values near the largest double, many
// ties, zeros, +inf, both signs, values on bucket edges. Counts, min and max
// are exact; order statistics and quantiles within 2^-10; merged states
// equal the state of all the values bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "metrics/sketch.hpp"
#include "metrics/sketch_families.hpp"
#include "metrics/stats.hpp"

using namespace chunkinv;

namespace {

bool same(double a, double b) { return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b); }

double ulp(double r) {
  const double a = std::fabs(r);
  return std::nextafter(a, INFINITY) - a;
}

SketchState sketch_of(const std::vector<double>& v) {
  StreamStats s;
  for (double x : v) s.add(x);
  return s.state();
}

using Family = chunkinv::testing::ValueFamily;
std::vector<Family> adversarial() { return chunkinv::testing::adversarial_values(); }

// The relative error of an estimate of r: 0 where they are equal (inf, 0 included).
double rel_error(double est, double r) {
  if (est == r) return 0;
  if (r == 0 || std::isinf(r) || std::isinf(est)) return INFINITY;
  return std::fabs(est - r) / std::fabs(r);
}

}  // namespace

TEST(Sketch, BucketsHoldTheirValuesAndCoverEveryDouble) {
  std::mt19937_64 rng(1);
  for (int i = 0; i < 200000; ++i) {
    double x = std::bit_cast<double>(rng() >> 1);  // any positive bits
    if (!std::isfinite(x) || x == 0) continue;
    const int32_t k = sketch_key(x);
    ASSERT_GE(k, kSketchKeyMin);
    ASSERT_LE(k, kSketchKeyMax);
    ASSERT_LE(sketch_lower(k), x) << x;
    ASSERT_LT(x - sketch_lower(k), kSketchRelativeError * x) << x;
    if (k < kSketchKeyMax) {
      ASSERT_GT(sketch_lower(k + 1), x) << x;
    }
  }
  EXPECT_EQ(sketch_key(0x1p-1074), kSketchKeyMin);
  EXPECT_EQ(sketch_key(DBL_MAX), kSketchKeyMax);
  EXPECT_EQ(sketch_lower(kSketchKeyMin), 0x1p-1074);
  EXPECT_LT(sketch_key(std::nextafter(DBL_MIN, 0.0)), sketch_key(DBL_MIN));  // subnormals below the normals
  // Values of at most 11 significant bits are a bucket's least value: exact.
  for (double v : {1.0, 2.0, 3.0, 63.0, 2047.0, 0.5, 0.75, 0x1p-1074, 0x3p-1074, 0x7FFp-1074, 1e300 - std::fmod(1e300, 0x1p987)})
    EXPECT_EQ(sketch_lower(sketch_key(v)), v) << v;
}

TEST(Sketch, WithinTheBoundOfTheExactReferenceOnAdversarialDistributions) {
  std::mt19937_64 rng(2026);
  const std::vector<double> qs{0, 0.001, 0.01, 0.1, 0.25, 0.37, 0.5, 0.63, 0.9, 0.99, 0.999, 1};
  double worst_quantile = 0, worst_order = 0;
  std::string worst_where;
  for (const Family& f : adversarial()) {
    for (size_t n : {1, 2, 3, 17, 1000, 20011}) {
      std::vector<double> v(n);
      for (double& x : v) x = f.draw(rng);
      const SketchState s = sketch_of(v);
      std::vector<double> sorted = v;
      std::sort(sorted.begin(), sorted.end());
      const std::string at = f.name + " n=" + std::to_string(n);
      // Counts, min and max: exact.
      const Stats ref = aggregate(sorted, false), got = s.stats(false);
      EXPECT_EQ(got.count, ref.count) << at;
      EXPECT_EQ(got.finite_count, ref.finite_count) << at;
      EXPECT_TRUE(same(got.min, ref.min)) << at;
      EXPECT_TRUE(same(got.max, ref.max)) << at;
      if (ref.min >= 0 && std::isfinite(ref.mean) && ref.mean != 0) {
        EXPECT_LE(std::fabs(got.mean / ref.mean - 1), 1e-10) << at;
      }
      // Every order statistic (or 2000 of them): below 2^-10, no slack.
      for (size_t i = 0; i < std::min<size_t>(n, 2000); ++i) {
        const uint64_t k = n <= 2000 ? i : rng() % n;
        const double e = rel_error(s.order_statistic(k), sorted[k]);
        ASSERT_LT(e, kSketchRelativeError) << at << " k=" << k << ": " << s.order_statistic(k) << " vs " << sorted[k];
        worst_order = std::max(worst_order, e);
      }
      // Quantiles: the same bound, up to the rounding of the interpolation
      // itself, where both order statistics around q have one sign.
      for (double q : qs) {
        const double h = (double(n) - 1) * q;
        const size_t lo = size_t(std::floor(h)), hi = std::min(lo + 1, n - 1);
        if (sorted[lo] < 0 && sorted[hi] > 0) continue;
        const double r = quantile_sorted(sorted, q), est = s.quantile(q);
        const double e = rel_error(est, r);
        ASSERT_TRUE(e < kSketchRelativeError || std::fabs(est - r) <= kSketchRelativeError * std::fabs(r) + 4 * ulp(r))
            << at << " q=" << q << ": " << est << " vs " << r;
        if (e > worst_quantile) {
          worst_quantile = e;
          worst_where = at + " q=" + std::to_string(q);
        }
      }
      if (f.name == "counts 0..63" || f.name == "flags") {  // few significant bits: exact
        for (double q : qs) {
          EXPECT_TRUE(same(s.quantile(q), quantile_sorted(sorted, q))) << at << " q=" << q;
        }
      }
    }
  }
  std::printf("sketch: largest relative error %.3e of an order statistic, %.3e of a quantile (%s); bound %.3e\n",
              worst_order, worst_quantile, worst_where.c_str(), kSketchRelativeError);
  ::testing::Test::RecordProperty("max_relative_error_order_statistic", std::to_string(worst_order));
  ::testing::Test::RecordProperty("max_relative_error_quantile", std::to_string(worst_quantile));
  EXPECT_GT(worst_order, kSketchRelativeError / 2) << "the adversarial values reach the bound's order";
}

TEST(Sketch, ReportStatisticsOfSmallValuesAreTheExactOnes) {
  // 0/1 flags and counts below 2048: every statistic as aggregate gives it,
  // bit for bit, the Wilson interval of a flag included.
  std::mt19937_64 rng(5);
  for (bool flag : {true, false}) {
    std::vector<double> v(4099);
    for (double& x : v) x = flag ? double(rng() % 50 != 0) : double(rng() % 19);
    const SketchState s = sketch_of(v);
    std::vector<double> copy = v;
    const Stats want = aggregate(copy, flag), got = s.stats(flag);
    for (const std::string& name : stat_names()) EXPECT_TRUE(same(stat_value(got, name), stat_value(want, name))) << name;
    EXPECT_EQ(got.has_wilson, flag);
    if (flag) {
      EXPECT_TRUE(same(got.wilson_low, want.wilson_low));
      EXPECT_TRUE(same(got.wilson_high, want.wilson_high));
    }
  }
}

TEST(Sketch, MergedStatesEqualTheStateOfAllTheValues) {
  std::mt19937_64 rng(9);
  for (const Family& f : adversarial()) {
    std::vector<double> v(30000);
    for (double& x : v) x = f.draw(rng);
    v[17] = NAN;
    v[18] = -INFINITY;
    const SketchState whole = sketch_of(v);
    // Contiguous shards of uneven sizes, merged in any order.
    for (size_t parts : {2, 3, 7, 64}) {
      std::vector<SketchState> shard;
      for (size_t p = 0; p < parts; ++p) {
        const size_t a = v.size() * p / parts, b = v.size() * (p + 1) / parts;
        shard.push_back(sketch_of(std::vector<double>(v.begin() + long(a), v.begin() + long(b))));
      }
      std::shuffle(shard.begin(), shard.end(), rng);
      SketchState merged;
      for (const SketchState& s : shard) merged.merge(s);
      EXPECT_TRUE(merged == whole) << f.name << " in " << parts;
      const Stats a = merged.stats(false), b = whole.stats(false);
      for (const std::string& name : stat_names()) EXPECT_TRUE(same(stat_value(a, name), stat_value(b, name))) << name;
    }
    // Going on from a saved state is the same as never stopping.
    StreamStats resumed(sketch_of(std::vector<double>(v.begin(), v.begin() + 12345)));
    for (size_t i = 12345; i < v.size(); ++i) resumed.add(v[i]);
    EXPECT_TRUE(resumed.state() == whole) << f.name;
  }
}

TEST(Sketch, NonFiniteValuesAreCountedApartNeverBucketed) {
  const SketchState s = sketch_of({NAN, INFINITY, -INFINITY, 0.0, 2.0, -3.0, INFINITY, NAN});
  EXPECT_EQ(s.count, 8u);
  EXPECT_EQ(s.nan, 2u);
  EXPECT_EQ(s.pos_inf, 2u);
  EXPECT_EQ(s.neg_inf, 1u);
  EXPECT_EQ(s.zeros, 1u);
  EXPECT_EQ(s.finite(), 3u);
  ASSERT_EQ(s.pos.size(), 1u);
  ASSERT_EQ(s.neg.size(), 1u);
  EXPECT_EQ(s.pos[0].count + s.neg[0].count, 2u);
  EXPECT_EQ(s.min, -INFINITY);
  EXPECT_EQ(s.max, INFINITY);
  EXPECT_EQ(s.sum.value(), -1.0);  // finite values only
  EXPECT_EQ(s.stats(false).mean, -1.0 / 3);
  // In order: -inf, -3, 0, 2, inf, inf, then NaN.
  const double want[] = {-INFINITY, -3.0, 0.0, 2.0, INFINITY, INFINITY};
  for (uint64_t k = 0; k < 6; ++k) EXPECT_EQ(s.order_statistic(k), want[k]) << k;
  EXPECT_TRUE(std::isnan(s.order_statistic(6)));
  const SketchState none = sketch_of({NAN});
  EXPECT_TRUE(std::isnan(none.min) && std::isnan(none.max) && std::isnan(none.stats(false).mean));
  const SketchState inf_only = sketch_of({INFINITY, INFINITY});
  EXPECT_EQ(inf_only.stats(false).median, INFINITY);
  EXPECT_TRUE(std::isnan(inf_only.stats(false).mean));
}

TEST(Sketch, MemoryIsBoundedByTheRangeNotByTheValues) {
  // A million values in four binades touch at most four pages of buckets:
  // the state holds at most 4 * 2^10 buckets whatever the count.
  std::mt19937_64 rng(4);
  std::uniform_real_distribution<double> u(1.0, 16.0);
  StreamStats s;
  for (int i = 0; i < 1000000; ++i) s.add(u(rng));
  const SketchState st = s.state();
  EXPECT_EQ(st.count, 1000000u);
  EXPECT_LE(st.pos.size(), 4u << kSketchBits);
  EXPECT_GT(st.pos.size(), 3u << kSketchBits);
}

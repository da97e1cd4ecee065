// The exact sum against a slow obvious reference (Shewchuk's expansion sum
// with CPython's final rounding, math.fsum), on values of every magnitude;
// order and splits never change it; its text form reads back.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "metrics/exact_sum.hpp"

using namespace chunkinv;

namespace {

// math.fsum: partials that add up exactly (no overflow on the way: |x| < 2^1000),
// then the sum of the partials rounded once.
double fsum(const std::vector<double>& xs) {
  std::vector<double> p;
  for (double x : xs) {
    size_t i = 0;
    for (double y : p) {
      if (std::fabs(x) < std::fabs(y)) std::swap(x, y);
      const double hi = x + y, lo = y - (hi - x);
      if (lo != 0.0) p[i++] = lo;
      x = hi;
    }
    p.resize(i);
    p.push_back(x);
  }
  size_t n = p.size();
  if (n == 0) return 0.0;
  double hi = p[--n], lo = 0;
  while (n > 0) {
    const double x = hi, y = p[--n];
    hi = x + y;
    lo = y - (hi - x);
    if (lo != 0.0) break;
  }
  if (n > 0 && ((lo < 0 && p[n - 1] < 0) || (lo > 0 && p[n - 1] > 0))) {
    const double y = lo * 2, x = hi + y;
    if (y == x - hi) hi = x;
  }
  return hi;
}

double sum_of(const std::vector<double>& xs) {
  ExactSum s;
  for (double x : xs) s.add(x);
  return s.value();
}

bool same(double a, double b) { return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b); }

// Values of both signs whose exponents spread over [lo, hi].
std::vector<double> spread(std::mt19937_64& rng, size_t n, int lo, int hi) {
  std::uniform_int_distribution<int> e(lo, hi);
  std::uniform_real_distribution<double> m(1.0, 2.0);
  std::vector<double> v(n);
  for (double& x : v) x = std::ldexp(m(rng), e(rng)) * (rng() & 1 ? -1 : 1);
  return v;
}

}  // namespace

TEST(ExactSum, EqualsTheExpansionSumReference) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 200; ++round) {
    const int lo = std::uniform_int_distribution<int>(-1070, 900)(rng);
    const int hi = std::min(990, lo + std::uniform_int_distribution<int>(0, 400)(rng));
    const std::vector<double> v = spread(rng, 1 + rng() % 300, lo, hi);
    EXPECT_TRUE(same(sum_of(v), fsum(v))) << "round " << round << ": " << sum_of(v) << " vs " << fsum(v);
  }
}

TEST(ExactSum, CancellationTiesSubnormalsAndOverflow) {
  EXPECT_EQ(sum_of({1e16, 1.0, -1e16}), 1.0);  // a naive left-to-right sum gives 0
  EXPECT_EQ(sum_of({1.0, 0x1p-53}), 1.0);      // a tie goes to the even neighbour
  EXPECT_EQ(sum_of({1.0, 0x1p-53, 0x1p-1074}), 1.0 + 0x1p-52);  // just above the tie
  EXPECT_EQ(sum_of({1.0 + 0x1p-52, 0x1p-53}), 1.0 + 0x1p-51);   // a tie from an odd significand
  EXPECT_EQ(sum_of({0x1p-1074, 0x1p-1074, 0x1p-1074}), 0x3p-1074);
  EXPECT_EQ(sum_of({DBL_MIN, -0x1p-1074}), DBL_MIN - 0x1p-1074);  // the largest subnormal
  EXPECT_EQ(sum_of({DBL_MAX, DBL_MAX}), INFINITY);
  EXPECT_EQ(sum_of({-DBL_MAX, -DBL_MAX}), -INFINITY);
  EXPECT_EQ(sum_of({DBL_MAX, DBL_MAX, -DBL_MAX}), DBL_MAX);  // exact on the way, so back in range
  EXPECT_EQ(sum_of({0.1, 0.2}), 0.1 + 0.2);
  EXPECT_EQ(sum_of({-0.5, -0.25}), -0.75);
  EXPECT_EQ(sum_of({}), 0.0);
  EXPECT_EQ(sum_of({INFINITY, NAN, 2.0}), 2.0);  // non-finite values are the caller's to count
  // Past the 2^20 adds after which the limbs are carried, with the most a
  // limb can take per add (a significand of 53 ones, shifted by 31).
  ExactSum many;
  const uint64_t n = 3 * (uint64_t{1} << 20) + 5;
  const double x = 0x1.fffffffffffffp-991;  // (2^53 - 1) 2^-1043: 53 ones at bit 31 of a limb
  for (uint64_t i = 0; i < n; ++i) many.add(x);
  EXPECT_EQ(many.value(), x * double(n));  // both the exact n x rounded once
  EXPECT_EQ(ExactSum::from_hex(many.to_hex()).value(), many.value());
}

TEST(ExactSum, OrderAndSplitsDoNotChangeIt) {
  std::mt19937_64 rng(11);
  std::vector<double> v = spread(rng, 5000, -1074, 1000);
  ExactSum whole;
  for (double x : v) whole.add(x);
  std::shuffle(v.begin(), v.end(), rng);
  ExactSum parts[3], merged;
  for (size_t i = 0; i < v.size(); ++i) parts[i % 3].add(v[i]);
  for (const ExactSum& p : parts) merged.add(p);
  EXPECT_TRUE(merged == whole);
  EXPECT_EQ(merged.to_hex(), whole.to_hex());
  EXPECT_TRUE(same(merged.value(), whole.value()));
}

TEST(ExactSum, HexFormReadsBackAndRefusesAnythingElse) {
  std::mt19937_64 rng(3);
  for (int round = 0; round < 50; ++round) {
    const std::vector<double> v = spread(rng, 20, -1074, 1023);
    ExactSum s;
    for (double x : v) s.add(x);
    const ExactSum back = ExactSum::from_hex(s.to_hex());
    EXPECT_TRUE(back == s);
    EXPECT_EQ(back.to_hex(), s.to_hex());
  }
  EXPECT_EQ(ExactSum().to_hex(), "0");
  ExactSum one;
  one.add(0x1p-1074);
  EXPECT_EQ(one.to_hex(), "1");
  ExactSum minus;
  minus.add(-0x10p-1074);
  EXPECT_EQ(minus.to_hex(), "-10");
  EXPECT_EQ(ExactSum::from_hex("-10").value(), -0x10p-1074);
  const std::vector<std::string> bad{"", "-", "-0", "00", "01", "+1", "1F", "0x1", "1 ", "g", std::string(545, 'f')};
  for (const std::string& b : bad) EXPECT_THROW(ExactSum::from_hex(b), UsageError) << b;
  EXPECT_THROW(ExactSum::from_hex("8" + std::string(543, '0')), UsageError);  // past the sign limb
  EXPECT_NO_THROW(ExactSum::from_hex("7" + std::string(543, 'f')));
}

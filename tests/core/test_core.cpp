// The deterministic elementary functions, the generator and the thread pool.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <set>
#include <vector>

#include "core/detmath.hpp"
#include "core/detmath_hd.hpp"
#include "core/rng.hpp"
#include "core/thread_pool.hpp"

using namespace chunkinv;

namespace {
double ulps(double a, double b) { return std::fabs(a - b) / (std::nextafter(std::fabs(b), INFINITY) - std::fabs(b)); }
}  // namespace

TEST(DetMath, ExpLogExp2WithinTwoUlpsOfLibm) {
  const Rng rng(7, 0, Stream::kUser);
  for (int i = 0; i < 200000; ++i) {
    const double x = (rng.uniform(i) - 0.5) * 1400;  // [-700, 700]
    ASSERT_LE(ulps(detmath::exp(x), std::exp(x)), 2.0) << x;
    ASSERT_LE(ulps(detmath::exp2(x / 2), std::exp2(x / 2)), 2.0) << x;
    const double y = std::exp(x / 10);
    ASSERT_LE(std::fabs(detmath::log(y) - std::log(y)), 4.5e-16 * std::max(1.0, std::fabs(std::log(y)))) << y;
  }
  EXPECT_EQ(detmath::exp2(-10.0), std::ldexp(1.0, -10));
  EXPECT_EQ(detmath::exp(0.0), 1.0);
  EXPECT_EQ(detmath::log(1.0), 0.0);
  EXPECT_EQ(detmath::exp(-800.0), 0.0);
  EXPECT_TRUE(std::isinf(detmath::exp(710.0)));
  EXPECT_NEAR(detmath::sigmoid(0.0), 0.5, 0.0);
}

// The log's frexp from the bits is std::frexp: every binade's ends and
// middle, subnormals, and random doubles.
TEST(DetMath, FrexpOfPositivesIsStdFrexp) {
  std::vector<double> xs = {0x1p-1074, 0x1p-1060, 0x0.fffffffffffffp-1022, 0x1p-1022, 0x1.fffffffffffffp1023, 1.0,
                            0.5, 0.70710678118654752};
  for (int b = -1022; b <= 1023; ++b)
    for (double m : {1.0, 1.5, 0x1.fffffffffffffp0, 0x1.0000000000001p0}) xs.push_back(std::ldexp(m, b));
  const Rng rng(11, 0, Stream::kUser);
  for (int i = 0; i < 100000; ++i) {
    const auto w = rng.block(uint64_t(i));
    const uint64_t u = ((uint64_t(w[0]) << 32 | w[1]) & 0x7FFFFFFFFFFFFFFFull);
    double x;
    std::memcpy(&x, &u, 8);
    if (std::isfinite(x) && x > 0) xs.push_back(x);
  }
  for (double x : xs) {
    int e1 = 0, e2 = 0;
    const double m1 = detmath::hd::frexp_positive(x, e1), m2 = std::frexp(x, &e2);
    ASSERT_EQ(m1, m2) << std::hexfloat << x;
    ASSERT_EQ(e1, e2) << std::hexfloat << x;
  }
}

TEST(Rng, PhiloxKnownAnswers) {
  // Philox4x32-10 known-answer vectors (Salmon et al., SC'11; Random123 kat).
  const auto z = Rng(0, 0, Stream::kKeys).block(0);
  EXPECT_EQ(z[0], 0x6627e8d5u);
  EXPECT_EQ(z[1], 0xe169c58du);
  EXPECT_EQ(z[2], 0xbc57ac4cu);
  EXPECT_EQ(z[3], 0x9b00dbd8u);
  const auto f = Rng(~0ull, ~0ull, Stream::kKeys).block(~0ull);
  EXPECT_EQ(f[0], 0x408f276du);
  EXPECT_EQ(f[1], 0x41c83b0eu);
  EXPECT_EQ(f[2], 0xa20bc7c6u);
  EXPECT_EQ(f[3], 0x6d5451fdu);
}

TEST(Rng, NormalsHaveTheRightMomentsAndStreamsDiffer) {
  const Rng a(1, 5, Stream::kKeys), b(1, 5, Stream::kGate), c(1, 6, Stream::kKeys);
  double s1 = 0, s2 = 0, s4 = 0;
  const int n = 400000;
  for (int i = 0; i < n; ++i) {
    const double x = a.normal(i);
    s1 += x;
    s2 += x * x;
    s4 += x * x * x * x;
  }
  EXPECT_NEAR(s1 / n, 0.0, 0.01);
  EXPECT_NEAR(s2 / n, 1.0, 0.01);
  EXPECT_NEAR(s4 / n, 3.0, 0.05);
  EXPECT_NE(a.normal(0), b.normal(0));
  EXPECT_NE(a.normal(0), c.normal(0));
  EXPECT_EQ(a.normal(17), Rng(1, 5, Stream::kKeys).normal(17));  // a pure function of its counter
}

TEST(ThreadPool, EveryIndexOnceAndExceptionsPropagate) {
  ThreadPool pool(3);
  std::vector<int> hits(10000, 0);
  pool.parallel_for(hits.size(), [&](size_t i) { hits[i] += 1; });
  for (int h : hits) ASSERT_EQ(h, 1);
  EXPECT_THROW(pool.parallel_for(100, [](size_t i) { if (i == 42) throw std::runtime_error("x"); }), std::runtime_error);
  pool.parallel_for(5, [&](size_t i) { hits[i] = 7; });  // still usable afterwards
  EXPECT_EQ(hits[4], 7);
}

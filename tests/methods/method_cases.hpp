// Test matrices and error bounds shared by the inverse methods' tests.
//
// The tolerances are derived, not fitted: an algorithm whose every step
// rounds once (relative error u of the working format) has a normwise
// relative forward error below about 2 C u G, where C is the chunk (the
// length of the longest dot or series), 2 counts a product and a sum, and G
// is a growth factor computed in FP64 from the input:
//   substitutions:      G = | |X| |I + L| |X| |_F / |X|_F, X = (I + L)^-1 (the
//                       componentwise bound of triangular inversion, Higham ch. 14)
//   series and powers:  G = |(I - |L|)^-1|_F / |(I + L)^-1|_F
//                       ((I - |L|)^-1 = sum_n |L|^n bounds every term)
// Each test also checks that its bound is small (it could fail). BF16's unit
// roundoff 2^-8 makes the bound useless beyond short chunks, so the BF16
// random cases stay at C <= 9.
#pragma once
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>

#include <gtest/gtest.h>

#include "core/rng.hpp"
#include "methods/method.hpp"

namespace chunkinv::testing {

inline constexpr double kUFP32 = 0x1p-24, kUTF32 = 0x1p-11, kUBF16 = 0x1p-8, kUFP16 = 0x1p-11;

// Strict-lower L = -(subdiagonal of ones): (I + L)^-1 is the all-ones lower
// triangle, exactly; every value on the way is a small integer.
inline Mat ones_inverse_case(int c) {
  Mat l = Mat::Zero(c, c);
  for (int i = 1; i < c; ++i) l(i, i - 1) = -1.0;
  return l;
}

inline Mat all_ones_lower(int c) { return Mat::Ones(c, c).triangularView<Eigen::Lower>(); }

// Entries uniform in [-scale/2, scale/2], times decay^(i-j) (the decays of a
// chunk make far entries small), strict lower.
inline Mat random_strict_lower(int c, double scale, uint64_t seed, double decay = 1.0) {
  const Rng rng(seed, 0, Stream::kUser);
  Mat l = Mat::Zero(c, c);
  for (int i = 0; i < c; ++i)
    for (int j = 0; j < i; ++j) l(i, j) = scale * (rng.uniform(uint64_t(i) * 64 + j) - 0.5) * std::pow(decay, i - j - 1);
  return l;
}

inline double rel(const Mat& a, const Mat& e) { return (a - e).norm() / e.norm(); }

inline double substitution_growth(const Mat& l) {
  const Mat x = unit_lower_inverse(l).cwiseAbs();
  const Mat t = (Mat::Identity(l.rows(), l.cols()) + l).cwiseAbs();
  return (x * t * x).norm() / x.norm();
}

inline double series_growth(const Mat& l) {
  const Mat abs_inv = unit_lower_inverse(Mat(-l.cwiseAbs()));  // (I - |L|)^-1 >= 0
  return abs_inv.norm() / unit_lower_inverse(l).norm();
}

inline double bound(int c, double u, double growth) { return 2.0 * c * u * growth; }

inline Method with(const char* text) { return parse_method(text); }

// Each method on the known-inverse case at every chunk from 2 to max_c:
// the all-ones lower triangle, bit for bit.
inline void expect_exact_on_known_inverse(std::initializer_list<const char*> methods, int max_c = 64) {
  for (int c = 2; c <= max_c; ++c)
    for (const char* m : methods)
      EXPECT_TRUE(with(m).invert(ones_inverse_case(c), false).inv == all_ones_lower(c)) << m << " C=" << c;
}

// A method whose working format has unit roundoff u and rounds its input with `round`.
struct RoundedMethod {
  const char* method;
  double u;
  double (*round)(double);
};

// A series or power method on 8 random chunks each (C <= 9 for BF16, whose
// bound means nothing beyond), against the exact inverse of its rounded input,
// within the series bound.
inline void expect_within_series_bound(std::initializer_list<RoundedMethod> cases) {
  for (const RoundedMethod k : cases)
    for (uint64_t seed = 0; seed < 8; ++seed) {
      const int c = 2 + int(seed * 9 % (k.u == kUBF16 ? 8 : 63));
      const Mat l = random_strict_lower(c, 0.5, seed, 0.8);
      const double tol = bound(c, k.u, series_growth(l));
      ASSERT_LT(tol, 0.3) << "the bound must be able to fail";
      EXPECT_LT(rel(with(k.method).invert(l, false).inv, unit_lower_inverse(l.unaryExpr(k.round))), tol)
          << k.method << " C=" << c;
    }
}

}  // namespace chunkinv::testing

#include "core/detmath.hpp"

#include <cmath>
#include <limits>

namespace chunkinv::detmath {
namespace {

// ln 2 split so that n * kLn2Hi is exact for |n| < 2^11.
constexpr double kLn2Hi = 0x1.62e42fefa3800p-1;
constexpr double kLn2Lo = 0x1.ef35793c76730p-45;

// e^r for |r| <= 0.35: Taylor series to degree 14 in Horner form
// (truncation below 1e-18 relative).
constexpr double inv_factorial(int k) { return k == 0 ? 1.0 : inv_factorial(k - 1) / k; }

double exp_reduced(double r) {
  double p = inv_factorial(14);
  for (int k = 13; k >= 0; --k) p = p * r + inv_factorial(k);
  return p;
}

}  // namespace

double exp(double x) {
  if (std::isnan(x)) return x;
  if (x > 709.79) return INFINITY;
  if (x < -745.2) return 0.0;
  const double n = std::nearbyint(x / (kLn2Hi + kLn2Lo));
  const double r = (x - n * kLn2Hi) - n * kLn2Lo;
  // Scale in two steps so that results in the subnormal range round once.
  const int ni = static_cast<int>(n);
  if (ni < -1021) return std::ldexp(std::ldexp(exp_reduced(r), ni + 60), -60);
  return std::ldexp(exp_reduced(r), ni);
}

double exp2(double x) {
  if (std::isnan(x)) return x;
  if (x >= 1024.0) return INFINITY;
  if (x < -1075.0) return 0.0;
  const double n = std::nearbyint(x);
  const double f = x - n;  // exact, |f| <= 0.5
  // 2^f = e^(f ln 2); f ln 2 formed in two parts keeps the error near 1 ulp.
  const double r = f * kLn2Hi + f * kLn2Lo;
  const int ni = static_cast<int>(n);
  if (ni < -1021) return std::ldexp(std::ldexp(exp_reduced(r), ni + 60), -60);
  return std::ldexp(exp_reduced(r), ni);
}

double log(double x) {
  if (std::isnan(x) || x < 0.0) return std::numeric_limits<double>::quiet_NaN();
  if (x == 0.0) return -INFINITY;
  if (std::isinf(x)) return x;
  int e = 0;
  double m = std::frexp(x, &e);  // m in [0.5, 1)
  if (m < 0.70710678118654752) {
    m *= 2.0;
    e -= 1;
  }
  // log m = 2 atanh(s), s = (m - 1)/(m + 1), |s| <= 0.1716: the odd series
  // to s^27 in Horner form (truncation below 1e-19 relative).
  static constexpr double kInvOdd[14] = {1.0,      1.0 / 3,  1.0 / 5,  1.0 / 7,  1.0 / 9,
                                         1.0 / 11, 1.0 / 13, 1.0 / 15, 1.0 / 17, 1.0 / 19,
                                         1.0 / 21, 1.0 / 23, 1.0 / 25, 1.0 / 27};
  const double s = (m - 1.0) / (m + 1.0);
  const double s2 = s * s;
  double poly = kInvOdd[13];
  for (int k = 12; k >= 0; --k) poly = poly * s2 + kInvOdd[k];
  const double sum = s * poly;
  return e * kLn2Hi + (e * kLn2Lo + 2.0 * sum);
}

double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

double expm1(double x) {
  if (!(std::fabs(x) <= 0.35)) return exp(x) - 1.0;  // no cancellation beyond 0.35 (NaN passes through)
  double p = inv_factorial(16);
  for (int k = 15; k >= 1; --k) p = p * x + inv_factorial(k);
  return p * x;
}

double tanh(double x) {
  if (std::isnan(x)) return x;
  const double a = std::fabs(x);
  if (a >= 20.0) return std::copysign(1.0, x);  // 1 - tanh(20) < 2^-57
  const double t = expm1(-2.0 * a);              // tanh a = -t / (2 + t)
  return std::copysign(-t / (2.0 + t), x);
}

}  // namespace chunkinv::detmath

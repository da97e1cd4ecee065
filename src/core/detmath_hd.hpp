// The one source of detmath's elementary functions, for the CPU
// (core/detmath.cpp calls these) and the GPU (the device-side input
// generator). They use IEEE +, -, *, / (correctly rounded on both) and
// frexp, ldexp, nearbyint (exact on both), so both give the same bits.
#pragma once
#include <cmath>

#include "core/hd.hpp"

namespace chunkinv::detmath::hd {

// ln 2 split so that n * kLn2Hi is exact for |n| < 2^11.
inline constexpr double kLn2Hi = 0x1.62e42fefa3800p-1;
inline constexpr double kLn2Lo = 0x1.ef35793c76730p-45;

CHUNKINV_HD constexpr double inv_factorial(int k) { return k == 0 ? 1.0 : inv_factorial(k - 1) / k; }

// 1/k! for k = 0..16, evaluated at compile time (the same divisions as a
// call of inv_factorial(k) at run time, so the same values).
struct InvFactorials {
  double v[17];
};
CHUNKINV_HD constexpr InvFactorials inv_factorials() {
  InvFactorials t{};
  for (int k = 0; k < 17; ++k) t.v[k] = inv_factorial(k);
  return t;
}

// 1/(2k + 1) for k = 0..13, log's series, evaluated at compile time (the
// literal 1.0 / 3 is the same correctly rounded division).
struct InvOdd {
  double v[14];
};
CHUNKINV_HD constexpr InvOdd inv_odd() {
  InvOdd t{};
  for (int k = 0; k < 14; ++k) t.v[k] = 1.0 / (2 * k + 1);
  return t;
}

// The series' coefficients on the device live in constant memory, where a
// fused multiply-add takes each as an operand straight from the constant
// bank; as immediates the compiler rebuilt every 64-bit coefficient with
// uniform moves at each call (30 of the 84 instructions of the polar
// transform's block). The same values either way: the tables are the
// compile-time ones above.
#ifdef __CUDACC__
static __constant__ InvFactorials kInvFactorialsDevice = inv_factorials();
static __constant__ InvOdd kInvOddDevice = inv_odd();
#endif
#ifdef __CUDA_ARCH__
#define CHUNKINV_SERIES_TABLE(type, name, device_table, host_init) const type& name = device_table
#else
#define CHUNKINV_SERIES_TABLE(type, name, device_table, host_init) constexpr type name = host_init
#endif

// e^r for |r| <= 0.35: Taylor series to degree 14 in Horner form
// (truncation below 1e-18 relative).
CHUNKINV_HD inline double exp_reduced(double r) {
  CHUNKINV_SERIES_TABLE(InvFactorials, f, kInvFactorialsDevice, inv_factorials());
  double p = f.v[14];
  CHUNKINV_UNROLL
  for (int k = 13; k >= 0; --k) p = p * r + f.v[k];
  return p;
}

CHUNKINV_HD inline double exp(double x) {
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

CHUNKINV_HD inline double exp2(double x) {
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

// std::frexp(x, &e) for a finite x > 0, normals from their bits (the GPU's
// frexp tested for zero, infinity and subnormals before it: a tenth of the
// polar transform's instructions); the same (m, e) on both, frexp being
// exact.
CHUNKINV_HD inline double frexp_positive(double x, int& e) {
  const uint64_t u = ::chunkinv::hd::bits(x);
  const int biased = static_cast<int>(u >> 52);  // the sign bit is 0
  if (biased == 0) return std::frexp(x, &e);     // subnormal
  e = biased - 1022;
  return ::chunkinv::hd::from_bits((u & 0x000FFFFFFFFFFFFFull) | 0x3FE0000000000000ull);
}

// log(x) for a finite x > 0: log's body after its special cases, for a
// caller that knows them not to arise (the polar transform's s, in (0, 1)).
CHUNKINV_HD inline double log_finite_positive(double x) {
  int e = 0;
  double m = frexp_positive(x, e);  // m in [0.5, 1)
  if (m < 0.70710678118654752) {
    m *= 2.0;
    e -= 1;
  }
  // log m = 2 atanh(s), s = (m - 1)/(m + 1), |s| <= 0.1716: the odd series
  // to s^27 in Horner form (truncation below 1e-19 relative).
  CHUNKINV_SERIES_TABLE(InvOdd, c, kInvOddDevice, inv_odd());
  const double s = (m - 1.0) / (m + 1.0);
  const double s2 = s * s;
  double poly = c.v[13];
  CHUNKINV_UNROLL
  for (int k = 12; k >= 0; --k) poly = poly * s2 + c.v[k];
  const double sum = s * poly;
  return e * kLn2Hi + (e * kLn2Lo + 2.0 * sum);
}

CHUNKINV_HD inline double log(double x) {
  if (std::isnan(x) || x < 0.0) return NAN;  // the quiet NaN 0x7FF8000000000000
  if (x == 0.0) return -INFINITY;
  if (std::isinf(x)) return x;
  return log_finite_positive(x);
}

CHUNKINV_HD inline double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

CHUNKINV_HD inline double expm1(double x) {
  if (!(std::fabs(x) <= 0.35)) return exp(x) - 1.0;  // no cancellation beyond 0.35 (NaN passes through)
  CHUNKINV_SERIES_TABLE(InvFactorials, f, kInvFactorialsDevice, inv_factorials());
  double p = f.v[16];
  CHUNKINV_UNROLL
  for (int k = 15; k >= 1; --k) p = p * x + f.v[k];
  return p * x;
}

CHUNKINV_HD inline double tanh(double x) {
  if (std::isnan(x)) return x;
  const double a = std::fabs(x);
  if (a >= 20.0) return std::copysign(1.0, x);  // 1 - tanh(20) < 2^-57
  const double t = expm1(-2.0 * a);              // tanh a = -t / (2 + t)
  return std::copysign(-t / (2.0 + t), x);
}

}  // namespace chunkinv::detmath::hd

// Low-precision formats, held as the exact double (or float) of their value.
//
// One rounding routine serves every format: a value is rounded to `mant`
// fraction bits with exponent floor `emin` (subnormals below it) and becomes
// infinite beyond `max_finite`. Round to nearest even or toward zero.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/hd.hpp"

namespace chunkinv {

struct Format {
  int mant;           // fraction bits (stored significand bits)
  int emin;           // exponent of the smallest normal
  double max_finite;  // largest finite value
};

inline constexpr Format kBF16{7, -126, 0x1.FEp127};
inline constexpr Format kFP16{10, -14, 65504.0};
inline constexpr Format kFP32{23, -126, 0x1.FFFFFEp127};

enum class Rounding { kNearestEven, kTowardZero };

// Rounds the exact value `x` once to `f`. NaN stays NaN, +-inf stays +-inf.
// Toward zero, a finite value beyond the range becomes +-inf as well: the
// tensor-core FP32 output does the same (SPEC §2 notes the emax model).
// Host and device (the GPU's input generator rounds its keys with it).
CHUNKINV_HD inline double round_to(double x, Format f, Rounding r = Rounding::kNearestEven) {
  if (!std::isfinite(x) || x == 0.0) return x;
  uint64_t u = hd::bits(x);
  int e = static_cast<int>((u >> 52) & 0x7FF) - 1023;
  if (e >= f.emin && e > -1023) {
    // Normal in the format: round the double's significand to f.mant bits in
    // place; a carry out of the significand moves to the next binade.
    const int shift = 52 - f.mant;
    const uint64_t mask = (uint64_t{1} << shift) - 1;
    if (r == Rounding::kNearestEven) u += (mask >> 1) + ((u >> shift) & 1);
    u &= ~mask;
    const double y = hd::from_bits(u);
    return std::fabs(y) > f.max_finite ? std::copysign(double(INFINITY), x) : y;
  }
  // Subnormal in the format: a fixed quantum of 2^(emin - mant).
  e = f.emin;
  const double ulp = std::ldexp(1.0, e - f.mant);
  const double q = x / ulp;  // exact: division by a power of two in range
  const double n = (r == Rounding::kNearestEven) ? std::nearbyint(q) : std::trunc(q);
  const double y = n * ulp;
  return y == 0.0 ? std::copysign(0.0, x) : y;
}

inline double bf16(double x) { return round_to(x, kBF16); }
inline double fp16(double x) { return round_to(x, kFP16); }
inline double fp32(double x) { return round_to(x, kFP32); }

// Bit patterns, for exhaustive tests and for files.
uint16_t bf16_bits(double value_already_bf16);
uint16_t fp16_bits(double value_already_fp16);
double bf16_from_bits(uint16_t bits);
double fp16_from_bits(uint16_t bits);

// Flush-to-zero of an FP32 result: magnitudes below FLT_MIN become +-0.
inline double ftz32(double x) {
  return std::fabs(x) < 0x1p-126 ? std::copysign(0.0, x) : x;
}

}  // namespace chunkinv

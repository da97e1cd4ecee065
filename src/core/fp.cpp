#include "core/fp.hpp"


namespace chunkinv {
namespace {

// Generic decoder of a 16-bit IEEE-like pattern with `mant` fraction bits.
double from_bits16(uint16_t b, int mant, int bias) {
  const bool neg = b >> 15;
  const int e = (b >> mant) & ((1 << (15 - mant)) - 1);
  const int m = b & ((1 << mant) - 1);
  const int emax_field = (1 << (15 - mant)) - 1;
  double v;
  if (e == emax_field) {
    v = m ? std::numeric_limits<double>::quiet_NaN() : INFINITY;
  } else if (e == 0) {
    v = std::ldexp(static_cast<double>(m), 1 - bias - mant);
  } else {
    v = std::ldexp(static_cast<double>(m + (1 << mant)), e - bias - mant);
  }
  return neg ? -v : v;
}

uint16_t to_bits16(double v, int mant, int bias) {
  const int emax_field = (1 << (15 - mant)) - 1;
  uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  if (std::isnan(v)) return static_cast<uint16_t>((emax_field << mant) | (1 << (mant - 1)));  // canonical quiet NaN
  const double a = std::fabs(v);
  if (std::isinf(a)) return sign | static_cast<uint16_t>(emax_field << mant);
  if (a == 0.0) return sign;
  int e = std::ilogb(a);
  if (e < 1 - bias) {  // subnormal
    return sign | static_cast<uint16_t>(std::ldexp(a, bias - 1 + mant));
  }
  const int frac = static_cast<int>(std::ldexp(a, mant - e)) - (1 << mant);
  return sign | static_cast<uint16_t>(((e + bias) << mant) | frac);
}

}  // namespace

uint16_t bf16_bits(double v) { return to_bits16(v, 7, 127); }
uint16_t fp16_bits(double v) { return to_bits16(v, 10, 15); }
double bf16_from_bits(uint16_t b) { return from_bits16(b, 7, 127); }
double fp16_from_bits(uint16_t b) { return from_bits16(b, 10, 15); }

}  // namespace chunkinv

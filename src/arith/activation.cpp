#include "arith/activation.hpp"

#include <bit>
#include <cmath>
#include <iterator>

namespace chunkinv {
namespace {

struct TanhException {
  uint16_t x_bf16;
  uint32_t y_bits;
};

// tanh.approx.f32 measured on the BF16 values where it is not the correctly
// rounded tanh (`chunkinv calibrate-activation`). The model does not use it:
// tests/arith/test_sfu_models.cpp checks the model against it; here only its
// size is reported.
constexpr TanhException kTanhExceptions[] = {
#include "arith/tanh_bf16_exceptions.inc"
    {0xFFFFu, 0}  // sentinel: a NaN pattern no input has
};
constexpr size_t kTanhExceptionCount = std::size(kTanhExceptions) - 1;

// The NaN every SFU instruction returns.
constexpr uint32_t kSfuNaN = 0x7FFFFFFFu;

// One row of an SFU instruction's table (rsqrt_table.inc, ex2_table.inc, tanh_table.inc).
struct SfuRow {
  int64_t k;
  int32_t a, b;
};
constexpr SfuRow kRsqrtTable[128] = {
#include "arith/rsqrt_table.inc"
};
constexpr SfuRow kEx2Table[64] = {
#include "arith/ex2_table.inc"
};

// The interpolator's squarer: l^2 / 2^19 (l < 2^17), each bit's partial
// product l * 2^i / 2^18 cut to an integer before the sum, the sum halved
// and cut again. This truncation is what makes the results reproducible:
// with the exact square no coefficients fit every input.
int64_t sfu_square(uint32_t l) {
  int64_t sum = 0;
  for (int i = 0; i < 17; ++i) sum += ((l >> i) & 1u) * (l >> (18 - i));  // no branch: the GPU test runs it 2^32 times
  return sum >> 1;
}

int64_t sfu_interpolate(const SfuRow& row, uint32_t l) {
  return (row.k + int64_t{row.a} * l + int64_t{row.b} * sfu_square(l)) >> 17;
}

// tanh's rows carry the unit of their result: 2^unit_exp.
struct TanhRow {
  SfuRow sfu;
  int unit_exp;
};
struct TanhBinade {
  int index_bits, first_row;
};
#include "arith/tanh_table.inc"

}  // namespace

// tanh.approx.f32 is the same interpolator (docs/sfu-models.md), its table
// indexed by the binade of |x| and the top m mantissa bits (m = 0..4 growing
// with the binade), l the next 17 bits: the low 6 - m bits of x are not read.
// Below 2^-8 it returns x, from 8 on +-1; it is odd.
float tanh_approx_model(float x) {
  const uint32_t xb = std::bit_cast<uint32_t>(x);
  const uint32_t sign = xb & 0x80000000u;
  const int biased = static_cast<int>((xb >> 23) & 0xFFu);
  const uint32_t mantissa = xb & 0x7FFFFFu;
  if (biased == 0xFF && mantissa != 0) return std::bit_cast<float>(kSfuNaN);
  if (biased < kTanhFirstBinade) return x;
  if (biased >= kTanhFirstBinade + kTanhBinades) return std::bit_cast<float>(sign | 0x3F800000u);  // +-1
  const TanhBinade& bin = kTanhBinade[biased - kTanhFirstBinade];
  const TanhRow& row = kTanhTable[bin.first_row + (mantissa >> (23 - bin.index_bits))];
  int64_t y = sfu_interpolate(row.sfu, (mantissa >> (6 - bin.index_bits)) & 0x1FFFFu);
  int unit = row.unit_exp;
  while (y >= (int64_t{1} << 24)) {  // a result past the row's binade keeps 24 bits, cut
    y >>= 1;
    ++unit;
  }
  const float r = std::ldexp(static_cast<float>(y), unit);  // exact
  return std::bit_cast<float>(std::bit_cast<uint32_t>(r) | sign);
}

bool tanh_model_is_exact(float) { return true; }

int tanh_exception_count() { return static_cast<int>(kTanhExceptionCount); }

// rsqrt.approx.ftz.f32 and ex2.approx.ftz.f32 are one interpolator
// (docs/sfu-models.md): the top bits of a 23-bit fraction pick a row, and the
// low 17 bits l give (k + a*l + b*square(l)) >> 17 in integer arithmetic.
float rsqrt_approx_model(float x) {
  const uint32_t xb = std::bit_cast<uint32_t>(x);
  const int biased = static_cast<int>((xb >> 23) & 0xFFu);
  const uint32_t mantissa = xb & 0x7FFFFFu;
  if (biased == 0) return (xb >> 31) ? -INFINITY : INFINITY;  // .ftz: a subnormal input is a zero
  if ((xb >> 31) || (biased == 0xFF && mantissa != 0)) return std::bit_cast<float>(kSfuNaN);
  if (biased == 0xFF) return 0.0f;
  // x = 4^h * m, m in [1, 4): the exponent's parity joins the mantissa's top bits as the index.
  const int e = biased - 127;
  const int h = e >> 1;  // floor(e / 2)
  const uint32_t parity = static_cast<uint32_t>(e) & 1u;
  if (mantissa == 0 && parity == 0) return std::ldexp(1.0f, -h);  // an even power of two: exact
  const int64_t y = sfu_interpolate(kRsqrtTable[(parity << 6) | (mantissa >> 17)], mantissa & 0x1FFFFu);
  return std::ldexp(static_cast<float>(y), -24 - h);  // y < 2^24: exact
}

float ex2_approx_model(float x) {
  const uint32_t xb = std::bit_cast<uint32_t>(x);
  const bool negative = (xb >> 31) != 0;
  const int biased = static_cast<int>((xb >> 23) & 0xFFu);
  const uint32_t mantissa = xb & 0x7FFFFFu;
  if (biased == 0xFF && mantissa != 0) return std::bit_cast<float>(kSfuNaN);
  if (biased >= 127 + 7) return negative ? 0.0f : INFINITY;  // |x| >= 128 (and the infinities)
  // x as a fixed-point number with 23 fraction bits, the bits below cut off
  // (not rounded: measured); a subnormal input is a zero.
  const uint32_t significand = mantissa | 0x800000u;
  const int shift = biased - 127;
  const uint32_t fixed = biased == 0 ? 0u
                         : shift >= 0 ? significand << shift
                         : shift > -25 ? significand >> -shift
                                       : 0u;
  int whole = static_cast<int>(fixed >> 23);
  uint32_t fraction = fixed & 0x7FFFFFu;
  if (negative) {  // 2^-(w + f) = 2^(-w-1) * 2^(1-f), 1 - f as the fraction's ones' complement
    whole = fraction == 0 ? -whole : -whole - 1;
    if (fraction != 0) fraction = 0x7FFFFFu - fraction;
  }
  const int64_t y = sfu_interpolate(kEx2Table[fraction >> 17], fraction & 0x1FFFFu);  // in [2^23, 2^24]
  const float r = std::ldexp(static_cast<float>(y), whole - 23);  // exact, or past the range
  return r < 0x1p-126f ? 0.0f : r;  // .ftz: results below FLT_MIN flush to +0
}

float sigmoid_tanh_model(float x) {
  const float th = tanh_approx_model(x * 0.5f);
  return std::fma(th, 0.5f, 0.5f);  // th * 0.5 is exact: one rounding either way
}

}  // namespace chunkinv

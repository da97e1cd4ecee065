#include "arith/activation.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <iterator>

#include "core/detmath.hpp"

namespace chunkinv {
namespace {

struct TanhException {
  uint16_t x_bf16;
  uint32_t y_bits;
};

// Sorted by x_bf16 (the generator writes them in that order).
constexpr TanhException kTanhExceptions[] = {
#include "arith/tanh_bf16_exceptions.inc"
    {0xFFFFu, 0}  // sentinel: a NaN pattern no input has
};
constexpr size_t kTanhExceptionCount = std::size(kTanhExceptions) - 1;

}  // namespace

float tanh_approx_model(float x) {
  const uint32_t b = std::bit_cast<uint32_t>(x);
  if ((b & 0xFFFFu) == 0) {  // a BF16 value: the measured table
    const uint16_t h = static_cast<uint16_t>(b >> 16);
    const auto* end = kTanhExceptions + kTanhExceptionCount;
    const auto* it = std::lower_bound(kTanhExceptions, end, h,
                                      [](const TanhException& e, uint16_t v) { return e.x_bf16 < v; });
    if (it != end && it->x_bf16 == h) return std::bit_cast<float>(it->y_bits);
  }
  return static_cast<float>(detmath::tanh(static_cast<double>(x)));
}

bool tanh_model_is_exact(float x) {
  const float a = std::fabs(x);
  return (std::bit_cast<uint32_t>(x) & 0xFFFFu) == 0 || !(a >= 0x1p-12f && a < 16.0f);
}

int tanh_exception_count() { return static_cast<int>(kTanhExceptionCount); }

float rsqrt_approx_model(float x) {
  if (std::fabs(x) < 0x1p-126f) x = std::copysign(0.0f, x);  // .ftz: a subnormal input is a zero
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(x)));  // two IEEE operations, then one rounding
}

float ex2_approx_model(float x) {
  const float y = static_cast<float>(detmath::exp2(static_cast<double>(x)));
  return y < 0x1p-126f ? 0.0f : y;
}

float sigmoid_tanh_model(float x) {
  const float th = tanh_approx_model(x * 0.5f);
  return std::fma(th, 0.5f, 0.5f);  // th * 0.5 is exact: one rounding either way
}

}  // namespace chunkinv

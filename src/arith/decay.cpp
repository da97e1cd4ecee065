#include "arith/decay.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <iterator>

#include "core/detmath.hpp"
#include "core/fp.hpp"

namespace chunkinv {
namespace {

struct Exception {
  uint32_t x_bits;
  uint16_t bf16_bits;
};

// Sorted by x_bits (the generator writes them in that order).
constexpr Exception kExceptions[] = {
#include "arith/decay_exceptions.inc"
    {0xFFFFFFFFu, 0}  // sentinel: a NaN pattern no input has
};
constexpr size_t kExceptionCount = std::size(kExceptions) - 1;

}  // namespace

double exp2_ftz_bf16_reference(float x) {
  const double y = fp32(detmath::exp2(static_cast<double>(x)));
  return bf16(ftz32(y));
}

double ex2_approx_ftz_bf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  const auto* end = kExceptions + kExceptionCount;
  const auto* it = std::lower_bound(kExceptions, end, bits,
                                    [](const Exception& e, uint32_t b) { return e.x_bits < b; });
  if (it != end && it->x_bits == bits) return bf16_from_bits(it->bf16_bits);
  return exp2_ftz_bf16_reference(x);
}

int decay_exception_count() { return static_cast<int>(kExceptionCount); }

}  // namespace chunkinv

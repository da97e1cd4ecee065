#include "arith/tensor_core.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/fp.hpp"

namespace chunkinv::tc {
namespace {

// Exponent of a normal, non-zero double (every BF16/FP16/FP32 value and
// every product of two is one in double).
inline int exponent_of(double x) {
  uint64_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return static_cast<int>((bits >> 52) & 0x7FF) - 1023;
}

}  // namespace

double dot16(const double* a, const double* b, int b_stride, double c, Accum acc) {
  return dot16_aligned(a, b, b_stride, c, acc, acc == Accum::kFP16 ? kFp16AlignFloor : std::numeric_limits<int>::min());
}

double dot16_aligned(const double* a, const double* b, int b_stride, double c, Accum acc, int align_floor) {
  double t[17];
  bool nan = false, pos_inf = false, neg_inf = false;
  double amax = 0.0;
  for (int k = 0; k < 16; ++k) {
    t[k] = a[k] * b[k * b_stride];  // exact in double
  }
  t[16] = c;
  for (double x : t) {
    if (std::isnan(x)) {
      nan = true;
    } else if (std::isinf(x)) {
      (x > 0 ? pos_inf : neg_inf) = true;
    } else {
      amax = std::fmax(amax, std::fabs(x));
    }
  }
  if (nan || (pos_inf && neg_inf)) return std::numeric_limits<double>::quiet_NaN();
  if (pos_inf) return INFINITY;
  if (neg_inf) return -INFINITY;
  if (amax == 0.0) return 0.0;  // a zero result is +0
  // The alignment exponent is the largest *nominal* exponent: for a product
  // the sum of its factors' exponents (its significand lies in [1, 4)), for
  // c its own; a subnormal counts with its format's smallest exponent.
  // (Measured on the H200: the true exponent of the largest term keeps one
  // bit too few whenever that product's significand is >= 2.)
  const int emin = acc == Accum::kFP32 ? kBF16.emin : kFP16.emin;  // inputs and C share it
  int emax = std::numeric_limits<int>::min();
  for (int k = 0; k < 16; ++k)
    if (t[k] != 0.0)
      emax = std::max(emax, std::max(exponent_of(a[k]), emin) + std::max(exponent_of(b[k * b_stride]), emin));
  if (c != 0.0) emax = std::max(emax, std::max(exponent_of(c), emin));
  emax = std::max(emax, align_floor);
  // Align every term to 2^(emax - kAlignBits) and truncate toward zero: the
  // scaled terms are below 2^27 in magnitude, so int64 holds their exact sum.
  const double scale = std::ldexp(1.0, kAlignBits - emax);
  int64_t sum = 0;
  for (double x : t) sum += static_cast<int64_t>(x * scale);
  const double s = std::ldexp(static_cast<double>(sum), emax - kAlignBits);  // exact
  const double r = acc == Accum::kFP32 ? round_to(s, kFP32, Rounding::kTowardZero)
                                       : round_to(s, kFP16, Rounding::kNearestEven);
  return r == 0.0 ? 0.0 : r;
}

namespace {

// Per (row, 16-block) of A and (16-block, column) of B: all zero / all finite.
// A k-block whose products are all exact zeros leaves C unchanged (and C is
// never -0 here), so skipping it is exact.
struct BlockFlags {
  std::vector<char> zero, finite;
};

Mat matmul(const Mat& a, const Mat& b, Accum acc) {
  const int m = static_cast<int>(a.rows()), k = static_cast<int>(a.cols()), n = static_cast<int>(b.cols());
  const int kb = k / 16;
  BlockFlags fa{std::vector<char>(m * kb, 1), std::vector<char>(m * kb, 1)};
  BlockFlags fb{std::vector<char>(n * kb, 1), std::vector<char>(n * kb, 1)};
  for (int i = 0; i < m; ++i)
    for (int kk = 0; kk < k; ++kk) {
      const double v = a(i, kk);
      if (v != 0.0) fa.zero[i * kb + kk / 16] = 0;
      if (!std::isfinite(v)) fa.finite[i * kb + kk / 16] = 0;
    }
  for (int kk = 0; kk < k; ++kk)
    for (int j = 0; j < n; ++j) {
      const double v = b(kk, j);
      if (v != 0.0) fb.zero[j * kb + kk / 16] = 0;
      if (!std::isfinite(v)) fb.finite[j * kb + kk / 16] = 0;
    }
  Mat d = Mat::Zero(m, n);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double c = 0.0;
      for (int blk = 0; blk < kb; ++blk) {
        const bool skip = (fa.zero[i * kb + blk] && fb.finite[j * kb + blk]) ||
                          (fb.zero[j * kb + blk] && fa.finite[i * kb + blk]);
        if (skip) continue;
        c = dot16(a.data() + static_cast<size_t>(i) * k + blk * 16, b.data() + static_cast<size_t>(blk) * 16 * n + j, n, c,
                  acc);
      }
      d(i, j) = c;
    }
  }
  return d;
}

}  // namespace

Mat matmul_bf16_f32(const Mat& a, const Mat& b) { return matmul(a, b, Accum::kFP32); }
Mat matmul_f16(const Mat& a, const Mat& b) { return matmul(a, b, Accum::kFP16); }

}  // namespace chunkinv::tc

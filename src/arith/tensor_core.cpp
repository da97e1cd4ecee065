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

// 2^e for e in a double's normal range (exact; what ldexp gives there).
inline double pow2(int e) {
  const uint64_t bits = static_cast<uint64_t>(e + 1023) << 52;
  double x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

// A zero operand's nominal exponent: far below any real one, so that a sum
// with a zero factor's stays below kZeroExponent / 2.
constexpr int kZeroExponent = -(1 << 20);

// dot16_aligned where every a[k], b[k] and c is finite, with the operands'
// nominal exponents (max(exponent, emin), or kZeroExponent for a zero)
// given: the same terms, alignment and rounding, without the special-value
// scan and with the powers of two made from their bits. A product is zero
// exactly when a factor is (products of BF16/FP16 values are normal
// doubles), so the largest nominal exponent is that of the non-zero terms.
inline double dot16_finite(const double* a, const int* ea, const double* b, const int* eb, double c, int emin,
                           Accum acc, int align_floor) {
  int emax = kZeroExponent;
  for (int k = 0; k < 16; ++k) emax = std::max(emax, ea[k] + eb[k]);
  if (c != 0.0) emax = std::max(emax, std::max(exponent_of(c), emin));
  if (emax < kZeroExponent / 2) return 0.0;  // every term zero (a zero factor's sum stays below): +0
  emax = std::max(emax, align_floor);
  if (emax - kAlignBits < -1022 || kAlignBits - emax < -1022)
    return dot16_aligned(a, b, 1, c, acc, align_floor);  // out of the powers' range: the general form
  const double scale = pow2(kAlignBits - emax);
  int64_t sum = static_cast<int64_t>(c * scale);
  for (int k = 0; k < 16; ++k) sum += static_cast<int64_t>(a[k] * b[k] * scale);
  const double s = static_cast<double>(sum) * pow2(emax - kAlignBits);  // exact
  const double r = acc == Accum::kFP32 ? round_to(s, kFP32, Rounding::kTowardZero)
                                       : round_to(s, kFP16, Rounding::kNearestEven);
  return r == 0.0 ? 0.0 : r;
}

// One operand of a product, laid out by output row (A's rows; B's columns,
// transposed) with each value's nominal exponent and, per (row, 16-block),
// whether the block is all zero and whether it is all finite.
struct Operand {
  int rows = 0, k = 0;
  std::vector<double> v;
  std::vector<int> e;
  std::vector<char> zero, finite;
  Operand(int rows_, int k_, int emin, auto&& at) : rows(rows_), k(k_), v(size_t(rows_) * k_), e(v.size()),
      zero(size_t(rows_) * (k_ / 16), 1), finite(zero.size(), 1) {
    for (int r = 0; r < rows; ++r)
      for (int kk = 0; kk < k; ++kk) {
        const double x = at(r, kk);
        const size_t i = size_t(r) * k + kk, blk = size_t(r) * (k / 16) + kk / 16;
        v[i] = x;
        e[i] = x == 0.0 || !std::isfinite(x) ? kZeroExponent : std::max(exponent_of(x), emin);
        if (x != 0.0) zero[blk] = 0;
        if (!std::isfinite(x)) finite[blk] = 0;
      }
  }
};

// Element (i, j) of the product of A's rows with B's rows (B's columns for
// a matrix product): its k-blocks chained in increasing order through C, from
// a zero C. A k-block whose products are all exact zeros leaves C unchanged
// (and C is never -0 here), so skipping it is exact. Blocks with a
// non-finite operand (or after a non-finite C) take the general dot16.
// strictly_lower: only j < i, zeros elsewhere.
Mat products(const Operand& A, const Operand& B, Accum acc, int emin, bool strictly_lower) {
  const int k = A.k, kb = k / 16;
  const int floor = acc == Accum::kFP16 ? kFp16AlignFloor : std::numeric_limits<int>::min();
  Mat d = Mat::Zero(A.rows, B.rows);
  for (int i = 0; i < A.rows; ++i) {
    for (int j = 0; j < (strictly_lower ? std::min(i, B.rows) : B.rows); ++j) {
      double c = 0.0;
      for (int blk = 0; blk < kb; ++blk) {
        const size_t ia = size_t(i) * kb + blk, jb = size_t(j) * kb + blk;
        if ((A.zero[ia] && B.finite[jb]) || (B.zero[jb] && A.finite[ia])) continue;
        const size_t oa = size_t(i) * k + blk * 16, ob = size_t(j) * k + blk * 16;
        if (A.finite[ia] && B.finite[jb] && std::isfinite(c))
          c = dot16_finite(&A.v[oa], &A.e[oa], &B.v[ob], &B.e[ob], c, emin, acc, floor);
        else
          c = dot16(&A.v[oa], &B.v[ob], 1, c, acc);
      }
      d(i, j) = c;
    }
  }
  return d;
}

int emin_of(Accum acc) { return acc == Accum::kFP32 ? kBF16.emin : kFP16.emin; }

Mat matmul(const Mat& a, const Mat& b, Accum acc) {
  const int emin = emin_of(acc);
  const Operand A(int(a.rows()), int(a.cols()), emin, [&](int r, int kk) { return a(r, kk); });
  const Operand B(int(b.cols()), int(b.rows()), emin, [&](int r, int kk) { return b(kk, r); });
  return products(A, B, acc, emin, false);
}

}  // namespace

Mat matmul_bf16_f32(const Mat& a, const Mat& b) { return matmul(a, b, Accum::kFP32); }
Mat matmul_f16(const Mat& a, const Mat& b) { return matmul(a, b, Accum::kFP16); }

Mat lower_products_bf16_f32(const Mat& a, const Mat& b) {
  const int emin = emin_of(Accum::kFP32);
  const Operand A(int(a.rows()), int(a.cols()), emin, [&](int r, int kk) { return a(r, kk); });
  const Operand B(int(b.rows()), int(b.cols()), emin, [&](int r, int kk) { return b(r, kk); });
  return products(A, B, Accum::kFP32, emin, true);
}

}  // namespace chunkinv::tc

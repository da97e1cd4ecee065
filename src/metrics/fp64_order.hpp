// The FP64 arithmetic of the gold and the metrics as plain loops, one source
// for the CPU and the GPU (metrics/device_metrics.cu).
//
// The CPU computes the gold inverse and the residual with Eigen; these loops
// are the same IEEE operations in the same order as Eigen 3.4 runs them in
// this build (EIGEN_DONT_VECTORIZE, -ffp-contract=off: its block-panel
// kernel has register blocks of 1 x 4, mr = 1, nr = 4, and peels k by 8).
// tests/metrics/test_gold_order.cpp checks them bit for bit against Eigen
// for C = 2..64 on random and extreme matrices (inf and NaN included).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/hd.hpp"

namespace chunkinv::fp64 {

// std::min(x, 0.0) as compute_gold writes it: (0.0 < x) ? 0.0 : x, so NaN
// and -0 pass through unchanged.
CHUNKINV_HD inline double min0(double x) { return (0.0 < x) ? 0.0 : x; }

// The panel loop of unit_lower_solve_column_from (below) in two parts, for callers
// that share a column's panels between threads (the gold's solve on the
// GPU): panel_sums forms the sums over j < p of R of panel p's rows, p + r0
// to p + r0 + R - 1 (rows past the matrix get none), each in its own
// order, from x(k) for k in [first, p), which must be final; panel_rows
// turns the panel's four sums into its rows, each finishing with the terms
// of the rows above it in the panel.
template <int R, class L, class X>
CHUNKINV_HD inline void panel_sums(int C, int p, int first, int r0, const L& l, const X& x, double (&acc)[R]) {
  const int n = C - p < 4 ? C - p : 4;
  CHUNKINV_UNROLL
  for (int r = 0; r < R; ++r) acc[r] = 0.0;
  if (p <= first) return;
  int k = first;
  if (p + 4 <= C) {  // a full panel (n = 4)
    double odd[R];
    CHUNKINV_UNROLL
    for (int r = 0; r < R; ++r) odd[r] = 0.0;
    for (const int peeled = p & ~7; k < peeled; ++k) {
      const double xk = x(k);
      CHUNKINV_UNROLL
      for (int r = 0; r < R; ++r) {
        const double t = xk * (0.0 + l(p + r0 + r, k));
        if (k & 1) odd[r] += t;
        else acc[r] += t;
      }
    }
    CHUNKINV_UNROLL
    for (int r = 0; r < R; ++r) acc[r] = acc[r] + odd[r];
  }
  for (; k < p; ++k) {
    const double xk = x(k);
    CHUNKINV_UNROLL
    for (int r = 0; r < R; ++r)
      if (r0 + r < n) acc[r] += xk * (0.0 + l(p + r0 + r, k));
  }
}
template <class L, class X>
CHUNKINV_HD inline void panel_rows(int C, int c, int p, int first, const double (&acc)[4], const L& l, const X& x) {
  const int n = C - p < 4 ? C - p : 4;
  CHUNKINV_UNROLL
  for (int r = 0; r < 4; ++r) {
    if (r >= n) break;
    const int i = p + r;
    double xi = (i == c) ? 1.0 : 0.0;
    if (p > first) xi = acc[r] * -1.0 + xi;
    for (int j = p; j < i; ++j) xi -= x(j) * (0.0 + l(i, j));
    x(i) = xi;
  }
}

// Column c of (I + L)^-1 for a strictly lower L, as
// `(I + L).triangularView<UnitLower>().solve(I)` forms it on row-major
// matrices (methods/exact.cpp). Eigen solves X^T (I + L)^T = I column panel by
// column panel, 4 wide: for row i, with p = 4 * (i / 4) the start of its
// panel,
//   acc = sum over j < p of x_j a_ij   (block-panel kernel; for a full panel,
//         p + 4 <= C, even j < (p & ~7) go into one accumulator and odd j
//         into another, added together, then j in [p & ~7, p) in order;
//         for the last, narrower panel all j in order),
//   x_i = acc * -1 + x_i               (the kernel's alpha = -1; only if p > 0),
//   x_i = x_i - x_j a_ij for j in [p, i) in order,
// with a_ij = 0.0 + l(i, j), the entry of I + L, and x starting as column c
// of I. `l(i, j)` returns L's entry (only j < i is read); `x(i)` returns a
// reference to the column's entry i.
//
// `first` (<= c) skips the terms x_j a_ij with j < first and sets rows
// i < first to +0: those x_j are +0, and when every entry of L is finite
// their products are zeros that change no bit of the result (the sums never
// hold -0, so adding +-0 to them is exact). first = 0 is Eigen's order on
// any L, inf and NaN included; first > 0 needs every entry of L finite.
// unit_lower_solve_column_from: the same without the rows above `first`
// (neither written nor read), for a caller that stores only rows >= first.
//
// The rows of a panel share p, so their sums over j < p read the same x_j
// and are independent: where `first` is a multiple of 4 (0, or c & ~31 as
// the callers pass it) the four rows' sums are formed side by side, each
// in its own order (eight chains at once instead of two: the solve waited
// on the latency of its adds), then the rows' tails one after another.
template <class L, class X>
CHUNKINV_HD inline void unit_lower_solve_column_from(int C, int c, int first, const L& l, const X& x) {
  if (first & 3) {  // row by row
    for (int i = first; i < C; ++i) {
      double xi = (i == c) ? 1.0 : 0.0;
      const int p = i & ~3;
      if (p > first) {
        double acc = 0.0, odd = 0.0;
        int k = first;
        if (p + 4 <= C) {
          for (const int peeled = p & ~7; k < peeled; ++k) {
            const double t = x(k) * (0.0 + l(i, k));
            if (k & 1) odd += t;
            else acc += t;
          }
          acc = acc + odd;
        }
        for (; k < p; ++k) acc += x(k) * (0.0 + l(i, k));
        xi = acc * -1.0 + xi;
      }
      for (int j = p > first ? p : first; j < i; ++j) xi -= x(j) * (0.0 + l(i, j));
      x(i) = xi;
    }
    return;
  }
  for (int p = first; p < C; p += 4) {  // the panel's rows p .. p + n - 1
    double acc[4];
    panel_sums(C, p, first, 0, l, x, acc);
    panel_rows(C, c, p, first, acc, l, x);
  }
}

template <class L, class X>
CHUNKINV_HD inline void unit_lower_solve_column(int C, int c, int first, const L& l, const X& x) {
  for (int i = 0; i < first; ++i) x(i) = 0.0;
  unit_lower_solve_column_from(C, c, first, l, x);
}

// Entry (i, j) of (I + L) * B as `(Mat::Identity(C, C) + L) * B` forms it
// (metrics.cpp's residual; row-major, dynamic sizes), with a_ik = (i == k) +
// l(i, k):
//  - 3C < 20 (C <= 6), Eigen's coefficient-based product: a_i0 b_0j, then
//    each further a_ik b_kj added in order;
//  - otherwise the block-panel kernel on the transposed problem: rows i in
//    groups of 4 (i < 4 * (C / 4)) take even k < (C & ~7) into one
//    accumulator and odd k into another, add them, then the remaining k in
//    order; the last C % 4 rows take every k in order; the result is
//    acc * 1 + 0 (the kernel's alpha on a zeroed destination).
// `k_end` (<= C) skips the terms with k >= k_end: pass C for Eigen's bits;
// i + 1 where L is strictly lower and every b_kj is finite (the skipped
// terms are then zeros, which can change only the sign of a zero result).
// `k_begin` skips the terms with k < k_begin: 0 for Eigen's bits; j where
// also b_kj = +-0 for k < j and every l(i, k) is finite, and C >= 7 (the
// block-panel kernel's accumulators start at +0, so the skipped zeros change
// no bit; the coefficient-based product starts from a term, not from +0).
template <class L, class B>
CHUNKINV_HD inline double unit_plus_times(int C, int i, int j, int k_begin, int k_end, const L& l, const B& b) {
  if (3 * C < 20) {
    double s = ((i == 0) ? 1.0 : 0.0) + l(i, 0);
    s = s * b(0, j);
    for (int k = 1; k < k_end; ++k) s = s + (((i == k) ? 1.0 : 0.0) + l(i, k)) * b(k, j);
    return s;
  }
  double acc = 0.0, odd = 0.0;
  int k = k_begin;
  if (i < (C & ~3)) {
    const int peeled = (C & ~7) < k_end ? (C & ~7) : k_end;
    for (; k < peeled; ++k) {
      const double t = b(k, j) * (((i == k) ? 1.0 : 0.0) + l(i, k));
      if (k & 1) odd += t;
      else acc += t;
    }
    acc = acc + odd;
  }
  for (; k < k_end; ++k) acc += b(k, j) * (((i == k) ? 1.0 : 0.0) + l(i, k));
  return acc * 1.0 + 0.0;
}
template <class L, class B>
CHUNKINV_HD inline double unit_plus_times(int C, int i, int j, int k_end, const L& l, const B& b) {
  return unit_plus_times(C, i, j, 0, k_end, l, b);
}

// unit_plus_times(C, i, j, k_begin, i + 1, l, b), the form the residual
// takes on a strictly lower L, with the same operations in the same order
// and fewer instructions: a_ik is 0.0 + l(i, k) below the diagonal and
// 1.0 + l(i, i) on it, and the peeled terms go to their accumulator by
// k's parity two at a time, without a test per term.
template <class L, class B>
CHUNKINV_HD inline double unit_plus_times_lower(int C, int i, int j, int k_begin, const L& l, const B& b) {
  if (3 * C < 20) return unit_plus_times(C, i, j, k_begin, i + 1, l, b);
  auto term = [&](int k) { return b(k, j) * (0.0 + l(i, k)); };  // k < i
  const double last = b(i, j) * (1.0 + l(i, i));                   // k = i
  double acc = 0.0, odd = 0.0;
  int k = k_begin;
  if (i < (C & ~3)) {
    const int peeled = (C & ~7) < i + 1 ? (C & ~7) : i + 1;
    const int below = peeled < i ? peeled : i;  // the peeled terms with k < i
    if (k < below && (k & 1)) odd += term(k++);
    for (; k + 1 < below; k += 2) {
      acc += term(k);
      odd += term(k + 1);
    }
    if (k < below) acc += term(k++);
    if (k < peeled) {  // k = i
      if (i & 1) odd += last;
      else acc += last;
      ++k;
    }
    acc = acc + odd;
  }
  for (; k < i; ++k) acc += term(k);
  if (k == i) acc += last;
  return acc * 1.0 + 0.0;
}

// unit_plus_times_lower(C, i, j, j, l, b) for 3C >= 20 with row i of l and
// column j of b walked by pointers rather than looked up term by term:
// l(i, k) = li[k]; b(k, j) = *bk, bk starting at b(j, j) and moving on by
// step(k) from row k to row k + 1; bi = &b(i, j). The same operations in
// the same order (the GPU's residuals spent most of their instructions on
// each term's index arithmetic and bounds tests).
template <class Step>
CHUNKINV_HD inline double unit_plus_times_lower_walk(int C, int i, int j, const double* li, const double* bk,
                                                     const double* bi, const Step& step) {
  const double last = *bi * (1.0 + li[i]);  // k = i
  double acc = 0.0, odd = 0.0;
  int k = j;
  auto term = [&]() {  // k < i, then on to row k + 1
    const double t = *bk * (0.0 + li[k]);
    bk += step(k);
    ++k;
    return t;
  };
  if (i < (C & ~3)) {
    const int peeled = (C & ~7) < i + 1 ? (C & ~7) : i + 1;
    const int below = peeled < i ? peeled : i;
    if (k < below && (k & 1)) odd += term();
    while (k + 1 < below) {
      acc += term();
      odd += term();
    }
    if (k < below) acc += term();
    if (k < peeled) {
      if (i & 1) odd += last;
      else acc += last;
      ++k;
    }
    acc = acc + odd;
  }
  while (k < i) acc += term();
  if (k == i) acc += last;
  return acc * 1.0 + 0.0;
}
// Steps of a column walk: a row-major C x C matrix (stride C), or a lower
// triangle packed by rows (row k + 1 starts k + 1 entries after row k).
struct StrideStep {
  int stride;
  CHUNKINV_HD int operator()(int) const { return stride; }
};
struct PackedRowsStep {
  CHUNKINV_HD int operator()(int k) const { return k + 1; }
};

// rel_rmse(a, e) of metrics.cpp, one entry at a time in the matrices' data
// order: sqrt(mean((a-e)^2)) / (sqrt(mean(e^2)) + 1e-30), +inf once an
// entry of a is not finite.
struct RelRmse {
  double err = 0.0, ref = 0.0;
  bool finite = true;

  CHUNKINV_HD void add(double a, double e) {
    if (!std::isfinite(a)) finite = false;
    const double d = a - e;
    err += d * d;
    ref += e * e;
  }
  CHUNKINV_HD double value(int count) const {
    if (!finite) return INFINITY;
    const double n = static_cast<double>(count);
    return std::sqrt(err / n) / (std::sqrt(ref / n) + 1e-30);
  }
};

// The exact double of a BF16 or FP16 bit pattern (NaN patterns give NaN).
CHUNKINV_HD inline double bf16_value(uint16_t b) {
  const uint32_t u = uint32_t(b) << 16;
#ifdef __CUDA_ARCH__
  return static_cast<double>(__uint_as_float(u));
#else
  float f;
  std::memcpy(&f, &u, 4);
  return static_cast<double>(f);
#endif
}

CHUNKINV_HD inline double fp16_value(uint16_t h) {
  const uint32_t e = (h >> 10) & 0x1F, m = h & 0x3FF;
  double v;
  if (e == 31) v = m ? NAN : INFINITY;
  else if (e == 0) v = static_cast<double>(m) * 0x1p-24;  // exact: m < 2^10
  else v = hd::from_bits((uint64_t(e - 15 + 1023) << 52) | (uint64_t(m) << 42));
  return (h & 0x8000) ? -v : v;
}

}  // namespace chunkinv::fp64

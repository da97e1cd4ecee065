// The FP64 arithmetic of the gold and the metrics as plain loops, one source
// for the CPU and the GPU (metrics/device_metrics.cu).
//
// The CPU computes the gold inverse with Eigen; the solve's loops below are
// the same IEEE operations in the same order as Eigen 3.4 runs them in this
// build (EIGEN_DONT_VECTORIZE, -ffp-contract=off: its block-panel kernel has
// register blocks of 1 x 4, mr = 1, nr = 4, and peels k by 8). The inverse
// residual's product is defined here (residual_entry), for both.
// tests/metrics/test_gold_order.cpp checks them bit for bit against Eigen
// and the definition for C = 2..64 on random and extreme matrices (inf and
// NaN included).
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

// Entry (i, j) of (I + L) B, the product of inverse_residual (metrics.cpp's
// residual; docs/numerics.md, "The inverse residual's product"): the fused
// multiply-adds a_ik b_kj for k = k_begin .. k_end - 1 in that order, from
// +0, with a_ik = (i == k) + l(i, k), the entry of I + L. k_begin = 0 and
// k_end = C is the definition. Where L is finite and zero on and above its
// diagonal, and B finite and +-0 above its diagonal, the terms with k < j
// or k > i are fused multiply-adds of a zero product, which change no bit
// of an accumulator that started at +0 (it is never -0: x + -0 = x, and
// +0 + -0 = +0): k_begin = j, k_end = i + 1 gives the same bits, and an
// entry above the diagonal is +0. This is the order of mma.m8n8k4.f64 on
// 8 x 8 tiles of I + L and B, k ascending (one fused multiply-add a term,
// k in order: GpuInstructions.MmaF64IsAFusedChainInKOrder), which the GPU's
// block programs use (gpu::blocks::residual_pass).
CHUNKINV_HD inline double fma_rn(double a, double b, double c) {
#ifdef __CUDA_ARCH__
  return __fma_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}
template <class L, class B>
CHUNKINV_HD inline double residual_entry(int i, int j, int k_begin, int k_end, const L& l, const B& b) {
  double r = 0.0;
  for (int k = k_begin; k < k_end; ++k) r = fma_rn(((i == k) ? 1.0 : 0.0) + l(i, k), b(k, j), r);
  return r;
}

// rel_rmse(a, e) = sqrt(mean((a-e)^2)) / (sqrt(mean(e^2)) + 1e-30), +inf
// once an entry of a is not finite, from its two sums (err, ref). add()
// takes the entries one at a time in data order: the downstream metrics'
// order (scores.cpp). A chunk's C x C matrices sum in classes (ChunkSums).
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

// The order of a chunk metric's rel_rmse sums over a C x C matrix
// (docs/design.md, "Precision choices"). The entries on and below the
// diagonal fall in kSumClasses classes by their index k = i (i + 1) / 2 + j
// in the lower triangle packed by rows, k mod kSumClasses; those above it in
// kSumClasses more by their index i C + j in the matrix. Each class adds its
// terms in ascending index from +0; the lower classes' sums p[0..7] are then
// added as ((p0 + p4) + (p2 + p6)) + ((p1 + p5) + (p3 + p7)) (halves of 4,
// 2, 1: class_total), the upper classes' likewise, and the sum is lower +
// upper. On a matrix pair zero above the diagonal the upper sum is +0 and
// the sum is the lower one's bits (every sum here is >= +0, never -0), so
// the GPU's fast programs, which walk the lower triangle only, add no
// upper classes. The classes let eight threads add a sum side by side where
// one added all its C (C + 1) / 2 terms (the data order, until 2026-12-07).
inline constexpr int kSumClasses = 8;
CHUNKINV_HD inline int lower_class(int i, int j) { return (i * (i + 1) / 2 + j) & (kSumClasses - 1); }
CHUNKINV_HD inline int upper_class(int C, int i, int j) { return (i * C + j) & (kSumClasses - 1); }
CHUNKINV_HD inline double class_total(const double* p) {
  return ((p[0] + p[4]) + (p[2] + p[6])) + ((p[1] + p[5]) + (p[3] + p[7]));
}
// rel_rmse(a, e) over a chunk's matrices, the entries (i, j) given in any
// order that is ascending within each class (data order is).
struct ChunkSums {
  double err[2][kSumClasses] = {}, ref[2][kSumClasses] = {};  // [lower, upper][class]
  bool finite = true;

  CHUNKINV_HD void add(int C, int i, int j, double a, double e) {
    if (!std::isfinite(a)) finite = false;
    const int u = j > i, c = u ? upper_class(C, i, j) : lower_class(i, j);
    const double d = a - e;
    err[u][c] += d * d;
    ref[u][c] += e * e;
  }
  CHUNKINV_HD RelRmse sums() const {
    RelRmse r;
    r.err = class_total(err[0]) + class_total(err[1]);
    r.ref = class_total(ref[0]) + class_total(ref[1]);
    r.finite = finite;
    return r;
  }
  CHUNKINV_HD double value(int C) const { return sums().value(C * C); }
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

// Method `flashkda_v2`: the inverse FlashKDA ships since September 2026 in
// place of v1's FP16 Neumann form (SPEC §2 "FlashKDA v2 inverse"; the
// kernel's `inv_fwd_subst_fused_1warp`, mirrored by its
// `tests/torch_ref.py::inv_fwd_subst_16`). At C = 16, exactly as SPEC says:
//
// 1. A = fp32(L), strict lower: a no-op on the L a kernel-arithmetic path
//    hands this method (l_storage = kFp32: the mma result kept in FP32).
// 2. Each 8x8 diagonal block inverted in FP32 by the column-oriented
//    substitution (prec::column_substitution_inverse): for s = 0..6, every
//    row r > s: X[r][p] = fmaf(-A[r][s], X[s][p], X[r][p]) for p < s, then
//    X[r][s] = -A[r][s]; X[r][r] = 1.
// 3. The merge on BF16 tensor cores, written as the kernel writes it, with
//    16x16 operands: P = diag(bf16(X_top), bf16(X_bottom)); M = bf16 of L's
//    lower-left block, zeros elsewhere; D = P M (mma.sync BF16 -> FP32, one
//    k-block, from a zero C operand); O = bf16(-D) P (likewise);
//    INV = P + bf16(O) (a BF16 add; the blocks are disjoint, so it is
//    exact). Output BF16.
//
// Other chunks (this project's choice; SPEC leaves them open): C is
// zero-padded to n = 8, 16, 32 or 64 (the next power-of-two multiple of 8;
// exact, the padded rows and columns of a strictly lower L stay zero), every
// 8x8 diagonal block is inverted as in step 2, and the blocks are merged
// pairwise, 8 -> 16 -> 32 -> 64, each merge step 3 with h x h halves:
// P = diag(bf16(Xa), bf16(Xb)) (2h x 2h, Xa and Xb the halves merged so
// far, already BF16 after the first level), M = bf16(L[t+h:t+2h, t:t+h])
// in its lower-left corner, D = P M and O = bf16(-D) P on the tensor-core
// model with k = 2h chained in 16-blocks through the C operand (the
// all-zero k-blocks change nothing), INV = P + bf16(O). At C <= 8 there is
// no merge and the output is bf16(X). The generalisation keeps every
// product in FlashKDA's two-product form; the first level at C > 16 is the
// C = 16 arithmetic itself.
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "core/fp.hpp"
#include "methods/method.hpp"
#include "methods/precision.hpp"

namespace chunkinv {
namespace {

using prec::Arith;

constexpr int kBlock = 8;

const MetricInfo kDiagnostics[] = {
    {"diag_inv_max", MetricKind::kValue,
     "max |entry| of the FP32 8x8 diagonal-block inverses (before the BF16 rounding); inf if any is non-finite"},
    {"work_max", MetricKind::kValue,
     "max |entry| over every intermediate (diagonal inverses, D and O of every merge) and the output; inf if any "
     "is non-finite"},
};

// "X[8:16,8:16]": a matrix over rows and columns r0 .. r0+size.
std::string label(const char* name, int r0, int size) { return fmt::format("{0}[{1}:{2},{1}:{2}]", name, r0, r0 + size); }

InverseRun invert_flashkda_v2(const Mat& l_in, const Method&, bool keep) {
  const int c = static_cast<int>(l_in.rows());
  int n = kBlock;
  while (n < c) n *= 2;
  const Mat l = prec::pad(prec::round_to(l_in, kFP32), n);  // the method's input format

  InverseRun run;
  if (keep) run.intermediates.push_back({"L (FP32)", l.topLeftCorner(c, c)});
  // inv holds each diagonal block of the current level: FP32 X on entry, BF16 after a merge.
  Mat inv = Mat::Zero(n, n);
  double diag_max = 0.0;
  for (int r0 = 0; r0 < n; r0 += kBlock) {
    const Mat x = prec::column_substitution_inverse(l, r0, kBlock);
    diag_max = std::fmax(diag_max, prec::max_abs(x));
    inv.block(r0, r0, kBlock, kBlock) = x;
    if (keep && r0 < c) run.intermediates.push_back({label("X", r0, kBlock), x});
  }
  double work_max = diag_max;
  for (int h = kBlock; h < n; h *= 2)
    for (int t = 0; t < n; t += 2 * h) {
      Mat p = Mat::Zero(2 * h, 2 * h), m = Mat::Zero(2 * h, 2 * h);
      p.topLeftCorner(h, h) = prec::round_to(Mat(inv.block(t, t, h, h)), kBF16);
      p.bottomRightCorner(h, h) = prec::round_to(Mat(inv.block(t + h, t + h, h, h)), kBF16);
      m.bottomLeftCorner(h, h) = prec::round_to(Mat(l.block(t + h, t, h, h)), kBF16);
      const Mat d = prec::matmul(p, m, Arith::kBF16Mma);
      const Mat o = prec::matmul(prec::round_to(Mat(-d), kBF16), p, Arith::kBF16Mma);
      const Mat merged = prec::round_to(Mat(p + prec::round_to(o, kBF16)), kBF16);
      work_max = std::fmax(work_max, std::fmax(prec::max_abs(d), prec::max_abs(o)));
      inv.block(t, t, 2 * h, 2 * h) = merged;
      if (keep && t + h < c) {
        run.intermediates.push_back({label("P", t, 2 * h), p});
        run.intermediates.push_back({label("D", t, 2 * h), d});
        run.intermediates.push_back({label("O", t, 2 * h), o});
      }
    }
  run.inv = prec::round_to(Mat(inv.topLeftCorner(c, c)), kBF16);  // bf16(X) when there was no merge
  work_max = std::fmax(work_max, prec::max_abs(run.inv));
  run.diagnostics = {diag_max, work_max};
  return run;
}

}  // namespace

extern const MethodSpec kFlashkdaV2Method{
    .name = "flashkda_v2",
    .arithmetic = "FlashKDA v2 inverse: C zero-padded to 8, 16, 32 or 64; 8x8 diagonal blocks of fp32(L) inverted in "
                  "FP32 by column-oriented substitution (X[r][p] = fmaf(-A[r][s], X[s][p], X[r][p]) for s ascending); "
                  "blocks merged pairwise on mma.sync BF16 -> FP32: P = diag(bf16(Xa), bf16(Xb)), M = bf16(lower-left "
                  "block of L), D = P M, O = bf16(-D) P, INV = P + bf16(O); output BF16 (C = 16: the kernel's one "
                  "merge, SPEC §2)",
    .diagnostics = kDiagnostics,
    .invert = invert_flashkda_v2,
    .l_storage = LStorage::kFp32,  // v2's L: the mma's FP32 result times the FP32 beta (SPEC §2 step 1)
};

}  // namespace chunkinv

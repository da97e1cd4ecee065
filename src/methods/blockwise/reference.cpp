// Method `blockwise`: the blockwise inverse cuDNN's KDA/GDN-2 kernels moved
// to (NVIDIA/cudnn-frontend issue #1051, PR #1124;
// python/cudnn/linear_attention/frost/common/blockwise_inverse.py).
// C is zero-padded to n = b * 2^m (b = block = 8 or 16).
//
// 1. Each b x b diagonal block A of L is inverted in FP32 by the
//    column-oriented substitution of the source's Gauss-Jordan step: for
//    s = 0..b-2, for every row r > s: X[r][p] = fmaf(-A[r][s], X[s][p], X[r][p])
//    for p < s, then X[r][s] = -A[r][s]; X[r][r] = 1. The result is stored in
//    the I/O format (BF16 for precision=bf16, else FP32).
// 2. Off-diagonal blocks by block substitution, doubling the block size
//    (b -> 2b -> ... -> n): for each pair of neighbouring inverted diagonal
//    blocks Ainv (top) and Dinv (bottom) with the raw lower-left block C of L,
//    T = io(-(Dinv C)), C <- io(T Ainv). With precision=bf16 both products are
//    mma.sync BF16 -> FP32 (tc model) and io = BF16, as in the source; fp32 and
//    tf32 are this project's FP32 variants (FMA chain; TF32 operands), io = FP32.
#include <cmath>

#include <fmt/format.h>

#include "methods/blockwise/params.hpp"
#include "methods/gpu_form.hpp"
#include "methods/method.hpp"
#include "methods/precision.hpp"

namespace chunkinv {
namespace {

using prec::Arith;

const MetricInfo kDiagnostics[] = {
    {"diag_inv_max", MetricKind::kValue,
     "max |entry| of the FP32 diagonal-block inverses (before the I/O rounding); inf if any is non-finite"},
    {"work_max", MetricKind::kValue,
     "max |entry| over every intermediate (diagonal inverses, both products of every merge) and the output; "
     "inf if any is non-finite"},
};

const std::string_view kBlockChoices[] = {"8", "16"};
const std::string_view kPrecisionChoices[] = {"bf16", "fp32", "tf32"};
const MethodParam kParams[] = {
    {"block", "8", kBlockChoices, 0, 0, "size b of the diagonal blocks inverted by FP32 substitution"},
    {"precision", "bf16", kPrecisionChoices, 0, 0,
     "block products: bf16 (BF16 in/out on mma.sync, FP32 accumulation), fp32 (FMA chain) or tf32 "
     "(TF32 operands, FP32 accumulation)"},
};

InverseRun invert_blockwise(const Mat& l_in, const Method& method, bool keep) {
  const BlockwiseParams& p = method.params<BlockwiseParams>();
  const int b = p.block;
  const Arith arith = p.arith;
  const Format io = arith == Arith::kBF16Mma ? kBF16 : kFP32;
  const int c = static_cast<int>(l_in.rows());
  int n = b;
  while (n < c) n *= 2;
  const Mat l = prec::pad(prec::round_to(l_in, io), n);  // the method's input format

  InverseRun run;
  if (keep) run.intermediates.push_back({io.mant == kBF16.mant ? "L (BF16)" : "L (FP32)", l.topLeftCorner(c, c)});
  Mat inv = Mat::Zero(n, n);
  double diag_max = 0.0;
  for (int r0 = 0; r0 < n; r0 += b) {
    const Mat x = prec::column_substitution_inverse(l, r0, b);
    diag_max = std::fmax(diag_max, prec::max_abs(x));
    inv.block(r0, r0, b, b) = prec::round_to(x, io);
    if (keep && r0 < c) run.intermediates.push_back({fmt::format("X[{0}:{1},{0}:{1}]", r0, r0 + b), x});
  }
  double work_max = diag_max;
  for (int h = b; h < n; h *= 2)
    for (int t = 0; t < n; t += 2 * h) {
      const Mat a_inv = inv.block(t, t, h, h), d_inv = inv.block(t + h, t + h, h, h);
      const Mat cb = l.block(t + h, t, h, h);
      const Mat dc = prec::matmul(d_inv, cb, arith);
      const Mat tm = prec::round_to(Mat(-dc), io);
      const Mat o = prec::matmul(tm, a_inv, arith);
      work_max = std::fmax(work_max, std::fmax(prec::max_abs(dc), prec::max_abs(o)));
      inv.block(t + h, t, h, h) = prec::round_to(o, io);
      if (keep && t + h < c) {
        run.intermediates.push_back({fmt::format("T[{}:{},{}:{}]", t + h, t + 2 * h, t, t + h), tm});
        run.intermediates.push_back(
            {fmt::format("INV[{}:{},{}:{}]", t + h, t + 2 * h, t, t + h), inv.block(t + h, t, h, h)});
      }
    }
  run.inv = inv.topLeftCorner(c, c);
  work_max = std::fmax(work_max, prec::max_abs(run.inv));
  run.diagnostics = {diag_max, work_max};
  return run;
}

}  // namespace

namespace gpu {
extern const GpuInverse kBlockwiseGpu;  // gpu_form.cpp
}  // namespace gpu

extern const MethodSpec kBlockwiseMethod{
    .name = "blockwise",
    .arithmetic = "cuDNN-style blockwise inverse: C zero-padded to b*2^m; b x b diagonal blocks (block=8|16) inverted "
                  "in FP32 by column-oriented substitution with FMAs; off-diagonal blocks by block substitution "
                  "doubling b -> n: T = io(-(Dinv C)), C = io(T Ainv); precision=bf16: BF16 I/O, products on mma.sync "
                  "BF16 -> FP32 (default, as cuDNN); fp32: FMA chain; tf32: TF32 operands, FP32 accumulation",
    .diagnostics = kDiagnostics,
    .invert = invert_blockwise,
    .params = kParams,
    .parse = parse_as<BlockwiseParams>,
    .gpu_form = &gpu::kBlockwiseGpu,
};

}  // namespace chunkinv

// Method `fla_solve_tril`: flash-linear-attention's `solve_tril`
// (fla/ops/utils/solve_tril.py): (I + A)^-1 of a strictly lower FP32 A with
// C in {16, 32, 64} (smaller chunks are zero-padded up to the next one), in
// the order the kernels Triton compiles for sm_90 compute it (the launches
// the autotuner picks there: one warp for 16 and 32, two for 64; read off
// their PTX and measured bit for bit on the H200, docs/methods.md).
//
// 1. Each 16x16 diagonal block by FP32 forward substitution, row by row:
//    X = -A (strict part; -0 elsewhere); for i = 2..15, with
//    a = -A[i, k] for k < i, +0 for k >= i:  X[i, j] = fp32(a[j] + S_j), where
//    S_j = sum_k a[k] X[k, j] is reduced across the lanes that hold rows k:
//    one warp (C <= 32; each lane holds rows k and k + 8):
//      q_k = fma(a[k], X[k, j], fp32(a[k+8] * X[k+8, j]))  for k = 0..7,
//      S_j = ((q0 + q4) + (q2 + q6)) + ((q1 + q5) + (q3 + q7));
//    two warps (C = 64; a lane holds one row, warp w rows 8w..8w+7):
//      v_k = fma(a[k], X[k, j], fp32(a[k+4] * X[k+4, j]))  for k = 0..3, 8..11,
//      S_j = ((v0 + v2) + (v1 + v3)) + ((v8 + v10) + (v9 + v11))
//    (the butterflies xor 4, 2, 1 over rows, the product of the partner row
//    contracted into an FMA with the lane's own); then Ai = X + I in FP32.
// 2. Merged by block substitution with FP32 dots (`precision=ieee`: an FMA
//    chain, k ascending from +0; `tf32`: operands rounded to TF32 first). A
//    sum of dots is one chain (Triton folds `dot(a, b) + c` into the dot's
//    accumulator), and a negation is 0 - x (Triton's `-x` on a tensor), so a
//    zero result is +0:
//    C = 32:  Ai21 = 0 - dot(dot(Ai22, A21), Ai11)
//    C = 64:  Ai21, Ai32, Ai43 as above, then
//             Ai31 = 0 - dot(Ai33, dot(A31, Ai11; A32, Ai21))
//             Ai42 = 0 - dot(Ai44, dot(A42, Ai22; A43, Ai32))
//             Ai41 = 0 - dot(Ai44, dot(A41, Ai11; A42, Ai21; A43, Ai31))
//    (dot(x1, y1; x2, y2) = the chain over the products of x1 y1, then x2 y2).
//    Output FP32.
#include <cmath>
#include <initializer_list>
#include <string>

#include <fmt/format.h>

#include "methods/fla_solve_tril/params.hpp"
#include "methods/gpu_form.hpp"
#include "methods/method.hpp"
#include "methods/precision.hpp"

namespace chunkinv {
namespace {

using prec::Arith;

const MetricInfo kDiagnostics[] = {
    {"diag_inv_max", MetricKind::kValue,
     "max |entry| of the FP32 16x16 diagonal-block inverses; inf if any is non-finite"},
    {"work_max", MetricKind::kValue,
     "max |entry| over every intermediate (diagonal inverses, dots, sums) and the output; inf if any is non-finite"},
};

const std::string_view kPrecisionChoices[] = {"ieee", "tf32"};
const MethodParam kParams[] = {
    {"precision", "ieee", kPrecisionChoices, 0, 0,
     "the merge's tl.dot input_precision: ieee (FP32 FMA chain) or tf32 (TF32 operands, FP32 accumulation)"},
};

constexpr int kB = 16;

// Ai = (I + A_block)^-1 of the 16x16 diagonal block at r0, as fla's kernel
// forms it with one warp (C <= 32) or two (C = 64).
Mat diagonal_inverse(const std::vector<float>& a, int n, int r0, bool two_warps) {
  auto at = [&](int i, int j) { return a[static_cast<size_t>(r0 + i) * n + r0 + j]; };
  float x[kB][kB];
  for (int i = 0; i < kB; ++i)
    for (int j = 0; j < kB; ++j) x[i][j] = -(i > j ? at(i, j) : 0.0f);  // -0 on and above the diagonal
  for (int i = 2; i < kB; ++i) {
    float row[kB], ai[kB];
    for (int k = 0; k < kB; ++k) ai[k] = k < i ? -at(i, k) : 0.0f;
    for (int j = 0; j < kB; ++j) {
      float s;
      if (two_warps) {
        float v[kB];
        for (int k : {0, 1, 2, 3, 8, 9, 10, 11}) {
          const float partner = ai[k + 4] * x[k + 4][j];
          v[k] = std::fma(ai[k], x[k][j], partner);
        }
        s = ((v[0] + v[2]) + (v[1] + v[3])) + ((v[8] + v[10]) + (v[9] + v[11]));
      } else {
        float q[kB / 2];
        for (int k = 0; k < kB / 2; ++k) {
          const float high = ai[k + 8] * x[k + 8][j];
          q[k] = std::fma(ai[k], x[k][j], high);
        }
        s = ((q[0] + q[4]) + (q[2] + q[6])) + ((q[1] + q[5]) + (q[3] + q[7]));
      }
      row[j] = ai[j] + s;
    }
    for (int j = 0; j < kB; ++j) x[i][j] = row[j];
  }
  Mat out(kB, kB);
  for (int i = 0; i < kB; ++i)
    for (int j = 0; j < kB; ++j) out(i, j) = double(x[i][j] + (i == j ? 1.0f : 0.0f));
  return out;
}

InverseRun invert_fla_solve_tril(const Mat& l_in, const Method& method, bool keep) {
  const Arith dot = method.params<FlaSolveTrilParams>().tf32 ? Arith::kTF32 : Arith::kFP32;
  const int c = static_cast<int>(l_in.rows());
  const int n = c <= 16 ? 16 : c <= 32 ? 32 : 64;
  const Mat l = prec::pad(prec::round_to(l_in, kFP32), n);  // A = fp32(L), zero-padded
  std::vector<float> af(static_cast<size_t>(n) * n);
  for (size_t i = 0; i < af.size(); ++i) af[i] = static_cast<float>(l.data()[i]);

  InverseRun run;
  if (keep) run.intermediates.push_back({"A = fp32(L)", l.topLeftCorner(c, c)});
  const int nb = n / kB;
  std::vector<Mat> ai_diag;
  double diag_max = 0.0, work_max = 0.0;
  for (int b = 0; b < nb; ++b) {
    ai_diag.push_back(diagonal_inverse(af, n, b * kB, n == 64));
    diag_max = std::fmax(diag_max, prec::max_abs(ai_diag.back()));
    if (keep) run.intermediates.push_back({fmt::format("Ai[{0}:{1},{0}:{1}]", b * kB, (b + 1) * kB), ai_diag.back()});
  }
  work_max = diag_max;

  auto blk = [&](int i, int j) { return Mat(l.block(i * kB, j * kB, kB, kB)); };
  auto mm = [&](const Mat& x, const Mat& y) {
    Mat r = prec::matmul(x, y, dot);
    work_max = std::fmax(work_max, prec::max_abs(r));
    return r;
  };
  // 0 - x entry by entry: Triton's negation (+0 for a zero of either sign).
  auto neg = [](const Mat& x) { return Mat((0.0 - x.array()).matrix()); };
  // The blocks of one block row side by side, and of one block column stacked,
  // so that one FMA chain runs over the products of every pair in turn.
  auto row_of = [&](int i, int j0, int j1) { return Mat(l.block(i * kB, j0 * kB, kB, (j1 - j0 + 1) * kB)); };
  auto col_of = [](std::initializer_list<const Mat*> blocks) {
    Mat c(kB * static_cast<int>(blocks.size()), kB);
    int r = 0;
    for (const Mat* b : blocks) c.middleRows(r, kB) = *b, r += kB;
    return c;
  };
  // off[i][j]: the block (i, j) of the inverse below the diagonal.
  std::vector<std::vector<Mat>> off(nb, std::vector<Mat>(nb));
  for (int i = 1; i < nb; ++i) off[i][i - 1] = neg(mm(mm(ai_diag[i], blk(i, i - 1)), ai_diag[i - 1]));
  if (nb == 4) {
    off[2][0] = neg(mm(ai_diag[2], mm(row_of(2, 0, 1), col_of({&ai_diag[0], &off[1][0]}))));
    off[3][1] = neg(mm(ai_diag[3], mm(row_of(3, 1, 2), col_of({&ai_diag[1], &off[2][1]}))));
    off[3][0] = neg(mm(ai_diag[3], mm(row_of(3, 0, 2), col_of({&ai_diag[0], &off[1][0], &off[2][0]}))));
  }
  Mat inv = Mat::Zero(n, n);
  for (int i = 0; i < nb; ++i) {
    inv.block(i * kB, i * kB, kB, kB) = ai_diag[i];
    for (int j = 0; j < i; ++j) {
      inv.block(i * kB, j * kB, kB, kB) = off[i][j];
      if (keep)
        run.intermediates.push_back(
            {fmt::format("Ai[{}:{},{}:{}]", i * kB, (i + 1) * kB, j * kB, (j + 1) * kB), off[i][j]});
    }
  }
  run.inv = inv.topLeftCorner(c, c);
  work_max = std::fmax(work_max, prec::max_abs(run.inv));
  run.diagnostics = {diag_max, work_max};
  return run;
}

}  // namespace

namespace gpu {
extern const GpuInverse kFlaSolveTrilGpu;  // gpu_form.cpp
}  // namespace gpu

extern const MethodSpec kFlaSolveTrilMethod{
    .name = "fla_solve_tril",
    .arithmetic = "fla solve_tril: C zero-padded to 16, 32 or 64; each 16x16 diagonal block of fp32(L) inverted by "
                  "FP32 forward substitution in the order of the kernels compiled for sm_90 (row i = -A[i] - sum_k "
                  "A[i][k] X[k]; C <= 32, one warp: rows k, k+8 by an FMA on the rounded second product, then a "
                  "butterfly xor 4, 2, 1; C = 64, two warps: rows k, k+4 likewise, butterflies xor 2, 1 in each warp, "
                  "then the two warps' sums); blocks merged by block substitution with FP32 dots (precision=ieee: FMA "
                  "chain; tf32: TF32 operands), a sum of dots one chain, negation as 0 - x; output FP32",
    .diagnostics = kDiagnostics,
    .invert = invert_fla_solve_tril,
    .params = kParams,
    .parse = parse_as<FlaSolveTrilParams>,
    .gpu_form = &gpu::kFlaSolveTrilGpu,
};

}  // namespace chunkinv

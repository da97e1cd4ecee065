// Method `residual_neumann`: the truncated Neumann series with a diagonal
// mask and residual correction of "When Good Enough Is Optimal:
// Multiplication-Only Matrix Inversion Approximation for Quantized Gated
// DeltaNet" (arXiv 2606.06034), including its INT16 form. Only the paper's
// abstract and summaries were available here, so the arithmetic below is the
// natural reading of them, reconstructed, not checked against the paper:
//
//   X0 = mask( sum_{n=0}^{N} (-L)^n )    N = order; powers by repeated right
//                                        multiplication, summed ascending
//   mask: keeps the entries with i - j < band (band 0: N + 1, the band on
//         which the order-N series is already complete; "the inverse
//         concentrates near the diagonal"), zeroes the rest
//   S times (steps):  R = (I - X) - L X,  X = X + X0 R
//         (iterative refinement with X0 as the approximate inverse: every
//         step is two matrix products, no row-by-row dependency; the error
//         I - (I + L) X is E^(s+1) with E = I - (I + L) X0 strictly lower, so
//         the result is exact in real arithmetic once (N+1)(S+1) >= C).
//
// format: fp32 (FMA chain), bf16 (BF16 operands, mma.sync FP32
// accumulation), fp16 (FP16 operands, mma.sync FP16 accumulation, FP16 adds)
// or int16: fixed point with `frac_bits` fraction bits (value = q 2^-f,
// q in [-32768, 32767]); L quantized by rounding to nearest even; products
// accumulated exactly (int64), then shifted back by f bits with rounding to
// nearest even; every quantization, product and sum saturates at the INT16
// range, and the saturations are counted. The paper's k is the chunk size
// (this lab's `chunk` axis); its setting for k = 64, N = 3 and S = 8, is the
// default.
#include <cmath>
#include <cstdint>
#include <string>

#include "methods/gpu_form.hpp"
#include "methods/method.hpp"
#include "methods/precision.hpp"
#include "methods/residual_neumann/params.hpp"

namespace chunkinv {
namespace {

using prec::Arith;

const MetricInfo kDiagnostics[] = {
    {"residual_before", MetricKind::kValue,
     "max |entry| of I - (I + L) X0 for the masked truncated series X0 (FP64, on the method's rounded L); "
     "inf if non-finite"},
    {"residual_after", MetricKind::kValue,
     "max |entry| of I - (I + L) X after the residual correction (FP64, on the method's rounded L); inf if non-finite"},
    {"work_max", MetricKind::kValue,
     "max |entry| over every power, X0, residual and correction in the working format; inf if any is non-finite"},
    {"saturations", MetricKind::kCount,
     "INT16 values clamped to [-32768, 32767] (quantization, products and sums); 0 for the floating formats"},
};

const std::string_view kFormatChoices[] = {"fp32", "bf16", "fp16", "int16"};
const MethodParam kParams[] = {
    {"order", "3", {}, 1, 63, "N: highest power of the truncated series sum_{n<=N} (-L)^n"},
    {"steps", "8", {}, 0, 63, "S: residual-correction steps X = X + X0 (I - (I + L) X)"},
    {"band", "0", {}, 0, 64, "diagonal mask: X0 keeps the entries with i - j < band (0: order + 1)"},
    {"format", "fp32", kFormatChoices, 0, 0,
     "fp32 (FMA chain), bf16 (mma.sync BF16 -> FP32), fp16 (mma.sync FP16 -> FP16) or int16 (fixed point)"},
    {"frac_bits", "12", {}, 1, 14, "int16: fraction bits f of the fixed-point format (value = q 2^-f)"},
};

// The working arithmetic: floating (methods/precision) or INT16 fixed point.
// Matrices hold the exact double of each value in both cases.
struct Engine {
  bool int16 = false;
  Arith arith = Arith::kFP32;
  int f = 12;
  double saturations = 0;

  double sat(double q) {
    if (std::isnan(q)) {
      ++saturations;
      return 0.0;
    }
    if (q > 32767.0) {
      ++saturations;
      return 32767.0;
    }
    if (q < -32768.0) {
      ++saturations;
      return -32768.0;
    }
    return q;
  }
  double scale() const { return std::ldexp(1.0, f); }
  Mat input(const Mat& l) {
    if (!int16) return prec::round_input(l, arith);
    Mat q(l.rows(), l.cols());
    for (Eigen::Index i = 0; i < l.size(); ++i) q.data()[i] = sat(std::nearbyint(l.data()[i] * scale())) / scale();
    return q;
  }
  Mat mm(const Mat& a, const Mat& b) {
    if (!int16) return prec::matmul(a, b, arith);
    const Eigen::Index m = a.rows(), k = a.cols(), n = b.cols();
    Mat d(m, n);
    for (Eigen::Index i = 0; i < m; ++i)
      for (Eigen::Index j = 0; j < n; ++j) {
        int64_t acc = 0;  // |q| <= 2^15: each product < 2^30, 64 of them < 2^36
        for (Eigen::Index kk = 0; kk < k; ++kk)
          acc += static_cast<int64_t>(a(i, kk) * scale()) * static_cast<int64_t>(b(kk, j) * scale());
        // Back to f fraction bits, round to nearest even (exact in double: |acc| < 2^53).
        d(i, j) = sat(std::nearbyint(std::ldexp(static_cast<double>(acc), -f))) / scale();
      }
    return d;
  }
  Mat add(const Mat& a, const Mat& b, double sign = 1.0) {
    if (!int16) return sign > 0 ? prec::add(a, b, arith) : prec::sub(a, b, arith);
    Mat r(a.rows(), a.cols());
    for (Eigen::Index i = 0; i < a.size(); ++i)
      r.data()[i] = sat((a.data()[i] + sign * b.data()[i]) * scale()) / scale();  // exact integers
    return r;
  }
};

// max |I - (I + L) X| in FP64, k ascending (no library product: same bits everywhere).
double residual_max(const Mat& l, const Mat& x) {
  const Eigen::Index c = l.rows();
  double r = 0.0;
  for (Eigen::Index i = 0; i < c; ++i)
    for (Eigen::Index j = 0; j < c; ++j) {
      double s = x(i, j);
      for (Eigen::Index k = 0; k < c; ++k) s += l(i, k) * x(k, j);
      const double e = (i == j ? 1.0 : 0.0) - s;
      if (!std::isfinite(e)) return INFINITY;
      r = std::fmax(r, std::fabs(e));
    }
  return r;
}

InverseRun invert_residual_neumann(const Mat& l_in, const Method& method, bool keep) {
  const ResidualNeumannParams& params = method.params<ResidualNeumannParams>();
  Engine eng;
  eng.int16 = params.format == ResidualFormat::kInt16;
  eng.arith = params.format == ResidualFormat::kBf16   ? Arith::kBF16Mma
              : params.format == ResidualFormat::kFp16 ? Arith::kFP16Mma
                                                       : Arith::kFP32;
  eng.f = params.frac_bits;
  const int order = params.order, steps = params.steps;
  const int band = params.band;  // 0 on the axis is order + 1 here already

  const int c = static_cast<int>(l_in.rows());
  const Mat l = eng.input(l_in);
  const Mat id = Mat::Identity(c, c);
  InverseRun run;
  if (keep) run.intermediates.push_back({"L", l});
  double work_max = prec::max_abs(l);
  auto note = [&](const Mat& m) { work_max = std::fmax(work_max, prec::max_abs(m)); };

  // X0: the truncated series, then the diagonal mask.
  // -L: exact (INT16: q = -32768 saturates to 32767, counted).
  const Mat neg = eng.int16 ? eng.add(Mat::Zero(c, c), l, -1.0) : Mat(-l);
  Mat x0 = eng.add(id, neg), p = neg;
  note(x0);
  for (int n = 2; n <= order; ++n) {
    p = eng.mm(p, neg);
    note(p);
    if (keep) run.intermediates.push_back({"(-L)^" + std::to_string(n), p});
    x0 = eng.add(x0, p);
    note(x0);
  }
  for (int i = 0; i < c; ++i)
    for (int j = 0; j < c; ++j)
      if (i - j >= band) x0(i, j) = 0.0;
  if (keep) run.intermediates.push_back({"X0 (masked)", x0});
  const double before = residual_max(l, x0);

  Mat x = x0;
  for (int s = 0; s < steps; ++s) {
    const Mat lx = eng.mm(l, x);
    const Mat r = eng.add(eng.add(id, x, -1.0), lx, -1.0);  // (I - X) - L X
    const Mat corr = eng.mm(x0, r);
    x = eng.add(x, corr);
    note(lx);
    note(r);
    note(corr);
    note(x);
    if (keep && (s == 0 || s + 1 == steps)) {
      run.intermediates.push_back({"R_" + std::to_string(s), r});
      run.intermediates.push_back({"X_" + std::to_string(s + 1), x});
    }
  }
  run.inv = x;
  run.diagnostics = {before, residual_max(l, x), work_max, eng.saturations};
  return run;
}

}  // namespace

namespace gpu {
extern const GpuInverse kResidualNeumannGpu;  // gpu_form.cpp
}  // namespace gpu

extern const MethodSpec kResidualNeumannMethod{
    .name = "residual_neumann",
    .arithmetic = "truncated Neumann with diagonal mask and residual correction (arXiv 2606.06034, reconstructed): X0 "
                  "= sum_{n<=N} (-L)^n with entries i - j >= band zeroed (band 0: N + 1); S times R = (I - X) - L X, "
                  "X = X + X0 R; format=fp32 (FMA chain), bf16 (mma.sync BF16 -> FP32), fp16 (mma.sync FP16 -> FP16) "
                  "or int16 (fixed point with frac_bits fraction bits, exact integer products, round-to-nearest-even "
                  "shifts, saturation counted)",
    .diagnostics = kDiagnostics,
    .invert = invert_residual_neumann,
    .params = kParams,
    .parse = parse_as<ResidualNeumannParams>,
    .gpu_form = &gpu::kResidualNeumannGpu,
};

}  // namespace chunkinv

#include "methods/precision.hpp"

#include <cmath>

#include "arith/tensor_core.hpp"

namespace chunkinv::prec {

double operand(double x, Arith a) {
  switch (a) {
    case Arith::kFP32: return fp32(x);
    case Arith::kTF32: return chunkinv::round_to(fp32(x), kTF32);
    case Arith::kBF16Seq:
    case Arith::kBF16Mma: return bf16(x);
    case Arith::kFP16Mma: return fp16(x);
  }
  return x;
}

double storage(double x, Arith a) { return a == Arith::kFP16Mma ? fp16(x) : fp32(x); }

Mat round_operand(const Mat& m, Arith a) {
  return m.unaryExpr([a](double v) { return operand(v, a); });
}
Mat round_storage(const Mat& m, Arith a) {
  return m.unaryExpr([a](double v) { return storage(v, a); });
}
Mat round_to(const Mat& m, Format f) {
  return m.unaryExpr([f](double v) { return chunkinv::round_to(v, f); });
}

Mat round_input(const Mat& l, Arith a) { return a == Arith::kTF32 ? round_to(l, kFP32) : round_operand(l, a); }

float fma_chain(const float* a, const float* b, int n, int b_stride) {
  float acc = 0.0f;
  for (int k = 0; k < n; ++k) acc = std::fmaf(a[k], b[static_cast<size_t>(k) * b_stride], acc);
  return acc;
}

namespace {

// The FP32 FMA chain over whole matrices (operands already rounded).
Mat matmul_fma(const Mat& a, const Mat& b) {
  const int m = static_cast<int>(a.rows()), k = static_cast<int>(a.cols()), n = static_cast<int>(b.cols());
  std::vector<float> af(static_cast<size_t>(m) * k), bf(static_cast<size_t>(k) * n);
  for (size_t i = 0; i < af.size(); ++i) af[i] = static_cast<float>(a.data()[i]);
  for (size_t i = 0; i < bf.size(); ++i) bf[i] = static_cast<float>(b.data()[i]);
  Mat d(m, n);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) d(i, j) = fma_chain(af.data() + static_cast<size_t>(i) * k, bf.data() + j, k, n);
  return d;
}

// The tensor-core model wants k in whole 16-blocks: zero-pad a's columns and b's rows.
Mat matmul_mma(const Mat& a, const Mat& b, bool fp16_acc) {
  const Eigen::Index k = a.cols(), kp = (k + 15) / 16 * 16;
  if (kp == k) return fp16_acc ? tc::matmul_f16(a, b) : tc::matmul_bf16_f32(a, b);
  Mat ap = Mat::Zero(a.rows(), kp), bp = Mat::Zero(kp, b.cols());
  ap.leftCols(k) = a;
  bp.topRows(k) = b;
  return fp16_acc ? tc::matmul_f16(ap, bp) : tc::matmul_bf16_f32(ap, bp);
}

}  // namespace

Mat matmul(const Mat& a, const Mat& b, Arith arith) {
  const Mat ar = round_operand(a, arith), br = round_operand(b, arith);
  switch (arith) {
    case Arith::kFP32:
    case Arith::kTF32:
    case Arith::kBF16Seq: return matmul_fma(ar, br);
    case Arith::kBF16Mma: return matmul_mma(ar, br, false);
    case Arith::kFP16Mma: return matmul_mma(ar, br, true);
  }
  return {};
}

Mat add(const Mat& a, const Mat& b, Arith arith) {
  Mat r(a.rows(), a.cols());
  for (Eigen::Index i = 0; i < a.size(); ++i) r.data()[i] = storage(a.data()[i] + b.data()[i], arith);
  return r;
}

Mat sub(const Mat& a, const Mat& b, Arith arith) {
  Mat r(a.rows(), a.cols());
  for (Eigen::Index i = 0; i < a.size(); ++i) r.data()[i] = storage(a.data()[i] - b.data()[i], arith);
  return r;
}

Mat column_substitution_inverse(const Mat& a, int r0, int b) {
  std::vector<float> x(static_cast<size_t>(b) * b, 0.0f);
  auto at = [&](int i, int j) { return static_cast<float>(a(r0 + i, r0 + j)); };
  for (int s = 0; s + 1 < b; ++s)
    for (int r = s + 1; r < b; ++r) {
      const float scale = -at(r, s);
      for (int p = 0; p < s; ++p) x[r * b + p] = std::fmaf(scale, x[s * b + p], x[r * b + p]);
      x[r * b + s] = scale;
    }
  Mat out(b, b);
  for (int i = 0; i < b; ++i)
    for (int j = 0; j < b; ++j) out(i, j) = i == j ? 1.0 : double(x[i * b + j]);
  return out;
}

double max_abs(const Mat& m) {
  double r = 0.0;
  for (Eigen::Index i = 0; i < m.size(); ++i) {
    const double v = m.data()[i];
    if (!std::isfinite(v)) return INFINITY;
    r = std::fmax(r, std::fabs(v));
  }
  return r;
}

Mat pad(const Mat& m, int n) {
  Mat p = Mat::Zero(n, n);
  p.topLeftCorner(m.rows(), m.cols()) = m;
  return p;
}

std::string_view name(Arith a) {
  switch (a) {
    case Arith::kFP32: return "FP32 (FMA chain, k ascending)";
    case Arith::kTF32: return "TF32 operands (nearest even), FP32 accumulation";
    case Arith::kBF16Seq: return "BF16 operands, FP32 FMA accumulation";
    case Arith::kBF16Mma: return "BF16 operands on mma.sync, FP32 accumulation";
    case Arith::kFP16Mma: return "FP16 operands on mma.sync, FP16 accumulation";
  }
  return "";
}

Arith tt_arith(const std::string& precision) {
  return precision == "bf16" ? Arith::kBF16Seq : precision == "tf32" ? Arith::kTF32 : Arith::kFP32;
}

}  // namespace chunkinv::prec

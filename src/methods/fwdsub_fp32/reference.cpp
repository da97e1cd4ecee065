// Method `fwdsub_fp32`: plain FP32 forward substitution of (I + A) X = I,
// A = fp32(L) strictly lower, row by row. For row i and column j < i:
//   acc = 0; for k = j .. i-1 (ascending): acc = fp32(acc + fp32(A[i][k] * X[k][j]));
//   X[i][j] = -acc
// with X[i][i] = 1 and X[i][j] = 0 above the diagonal. Every product and
// every sum is rounded to FP32 once, in that order (no FMA: the project
// builds with -ffp-contract=off), so the result is the same bits on every
// machine. The slow, obvious reference of any FP32 substitution kernel.
#include <cmath>

#include "methods/method.hpp"

namespace chunkinv {
namespace {

const MetricInfo kDiagnostics[] = {
    {"inv_max", MetricKind::kValue, "max |entry| of the FP32 inverse; inf if any is non-finite (overflow)"},
};

InverseRun invert_fwdsub_fp32(const Mat& l, const Method&, bool keep) {
  const int c = static_cast<int>(l.rows());
  std::vector<float> a(size_t(c) * c), x(size_t(c) * c, 0.0f);
  for (int i = 0; i < c; ++i)
    for (int j = 0; j < i; ++j) a[size_t(i) * c + j] = static_cast<float>(l(i, j));
  double inv_max = 1.0;  // the unit diagonal
  for (int i = 0; i < c; ++i) {
    x[size_t(i) * c + i] = 1.0f;
    for (int j = 0; j < i; ++j) {
      float acc = 0.0f;
      for (int k = j; k < i; ++k) {
        const float prod = a[size_t(i) * c + k] * x[size_t(k) * c + j];
        acc = acc + prod;
      }
      const float v = -acc;
      x[size_t(i) * c + j] = v;
      inv_max = std::isfinite(v) ? std::fmax(inv_max, std::fabs(double(v))) : INFINITY;
    }
  }
  InverseRun run;
  run.inv = Mat(c, c);
  for (int i = 0; i < c; ++i)
    for (int j = 0; j < c; ++j) run.inv(i, j) = x[size_t(i) * c + j];
  run.diagnostics = {inv_max};
  if (keep) {
    Mat af(c, c);
    for (int i = 0; i < c; ++i)
      for (int j = 0; j < c; ++j) af(i, j) = a[size_t(i) * c + j];
    run.intermediates.push_back({"A = fp32(L)", af});
  }
  return run;
}

}  // namespace

extern const MethodSpec kFwdsubFp32Method{
    .name = "fwdsub_fp32",
    .arithmetic = "FP32 forward substitution of (I + fp32(L)) X = I, row by row: X[i][j] = -sum_{k=j}^{i-1} A[i][k] "
                  "X[k][j], each product and each partial sum rounded to FP32, k ascending, no FMA",
    .diagnostics = kDiagnostics,
    .invert = invert_fwdsub_fp32,
};

}  // namespace chunkinv

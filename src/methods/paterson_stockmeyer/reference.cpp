// Method `paterson_stockmeyer`: the Paterson-Stockmeyer evaluation of the
// Neumann polynomial that tt-metal's `invert_block_ps4` used (PR #54937,
// issue #55420: "exact in algebra but loses conditioning at Kimi-K3's real
// decay magnitudes"). With N = -L and s baby steps (PS4: s = 4):
//   baby steps  N^2, ..., N^s (s - 1 products), B = I + N + ... + N^(s-1)
//               (FP32 sums, ascending), giant step G = N^s;
//   giant steps X = B, then m - 1 times X = B + G X, m = ceil(C / s),
// so that X = B (I + G + G^2 + ... + G^(m-1)) = sum_{k < m s} N^k. The
// kernel applied it per 16x16 face of a 32x32 tile and merged the faces
// ("2x2 face-blocked"); this reference applies it to the whole chunk
// (reconstructed from the PR and issue text, not checked against the code).
// precision: as `doubling` (methods/precision.hpp).
#include <cmath>
#include <string>

#include "methods/method.hpp"
#include "methods/paterson_stockmeyer/params.hpp"
#include "methods/precision.hpp"

namespace chunkinv {
namespace {

const MetricInfo kDiagnostics[] = {
    {"power_max", MetricKind::kValue, "max |entry| over N = -L and the powers N^2..N^s formed; inf if any is non-finite"},
    {"work_max", MetricKind::kValue, "max |entry| over every power, B, product G X and partial X; inf if any is non-finite"},
};

const MethodParam kParams[] = {
    {"s", "4", {}, 2, 8, "baby steps: powers N..N^s are formed, G = N^s is the giant step (PS4: s = 4)"},
    {"precision", "fp32", prec::kTtPrecisionChoices, 0, 0, prec::kTtPrecisionHelp},
};

InverseRun invert_paterson_stockmeyer(const Mat& l_in, const Method& method, bool keep) {
  const PatersonStockmeyerParams& p = method.params<PatersonStockmeyerParams>();
  const prec::Arith arith = p.arith;
  const int s = p.s;
  const int c = static_cast<int>(l_in.rows());
  const Mat n = -prec::round_input(l_in, arith);
  InverseRun run;
  if (keep) run.intermediates.push_back({"N = -L", n});
  Mat b = prec::add(Mat::Identity(c, c), n, arith), g = n;
  double power_max = prec::max_abs(n);
  for (int k = 2; k <= s; ++k) {
    g = prec::matmul(g, n, arith);  // N^k
    power_max = std::fmax(power_max, prec::max_abs(g));
    if (keep) run.intermediates.push_back({"N^" + std::to_string(k), g});
    if (k < s) b = prec::add(b, g, arith);
  }
  if (keep) run.intermediates.push_back({"B = I + N + ... + N^" + std::to_string(s - 1), b});
  double work_max = std::fmax(power_max, prec::max_abs(b));
  const int m = (c + s - 1) / s;
  Mat x = b;
  for (int j = 1; j < m; ++j) {
    const Mat t = prec::matmul(g, x, arith);
    x = prec::add(b, t, arith);
    work_max = std::fmax(work_max, std::fmax(prec::max_abs(t), prec::max_abs(x)));
  }
  run.inv = x;
  run.diagnostics = {power_max, work_max};
  return run;
}

}  // namespace

extern const MethodSpec kPatersonStockmeyerMethod{
    .name = "paterson_stockmeyer",
    .arithmetic = "Paterson-Stockmeyer Neumann polynomial (tt-metal invert_block_ps4, whole chunk): N = -L; powers "
                  "N..N^s (s = 4), B = I + N + ... + N^(s-1), G = N^s; X = B, then ceil(C/s) - 1 times X = B + G X; "
                  "precision=fp32 (FMA chain), tf32 or bf16 operands, FP32 accumulation and sums",
    .diagnostics = kDiagnostics,
    .invert = invert_paterson_stockmeyer,
    .params = kParams,
    .parse = parse_as<PatersonStockmeyerParams>,
};

}  // namespace chunkinv

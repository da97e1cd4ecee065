// Method `horner`: the Horner form tt-metal's KDA inverse used before and
// after `invert_doubling` (issues #54813, #55420: "~4x the matmuls and
// survives only because its nested form never materializes a high power of
// N"): with N = -L,
//   (I + L)^-1 = I + N(I + N(I + ... (I + N))),  C - 1 nested factors,
// evaluated as X = I + N, then C - 2 times X = I + N X. The kernel applied it
// on masked 16x16 faces; this reference applies it to the whole chunk
// (reconstructed, the tiling not checked against the source).
// precision: as `doubling` (methods/precision.hpp).
#include <cmath>

#include "methods/horner/params.hpp"
#include "methods/method.hpp"
#include "methods/precision.hpp"

namespace chunkinv {
namespace {

const MetricInfo kDiagnostics[] = {
    {"work_max", MetricKind::kValue, "max |entry| over N = -L, every product N X and every partial X; inf if any is non-finite"},
};

const MethodParam kParams[] = {
    {"precision", "fp32", prec::kTtPrecisionChoices, 0, 0, prec::kTtPrecisionHelp},
};

InverseRun invert_horner(const Mat& l_in, const Method& method, bool keep) {
  const prec::Arith arith = method.params<HornerParams>().arith;
  const int c = static_cast<int>(l_in.rows());
  const Mat n = -prec::round_input(l_in, arith);
  const Mat id = Mat::Identity(c, c);
  InverseRun run;
  if (keep) run.intermediates.push_back({"N = -L", n});
  Mat x = prec::add(id, n, arith);
  double work_max = std::fmax(prec::max_abs(n), prec::max_abs(x));
  for (int k = 2; k < c; ++k) {
    const Mat t = prec::matmul(n, x, arith);
    x = prec::add(id, t, arith);
    work_max = std::fmax(work_max, std::fmax(prec::max_abs(t), prec::max_abs(x)));
    if (keep && (k & (k - 1)) == 0) run.intermediates.push_back({"X (degree " + std::to_string(k) + ")", x});
  }
  run.inv = x;
  run.diagnostics = {work_max};
  return run;
}

}  // namespace

extern const MethodSpec kHornerMethod{
    .name = "horner",
    .arithmetic = "Horner form of the Neumann series (tt-metal's KDA inverse): N = -L; X = I + N, then C - 2 times X "
                  "= I + N X; precision=fp32 (FMA chain), tf32 or bf16 operands, FP32 accumulation and sums",
    .diagnostics = kDiagnostics,
    .invert = invert_horner,
    .params = kParams,
    .parse = parse_as<HornerParams>,
};

}  // namespace chunkinv

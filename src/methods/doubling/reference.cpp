// Method `doubling`: tt-metal's `invert_doubling` (prepare_chunk_recurrence,
// Kimi-K3 KDA; retired in issue #54813): with N = -L,
//   (I + L)^-1 = (I + N)(I + N^2)(I + N^4)...(I + N^(2^(r-1))),  2^r >= C,
// evaluated as S = I + N, P = N; per round P = P P, S = S + P S (the power on
// the left, as the kernel's matmul(power, sum)). Exact in real arithmetic,
// two products per round; its powers N^(2^k) grow to O(1e2) where the answer
// is O(1) (the diagnosis), so their rounding error is what breaks it.
// precision: fp32 (FP32 FMA chain), tf32 or bf16 operands with FP32
// accumulation and FP32 sums (methods/precision.hpp); Tensix's own matmul
// arithmetic (fidelity phases) is not modelled.
#include <cmath>
#include <string>

#include "methods/doubling/params.hpp"
#include "methods/method.hpp"
#include "methods/precision.hpp"

namespace chunkinv {
namespace {

const MetricInfo kDiagnostics[] = {
    {"power_max", MetricKind::kValue, "max |entry| over N = -L and every power N^(2^k) formed; inf if any is non-finite"},
    {"work_max", MetricKind::kValue, "max |entry| over every power, product P S and partial product S; inf if any is non-finite"},
};

const MethodParam kParams[] = {
    {"precision", "fp32", prec::kTtPrecisionChoices, 0, 0, prec::kTtPrecisionHelp},
};

InverseRun invert_doubling(const Mat& l_in, const Method& method, bool keep) {
  const prec::Arith arith = method.params<DoublingParams>().arith;
  const int c = static_cast<int>(l_in.rows());
  const Mat n = -prec::round_input(l_in, arith);  // exact negation
  const Mat id = Mat::Identity(c, c);
  InverseRun run;
  if (keep) run.intermediates.push_back({"N = -L", n});
  Mat s = prec::add(id, n, arith), p = n;
  double power_max = prec::max_abs(n), work_max = std::fmax(power_max, prec::max_abs(s));
  for (int e = 2; e < c; e *= 2) {  // S covers N^0..N^(e-1); one more factor while e < C
    p = prec::matmul(p, p, arith);
    power_max = std::fmax(power_max, prec::max_abs(p));
    if (keep) run.intermediates.push_back({"N^" + std::to_string(e), p});
    const Mat t = prec::matmul(p, s, arith);
    s = prec::add(s, t, arith);
    work_max = std::fmax(work_max, std::fmax(prec::max_abs(t), prec::max_abs(s)));
    if (keep) run.intermediates.push_back({"S (through N^" + std::to_string(2 * e - 1) + ")", s});
  }
  run.inv = s;
  run.diagnostics = {power_max, std::fmax(work_max, power_max)};
  return run;
}

}  // namespace

extern const MethodSpec kDoublingMethod{
    .name = "doubling",
    .arithmetic = "tt-metal invert_doubling: N = -L; S = I + N, P = N; while the product covers fewer than C powers: "
                  "P = P P, S = S + P S (=(I + N)(I + N^2)(I + N^4)...); precision=fp32 (FMA chain), tf32 or bf16 "
                  "operands, FP32 accumulation and sums",
    .diagnostics = kDiagnostics,
    .invert = invert_doubling,
    .params = kParams,
    .parse = parse_as<DoublingParams>,
};

}  // namespace chunkinv

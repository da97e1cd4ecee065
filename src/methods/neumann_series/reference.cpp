// Method `neumann_series`: the Neumann series of (I + L)^-1 = sum_n (-L)^n,
// truncated, in one of two forms and three accumulations.
//
//   form=series   INV = sum_{n=0}^{N-1} (-L)^n with N = inv_iters terms
//                 (0: N = C, all of them, exact in real arithmetic):
//                 M = -L; INV = I + M; P = M; for n = 2..N-1: P = P M, INV = INV + P.
//   form=product  INV = (I - L)(I + L^2)(I + L^4)... with `rounds` factors
//                 (0: ceil(log2 C), all of them): INV = I - L; P = L; then per
//                 round P = P P, INV = INV + INV P. With accum=fp16 and all
//                 rounds this is `neumann` bit for bit.
//
// accum: fp16 (FP16 operands, mma.sync with FP16 accumulation, FP16 adds:
// the article's kernel), bf16 (BF16 operands, mma.sync with FP32
// accumulation, FP32 adds) or fp32 (FP32 FMA chain, FP32 adds). L is rounded
// to the operand format first; C is zero-padded to a multiple of 16 (the mma
// tiles; exact).
#include <cmath>
#include <string>

#include "methods/method.hpp"
#include "methods/neumann_series/params.hpp"
#include "methods/precision.hpp"

namespace chunkinv {
namespace {

using prec::Arith;

const MetricInfo kDiagnostics[] = {
    {"highest_power", MetricKind::kValue, "exponent of the highest power of L formed"},
    {"last_term_max", MetricKind::kValue,
     "max |entry| of the last term added (series: (-L)^(N-1); product: INV P of the last round); "
     "inf if non-finite"},
    {"work_max", MetricKind::kValue, "max |entry| over L, every power, term and partial sum; inf if any is non-finite"},
};

const std::string_view kFormChoices[] = {"series", "product"};
const std::string_view kAccumChoices[] = {"fp16", "bf16", "fp32"};
const MethodParam kParams[] = {
    {"form", "series", kFormChoices, 0, 0, "series: sum of N terms; product: (I - L)(I + L^2)(I + L^4)..."},
    {"inv_iters", "0", {}, 0, 64, "series: number of terms N (0: C, every term)"},
    {"rounds", "0", {}, 0, 7, "product: number of factors (0: ceil(log2 C), every factor)"},
    {"accum", "fp16", kAccumChoices, 0, 0,
     "fp16: FP16 mma accumulation and adds; bf16: BF16 operands, FP32 mma accumulation; fp32: FP32 FMA chain"},
};

InverseRun invert_neumann_series(const Mat& l_in, const Method& method, bool keep) {
  const NeumannSeriesParams& params = method.params<NeumannSeriesParams>();
  const Arith arith = params.arith;
  const int c = static_cast<int>(l_in.rows()), cp = (c + 15) / 16 * 16;
  const Mat l = prec::pad(prec::round_operand(l_in, arith), cp);
  const Mat id = Mat::Identity(cp, cp);
  InverseRun run;
  if (keep) run.intermediates.push_back({"L", l.topLeftCorner(c, c)});
  double work_max = prec::max_abs(l), last = 0.0;
  int highest = 1;
  auto note = [&](const Mat& m) {
    const double v = prec::max_abs(m);
    work_max = std::fmax(work_max, v);
    return v;
  };
  Mat inv;
  if (!params.product) {
    int terms = params.inv_iters;
    if (terms == 0) terms = c;
    const Mat m = -l;  // exact
    if (terms == 1) {
      inv = id;
      last = 1.0;
      highest = 0;
    } else {
      inv = prec::add(id, m, arith);
      note(inv);
      Mat p = m;
      last = prec::max_abs(m);
      for (int n = 2; n < terms; ++n) {
        p = prec::matmul(p, m, arith);
        last = note(p);
        highest = n;
        if (keep) run.intermediates.push_back({"(-L)^" + std::to_string(n), p.topLeftCorner(c, c)});
        inv = prec::add(inv, p, arith);
        note(inv);
      }
    }
  } else {
    int rounds = params.rounds;
    if (rounds == 0)
      while ((1 << rounds) < c) ++rounds;
    rounds = std::max(rounds, 1);
    inv = prec::sub(id, l, arith);
    note(inv);
    last = prec::max_abs(l);
    Mat p = l;
    for (int r = 1; r < rounds; ++r) {
      p = prec::matmul(p, p, arith);
      highest *= 2;
      note(p);
      if (keep) run.intermediates.push_back({"L^" + std::to_string(highest), p.topLeftCorner(c, c)});
      const Mat t = prec::matmul(inv, p, arith);
      last = note(t);
      inv = prec::add(inv, t, arith);
      note(inv);
    }
  }
  run.inv = inv.topLeftCorner(c, c);
  run.diagnostics = {static_cast<double>(highest), last, work_max};
  return run;
}

}  // namespace

extern const MethodSpec kNeumannSeriesMethod{
    .name = "neumann_series",
    .arithmetic = "truncated Neumann series of (I + L)^-1: form=series: sum_{n<N} (-L)^n, powers by repeated right "
                  "multiplication, N = inv_iters (0: C); form=product: (I - L)(I + L^2)(I + L^4)... with `rounds` "
                  "factors (0: all), INV = INV + INV P; accum=fp16 (mma.sync FP16 accumulation, FP16 adds), bf16 "
                  "(BF16 operands, FP32 accumulation) or fp32 (FMA chain); C zero-padded to a multiple of 16",
    .diagnostics = kDiagnostics,
    .invert = invert_neumann_series,
    .params = kParams,
    .parse = parse_as<NeumannSeriesParams>,
};

}  // namespace chunkinv

// residual_neumann: the documented order on hand-made cases (FP32 and INT16
// fixed point), exactness once (N+1)(S+1) >= C, the residual diagnostics,
// FP64 on random cases, the known inverse, INT16 saturation, and overflow.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/fp.hpp"
#include "methods/method_cases.hpp"
#include "methods/residual_neumann/params.hpp"
#include "support/usage_error.hpp"

using namespace chunkinv;
using namespace chunkinv::testing;

TEST(ResidualNeumann, HandMadeFp32CaseInTheDocumentedOrder) {
  // C = 3, N = 1, band 2: X0 = I - (the subdiagonal of L); X0(2,0) = 0. S = 1:
  // R = (I - X0) - L X0 with (L X0)(2,0) = fmaf(l21, -l10, fmaf(l20, 1, 0)); R10 = R21 = 0;
  // X = X0 + X0 R, (X0 R)(2,0) = fmaf(1, R20, fmaf(-l21, R10, fmaf(0, R00, 0))) = R20.
  Mat l = Mat::Zero(3, 3);
  l(1, 0) = 0.1;
  l(2, 0) = 0.3;
  l(2, 1) = 0.7;
  const float l10 = 0.1f, l20 = 0.3f, l21 = 0.7f;
  const float lx20 = std::fmaf(l21, -l10, std::fmaf(l20, 1.0f, 0.0f));
  const float r20 = (0.0f - 0.0f) - lx20;
  const InverseRun r = with("residual_neumann:order=1:steps=1").invert(l, true);
  EXPECT_EQ(r.inv(2, 0), double(0.0f + std::fmaf(1.0f, r20, 0.0f)));
  EXPECT_EQ(r.inv(1, 0), double(-l10));
  EXPECT_EQ(r.inv(2, 1), double(-l21));
  // residual_before = |I - (I + L) X0| at (2,0), in FP64 on the FP32 values, k ascending.
  const double s20 = 0.0 + double(l20) * 1.0 + double(l21) * -double(l10);
  EXPECT_EQ(r.diagnostics[0], std::fabs(0.0 - s20));
  EXPECT_LT(r.diagnostics[1], 1e-7);  // residual_after: exact up to FP32 rounding (N+1)(S+1) = 4 >= 3
  EXPECT_EQ(r.diagnostics[3], 0.0);   // saturations
  EXPECT_EQ(r.intermediates.at(1).label, "X0 (masked)");
  EXPECT_EQ(r.intermediates.at(1).m(2, 0), 0.0);
}

TEST(ResidualNeumann, HandMadeInt16CaseWithItsRoundings) {
  // f = 4 fraction bits: 0.3 -> 5/16 (4.8 rounds up), 0.7 -> 11/16 (11.2 rounds down), 0.25 -> 4/16.
  // N = 2, band 3, S = 0: X0 = I - L + L^2; (L^2)(2,0): q = (11 * 4) / 16 = 2.75 rounds to 3.
  Mat l = Mat::Zero(3, 3);
  l(1, 0) = 0.25;
  l(2, 0) = 0.3;
  l(2, 1) = 0.7;
  const InverseRun r = with("residual_neumann:format=int16:frac_bits=4:order=2:steps=0").invert(l, true);
  EXPECT_EQ(r.inv(1, 0), -4.0 / 16);
  EXPECT_EQ(r.inv(2, 1), -11.0 / 16);
  EXPECT_EQ(r.inv(2, 0), (-5.0 + 3.0) / 16);  // -l20 + (l21 l10), each on the 1/16 grid
  EXPECT_EQ(r.diagnostics[3], 0.0);
  EXPECT_EQ(r.intermediates.at(0).m(2, 0), 5.0 / 16);  // L as quantized
}

TEST(ResidualNeumann, ExactOnceTheCorrectionCoversTheChunk) {
  // E = I - (I + L) X0 has nothing within N of the diagonal; S steps raise it to E^(S+1).
  const Mat ones = ones_inverse_case(64);
  for (const char* fmt : {"fp32", "bf16", "fp16", "int16"}) {
    const std::string base = std::string("residual_neumann:format=") + fmt;
    // (3+1)(8+1) = 36 < 64: not exact; (7+1)(7+1) = 64: exact.
    const InverseRun d = with(base.c_str()).invert(ones, false);
    EXPECT_FALSE(d.inv == all_ones_lower(64)) << fmt;
    EXPECT_GT(d.diagnostics[1], 0.5) << fmt;  // residual_after
    const InverseRun e = with((base + ":order=7:steps=7").c_str()).invert(ones, false);
    EXPECT_TRUE(e.inv == all_ones_lower(64)) << fmt;
    EXPECT_EQ(e.diagnostics[1], 0.0) << fmt;
    EXPECT_EQ(e.diagnostics[0], 1.0) << fmt;  // residual_before: E = (-L)^8 masked, entries 1
  }
}

TEST(ResidualNeumann, TheCorrectionShrinksTheResidualAndTheMaskCutsX0) {
  const Mat l = random_strict_lower(32, 0.5, 6, 0.5);
  const InverseRun r = with("residual_neumann:order=1:steps=3").invert(l, false);
  EXPECT_GT(r.diagnostics[0], 1e-3);
  EXPECT_LT(r.diagnostics[1], 1e-3 * r.diagnostics[0]);
  // The mask: band 2 keeps the subdiagonal of I - L only; band 64 keeps all of it.
  const InverseRun masked = with("residual_neumann:order=1:steps=0").invert(l, false);
  const InverseRun full = with("residual_neumann:order=1:steps=0:band=64").invert(l, false);
  for (int i = 0; i < 32; ++i)
    for (int j = 0; j + 2 <= i; ++j) {
      EXPECT_EQ(masked.inv(i, j), 0.0);
      EXPECT_EQ(full.inv(i, j), -fp32(l(i, j)));
    }
  EXPECT_GT(masked.diagnostics[0], full.diagnostics[0]);  // residual_before: the mask costs accuracy...
  EXPECT_LT(with("residual_neumann:order=1:steps=3:band=64").invert(l, false).diagnostics[1], 1e-3);  // ...fixed by S
}

TEST(ResidualNeumann, CloseToFp64OnRandomCases) {
  struct Case {
    const char* format;
    double u;
    double (*round)(double);
  };
  for (const Case k : {Case{"fp32", kUFP32, fp32}, Case{"bf16", kUBF16, bf16}, Case{"fp16", kUFP16, fp16}})
    for (uint64_t seed = 0; seed < 8; ++seed) {
      const int c = 2 + int(seed * 9 % (k.u == kUBF16 ? 8 : 35));  // (3+1)(8+1) = 36 >= C: exact in algebra
      const Mat l = random_strict_lower(c, 0.5, seed, 0.8);
      const double tol = bound(c, k.u, series_growth(l));
      ASSERT_LT(tol, 0.3) << "the bound must be able to fail";
      const std::string m = std::string("residual_neumann:format=") + k.format;
      EXPECT_LT(rel(with(m.c_str()).invert(l, false).inv, unit_lower_inverse(l.unaryExpr(k.round))), tol)
          << m << " C=" << c;
    }
  // INT16 with f fraction bits: the absolute error of each value is about 2^-(f+1) per step.
  for (uint64_t seed = 0; seed < 4; ++seed) {
    // Against the exact inverse of the quantized L (the method's input): every entry is ~2 C
    // roundings of half a step 2^-13 through growth G; C^2 entries make C in the F-norm.
    const Mat l = random_strict_lower(24, 0.5, seed, 0.8);
    const InverseRun r = with("residual_neumann:format=int16").invert(l, true);
    const Mat exact = unit_lower_inverse(r.intermediates.at(0).m);
    const double tol = 2.0 * 24 * 0x1p-13 * series_growth(l) * 24 / exact.norm();
    ASSERT_LT(tol, 0.3);
    EXPECT_LT(rel(r.inv, exact), tol) << seed;
    EXPECT_EQ(r.diagnostics[3], 0.0);
  }
}

TEST(ResidualNeumann, ExactOnTheKnownInverseUpToItsReach) {
  expect_exact_on_known_inverse({"residual_neumann", "residual_neumann:format=int16", "residual_neumann:format=fp16"}, 36);
}

TEST(ResidualNeumann, Int16SaturationIsCounted) {
  // f = 12: the range is [-8, 8). An entry of 10 saturates when quantized, and the
  // powers of a subdiagonal of 3 (9, 27) saturate in the products.
  Mat l = Mat::Zero(4, 4);
  l(1, 0) = 10.0;
  const InverseRun a = with("residual_neumann:format=int16:steps=0").invert(l, false);
  EXPECT_GE(a.diagnostics[3], 1.0);
  EXPECT_EQ(a.inv(1, 0), -32767.0 / 4096);  // clamped to 32767/4096, then negated
  Mat m = Mat::Zero(4, 4);
  for (int i = 1; i < 4; ++i) m(i, i - 1) = 3.0;
  const InverseRun b = with("residual_neumann:format=int16:steps=0").invert(m, false);
  EXPECT_GE(b.diagnostics[3], 1.0);
  EXPECT_EQ(with("residual_neumann:format=fp32:steps=0").invert(m, false).diagnostics[3], 0.0);
}

TEST(ResidualNeumann, OverflowShowsInTheDiagnostics) {
  Mat l = Mat::Zero(8, 8);
  for (int i = 1; i < 8; ++i) l(i, i - 1) = 300.0;
  const InverseRun r = with("residual_neumann:format=fp16").invert(l, false);  // 300^2 > 65504
  EXPECT_TRUE(std::isinf(r.diagnostics[2]));  // work_max
  EXPECT_TRUE(std::isinf(r.diagnostics[1]));  // residual_after
  const InverseRun f = with("residual_neumann").invert(l, false);  // FP32: finite
  EXPECT_TRUE(std::isfinite(f.diagnostics[2]));
}

// The typed parameters, made once from the axis value: band 0 stands for
// order + 1; a wrong value is refused in one line naming it and what is allowed.
TEST(ResidualNeumann, TypedParametersFromTheAxisValue) {
  const ResidualNeumannParams d = method_of(find_method("residual_neumann")).params<ResidualNeumannParams>();
  EXPECT_EQ(d.band, d.order + 1);
  EXPECT_EQ(d.format, ResidualFormat::kFp32);
  const ResidualNeumannParams p =
      parse_method("residual_neumann:order=5:steps=2:band=2:format=int16:frac_bits=10").params<ResidualNeumannParams>();
  EXPECT_EQ(p.order, 5);
  EXPECT_EQ(p.steps, 2);
  EXPECT_EQ(p.band, 2);
  EXPECT_EQ(p.format, ResidualFormat::kInt16);
  EXPECT_EQ(p.frac_bits, 10);
  EXPECT_EQ(parse_method("residual_neumann:order=5").params<ResidualNeumannParams>().band, 6);
  const std::string why = usage_error([] { parse_method("residual_neumann:format=int8"); });
  EXPECT_EQ(why, "method residual_neumann: format = int8 must be one of fp32, bf16, fp16, int16");
}

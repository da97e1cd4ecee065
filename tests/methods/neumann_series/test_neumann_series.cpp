// neumann_series: the documented order on a hand-made case, the product form
// against `neumann` bit for bit, truncation against the FP64 truncated
// series, FP64 on random cases in the three accumulations, the known inverse,
// padding invariance, and the FP16 overflow of the powers.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/fp.hpp"
#include "inputs/family.hpp"
#include "methods/method_cases.hpp"
#include "methods/precision.hpp"
#include "paths/emulated/emulated.hpp"

using namespace chunkinv;
using namespace chunkinv::testing;

namespace {

// sum_{n<N} (-L)^n in FP64.
Mat truncated_series(const Mat& l, int terms) {
  const int c = static_cast<int>(l.rows());
  Mat sum = Mat::Identity(c, c), p = Mat::Identity(c, c);
  for (int n = 1; n < terms; ++n) {
    p = p * (-l);
    sum += p;
  }
  return sum;
}

Mat emulated_l(int c, uint64_t sample) {
  Configuration cfg{"model_like", c, 64, {{"decay_floor", -5.0}}};
  const Sample s = find_family("model_like").make(cfg, 5, sample);
  std::vector<double> dec, inv;
  emulated::decays(s, dec, inv);
  return emulated::kernel_l(s, dec, inv);
}

}  // namespace

TEST(NeumannSeries, HandMadeFp32SeriesInTheDocumentedOrder) {
  // C = 4, every term, M = -L on the subdiagonal only: P2 = M M, P3 = P2 M (powers multiplied on
  // the right); INV(3,0) = P3(3,0) = fmaf(fmaf(m32, m21, 0), m10, 0), which differs from
  // m32 (m21 m10) for these values.
  Mat l = Mat::Zero(4, 4);
  l(1, 0) = double(1.0f / 7);
  l(2, 1) = double(0.1f);
  l(3, 2) = double(0.1f);
  const float m10 = -(1.0f / 7), m21 = -0.1f, m32 = -0.1f;
  const float p3 = std::fmaf(std::fmaf(m32, m21, 0.0f), m10, 0.0f);
  ASSERT_NE(p3, std::fmaf(m32, std::fmaf(m21, m10, 0.0f), 0.0f));
  const InverseRun r = with("neumann_series:accum=fp32").invert(l, true);
  EXPECT_EQ(r.inv(3, 0), double(p3));
  EXPECT_EQ(r.inv(2, 0), double(std::fmaf(m21, m10, 0.0f)));
  EXPECT_EQ(r.inv(1, 0), double(m10));
  EXPECT_EQ(r.diagnostics[0], 3.0);              // highest_power
  EXPECT_EQ(r.diagnostics[1], std::fabs(p3));    // last_term_max: (-L)^3 has one entry
  EXPECT_EQ(r.diagnostics[2], 1.0);              // work_max: the partial sums' unit diagonal
  ASSERT_EQ(r.intermediates.size(), 3u);
  EXPECT_EQ(r.intermediates[2].label, "(-L)^3");
}

TEST(NeumannSeries, ProductFormInFp16IsNeumannBitForBit) {
  for (int c : {8, 16, 17, 32, 48, 64}) {
    const Mat l = emulated_l(c, 1);
    const InverseRun a = with("neumann").invert(l, false);
    const InverseRun b = with("neumann_series:form=product").invert(l, false);
    // Same values, NaN where NaN (the FP16 powers overflow on some of these chunks).
    EXPECT_TRUE(a.inv.array().isNaN().matrix() == b.inv.array().isNaN().matrix()) << "C=" << c;
    EXPECT_TRUE(((a.inv.array() == b.inv.array()) || a.inv.array().isNaN()).all()) << "C=" << c;
    EXPECT_EQ(a.diagnostics[0], b.diagnostics[0]) << "C=" << c;  // highest_power
  }
}

TEST(NeumannSeries, TruncationKeepsExactlyNTerms) {
  // In FP32 a truncated series is the FP64 truncated series up to rounding,
  // and far from the full inverse.
  const Mat l = random_strict_lower(24, 1.0, 2, 0.9);
  const Mat l32 = l.unaryExpr([](double v) { return fp32(v); });
  for (int terms : {1, 2, 3, 5, 9}) {
    const InverseRun r = with(("neumann_series:accum=fp32:inv_iters=" + std::to_string(terms)).c_str()).invert(l, false);
    const Mat want = truncated_series(l32, terms);
    EXPECT_LT(rel(r.inv, want), bound(24, kUFP32, series_growth(l))) << terms;
    EXPECT_EQ(r.diagnostics[0], terms - 1) << terms;
    EXPECT_GT(rel(r.inv, unit_lower_inverse(l32)), 1e-6) << terms;
  }
  // The product form with r rounds: 2^r terms.
  const InverseRun p = with("neumann_series:form=product:rounds=2:accum=fp32").invert(l, false);
  EXPECT_LT(rel(p.inv, truncated_series(l32, 4)), bound(24, kUFP32, series_growth(l)));
  EXPECT_EQ(p.diagnostics[0], 2.0);
}

TEST(NeumannSeries, CloseToFp64OnRandomCasesInEveryAccumulation) {
  struct Case {
    const char* accum;
    double u;
    double (*round)(double);
  };
  for (const Case k : {Case{"fp16", kUFP16, fp16}, Case{"bf16", kUBF16, bf16}, Case{"fp32", kUFP32, fp32}})
    for (const char* form : {"series", "product"})
      for (uint64_t seed = 0; seed < 8; ++seed) {
        // BF16's bound 2 C 2^-8 G only means something for short chunks.
        const int c = 2 + int(seed * 9 % (k.u == kUBF16 ? 8 : 63));
        const Mat l = random_strict_lower(c, 0.5, seed, 0.8);
        const Mat in = l.unaryExpr(k.round);
        const double tol = bound(c, k.u, series_growth(l));
        ASSERT_LT(tol, 0.3) << "the bound must be able to fail";
        const std::string m = std::string("neumann_series:form=") + form + ":accum=" + k.accum;
        EXPECT_LT(rel(with(m.c_str()).invert(l, false).inv, unit_lower_inverse(in)), tol) << m << " C=" << c;
      }
}

TEST(NeumannSeries, ExactOnTheKnownInverseAtEveryChunk) {
  expect_exact_on_known_inverse({"neumann_series", "neumann_series:form=product", "neumann_series:accum=bf16",
                                 "neumann_series:accum=fp32:form=product"});
}

TEST(NeumannSeries, PaddingIsInvisible) {
  const Mat l = emulated_l(16, 3);
  for (const char* m : {"neumann_series", "neumann_series:accum=bf16", "neumann_series:form=product:accum=fp32"}) {
    const Mat small = with((std::string(m) + ":inv_iters=16:rounds=4").c_str()).invert(l, false).inv;
    for (int c : {17, 24, 32})
      EXPECT_TRUE(with((std::string(m) + ":inv_iters=16:rounds=4").c_str()).invert(prec::pad(l, c), false)
                      .inv.topLeftCorner(16, 16) == small)
          << m << " C=" << c;
  }
}

TEST(NeumannSeries, Fp16PowersOverflowAndTheDiagnosticsSayIt) {
  // A subdiagonal of 300: (-L)^2 holds 9e4 > 65504, infinite in FP16, finite in BF16 and FP32.
  Mat l = Mat::Zero(8, 8);
  for (int i = 1; i < 8; ++i) l(i, i - 1) = 300.0;
  const InverseRun h = with("neumann_series").invert(l, false);
  EXPECT_TRUE(std::isinf(h.diagnostics[2]));  // work_max
  EXPECT_TRUE(std::isinf(h.diagnostics[1]));  // last_term_max: (-L)^7 overflowed long before
  EXPECT_FALSE(std::isfinite(h.inv(7, 0)));
  for (const char* m : {"neumann_series:accum=bf16", "neumann_series:accum=fp32"}) {
    const InverseRun r = with(m).invert(l, false);
    EXPECT_TRUE(std::isfinite(r.diagnostics[2])) << m;
    EXPECT_GT(r.diagnostics[1], 1e17) << m;  // 300^7 = 2.2e17
  }
}

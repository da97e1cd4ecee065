// The inverse methods' CPU references: each against FP64 on hand-made and
// random cases, against the exact inverse of a matrix with a known inverse,
// and the registry's promises (diagnostics declared and filled, names).
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.hpp"
#include "core/rng.hpp"
#include "inputs/family.hpp"
#include "methods/method.hpp"
#include "paths/emulated/emulated.hpp"
#include "paths/gold/gold.hpp"

using namespace chunkinv;

namespace {

// Strict-lower L = -(subdiagonal of ones): (I + L)^-1 is the all-ones lower
// triangle, exactly, and every step of a substitution is exact in FP16 too.
Mat ones_inverse_case(int c) {
  Mat l = Mat::Zero(c, c);
  for (int i = 1; i < c; ++i) l(i, i - 1) = -1.0;
  return l;
}

Mat random_strict_lower(int c, double scale, uint64_t seed) {
  const Rng rng(seed, 0, Stream::kUser);
  Mat l = Mat::Zero(c, c);
  for (int i = 0; i < c; ++i)
    for (int j = 0; j < i; ++j) l(i, j) = scale * (rng.uniform(uint64_t(i) * 64 + j) - 0.5);
  return l;
}

double rel(const Mat& a, const Mat& e) { return (a - e).norm() / e.norm(); }

}  // namespace

TEST(MethodRegistry, NamesDiagnosticsAndSuggestions) {
  EXPECT_EQ(default_method().name, "neumann");
  EXPECT_TRUE(exact_method().exact);
  EXPECT_EQ(&find_method("fwdsub_fp32"), &find_method("fwdsub_fp32"));
  try {
    find_method("fwdsub_fp23");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean \"fwdsub_fp32\""), std::string::npos) << e.what();
  }
  for (const MethodSpec* m : methods()) {
    // Every method inverts I exactly and fills one value per declared diagnostic.
    for (int c : {2, 16, 17, 64}) {
      const InverseRun r = method_of(*m).invert(Mat::Zero(c, c), true);
      EXPECT_TRUE(r.inv == Mat::Identity(c, c)) << m->name << " C=" << c;
      EXPECT_EQ(r.diagnostics.size(), m->diagnostics.size()) << m->name;
    }
    EXPECT_FALSE(m->arithmetic.empty()) << m->name;
  }
}

TEST(MethodRegistry, ParametersAreCheckedAndLabelledCanonically) {
  EXPECT_EQ(parse_method("neumann").label(), "neumann");
  EXPECT_TRUE(parse_method("fwdsub_fp32") == method_of(find_method("fwdsub_fp32")));
  for (const char* bad : {"neumann:terms=3", "neumann:", "neumann:=1", "fwdsub_fp23", "neumann:x"}) {
    EXPECT_THROW(parse_method(bad), UsageError) << bad;
  }
  try {
    parse_method("neumann:terms=3");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("method neumann takes no parameters"), std::string::npos) << e.what();
  }
  // Every registered parameter: its default is allowed and drops out of the label.
  for (const MethodSpec* m : methods())
    for (const MethodParam& p : m->params) {
      const Method x = parse_method(std::string(m->name) + ":" + std::string(p.name) + "=" + std::string(p.default_value));
      EXPECT_EQ(x.label(), m->name) << p.name;
    }
}

// A method with parameters has a typed form of them, made once with every
// Method of it; a method without has none.
TEST(MethodRegistry, ParametersAreTypedOnce) {
  for (const MethodSpec* m : methods()) {
    EXPECT_EQ(m->parse == nullptr, m->params.empty()) << m->name;
    EXPECT_EQ(method_of(*m).typed.has_value(), !m->params.empty()) << m->name;
    for (const MethodParam& p : m->params) {
      const Method x = parse_method(std::string(m->name) + ":" + std::string(p.name) + "=" + std::string(p.default_value));
      EXPECT_TRUE(x.typed.has_value()) << m->name;
    }
  }
}

TEST(MethodRegistry, EveryMethodIsExactOnAKnownInverse) {
  // Entries 0 and +-1 only: every method's arithmetic is exact on it.
  for (const MethodSpec* m : methods())
    for (int c : {8, 16, 33}) {
      const Mat l = ones_inverse_case(c);
      const Mat want = Mat::Ones(c, c).triangularView<Eigen::Lower>();
      EXPECT_TRUE(method_of(*m).invert(l, false).inv == want) << m->name << " C=" << c;
    }
}

TEST(Exact, IsTheTriangularSolve) {
  const Mat l = random_strict_lower(24, 0.5, 1);
  const Mat x = method_of(exact_method()).invert(l, false).inv;
  const Mat id = Mat::Identity(24, 24);
  EXPECT_LT(((id + l) * x - id).norm(), 1e-13);
}

TEST(Neumann, PaddingInvariance) {
  // A C=16 L inside a chunk of 17..32 whose extra rows carry no coupling:
  // the leading 16x16 block of INV is bit-identical (padding rows and
  // columns of a strictly lower matrix stay zero).
  Configuration cfg{"model_like", 16, 64, {{"decay_floor", -5.0}}};
  const Sample s = find_family("model_like").make(cfg, 11, 2);
  std::vector<double> dec, inv;
  emulated::decays(s, dec, inv);
  const Mat l = emulated::kernel_l(s, dec, inv);
  const Method neumann = method_of(find_method("neumann"));
  const InverseRun small = neumann.invert(l, false);
  for (int c : {17, 24, 32}) {
    Mat big = Mat::Zero(c, c);
    big.topLeftCorner(16, 16) = l;
    const InverseRun r = neumann.invert(big, false);
    EXPECT_GT(r.diagnostics[0], small.diagnostics[0]);  // highest_power
    EXPECT_TRUE(r.inv.topLeftCorner(16, 16) == small.inv) << "chunk " << c;
  }
}

TEST(Neumann, MatchesExactInverseOnBenignInputsAndKeepsItsPowers) {
  Configuration cfg{"model_like", 32, 128, {{"decay_floor", -5.0}}};
  const Sample s = find_family("model_like").make(cfg, 0, 0);
  std::vector<double> dec, inv;
  emulated::decays(s, dec, inv);
  const Mat l = emulated::kernel_l(s, dec, inv);
  const InverseRun r = method_of(find_method("neumann")).invert(l, true);
  EXPECT_EQ(r.diagnostics[0], 16);  // highest_power
  ASSERT_EQ(r.intermediates.size(), 5u);  // L, L^2, L^4, L^8, L^16
  EXPECT_EQ(r.intermediates[0].label, "L");
  EXPECT_EQ(r.intermediates[4].label, "L^16");
  EXPECT_TRUE(r.intermediates[0].m == l);
  const double err = rel(r.inv, unit_lower_inverse(l));
  EXPECT_LT(err, 1e-3);  // FP16 accumulation
  EXPECT_GT(err, 0.0);   // but not exact
  for (int i = 0; i < 32; ++i) EXPECT_EQ(r.inv(i, i), 1.0);
}

TEST(FwdsubFp32, HandMadeCaseInTheDocumentedOrder) {
  // 3x3: X[2][0] = -(fp32(A20 * X00) + fp32(A21 * X10)), k ascending, each rounded to FP32.
  Mat l = Mat::Zero(3, 3);
  l(1, 0) = 0.1;
  l(2, 0) = 0.3;
  l(2, 1) = 0.7;
  const InverseRun r = method_of(find_method("fwdsub_fp32")).invert(l, true);
  const float a10 = 0.1f, a20 = 0.3f, a21 = 0.7f;
  const float x10 = -(0.0f + a10 * 1.0f);
  const float x20 = -((0.0f + a20 * 1.0f) + a21 * x10);
  EXPECT_EQ(r.inv(1, 0), double(x10));
  EXPECT_EQ(r.inv(2, 0), double(x20));
  EXPECT_EQ(r.inv(2, 1), double(-(0.0f + a21 * 1.0f)));
  EXPECT_EQ(r.inv(0, 1), 0.0);
  EXPECT_EQ(r.diagnostics[0], std::fabs(double(x20)) > 1 ? std::fabs(double(x20)) : 1.0);  // inv_max
  ASSERT_EQ(r.intermediates.size(), 1u);
  EXPECT_EQ(r.intermediates[0].m(2, 1), double(a21));
}

TEST(FwdsubFp32, CloseToFp64OnRandomCasesAndFarBetterThanFp16Neumann) {
  for (uint64_t seed = 0; seed < 20; ++seed) {
    const int c = 8 + int(seed % 5) * 10;
    const Mat l = random_strict_lower(c, 0.5, seed);
    const Mat exact = unit_lower_inverse(l.unaryExpr([](double v) { return double(float(v)); }));
    const double err = rel(method_of(find_method("fwdsub_fp32")).invert(l, false).inv, exact);
    EXPECT_LT(err, 64 * c * 6e-8) << "seed " << seed;  // a few ulps of FP32 per step
    EXPECT_LT(err, rel(method_of(find_method("neumann")).invert(l, false).inv, exact)) << "seed " << seed;
  }
}

TEST(FwdsubFp32, OverflowIsReportedNotHidden) {
  // Growth (-1e20)^k overflows FP32 by the third row.
  Mat l = Mat::Zero(4, 4);
  for (int i = 1; i < 4; ++i) l(i, i - 1) = 1e20;
  const InverseRun r = method_of(find_method("fwdsub_fp32")).invert(l, false);
  EXPECT_TRUE(std::isinf(r.diagnostics[0]));
  EXPECT_FALSE(std::isfinite(r.inv(3, 0)));
}

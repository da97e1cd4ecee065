// FlashKDA's raw inputs (SPEC §1 "Raw inputs"): the CPU models of the
// kernel's activation, the exact activation the gold uses, the families kda
// and collinear, and raw tensor sets.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "arith/activation.hpp"
#include "core/detmath.hpp"
#include "core/error.hpp"
#include "core/fp.hpp"
#include "gpu/gpu_test_common.hpp"
#include "inputs/family.hpp"
#include "inputs/raw.hpp"
#include "inputs/tensor_set.hpp"
#include "paths/gold/gold.hpp"

using namespace chunkinv;

namespace {

float from_bits(uint32_t b) { return std::bit_cast<float>(b); }
uint32_t bits(float x) { return std::bit_cast<uint32_t>(x); }
using gputest::config;

}  // namespace

// The table holds the H200's tanh.approx wherever it differs from the
// correctly rounded tanh of the libm the measurement used; the model's own
// tanh (detmath, the same on every machine) must equal that libm's on every
// other BF16 value, or the model would not be the hardware there.
TEST(Activation, TanhModelIsTheMeasuredHardwareOnEveryBf16Value) {
  ASSERT_EQ(tanh_exception_count(), 3650);
  int table = 0, libm = 0;
  for (uint32_t v = 0; v < 65536; ++v) {
    const float x = from_bits(v << 16);
    if (!std::isfinite(x)) continue;
    const float cr = static_cast<float>(std::tanh(static_cast<double>(x)));
    const float m = tanh_approx_model(x);
    if (bits(m) != bits(cr)) ++table;  // an entry of the table
    else ++libm;
    EXPECT_TRUE(tanh_model_is_exact(x));
  }
  EXPECT_EQ(table, 3650) << "every table entry is used, and detmath's tanh rounds like libm's elsewhere";
  EXPECT_EQ(libm, 65280 - 3650);
}

TEST(Activation, SigmoidIsHalfTanhOfHalfPlusHalfInFp32) {
  EXPECT_EQ(sigmoid_tanh_model(0.0f), 0.5f);
  EXPECT_EQ(sigmoid_tanh_model(40.0f), 1.0f);   // tanh saturates to 1 at 20
  EXPECT_EQ(sigmoid_tanh_model(-40.0f), 0.0f);
  // 8 (the NaN reproducer's beta logit): tanh.approx(4) from the table or libm, then fma.
  const float t = tanh_approx_model(4.0f);
  EXPECT_EQ(sigmoid_tanh_model(8.0f), std::fma(t, 0.5f, 0.5f));
  EXPECT_NEAR(sigmoid_tanh_model(8.0f), 1.0 / (1.0 + std::exp(-8.0)), 4e-6);  // the hardware's tanh is ~1e-6 off
}

TEST(Activation, Rsqrt4xIsHalfRsqrtxAndEx2OfIntegersIsExact) {
  // The hardware's rsqrt(4x) equals rsqrt(x) / 2 on every normal input
  // (measured); the model keeps that property.
  for (float x : {1.0f, 1.5f, 3.99f, 1e-6f, 12345.678f})
    EXPECT_EQ(rsqrt_approx_model(4.0f * x), rsqrt_approx_model(x) * 0.5f) << x;
  EXPECT_EQ(ex2_approx_model(0.0f), 1.0f);
  EXPECT_EQ(ex2_approx_model(3.0f), 8.0f);
  EXPECT_EQ(ex2_approx_model(-130.0f), 0.0f);  // below FLT_MIN: flushed
}

// The key norm's order: FMA partial sums over groups of 8 channels, then the
// butterfly ((p0 + p8) + (p4 + p12)) + ((p2 + p10) + (p6 + p14)) + ... for d = 128.
TEST(Activation, KeyNormFollowsTheKernelsReductionOrder) {
  RawInputs r;
  r.chunk = 2;
  r.dim = 128;
  r.keys.resize(256);
  for (int c = 0; c < 128; ++c) {  // values whose sums depend on the order
    r.keys[size_t(c)] = bf16_bits(bf16(std::ldexp(1.0 + c / 128.0, (c * 7) % 23 - 11)));
    r.keys[size_t(128 + c)] = bf16_bits(bf16(c % 2 ? 3.0 : 1.0 / 1024));
  }
  for (int t = 0; t < 2; ++t) {
    float p[16];
    for (int j = 0; j < 16; ++j) {
      p[j] = 0.0f;
      for (int c = 8 * j; c < 8 * j + 8; ++c) p[j] = std::fma(r.key_raw(t, c), r.key_raw(t, c), p[j]);
    }
    float s[8], u[4], v[2];
    for (int i = 0; i < 8; ++i) s[i] = p[i] + p[i + 8];
    for (int i = 0; i < 4; ++i) u[i] = s[i] + s[i + 4];
    for (int i = 0; i < 2; ++i) v[i] = u[i] + u[i + 2];
    const float sum = v[0] + v[1];
    EXPECT_EQ(kernel_key_inv_norm(r, t, [](float x) { return x; }), sum + 1e-6f) << "row " << t;
  }
}

// Gates come back exactly: fp32(g log2 e) of the Sample's g is the FP32 gate.
TEST(Activation, GateInLog2UnitsSurvivesTheSamplesNaturalLog) {
  auto raw = std::make_shared<RawInputs>();
  raw->chunk = 2;
  raw->dim = 1;
  raw->keys = {0x3F80, 0x3F80};
  raw->g = {0, 0};
  raw->beta = {0, 0};
  raw->dt_bias = {0.0f};
  uint64_t z = 12345;
  for (int i = 0; i < 200000; ++i) {
    z = z * 6364136223846793005ull + 1442695040888963407ull;
    float g2 = -std::fabs(from_bits(static_cast<uint32_t>(z >> 32)));
    if (!std::isfinite(g2)) continue;
    const Sample s = sample_from_activated(raw, {1.0f, 1.0f}, {g2, 0.0f}, {0.5f, 0.5f});
    ASSERT_EQ(bits(static_cast<float>(s.g[0] * 1.4426950408889634074)), bits(g2)) << g2;
  }
}

TEST(RawFamilies, CollinearRowsAreOneKeyAndItsActivationIsTheDefinition) {
  const Configuration c = config("collinear", 16);
  const Sample s = find_family("collinear").make(c, 7, 0);
  ASSERT_TRUE(s.raw);
  EXPECT_EQ(s.gating, Gating::kChannel);
  for (int t = 1; t < 16; ++t)
    for (int k = 0; k < 128; ++k) ASSERT_EQ(s.raw->keys[size_t(t) * 128 + k], s.raw->keys[size_t(k)]);
  // The model's activation of one element, step by step (SPEC §1).
  const float a = ex2_approx_model(0.0f * 1.44269502f);
  const float x = a * (-12.0f + 0.0f);
  const float g2 = static_cast<float>(-5.0 * 1.4426950408889634) * sigmoid_tanh_model(x);
  EXPECT_EQ(static_cast<float>(s.g[5] * 1.4426950408889634074), g2);
  EXPECT_EQ(s.beta[3], sigmoid_tanh_model(8.0f));
  // The gold's exact activation: a unit key, g = -5 sigmoid(-12), beta = sigmoid(8).
  const Sample e = activate_exact(*s.raw);
  double n2 = 0;
  for (int k = 0; k < 128; ++k) n2 += e.keys[size_t(k)] * e.keys[size_t(k)];
  double raw2 = 0;  // |k|^2 / (|k|^2 + 1e-6): the epsilon is part of the definition
  for (int k = 0; k < 128; ++k) raw2 += double(s.raw->key_raw(0, k)) * s.raw->key_raw(0, k);
  EXPECT_NEAR(n2, raw2 / (raw2 + 1e-6), 1e-15);
  EXPECT_DOUBLE_EQ(e.g[0], -5.0 * detmath::sigmoid(-12.0));
  EXPECT_DOUBLE_EQ(e.beta[0], detmath::sigmoid(8.0));
  // The gold uses it: L_10 = beta_1 (k.k) exp(g).
  const GoldOutput gold = compute_gold(s);
  EXPECT_NEAR(gold.L(1, 0), detmath::sigmoid(8.0) * n2 * std::exp(-5.0 * detmath::sigmoid(-12.0)), 1e-12);
}

TEST(RawFamilies, SameSeedSameRawInputsAndAxesAreValidated) {
  const Configuration c = config("kda", 16, 64);
  const Sample a = find_family("kda").make(c, 3, 9), b = find_family("kda").make(c, 3, 9);
  EXPECT_EQ(a.raw->keys, b.raw->keys);
  EXPECT_EQ(a.raw->g, b.raw->g);
  EXPECT_EQ(a.raw->dt_bias, b.raw->dt_bias);
  EXPECT_EQ(a.keys, b.keys);
  EXPECT_NE(find_family("kda").make(c, 3, 10).raw->keys, a.raw->keys);
  for (auto [axis, value] : std::vector<std::pair<const char*, double>>{
           {"lower_bound", 0.0}, {"lower_bound", -6.0}, {"gate_scale", 0.0}, {"dt_bias_spread", -1.0}, {"a_log", 100.0}}) {
    Configuration bad = c;
    bad.params[axis] = value;
    EXPECT_THROW(find_family("kda").validate(bad), UsageError) << axis << " = " << value;
  }
  Configuration bad = config("collinear", 16);
  bad.params["eps"] = -0.1;
  EXPECT_THROW(find_family("collinear").validate(bad), UsageError);
}

namespace {

// A raw tensor set in memory holding the raw inputs of `samples`.
TensorMap raw_tensors(const std::vector<Sample>& samples) {
  const int n = int(samples.size()), c = samples[0].chunk, d = samples[0].dim;
  TensorMap m;
  m["keys"] = {DType::kBF16, {n, c, d}, {}};
  m["g_raw"] = {DType::kBF16, {n, c, d}, {}};
  m["beta_raw"] = {DType::kBF16, {n, c}, {}};
  m["dt_bias"] = {DType::kF32, {n, d}, {}};
  m["A_log"] = {DType::kF32, {n}, {}};
  m["lower_bound"] = {DType::kF32, {}, {samples[0].raw->lower_bound}};
  for (const Sample& s : samples) {
    for (uint16_t b : s.raw->keys) m["keys"].values.push_back(bf16_from_bits(b));
    for (uint16_t b : s.raw->g) m["g_raw"].values.push_back(bf16_from_bits(b));
    for (uint16_t b : s.raw->beta) m["beta_raw"].values.push_back(bf16_from_bits(b));
    for (float v : s.raw->dt_bias) m["dt_bias"].values.push_back(v);
    m["A_log"].values.push_back(s.raw->a_log);
  }
  return m;
}

}  // namespace

TEST(RawTensorSet, ReplaysTheFamilysSamplesBitForBit) {
  Configuration c = config("kda", 16, 32);
  c.params["a_log"] = 0.7;
  std::vector<Sample> samples;
  for (int i = 0; i < 5; ++i) samples.push_back(find_family("kda").make(c, 11, uint64_t(i)));
  const TensorSet set = make_tensor_set(raw_tensors(samples), "raw.npz");
  ASSERT_EQ(set.count, 5u);
  for (int i = 0; i < 5; ++i) {
    const Sample s = set.sample(uint64_t(i));
    ASSERT_TRUE(s.raw);
    EXPECT_EQ(s.keys, samples[size_t(i)].keys);
    EXPECT_EQ(s.g, samples[size_t(i)].g);
    EXPECT_EQ(s.beta, samples[size_t(i)].beta);
  }
}

TEST(RawTensorSet, MixedPartialAndMisshapenSetsAreOneLineErrors) {
  std::vector<Sample> samples{find_family("kda").make(config("kda", 8, 16), 1, 0)};
  auto expect_error = [&](TensorMap m, const std::string& needle) {
    try {
      make_tensor_set(std::move(m), "raw.npz");
      ADD_FAILURE() << "accepted; expected: " << needle;
    } catch (const UsageError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(needle), std::string::npos) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  };
  TensorMap mixed = raw_tensors(samples);
  mixed["g"] = mixed["beta_raw"];
  expect_error(mixed, "activated or raw, not both");
  TensorMap partial = raw_tensors(samples);
  partial.erase("A_log");
  expect_error(partial, "'A_log' is missing");
  TensorMap shape = raw_tensors(samples);
  shape["g_raw"].shape = {1, 8, 8, 2};
  expect_error(shape, "g_raw");
  TensorMap bound = raw_tensors(samples);
  bound["lower_bound"].values = {-7.0};
  expect_error(bound, "lower_bound");
  TensorMap inf = raw_tensors(samples);
  inf["dt_bias"].values[3] = INFINITY;
  expect_error(inf, "dt_bias");
}

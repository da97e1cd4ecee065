// The kernel's instructions on the GPU against their CPU models: the two
// mma.sync m16n8k16 forms against tc::dot16 (arith/tensor_core.hpp),
// ex2.approx.ftz + cvt.rn.bf16 against the decay function, and the single
// roundings (cvt, mul, add) against core/fp.hpp. Each prints its agreement.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/fp.hpp"
#include "arith/decay.hpp"
#include "arith/tensor_core.hpp"
#include "gpu/gpu_test_common.hpp"
#ifdef CHUNKINV_HAVE_CUDA
#include "gpu/probes.hpp"
#endif

using namespace chunkinv;
using namespace chunkinv::gputest;

namespace {

constexpr int kTilesPerRegime = 4000;

float as_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Input regimes of one 16x8 output tile: a (16x16), b (16x8, k x n), c (16x8).
enum class Regime { kRandom, kWideExponents, kCancellation, kTiny, kNearOverflow };
const char* regime_name(Regime r) {
  switch (r) {
    case Regime::kRandom: return "random";
    case Regime::kWideExponents: return "wide exponents";
    case Regime::kCancellation: return "cancellation";
    case Regime::kTiny: return "tiny/subnormal";
    case Regime::kNearOverflow: return "near overflow";
  }
  return "";
}
constexpr Regime kRegimes[] = {Regime::kRandom, Regime::kWideExponents, Regime::kCancellation, Regime::kTiny,
                               Regime::kNearOverflow};

struct Tiles {
  std::vector<double> a, b, c;  // exact values of the input format (c: FP32 or FP16)
};

// `fmt` is the input format; `cfmt` the accumulator's. Exponent ranges per
// regime are chosen so that products and sums reach the interesting corner of
// the accumulator: below FLT_MIN / FP16's normal range, near their maxima.
Tiles make_tiles(Regime r, bool bf16_inputs, int tiles, uint64_t seed) {
  TestRng rng(seed);
  const Format fmt = bf16_inputs ? kBF16 : kFP16;
  const Format cfmt = bf16_inputs ? kFP32 : kFP16;
  Tiles t;
  t.a.resize(size_t(tiles) * 256);
  t.b.resize(size_t(tiles) * 128);
  t.c.resize(size_t(tiles) * 128);
  auto value = [&](double lo_exp, double hi_exp) {
    const double v = rng.normal() * std::exp2(rng.uniform(lo_exp, hi_exp));
    return round_to(v, fmt);
  };
  double lo = -2, hi = 2, clo = -2, chi = 4;
  switch (r) {
    case Regime::kRandom: break;
    case Regime::kWideExponents: lo = -12; hi = 12; clo = -20; chi = 20; break;
    case Regime::kTiny:
      if (bf16_inputs) { lo = -72; hi = -58; clo = -140; chi = -118; }
      else { lo = -16; hi = -5; clo = -26; chi = -12; }
      break;
    case Regime::kNearOverflow:
      if (bf16_inputs) { lo = 60; hi = 64; clo = 124; chi = 128; }
      else { lo = 6; hi = 8.2; clo = 12; chi = 16; }
      break;
    case Regime::kCancellation: lo = -6; hi = 6; clo = -2; chi = 2; break;
  }
  for (int tile = 0; tile < tiles; ++tile) {
    double* a = &t.a[size_t(tile) * 256];
    double* b = &t.b[size_t(tile) * 128];
    double* c = &t.c[size_t(tile) * 128];
    for (int e = 0; e < 256; ++e) a[e] = value(lo, hi);
    for (int e = 0; e < 128; ++e) b[e] = value(lo, hi);
    for (int e = 0; e < 128; ++e) c[e] = round_to(rng.normal() * std::exp2(rng.uniform(clo, chi)), cfmt);
    if (r == Regime::kCancellation) {
      // Products k and k+8 nearly cancel, and c cancels what is left, so that
      // the result keeps few leading bits and the alignment decides it.
      for (int m = 0; m < 16; ++m)
        for (int k = 0; k < 8; ++k) a[m * 16 + k + 8] = a[m * 16 + k];
      for (int n = 0; n < 8; ++n)
        for (int k = 0; k < 8; ++k) {
          const double bk = b[k * 8 + n];
          b[(k + 8) * 8 + n] = round_to(-bk * (1.0 + rng.uniform(-1, 1) * std::exp2(-6)), fmt);
        }
      for (int m = 0; m < 16; ++m)
        for (int n = 0; n < 8; ++n) {
          double s = 0;
          for (int k = 0; k < 16; ++k) s += a[m * 16 + k] * b[k * 8 + n];
          if (rng.uniform() < 0.5) c[m * 8 + n] = round_to(-s * (1.0 + rng.uniform(-1, 1) * std::exp2(-10)), cfmt);
        }
    }
  }
  return t;
}

}  // namespace

TEST(GpuInstructions, MmaBf16Fp32MatchesModel) {
  CHUNKINV_REQUIRE_GPU();
#ifdef CHUNKINV_HAVE_CUDA
  size_t total = 0, total_same = 0;
  for (Regime r : kRegimes) {
    const Tiles t = make_tiles(r, true, kTilesPerRegime, 1000 + int(r));
    std::vector<uint16_t> a(t.a.size()), b(t.b.size());
    std::vector<float> c(t.c.size()), d(t.c.size());
    for (size_t i = 0; i < a.size(); ++i) a[i] = bf16_bits(t.a[i]);
    for (size_t i = 0; i < b.size(); ++i) b[i] = bf16_bits(t.b[i]);
    for (size_t i = 0; i < c.size(); ++i) c[i] = float(t.c[i]);
    gpu::testing::mma_bf16_f32(a.data(), b.data(), c.data(), d.data(), kTilesPerRegime);
    size_t same = 0, shown = 0;
    for (int tile = 0; tile < kTilesPerRegime; ++tile)
      for (int m = 0; m < 16; ++m)
        for (int n = 0; n < 8; ++n) {
          const size_t o = size_t(tile) * 128 + m * 8 + n;
          const double model = tc::dot16(&t.a[size_t(tile) * 256 + m * 16], &t.b[size_t(tile) * 128 + n], 8,
                                         t.c[o], tc::Accum::kFP32);
          const double hw = d[o];
          if (same_double(model, hw)) {
            ++same;
          } else if (shown++ < 5) {
            std::printf("  bf16 mma %s: tile %d (%d,%d): hardware %a model %a\n", regime_name(r), tile, m, n, hw,
                        model);
          }
        }
    const size_t n = size_t(kTilesPerRegime) * 128;
    std::printf("mma bf16->f32 %-15s: %zu / %zu elements bit-identical to the model\n", regime_name(r), same, n);
    total += n;
    total_same += same;
  }
  EXPECT_EQ(total_same, total);
#endif
}

TEST(GpuInstructions, MmaF16F16MatchesModel) {
  CHUNKINV_REQUIRE_GPU();
#ifdef CHUNKINV_HAVE_CUDA
  size_t total = 0, total_same = 0, neg_zero = 0;
  for (Regime r : kRegimes) {
    const Tiles t = make_tiles(r, false, kTilesPerRegime, 2000 + int(r));
    std::vector<uint16_t> a(t.a.size()), b(t.b.size()), c(t.c.size()), d(t.c.size());
    for (size_t i = 0; i < a.size(); ++i) a[i] = fp16_bits(t.a[i]);
    for (size_t i = 0; i < b.size(); ++i) b[i] = fp16_bits(t.b[i]);
    for (size_t i = 0; i < c.size(); ++i) c[i] = fp16_bits(t.c[i]);
    gpu::testing::mma_f16_f16(a.data(), b.data(), c.data(), d.data(), kTilesPerRegime);
    size_t same = 0, shown = 0;
    for (int tile = 0; tile < kTilesPerRegime; ++tile)
      for (int m = 0; m < 16; ++m)
        for (int n = 0; n < 8; ++n) {
          const size_t o = size_t(tile) * 128 + m * 8 + n;
          const double model = tc::dot16(&t.a[size_t(tile) * 256 + m * 16], &t.b[size_t(tile) * 128 + n], 8,
                                         t.c[o], tc::Accum::kFP16);
          const double hw = fp16_from_bits(d[o]);
          if (d[o] == 0x8000) ++neg_zero;
          if (same_fp16(model, hw)) {
            ++same;
          } else if (shown++ < 5) {
            std::printf("  f16 mma %s: tile %d (%d,%d): hardware %a (0x%04x) model %a\n", regime_name(r), tile, m,
                        n, hw, d[o], model);
          }
        }
    const size_t n = size_t(kTilesPerRegime) * 128;
    std::printf("mma f16->f16 %-15s: %zu / %zu elements bit-identical to the model\n", regime_name(r), same, n);
    total += n;
    total_same += same;
  }
  std::printf("mma f16->f16: %zu results were -0\n", neg_zero);
  EXPECT_EQ(total_same, total);
#endif
}

// The FP16 accumulator's alignment floor: tiles whose products are tiny
// (FP16 operands of biased exponent 0..8, so nominal product exponents
// -28..-14, random signs and significands), against the model with every
// candidate floor. Prints each candidate's differing elements; the model's
// own floor (kFp16AlignFloor) must differ in none.
TEST(GpuInstructions, MmaF16AlignmentFloor) {
  CHUNKINV_REQUIRE_GPU();
#ifdef CHUNKINV_HAVE_CUDA
  constexpr int kTiles = 6000;
  TestRng rng(4242);
  std::vector<uint16_t> a(size_t(kTiles) * 256), b(size_t(kTiles) * 128), c(size_t(kTiles) * 128, 0),
      d(size_t(kTiles) * 128);
  const auto tiny = [&](int max_exp_field) {
    if (rng.next() % 5 == 0) return uint16_t(0);
    const uint16_t e = uint16_t(rng.next() % (max_exp_field + 1)), m = uint16_t(rng.next() % 1024);
    return uint16_t(((rng.next() & 1) << 15) | (e << 10) | m);
  };
  for (int t = 0; t < kTiles; ++t) {
    const int top = 1 + t % 8;  // the tile's largest exponent field: sums from ~2^-28 up
    for (int i = 0; i < 256; ++i) a[size_t(t) * 256 + i] = tiny(top);
    for (int i = 0; i < 128; ++i) b[size_t(t) * 128 + i] = tiny(top);
  }
  // Designed tiles (row 0, column 0 of tiles kTiles..): P1 = a0 b0 = 1.5 x
  // 2^-24, the midpoint between two subnormal results; p2 = +2^(E - 10) and
  // p3 = -2^(E - 10), which cancel exactly but hold the largest nominal
  // exponent at E (-24..-14); p4 = -2^-k (k = 38..48, nominal exponent
  // below -27). The exact sum 1.5 x 2^-24 - 2^-k rounds to 1 unit of 2^-24;
  // where the alignment truncates p4 away the sum is the tie and rounds to 2:
  // the unit of truncation, per E, is where the result changes.
  std::vector<std::pair<int, int>> designed;  // (E, k) of each designed tile
  const auto h = [](double v) { return fp16_bits(v); };
  for (int e = -24; e <= -14; ++e)
    for (int k = 38; k <= 48; ++k) {
      const size_t t = a.size() / 256;
      a.resize(a.size() + 256, 0), b.resize(b.size() + 128, 0), c.resize(c.size() + 128, 0), d.resize(d.size() + 128);
      uint16_t* at = &a[t * 256];
      uint16_t* bt = &b[t * 128];
      at[0] = h(0x1.8p-10), bt[0 * 8] = h(0x1p-14);
      at[1] = h(std::ldexp(1.0, e + 14)), bt[1 * 8] = h(0x1p-24);
      at[2] = h(-std::ldexp(1.0, e + 14)), bt[2 * 8] = h(0x1p-24);
      at[3] = h(-std::ldexp(1.0, 24 - k)), bt[3 * 8] = h(0x1p-24);
      designed.push_back({e, k});
    }
  const int tiles = int(a.size() / 256);
  gpu::testing::mma_f16_f16(a.data(), b.data(), c.data(), d.data(), size_t(tiles));
  for (size_t i = 0; i < designed.size(); ++i) {
    const size_t t = size_t(kTiles) + i;
    double av0[16], bv0[16];
    for (int k = 0; k < 16; ++k) av0[k] = fp16_from_bits(a[t * 256 + k]), bv0[k] = fp16_from_bits(b[t * 128 + k * 8]);
    const uint16_t hw = d[t * 128];
    const uint16_t model = fp16_bits(tc::dot16(av0, bv0, 1, 0.0, tc::Accum::kFP16));
    if (designed[i].second == 38 || hw != model)
      std::printf("mma f16 designed E = %d: k = %d: hardware 0x%04x, model 0x%04x\n", designed[i].first,
                  designed[i].second, hw, model);
    EXPECT_EQ(hw, model) << "E = " << designed[i].first << ", k = " << designed[i].second;
  }
  for (int e = -24; e <= -14; ++e) {  // the truncation unit per E: 2^-(the smallest k truncated away, minus one)
    int unit = 0;
    for (size_t i = 0; i < designed.size(); ++i)
      if (designed[i].first == e && d[(size_t(kTiles) + i) * 128] == h(0x1p-23)) {
        unit = designed[i].second - 1;
        break;
      }
    std::printf("mma f16 alignment: largest nominal exponent %d: terms truncated at 2^-%d\n", e, unit);
  }
  const int floors[] = {-1000, -30, -28, -26, -25, -24, -23, -22, -21, -20, -19, -18, -17, -16, -15, -14, -13};
  std::vector<size_t> differ(std::size(floors), 0);
  size_t own = 0;
  double av[16], bv[16];
  for (int t = 0; t < kTiles; ++t)
    for (int m = 0; m < 16; ++m)
      for (int n = 0; n < 8; ++n) {
        for (int k = 0; k < 16; ++k)
          av[k] = fp16_from_bits(a[size_t(t) * 256 + m * 16 + k]), bv[k] = fp16_from_bits(b[size_t(t) * 128 + k * 8 + n]);
        const uint16_t hw = d[size_t(t) * 128 + m * 8 + n];
        for (size_t f = 0; f < std::size(floors); ++f)
          if (fp16_bits(tc::dot16_aligned(av, bv, 1, 0.0, tc::Accum::kFP16, floors[f])) != hw) ++differ[f];
        if (fp16_bits(tc::dot16(av, bv, 1, 0.0, tc::Accum::kFP16)) != hw) ++own;
      }
  for (size_t f = 0; f < std::size(floors); ++f)
    std::printf("mma f16 alignment floor %5d: %zu of %d random elements differ\n", floors[f], differ[f], kTiles * 128);
  std::printf("mma f16 alignment floor of the model (%d): %zu differ\n", tc::kFp16AlignFloor, own);
  EXPECT_EQ(own, 0u);
#endif
}

TEST(GpuInstructions, Ex2ApproxBf16MatchesDecayFunction) {
  CHUNKINV_REQUIRE_GPU();
#ifdef CHUNKINV_HAVE_CUDA
  TestRng rng(42);
  std::vector<float> x;
  for (int i = 0; i < 1 << 21; ++i) x.push_back(float(rng.uniform(-470, 470)));
  for (int i = 0; i < 1 << 20; ++i) x.push_back(float(rng.uniform(-130, 130)));
  for (int i = 0; i < 1 << 20; ++i) x.push_back(float(rng.uniform(-1, 1) * std::exp2(rng.uniform(-30, 0))));
  for (float v : {-127.0f, -126.0f, -125.9f, 127.9f, 128.0f, 0.0f, -0.0f}) x.push_back(v);
  std::vector<float> y(x.size());
  std::vector<uint16_t> yb(x.size());
  gpu::testing::ex2_approx_ftz(x.data(), y.data(), yb.data(), x.size());
  size_t same = 0, fp32_same = 0, shown = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double model = ex2_approx_ftz_bf16(x[i]);
    if (same_bf16(model, bf16_from_bits(yb[i]))) {
      ++same;
    } else if (shown++ < 10) {
      std::printf("  ex2 x = %a (0x%08x): hardware bf16 0x%04x, model 0x%04x\n", double(x[i]), float_bits(x[i]), yb[i],
                  bf16_bits(model));
    }
    // The FP32 values themselves differ from the correctly rounded exp2 often.
    if (double(y[i]) == ftz32(fp32(std::exp2(double(x[i]))))) ++fp32_same;
  }
  std::printf("ex2.approx.ftz -> bf16: %zu / %zu identical to the decay function (table of %d exceptions); "
              "FP32 result equal to the correctly rounded exp2 for %.2f%%\n",
              same, x.size(), decay_exception_count(), 100.0 * double(fp32_same) / double(x.size()));
  EXPECT_EQ(same, x.size());
#endif
}

TEST(GpuInstructions, Conversions) {
  CHUNKINV_REQUIRE_GPU();
#ifdef CHUNKINV_HAVE_CUDA
  TestRng rng(7);
  const size_t n = 1 << 20;
  // FP32 inputs over every exponent (subnormals, overflow, inf, NaN included).
  std::vector<float> x(n);
  for (auto& v : x) v = as_float(uint32_t(rng.next()));
  std::vector<uint16_t> hb(n), hh(n);
  gpu::testing::cvt_rn_bf16(x.data(), hb.data(), n);
  gpu::testing::cvt_rn_f16(x.data(), hh.data(), n);
  size_t bad_b = 0, bad_h = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!same_bf16(bf16(x[i]), bf16_from_bits(hb[i]))) ++bad_b;
    if (!same_fp16(fp16(x[i]), fp16_from_bits(hh[i]))) ++bad_h;
  }
  // BF16 and FP16 products and sums, random bit patterns of either format.
  std::vector<uint16_t> a(n), b(n), mb(n), mh(n), ah(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = uint16_t(rng.next());
    b[i] = uint16_t(rng.next());
  }
  gpu::testing::mul_rn_bf16(a.data(), b.data(), mb.data(), n);
  gpu::testing::mul_rn_f16(a.data(), b.data(), mh.data(), n);
  gpu::testing::add_rn_f16(a.data(), b.data(), ah.data(), n);
  size_t bad_mb = 0, bad_mh = 0, bad_ah = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!same_bf16(bf16(bf16_from_bits(a[i]) * bf16_from_bits(b[i])), bf16_from_bits(mb[i]))) ++bad_mb;
    if (!same_fp16(fp16(fp16_from_bits(a[i]) * fp16_from_bits(b[i])), fp16_from_bits(mh[i]))) ++bad_mh;
    if (!same_fp16(fp16(fp16_from_bits(a[i]) + fp16_from_bits(b[i])), fp16_from_bits(ah[i]))) ++bad_ah;
  }
  std::printf("conversions over %zu inputs, differing from core/fp.hpp: cvt.rn.bf16.f32 %zu, cvt.rn.f16.f32 %zu, "
              "mul.rn.bf16 %zu, mul.rn.f16 %zu, add.rn.f16 %zu\n",
              n, bad_b, bad_h, bad_mb, bad_mh, bad_ah);
  EXPECT_EQ(bad_b, 0u);
  EXPECT_EQ(bad_h, 0u);
  EXPECT_EQ(bad_mb, 0u);
  EXPECT_EQ(bad_mh, 0u);
  EXPECT_EQ(bad_ah, 0u);
#endif
}

// mma.sync.m8n8k4.f64 against FP64 fused multiply-adds: the CPU model of an
// FP64 tensor-core product that the gold's blocked forms rest on (d = c +
// sum over k of a_k b_k, each term a fused multiply-add in k order, one
// rounding each). Printed beside it, the same chain in the other order, so
// that a failure says which order (if either) the hardware takes.
TEST(GpuInstructions, MmaF64IsAFusedChainInKOrder) {
  CHUNKINV_REQUIRE_GPU();
#ifdef CHUNKINV_HAVE_CUDA
  constexpr int kTiles = 4000;
  struct Case {
    const char* name;
    double lo, hi;  // the operands' exponents, uniform in [lo, hi)
    bool cancel;    // c (and a pair of products) cancel what the others leave
  };
  const Case cases[] = {{"random", -2, 2, false},
                        {"wide exponents", -40, 40, false},
                        {"cancellation", -6, 6, true},
                        {"subnormal results", -540, -515, false},
                        {"near overflow", 508, 511, false}};
  TestRng rng(8484);
  size_t total = 0, forward = 0, backward = 0;
  for (const Case& cs : cases) {
    std::vector<double> a(size_t(kTiles) * 32), b(size_t(kTiles) * 32), c(size_t(kTiles) * 64), d(c.size());
    auto value = [&](double lo, double hi) { return rng.normal() * std::exp2(rng.uniform(lo, hi)); };
    for (auto& v : a) v = value(cs.lo, cs.hi);
    for (auto& v : b) v = value(cs.lo, cs.hi);
    for (int tile = 0; tile < kTiles; ++tile)
      for (int m = 0; m < 8; ++m)
        for (int n = 0; n < 8; ++n) {
          double& cv = c[size_t(tile) * 64 + m * 8 + n];
          cv = value(2 * cs.lo, 2 * cs.hi);
          if (cs.cancel && rng.uniform() < 0.5) {
            double s = 0.0;
            for (int k = 0; k < 4; ++k) s += a[size_t(tile) * 32 + m * 4 + k] * b[size_t(tile) * 32 + k * 8 + n];
            cv = -s * (1.0 + rng.uniform(-1, 1) * 0x1p-30);
          }
        }
    if (cs.cancel)  // products 0 and 1 of row 0 nearly cancel
      for (int tile = 0; tile < kTiles; ++tile) {
        double* A = &a[size_t(tile) * 32];
        const double* B = &b[size_t(tile) * 32];
        A[1] = -A[0] * B[0] / B[8] * (1.0 + rng.uniform(-1, 1) * 0x1p-40);
      }
    gpu::testing::mma_f64_m8n8k4(a.data(), b.data(), c.data(), d.data(), kTiles);
    size_t fw = 0, bw = 0, shown = 0;
    for (int tile = 0; tile < kTiles; ++tile)
      for (int m = 0; m < 8; ++m)
        for (int n = 0; n < 8; ++n) {
          const double* A = &a[size_t(tile) * 32 + m * 4];
          const double* B = &b[size_t(tile) * 32 + n];
          const double cv = c[size_t(tile) * 64 + m * 8 + n], hw = d[size_t(tile) * 64 + m * 8 + n];
          double f = cv, r = cv;
          for (int k = 0; k < 4; ++k) f = std::fma(A[k], B[k * 8], f);
          for (int k = 3; k >= 0; --k) r = std::fma(A[k], B[k * 8], r);
          fw += same_double(f, hw);
          bw += same_double(r, hw);
          if (!same_double(f, hw) && shown++ < 3)
            std::printf("  f64 mma %s: tile %d (%d,%d): hardware %a, chain k = 0..3 %a, k = 3..0 %a\n", cs.name, tile,
                        m, n, hw, f, r);
        }
    const size_t n = size_t(kTiles) * 64;
    std::printf("mma f64 m8n8k4 %-17s: %zu / %zu equal to the fused chain in k order (%zu to the reverse order)\n",
                cs.name, fw, n, bw);
    total += n;
    forward += fw;
    backward += bw;
  }
  EXPECT_EQ(forward, total);
#endif
}

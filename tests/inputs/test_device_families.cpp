// The generated families drawn on the GPU (inputs/device_families.cu)
// against find_family(name).make, value for value and bit for bit; and, on
// the CPU, the host/device shared sources they rest on.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "core/detmath_hd.hpp"
#include "core/error.hpp"
#include "core/fp.hpp"
#include "core/fp_hd.hpp"
#include "core/philox.hpp"
#include "core/rng.hpp"
#include "core/thread_pool.hpp"
#include "gpu/gpu_test_common.hpp"
#include "gpu/pack.hpp"
#include "inputs/device_families.hpp"

#ifdef CHUNKINV_HAVE_CUDA
#include <cuda_runtime.h>
#endif

using namespace chunkinv;

namespace {

// The families and gatings the device generates.
struct Case {
  const char* family;
  const char* gating;  // nullptr: the family's default
};
const Case kCases[] = {{"floor", nullptr},      {"floor", "channel"},
                       {"model_like", nullptr}, {"model_like", "channel"},
                       {"weak_decay_correlated", nullptr}};

Configuration config_of(const Case& k, int chunk, int dim) {
  Configuration c = gputest::config(k.family, chunk, dim);
  if (k.gating) c.params["gating"] = k.gating;
  find_family(c.family).complete(c);
  find_family(c.family).validate(c);
  return c;
}

std::string name_of(const Case& k) { return std::string(k.family) + (k.gating ? std::string(" gating=") + k.gating : ""); }

}  // namespace

// --- CPU: the shared sources ------------------------------------------------

TEST(SharedPhilox, KnownAnswers) {
  // Random123's philox4x32-10 known-answer vectors (counter, key -> output).
  struct Kat {
    philox::Block ctr;
    uint32_t k0, k1;
    philox::Block want;
  };
  const Kat kats[] = {
      {{{0, 0, 0, 0}}, 0, 0, {{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}}},
      {{{~0u, ~0u, ~0u, ~0u}}, ~0u, ~0u, {{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}}},
      {{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}}, 0xa4093822, 0x299f31d0,
       {{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}}},
  };
  for (const Kat& k : kats) {
    const philox::Block got = philox::philox4x32_10(k.ctr, k.k0, k.k1);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(got.v[i], k.want.v[i]) << "word " << i;
    // The same through the counter layout (stream kKeys = 0 leaves the words as they are).
    const uint64_t index = k.ctr.v[0] | uint64_t(k.ctr.v[1]) << 32, sample = k.ctr.v[2] | uint64_t(k.ctr.v[3]) << 32;
    const uint64_t seed = k.k0 | uint64_t(k.k1) << 32;
    const auto via_rng = Rng(seed, sample, Stream::kKeys).block(index);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(via_rng[i], k.want.v[i]) << "word " << i;
  }
}

// The attempts' coordinates in one product: 2 to_unit - 1 bit for bit, at
// the ends of the range and on random words.
TEST(SharedPhilox, SignedUnitIsTwiceTheUnitLessOne) {
  std::vector<std::pair<uint32_t, uint32_t>> words = {{0, 0}, {0, 0x7FF}, {0, 0x800}, {0x7FFFFFFF, ~0u}, {0x80000000, 0},
                                                      {~0u, ~0u}, {~0u, 0xFFFFF7FF}, {0x00100000, 0}, {1, 0}};
  for (uint32_t n = 0; n < 100000; ++n) {
    const philox::Block b = philox::philox4x32_10({{n, 0, 0, 0}}, 1, 2);
    words.emplace_back(b.v[0], b.v[1]);
    words.emplace_back(b.v[2] >> (n % 32), b.v[3]);  // small magnitudes too
  }
  for (const auto& [hi, lo] : words) {
    const double want = 2.0 * philox::to_unit(hi, lo) - 1.0, got = philox::to_signed_unit(hi, lo);
    ASSERT_EQ(hd::bits(got), hd::bits(want)) << std::hex << hi << " " << lo;
  }
}

TEST(SharedFp, Bf16BitsMatchThePacker) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const double v = bf16_from_bits(uint16_t(b));
    if (std::isnan(v)) continue;
    ASSERT_EQ(hd::exact_bf16_bits(v), gpu::exact_bf16_bits(v)) << b;
  }
}

// The device's decomposition of a key row (normal n is element n & 1 of
// pair n >> 1; the row's pairs drawn in any order; the norm summed in column
// order) gives random_unit_key, at odd d too where rows share a pair.
TEST(SharedPhilox, KeyRowByPairsIsRandomUnitKey) {
  for (int d : {1, 2, 3, 7, 128}) {
    for (int row : {0, 1, 2, 5, 63}) {
      const uint64_t seed = 0xF00DFACE12345678ull, sample = (1ull << 32) + 17;
      std::vector<double> want(d), v(d);
      random_unit_key(seed, sample, row, d, want.data());
      const uint64_t base = uint64_t(row) * d, q0 = base >> 1, q1 = (base + d - 1) >> 1;
      for (uint64_t q = q1 + 1; q-- > q0;) {  // backwards: order does not matter
        const philox::NormalPair z = philox::normal_pair(seed, sample, uint32_t(Stream::kKeys), q);
        const long long c = static_cast<long long>(2 * q) - static_cast<long long>(base);
        if (c >= 0) v[c] = z.x;
        if (c + 1 < d) v[c + 1] = z.y;
      }
      double norm2 = 0.0;
      for (int c = 0; c < d; ++c) norm2 += v[c] * v[c];
      const double norm = std::sqrt(norm2);
      for (int c = 0; c < d; ++c)
        ASSERT_EQ(hd::exact_bf16_bits(round_to(v[c] / norm, kBF16)), gpu::exact_bf16_bits(want[c]))
            << "d " << d << " row " << row << " column " << c;
    }
  }
}

// The polar method written out from the Philox blocks up, without
// polar_attempt and polar_transform: the reference their users are held to.
namespace {
philox::NormalPair polar_reference(uint64_t seed, uint64_t sample, uint32_t stream, uint64_t pair) {
  for (uint64_t a = 0; a < 256; ++a) {
    const philox::Block b = philox::block(seed, sample, stream, (pair << 8) | a);
    const double u = 2.0 * philox::to_unit(b.v[0], b.v[1]) - 1.0;
    const double v = 2.0 * philox::to_unit(b.v[2], b.v[3]) - 1.0;
    const double s = u * u + v * v;
    if (s >= 1.0 || s == 0.0) continue;
    const double f = std::sqrt(-2.0 * detmath::hd::log(s) / s);
    return {u * f, v * f};
  }
  return {0.0, 0.0};
}
}  // namespace

// The device's key rows split normal_pair: one polar_attempt at a time until
// one is accepted ((0, 0) after 256 rejected), then polar_transform. Both
// that and normal_pair are the polar method bit for bit, at pairs whose
// attempt 0 is rejected too.
TEST(SharedPhilox, AttemptsThenTransformIsNormalPair) {
  const uint64_t seeds[] = {7, 0xF00DFACE12345678ull, ~0ull};
  const uint64_t samples[] = {0, (1ull << 32) + 17};
  const Stream streams[] = {Stream::kKeys, Stream::kChannelGate};
  const uint64_t starts[] = {0, (1ull << 32) - 2048, (1ull << 56) - 4096};  // pair << 8 fills the 64 bits at the last
  const uint64_t per_start = 4096;
  uint64_t pairs = 0, rejected_first = 0;
  for (uint64_t seed : seeds)
    for (uint64_t sample : samples)
      for (Stream stream : streams)
        for (uint64_t start : starts)
          for (uint64_t q = start; q < start + per_start; ++q) {
            const uint32_t id = uint32_t(stream);
            double u = 0.0, v = 0.0;
            uint32_t a = 0;  // the attempt accepted
            bool inside = false;
            for (; a < 256; ++a)
              if ((inside = philox::polar_attempt(seed, sample, id, q, a, u, v))) break;
            if (!inside) u = v = 0.0;
            rejected_first += a > 0;
            ++pairs;
            const philox::NormalPair got = philox::polar_transform(u, v), want = polar_reference(seed, sample, id, q);
            const philox::NormalPair pair = philox::normal_pair(seed, sample, id, q);
            ASSERT_EQ(hd::bits(got.x), hd::bits(want.x)) << "seed " << seed << " sample " << sample << " pair " << q;
            ASSERT_EQ(hd::bits(got.y), hd::bits(want.y)) << "seed " << seed << " sample " << sample << " pair " << q;
            ASSERT_EQ(hd::bits(pair.x), hd::bits(want.x)) << "seed " << seed << " sample " << sample << " pair " << q;
            ASSERT_EQ(hd::bits(pair.y), hd::bits(want.y)) << "seed " << seed << " sample " << sample << " pair " << q;
          }
  EXPECT_EQ(pairs, 3u * 2 * 2 * 3 * per_start);
  // About 1 - pi/4 of the pairs reject attempt 0.
  EXPECT_GT(rejected_first, pairs / 10) << "of " << pairs;
  // The unresolved pair's (0, 0) stays (+0, +0).
  const philox::NormalPair zero = philox::polar_transform(0.0, 0.0);
  EXPECT_EQ(hd::bits(zero.x), 0u);
  EXPECT_EQ(hd::bits(zero.y), 0u);
}

TEST(DeviceFamilies, WhichFamiliesTheDeviceGenerates) {
  for (const Case& k : kCases) {
    std::string why;
    EXPECT_TRUE(device_generates(config_of(k, 16, 8), &why)) << name_of(k);
    EXPECT_EQ(generated_gate_width(config_of(k, 16, 8)), find_family(k.family).make(config_of(k, 16, 8), 1, 2).gate_width())
        << name_of(k);
  }
  for (const char* f : {"kda", "collinear", "file", "real_gates", "no_such_family"}) {
    Configuration c;
    c.family = f;
    std::string why;
    EXPECT_FALSE(device_generates(c, &why)) << f;
    EXPECT_FALSE(why.empty()) << f;
    EXPECT_EQ(why.find('\n'), std::string::npos) << f;
    EXPECT_FALSE(device_generates(c, nullptr)) << f;
  }
}

// What the device draws is declared by each family (Family::device_draw):
// its generator and the parameters it reads from the axes.
TEST(DeviceFamilies, EachFamilyDeclaresItsDeviceForm) {
  Case ml{"model_like", "channel"};
  Configuration c = config_of(ml, 16, 8);
  c.params["decay_floor"] = -3.0;
  std::optional<DeviceDraw> d = device_draw_of(c, nullptr);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, DeviceDraw::Kind::kModelLike);
  EXPECT_EQ(d->gate, -3.0);
  EXPECT_TRUE(d->channel);
  c = config_of(Case{"floor", nullptr}, 16, 8);
  d = device_draw_of(c, nullptr);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, DeviceDraw::Kind::kFloor);
  EXPECT_EQ(d->gate, c.params.at("decay_floor").get<double>());
  EXPECT_FALSE(d->channel);
  c = config_of(Case{"weak_decay_correlated", nullptr}, 16, 8);
  c.params["log_decay"] = -0.02;
  c.params["beta"] = 0.25;
  d = device_draw_of(c, nullptr);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, DeviceDraw::Kind::kWeakDecayCorrelated);
  EXPECT_EQ(d->gate, -0.02);
  EXPECT_EQ(d->beta, 0.25);
  EXPECT_FALSE(d->channel);
  // Without a device form: the reason says which families have one, from the registry.
  Configuration unknown;
  unknown.family = "no_such_family";
  std::string why;
  EXPECT_FALSE(device_draw_of(unknown, &why).has_value());
  EXPECT_EQ(why, "family no_such_family is not one the device generates (floor, weak_decay_correlated, model_like)");
  Configuration raw;
  raw.family = "kda";
  EXPECT_FALSE(device_draw_of(raw, &why).has_value());
  EXPECT_NE(why.find("raw inputs"), std::string::npos) << why;
}

// --- GPU ---------------------------------------------------------------------

#ifdef CHUNKINV_HAVE_CUDA
namespace {

#define TEST_CUDA(call) ASSERT_EQ((call), cudaSuccess) << #call

struct Mismatches {
  size_t keys = 0, g = 0, beta = 0, beta_fp16 = 0, values = 0;
  size_t total() const { return keys + g + beta + beta_fp16; }
};

// Draws n samples from `first` on the device and counts the values that
// differ from the CPU's make(c, seed, first + j).
void compare(const Configuration& c, uint64_t seed, uint64_t first, int n, Mismatches& m, ThreadPool& pool) {
  const int C = c.chunk, d = c.dim, w = generated_gate_width(c);
  const size_t nk = size_t(n) * C * d, ng = size_t(n) * C * w, nb = size_t(n) * C;
  DeviceSampleBuffers b;
  TEST_CUDA(cudaMalloc(&b.keys, nk * sizeof(uint16_t)));
  TEST_CUDA(cudaMalloc(&b.g, ng * sizeof(double)));
  TEST_CUDA(cudaMalloc(&b.beta, nb * sizeof(double)));
  TEST_CUDA(cudaMalloc(&b.beta_fp16, nb * sizeof(uint16_t)));
  generate_on_device(c, seed, first, n, b, nullptr);
  TEST_CUDA(cudaDeviceSynchronize());
  std::vector<uint16_t> keys(nk), beta_fp16(nb);
  std::vector<double> g(ng), beta(nb);
  TEST_CUDA(cudaMemcpy(keys.data(), b.keys, nk * sizeof(uint16_t), cudaMemcpyDeviceToHost));
  TEST_CUDA(cudaMemcpy(g.data(), b.g, ng * sizeof(double), cudaMemcpyDeviceToHost));
  TEST_CUDA(cudaMemcpy(beta.data(), b.beta, nb * sizeof(double), cudaMemcpyDeviceToHost));
  TEST_CUDA(cudaMemcpy(beta_fp16.data(), b.beta_fp16, nb * sizeof(uint16_t), cudaMemcpyDeviceToHost));
  TEST_CUDA(cudaFree(b.keys));
  TEST_CUDA(cudaFree(b.g));
  TEST_CUDA(cudaFree(b.beta));
  TEST_CUDA(cudaFree(b.beta_fp16));

  std::vector<Mismatches> per(n);
  const Family& family = find_family(c.family);
  pool.parallel_for(size_t(n), [&](size_t j) {
    const Sample s = family.make(c, seed, first + j);
    Mismatches& p = per[j];
    if (s.g.size() != size_t(C) * w) throw std::logic_error("gate width differs from generated_gate_width");
    for (size_t e = 0; e < s.keys.size(); ++e) p.keys += gpu::exact_bf16_bits(s.keys[e]) != keys[j * C * d + e];
    for (size_t e = 0; e < s.g.size(); ++e) p.g += !gputest::same_double(s.g[e], g[j * C * w + e]);
    for (int t = 0; t < C; ++t) {
      p.beta += !gputest::same_double(s.beta[t], beta[j * C + t]);
      p.beta_fp16 += gpu::fp16_bits_rn(s.beta[t]) != beta_fp16[j * C + t];
    }
    p.values = s.keys.size() + s.g.size() + 2 * size_t(C);
  });
  for (const Mismatches& p : per) {
    m.keys += p.keys, m.g += p.g, m.beta += p.beta, m.beta_fp16 += p.beta_fp16;
    m.values += p.values;
  }
}

}  // namespace

TEST(DeviceFamilies, EveryValueAsTheCpuMakesIt) {
  CHUNKINV_REQUIRE_GPU();
  ThreadPool pool(0);
  const uint64_t seeds[] = {7, 0xF00DFACE12345678ull};
  const uint64_t firsts[] = {0, (1ull << 32) - 200, (1ull << 40) + 12345};  // the middle one straddles 2^32
  const int n = 400;  // per seed and first: 2400 samples per shape
  size_t all = 0;
  for (const Case& k : kCases) {
    for (int C : {2, 3, 16, 33, 64}) {
      for (int d : {1, 2, 7, 128}) {
        const Configuration c = config_of(k, C, d);
        Mismatches m;
        for (uint64_t seed : seeds)
          for (uint64_t first : firsts) compare(c, seed, first, n, m, pool);
        std::printf("%-34s C %2d d %3d: %zu of %zu values differ (keys %zu, g %zu, beta %zu, fp16(beta) %zu)\n",
                    name_of(k).c_str(), C, d, m.total(), m.values, m.keys, m.g, m.beta, m.beta_fp16);
        EXPECT_EQ(m.total(), 0u) << name_of(k) << " C " << C << " d " << d;
        all += m.total();
      }
    }
  }
  std::printf("device-generated samples: %zu values differ from the CPU's in all\n", all);
}

TEST(DeviceFamilies, NonDefaultParametersAndNullFp16Beta) {
  CHUNKINV_REQUIRE_GPU();
  ThreadPool pool(0);
  Mismatches m;
  for (const Case& k : kCases) {
    Configuration c = config_of(k, 16, 128);
    if (c.family == "weak_decay_correlated") {
      c.params["log_decay"] = -0.37;
      c.params["beta"] = 0.123456789;
    } else {
      c.params["decay_floor"] = -11.5;
    }
    compare(c, 0xFFFFFFFFFFFFFFFFull, 0xFFFFFFFFFFFFF000ull, 1000, m, pool);
  }
  std::printf("non-default parameters, seed and indices near 2^64: %zu of %zu values differ\n", m.total(), m.values);
  EXPECT_EQ(m.total(), 0u);

  // beta_fp16 may be null; the rest is unchanged.
  const Configuration c = config_of(kCases[2], 16, 128);
  DeviceSampleBuffers b;
  TEST_CUDA(cudaMalloc(&b.keys, 16 * 128 * sizeof(uint16_t)));
  TEST_CUDA(cudaMalloc(&b.g, 16 * sizeof(double)));
  TEST_CUDA(cudaMalloc(&b.beta, 16 * sizeof(double)));
  generate_on_device(c, 3, 4, 1, b, nullptr);
  TEST_CUDA(cudaDeviceSynchronize());
  std::vector<double> beta(16);
  TEST_CUDA(cudaMemcpy(beta.data(), b.beta, 16 * sizeof(double), cudaMemcpyDeviceToHost));
  EXPECT_EQ(beta, find_family(c.family).make(c, 3, 4).beta);
  TEST_CUDA(cudaFree(b.keys));
  TEST_CUDA(cudaFree(b.g));
  TEST_CUDA(cudaFree(b.beta));
}

TEST(DeviceFamilies, OtherFamiliesAreRefused) {
  // No device work happens before the refusal: this runs without a GPU too.
  for (const char* f : {"kda", "collinear"}) {
    const Configuration c = gputest::config(f, 16, 128);
    EXPECT_THROW(generate_on_device(c, 1, 0, 4, DeviceSampleBuffers{}, nullptr), UsageError) << f;
  }
}

#endif  // CHUNKINV_HAVE_CUDA

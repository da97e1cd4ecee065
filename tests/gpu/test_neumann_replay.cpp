// The FP16 Neumann product form (method `neumann`) replayed instruction by
// instruction: every mma.sync m16n8k16 with FP16 accumulation and every FP16
// add that the CPU model performs on a sample's fp16(gold L) is issued again
// on the GPU with the same operands, and each result compared bit for bit
// with the model's. Where the model and the hardware part, the operands are
// printed, so that the model can be corrected on the very instruction.
//
// The samples: model_like at C = 24, decay floor -2, seed 31337, the first 64
// by default; CHUNKINV_REPLAY_FAMILY, _CHUNK, _FLOOR, _SEED and _SAMPLES
// ("first:count" or "i,j,k") choose others (the samples a run found apart).
// CHUNKINV_REPLAY_DUMP=FILE writes every differing element, and up to 2^18
// agreeing ones whose result is below 2^-10 in magnitude, as records of 35
// uint16: a's row (16), b's column (16), c, the hardware's d, the model's d.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "arith/tensor_core.hpp"
#include "core/fp.hpp"
#include "gpu/gpu_test_common.hpp"
#include "paths/gold/gold.hpp"
#ifdef CHUNKINV_HAVE_CUDA
#include "gpu/probes.hpp"
#endif

using namespace chunkinv;
using namespace chunkinv::gputest;

namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

std::vector<uint64_t> replay_indices() {
  const std::string s = env_or("CHUNKINV_REPLAY_SAMPLES", "0:64");
  std::vector<uint64_t> out;
  if (const auto colon = s.find(':'); colon != std::string::npos) {
    const uint64_t first = std::stoull(s.substr(0, colon)), count = std::stoull(s.substr(colon + 1));
    for (uint64_t i = 0; i < count; ++i) out.push_back(first + i);
  } else {
    std::stringstream in(s);
    for (std::string item; std::getline(in, item, ',');)
      if (!item.empty()) out.push_back(std::stoull(item));
  }
  return out;
}

// Every instruction of the replay, with the model's result.
struct Recorder {
  std::vector<uint16_t> a, b, c, d;      // mma tiles: a 16x16, b 16x8 (k x n), c and d 16x8
  std::vector<uint64_t> mma_sample;      // the sample of each tile
  std::vector<uint16_t> x, y, sum;       // FP16 adds
  std::vector<uint64_t> add_sample;
};

// A (m x k) times B (k x n) as the kernel tiles it (tensor_core.hpp), each
// m16n8k16 recorded with the model's result.
Mat replay_matmul(const Mat& A, const Mat& B, Recorder& r, uint64_t sample) {
  const int m = int(A.rows()), k = int(A.cols()), n = int(B.cols());
  Mat out = Mat::Zero(m, n);
  double at[256], bt[128];
  for (int r0 = 0; r0 < m; r0 += 16)
    for (int n0 = 0; n0 < n; n0 += 8) {
      double acc[128] = {};
      for (int k0 = 0; k0 < k; k0 += 16) {
        for (int i = 0; i < 16; ++i)
          for (int j = 0; j < 16; ++j) at[i * 16 + j] = A(r0 + i, k0 + j);
        for (int i = 0; i < 16; ++i)
          for (int j = 0; j < 8; ++j) bt[i * 8 + j] = B(k0 + i, n0 + j);
        for (double v : at) r.a.push_back(fp16_bits(v));
        for (double v : bt) r.b.push_back(fp16_bits(v));
        for (double v : acc) r.c.push_back(fp16_bits(v));
        for (int i = 0; i < 16; ++i)
          for (int j = 0; j < 8; ++j) acc[i * 8 + j] = tc::dot16(&at[i * 16], &bt[j], 8, acc[i * 8 + j], tc::Accum::kFP16);
        for (double v : acc) r.d.push_back(fp16_bits(v));
        r.mma_sample.push_back(sample);
      }
      for (int i = 0; i < 16; ++i)
        for (int j = 0; j < 8; ++j) out(r0 + i, n0 + j) = acc[i * 8 + j];
    }
  return out;
}

// The method's loop (methods/neumann.cpp) on fp16(L), recording as it goes.
void replay_neumann(const Mat& l_in, Recorder& r, uint64_t sample) {
  const int c = int(l_in.rows()), cp = (c + 15) / 16 * 16;
  Mat p = Mat::Zero(cp, cp);
  p.topLeftCorner(c, c) = l_in.unaryExpr([](double v) { return fp16(v); });
  Mat inv = Mat::Zero(cp, cp);
  for (int i = 0; i < cp; ++i)
    for (int j = 0; j < cp; ++j) inv(i, j) = (i == j) ? 1.0 : (p(i, j) == 0.0 ? 0.0 : -p(i, j));
  for (int highest = 1; 2 * highest < c; highest *= 2) {
    p = replay_matmul(p, p, r, sample);
    const Mat t = replay_matmul(inv, p, r, sample);
    for (Eigen::Index k = 0; k < inv.size(); ++k) {
      const double s = fp16(inv.data()[k] + t.data()[k]);
      r.x.push_back(fp16_bits(inv.data()[k]));
      r.y.push_back(fp16_bits(t.data()[k]));
      r.sum.push_back(fp16_bits(s));
      r.add_sample.push_back(sample);
      inv.data()[k] = s;
    }
  }
}

}  // namespace

TEST(GpuNeumannReplay, EveryInstructionOnGoldLMatchesTheModel) {
  CHUNKINV_REQUIRE_GPU();
#ifdef CHUNKINV_HAVE_CUDA
  Configuration cfg = config(env_or("CHUNKINV_REPLAY_FAMILY", "model_like"),
                             std::stoi(env_or("CHUNKINV_REPLAY_CHUNK", "24")));
  if (cfg.params.contains("decay_floor")) cfg.params["decay_floor"] = std::stod(env_or("CHUNKINV_REPLAY_FLOOR", "-2"));
  const uint64_t seed = std::stoull(env_or("CHUNKINV_REPLAY_SEED", "31337"));
  const Family& family = find_family(cfg.family);
  family.validate(cfg);
  const std::vector<uint64_t> indices = replay_indices();
  size_t tiles = 0, elements = 0, adds = 0, mma_differ = 0, add_differ = 0, shown = 0;
  std::vector<uint64_t> samples_apart;
  std::FILE* dump = nullptr;
  if (const char* path = std::getenv("CHUNKINV_REPLAY_DUMP")) dump = std::fopen(path, "wb");
  size_t dumped_agreeing = 0;
  const auto record = [&](const Recorder& r, size_t t, int e, uint16_t hw_d) {
    if (!dump) return;
    uint16_t rec[35];
    const int m = e / 8, n = e % 8;
    for (int k = 0; k < 16; ++k) rec[k] = r.a[t * 256 + m * 16 + k], rec[16 + k] = r.b[t * 128 + k * 8 + n];
    rec[32] = r.c[t * 128 + e], rec[33] = hw_d, rec[34] = r.d[t * 128 + e];
    std::fwrite(rec, sizeof rec, 1, dump);
  };
  // In slices, so that the recorded operands stay small.
  for (size_t s0 = 0; s0 < indices.size(); s0 += 256) {
    Recorder r;
    for (size_t s = s0; s < std::min(indices.size(), s0 + 256); ++s) {
      const Sample smp = family.make(cfg, seed, indices[s]);
      replay_neumann(compute_gold(smp).L, r, indices[s]);
    }
    const size_t nt = r.mma_sample.size();
    std::vector<uint16_t> hw(r.d.size()), hws(r.sum.size());
    if (nt) gpu::testing::mma_f16_f16(r.a.data(), r.b.data(), r.c.data(), hw.data(), nt);
    if (!r.sum.empty()) gpu::testing::add_rn_f16(r.x.data(), r.y.data(), hws.data(), r.sum.size());
    for (size_t t = 0; t < nt; ++t) {
      bool apart = false;
      for (int e = 0; e < 128; ++e) {
        const size_t o = t * 128 + e;
        if (hw[o] == r.d[o]) {
          if ((hw[o] & 0x7c00) < 0x1400 && (hw[o] & 0x7fff) != 0 && dumped_agreeing < (size_t{1} << 18)) {
            ++dumped_agreeing;
            record(r, t, e, hw[o]);
          }
          continue;
        }
        record(r, t, e, hw[o]);
        ++mma_differ;
        apart = true;
        if (shown++ < 8) {
          const int m = e / 8, n = e % 8;
          std::printf("sample %llu tile %zu (%d,%d): hardware 0x%04x model 0x%04x c 0x%04x\n  a row:",
                      (unsigned long long)r.mma_sample[t], t, m, n, hw[o], r.d[o], r.c[o]);
          for (int k = 0; k < 16; ++k) std::printf(" %04x", r.a[t * 256 + m * 16 + k]);
          std::printf("\n  b col:");
          for (int k = 0; k < 16; ++k) std::printf(" %04x", r.b[t * 128 + k * 8 + n]);
          std::printf("\n");
        }
      }
      if (apart && (samples_apart.empty() || samples_apart.back() != r.mma_sample[t]))
        samples_apart.push_back(r.mma_sample[t]);
    }
    for (size_t i = 0; i < r.sum.size(); ++i)
      if (hws[i] != r.sum[i]) {
        ++add_differ;
        if (shown++ < 8)
          std::printf("sample %llu add: 0x%04x + 0x%04x: hardware 0x%04x model 0x%04x\n",
                      (unsigned long long)r.add_sample[i], r.x[i], r.y[i], hws[i], r.sum[i]);
      }
    tiles += nt;
    elements += nt * 128;
    adds += r.sum.size();
  }
  if (dump) std::fclose(dump);
  std::printf("Neumann replay, %s C = %d seed %llu, %zu samples: %zu mma tiles (%zu elements), %zu differ; "
              "%zu FP16 adds, %zu differ; %zu samples with a differing instruction\n",
              cfg.family.c_str(), cfg.chunk, (unsigned long long)seed, indices.size(), tiles, elements, mma_differ,
              adds, add_differ, samples_apart.size());
  EXPECT_EQ(mma_differ, 0u);
  EXPECT_EQ(add_differ, 0u);
#endif
}

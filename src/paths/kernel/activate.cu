#include "paths/kernel/activate.hpp"

#include <algorithm>
#include <cstring>

#include "core/fp.hpp"
#include "gpu/buffers.cuh"
#include "gpu/check.cuh"
#include "gpu/ptx.cuh"
#include "inputs/raw.hpp"

namespace chunkinv::gpu {
namespace {

using detail::DeviceBuffer;

struct RawArgs {
  int n, chunk, dim;
  const uint16_t* keys;   // n x C x d BF16
  const uint16_t* g;      // n x C x d BF16
  const uint16_t* beta;   // n x C BF16
  const float* dt_bias;   // n x d
  const float* a_log;     // n
  const float* scale;     // n: fp32(lower_bound log2 e)
  uint16_t* keys_out;     // n x C x d BF16
  float* g_out;           // n x C x d, log2 units
  float* beta_out;        // n x C
};

__device__ float sigmoid_tanh(float x) {
  const float th = ptx::tanh_approx(__fmul_rn(x, 0.5f));
  return __fmaf_rn(th, 0.5f, 0.5f);
}

// One thread per (sample, row): the row's key norm and its beta.
__global__ void activate_rows(RawArgs a) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= a.n * a.chunk) return;
  const int s = i / a.chunk, t = i % a.chunk;
  const uint16_t* k = a.keys + (size_t(s) * a.chunk + t) * a.dim;
  const int groups = (a.dim + 7) / 8;
  int lanes = 1;
  while (lanes < groups) lanes *= 2;
  float part[512];
  for (int j = 0; j < lanes; ++j) {
    float p = 0.0f;
    for (int c = 8 * j; c < min(a.dim, 8 * j + 8); ++c) {
      const float v = ptx::bf16_to_f32(k[c]);
      p = __fmaf_rn(v, v, p);
    }
    part[j] = p;
  }
  for (int h = lanes / 2; h >= 1; h /= 2) {  // the butterfly; every lane keeps the same sum
    float next[512];
    for (int j = 0; j < lanes; ++j) next[j] = __fadd_rn(part[j], part[j ^ h]);
    for (int j = 0; j < lanes; ++j) part[j] = next[j];
  }
  const float inv = ptx::rsqrt_approx_ftz(__fadd_rn(part[0], 1e-6f));
  uint16_t* out = a.keys_out + (size_t(s) * a.chunk + t) * a.dim;
  for (int c = 0; c < a.dim; ++c) out[c] = ptx::cvt_rn_bf16(__fmul_rn(ptx::bf16_to_f32(k[c]), inv));
  a.beta_out[i] = sigmoid_tanh(ptx::bf16_to_f32(a.beta[i]));
}

// One thread per (sample, token, channel): the gate in log2 units.
__global__ void activate_gates(RawArgs a) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t cd = size_t(a.chunk) * a.dim;
  if (i >= size_t(a.n) * cd) return;
  const int s = int(i / cd), c = int(i % a.dim);
  const float ae = ptx::ex2_approx_ftz(__fmul_rn(a.a_log[s], 1.44269502f));
  const float x = __fmul_rn(ae, __fadd_rn(ptx::bf16_to_f32(a.g[i]), a.dt_bias[size_t(s) * a.dim + c]));
  a.g_out[i] = __fmul_rn(a.scale[s], sigmoid_tanh(x));
}

}  // namespace

bool any_raw(std::span<const Sample> samples) {
  return std::any_of(samples.begin(), samples.end(), [](const Sample& s) { return s.raw != nullptr; });
}

std::vector<Sample> activate_raw_on_gpu(std::span<const Sample> samples) {
  std::vector<Sample> out(samples.begin(), samples.end());
  // Runs of one shape, each in one launch.
  for (size_t i = 0; i < samples.size();) {
    if (!samples[i].raw) {
      ++i;
      continue;
    }
    const int C = samples[i].raw->chunk, d = samples[i].raw->dim;
    size_t j = i;
    while (j < samples.size() && samples[j].raw && samples[j].raw->chunk == C && samples[j].raw->dim == d) ++j;
    const int n = int(j - i);
    const size_t cd = size_t(C) * d;
    std::vector<uint16_t> keys(n * cd), g(n * cd), beta(size_t(n) * C);
    std::vector<float> dt(size_t(n) * d), alog(n), scale(n);
    for (int s = 0; s < n; ++s) {
      const RawInputs& r = *samples[i + s].raw;
      std::copy(r.keys.begin(), r.keys.end(), keys.begin() + s * cd);
      std::copy(r.g.begin(), r.g.end(), g.begin() + s * cd);
      std::copy(r.beta.begin(), r.beta.end(), beta.begin() + size_t(s) * C);
      std::copy(r.dt_bias.begin(), r.dt_bias.end(), dt.begin() + size_t(s) * d);
      alog[s] = r.a_log;
      scale[s] = static_cast<float>(static_cast<double>(r.lower_bound) * 1.4426950408889634074);
    }
    DeviceBuffer<uint16_t> dk, dg, db, dko;
    DeviceBuffer<float> ddt, dal, dsc, dgo, dbo;
    auto up = [](auto& buf, const auto& v) {
      auto* p = buf.get(v.size());
      CUDA_CHECK(cudaMemcpy(p, v.data(), v.size() * sizeof(v[0]), cudaMemcpyHostToDevice));
      return p;
    };
    RawArgs a{n, C, d, up(dk, keys), up(dg, g), up(db, beta), up(ddt, dt), up(dal, alog), up(dsc, scale),
              dko.get(n * cd), dgo.get(n * cd), dbo.get(size_t(n) * C)};
    activate_rows<<<(n * C + 127) / 128, 128>>>(a);
    CUDA_CHECK_LAUNCH();
    activate_gates<<<unsigned((n * cd + 255) / 256), 256>>>(a);
    CUDA_CHECK_LAUNCH();
    std::vector<uint16_t> ko(n * cd);
    std::vector<float> go(n * cd), bo(size_t(n) * C);
    CUDA_CHECK(cudaMemcpy(ko.data(), a.keys_out, ko.size() * 2, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(go.data(), a.g_out, go.size() * 4, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(bo.data(), a.beta_out, bo.size() * 4, cudaMemcpyDeviceToHost));
    for (int s = 0; s < n; ++s) {
      std::vector<float> kf(cd), gf(go.begin() + s * cd, go.begin() + (s + 1) * cd),
          bf(bo.begin() + size_t(s) * C, bo.begin() + size_t(s + 1) * C);
      for (size_t e = 0; e < cd; ++e) kf[e] = static_cast<float>(bf16_from_bits(ko[s * cd + e]));
      out[i + s] = sample_from_activated(samples[i + s].raw, kf, gf, bf);
    }
    i = j;
  }
  return out;
}

}  // namespace chunkinv::gpu

// The `cublas` path (SPEC §2 "cublas"): the article's simulation of the
// kernel with library calls. G and x = G log2 e in FP64 on the host;
// decay = bf16(ftz(exp2f(fp32(x)))); BF16 scaled keys; L = fp16 of an FP32
// SGEMM (default math mode: no TF32); strict lower times fp16(beta); the
// Neumann products through cublasGemmStridedBatchedEx with
// CUBLAS_COMPUTE_16F and the adds in a small FP16 kernel. No padding: the
// library takes any chunk. The path's L and fp16(gold L) run through the
// Neumann together, as one batch of 2n matrices.
// Eigen (through core/matrix.hpp) calls constexpr host functions from host-device code.
#pragma nv_diag_suppress 20015
#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include <cuda_fp16.h>

#include "core/error.hpp"
#include "core/fp.hpp"
#include "core/thread_pool.hpp"
#include "gpu/buffers.cuh"
#include "gpu/check.cuh"
#include "gpu/gpu.hpp"
#include "gpu/pack.hpp"
#include "gpu/ptx.cuh"
#include "paths/gpu_paths.hpp"

namespace chunkinv::gpu {
namespace {

constexpr double kLog2e = 1.4426950408889634;

// decay = bf16(ftz(exp2f(x))), inv_decay likewise with -x (the article's exp2_ftz_f32).
__device__ inline uint16_t decay_bits(float x) {
  float y = exp2f(x);
  if (y < 0x1p-126f) y = 0.0f;
  return ptx::cvt_rn_bf16(y);
}

__global__ void decays_kernel(const float* x, uint16_t* decay, uint16_t* inv_decay, size_t n) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  decay[i] = decay_bits(x[i]);
  inv_decay[i] = decay_bits(-x[i]);
}

// kd = fp32(bf16(k * decay)), ki = fp32(bf16(k * inv_decay)): the SGEMM's inputs.
__global__ void scale_keys_kernel(const uint16_t* keys, const uint16_t* decay, const uint16_t* inv_decay,
                                  float* kd, float* ki, int dim, bool per_channel, size_t n) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const size_t e = per_channel ? i : i / dim;  // decays are laid out like the keys, or one per row
  kd[i] = ptx::bf16_to_f32(ptx::mul_rn_bf16(keys[i], decay[e]));
  ki[i] = ptx::bf16_to_f32(ptx::mul_rn_bf16(keys[i], inv_decay[e]));
}

// L_ij = fp16(fp16(S_ij) * fp16(beta_i)) for j < i, else 0.
__global__ void finish_l_kernel(const float* s, const uint16_t* beta, uint16_t* l, int chunk, size_t n) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const size_t csq = size_t(chunk) * chunk;
  const int r = int((i % csq) / chunk), c = int(i % chunk);
  uint16_t h = 0;
  if (c < r) h = ptx::mul_rn_f16(ptx::cvt_rn_f16(s[i]), beta[(i / csq) * chunk + r]);
  l[i] = h;
}

__global__ void identity_minus_kernel(const uint16_t* l, uint16_t* inv, int chunk, size_t n) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int r = int((i % (size_t(chunk) * chunk)) / chunk), c = int(i % chunk);
  inv[i] = ptx::sub_rn_f16(r == c ? uint16_t(0x3C00) : uint16_t(0), l[i]);
}

__global__ void add_kernel(uint16_t* inv, const uint16_t* t, size_t n) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) inv[i] = ptx::add_rn_f16(inv[i], t[i]);
}

// power_max[m] = max(power_max[m], max |P_m|), +inf for any non-finite entry; one warp per matrix.
__global__ void power_max_kernel(const uint16_t* p, float* power_max, int chunk, int matrices, bool first) {
  const int m = int((size_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32);
  if (m >= matrices) return;
  const int lane = threadIdx.x & 31;
  const size_t csq = size_t(chunk) * chunk;
  float v = 0.0f;
  for (size_t e = lane; e < csq; e += 32) {
    const uint16_t h = p[m * csq + e];
    v = fmaxf(v, (h & 0x7C00) == 0x7C00 ? INFINITY : fabsf(ptx::f16_to_f32(h)));
  }
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (lane == 0) power_max[m] = first ? v : fmaxf(power_max[m], v);
}

unsigned blocks_for(size_t n, int threads = 256) { return unsigned((n + threads - 1) / threads); }

class CublasPath final : public Path {
 public:
  CublasPath() {
    CUDA_CHECK(cublasCreate(&handle_));
    CUDA_CHECK(cublasSetMathMode(handle_, CUBLAS_DEFAULT_MATH));
  }
  ~CublasPath() override { cublasDestroy(handle_); }

  BatchTiming run_batch(const Batch& in, std::span<const Method* const> methods, std::span<PathOutput> out,
                        ThreadPool& pool, bool keep) override {
    // Neumann, under its name or FlashKDA v1's (the spec's supports() admits no other): run once, copied.
    const size_t n = in.samples.size();
    const BatchTiming t = detail::run_by_shape(in.samples, [&](size_t i, size_t k) {
      return run_group(in.samples.subspan(i, k), in.gold.subspan(i, k), out.subspan(i, k), pool, keep);
    });
    for (size_t m = 1; m < methods.size(); ++m) std::copy(out.begin(), out.begin() + n, out.begin() + m * n);
    return t;
  }

 private:
  // Row-major D = A * B for `count` C x C FP16 matrices (cuBLAS is column-major:
  // it computes D^T = B^T A^T).
  void gemm16(const uint16_t* a, const uint16_t* b, uint16_t* d, int C, int count) {
    const __half one = __float2half(1.0f), zero = __float2half(0.0f);
    const long long stride = (long long)C * C;
    CUDA_CHECK(cublasGemmStridedBatchedEx(handle_, CUBLAS_OP_N, CUBLAS_OP_N, C, C, C, &one, b, CUDA_R_16F, C,
                                          stride, a, CUDA_R_16F, C, stride, &zero, d, CUDA_R_16F, C, stride, count,
                                          CUBLAS_COMPUTE_16F, CUBLAS_GEMM_DEFAULT));
  }

  BatchTiming run_group(std::span<const Sample> samples, std::span<const GoldOutput> gold,
                        std::span<PathOutput> out, ThreadPool& pool, bool keep_powers) {
    using namespace detail;
    const auto t0 = std::chrono::steady_clock::now();
    const int n = int(samples.size());
    const int C = samples[0].chunk, d = samples[0].dim;
    if (C < 2 || C > 64) throw UsageError("path cublas: chunk " + std::to_string(C) + " outside 2..64");
    const bool stable = !gold.empty();
    const int mats = stable ? 2 * n : n;
    const size_t csq = size_t(C) * C, cd = size_t(C) * d;
    const int gw = samples[0].gate_width();
    const size_t cg = size_t(C) * gw;  // gates (and decays) per sample

    uint16_t* h_keys = h_keys_.get(n * cd);
    float* h_x = h_x_.get(size_t(n) * cg);
    uint16_t* h_beta = h_beta_.get(size_t(n) * C);
    uint16_t* h_gold = stable ? h_gold_.get(n * csq) : nullptr;
    constexpr size_t kBlock = 64;
    const size_t blocks = (size_t(n) + kBlock - 1) / kBlock;
    pool.parallel_for(blocks, [&](size_t b) {
      for (size_t s = b * kBlock; s < std::min(size_t(n), (b + 1) * kBlock); ++s) {
        const Sample& x = samples[s];
        for (size_t e = 0; e < cd; ++e) h_keys[s * cd + e] = exact_bf16_bits(x.keys[e]);
        if (x.gate_width() != gw || x.g.size() != cg)
          throw std::logic_error("path cublas: samples of one batch differ in gating");
        for (int k = 0; k < gw; ++k) {  // G per channel (one for per-token gates) in FP64
          double G = 0.0;
          for (int r = 0; r < C; ++r) {
            G += x.g[size_t(r) * gw + k];
            h_x[s * cg + size_t(r) * gw + k] = static_cast<float>(G * kLog2e);  // fp32(x), x = G log2 e in FP64
          }
        }
        for (int r = 0; r < C; ++r) h_beta[s * C + r] = fp16_bits_rn(x.beta[r]);
        if (stable)
          for (int r = 0; r < C; ++r)
            for (int c = 0; c < C; ++c) h_gold[s * csq + r * C + c] = fp16_bits_rn(gold[s].L(r, c));
      }
    });
    const double pack_ms = wall_ms_since(t0);

    uint16_t* keys = d_keys_.get(n * cd);
    float* x = d_x_.get(size_t(n) * cg);
    uint16_t* beta = d_beta_.get(size_t(n) * C);
    uint16_t* decay = d_decay_.get(size_t(n) * cg);
    uint16_t* inv_decay = d_inv_decay_.get(size_t(n) * cg);
    float* kd = d_kd_.get(n * cd);
    float* ki = d_ki_.get(n * cd);
    float* s32 = d_s_.get(n * csq);
    uint16_t* P = d_p_.get(mats * csq);  // the path's L, then fp16(gold L)
    uint16_t* Pn = d_pn_.get(mats * csq);
    uint16_t* INV = d_inv_.get(mats * csq);
    uint16_t* T = d_t_.get(mats * csq);
    float* pmax = d_pmax_.get(mats);
    uint16_t* L = d_l_.get(n * csq);

    cudaStream_t st = nullptr;
    CUDA_CHECK(cublasSetStream(handle_, st));
    timer_.mark(0, st);
    CUDA_CHECK(cudaMemcpyAsync(keys, h_keys, n * cd * 2, cudaMemcpyHostToDevice, st));
    CUDA_CHECK(cudaMemcpyAsync(x, h_x, size_t(n) * cg * 4, cudaMemcpyHostToDevice, st));
    CUDA_CHECK(cudaMemcpyAsync(beta, h_beta, size_t(n) * C * 2, cudaMemcpyHostToDevice, st));
    if (stable) CUDA_CHECK(cudaMemcpyAsync(P + n * csq, h_gold, n * csq * 2, cudaMemcpyHostToDevice, st));
    timer_.mark(1, st);

    decays_kernel<<<blocks_for(size_t(n) * cg), 256, 0, st>>>(x, decay, inv_decay, size_t(n) * cg);
    CUDA_CHECK_LAUNCH();
    scale_keys_kernel<<<blocks_for(n * cd), 256, 0, st>>>(keys, decay, inv_decay, kd, ki, d, gw != 1, n * cd);
    CUDA_CHECK_LAUNCH();
    // Row-major S = kd ki^T is column-major S^T = ki kd^T: A = ki (stored d x C, op T), B = kd (d x C).
    const float one = 1.0f, zero = 0.0f;
    CUDA_CHECK(cublasSgemmStridedBatched(handle_, CUBLAS_OP_T, CUBLAS_OP_N, C, C, d, &one, ki, d, (long long)cd, kd,
                                         d, (long long)cd, &zero, s32, C, (long long)csq, n));
    finish_l_kernel<<<blocks_for(n * csq), 256, 0, st>>>(s32, beta, P, C, n * csq);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaMemcpyAsync(L, P, n * csq * 2, cudaMemcpyDeviceToDevice, st));
    identity_minus_kernel<<<blocks_for(mats * csq), 256, 0, st>>>(P, INV, C, mats * csq);
    CUDA_CHECK_LAUNCH();
    const unsigned warp_blocks = blocks_for(size_t(mats) * 32);
    power_max_kernel<<<warp_blocks, 256, 0, st>>>(P, pmax, C, mats, true);
    CUDA_CHECK_LAUNCH();
    std::vector<std::vector<uint16_t>> powers;
    auto keep = [&](const uint16_t* p) {
      if (!keep_powers) return;
      powers.emplace_back(mats * csq);
      CUDA_CHECK(cudaMemcpyAsync(powers.back().data(), p, mats * csq * 2, cudaMemcpyDeviceToHost, st));
    };
    keep(P);
    int p = 1;
    while (2 * p < C) {
      gemm16(P, P, Pn, C, mats);
      std::swap(P, Pn);
      p *= 2;
      power_max_kernel<<<warp_blocks, 256, 0, st>>>(P, pmax, C, mats, false);
      CUDA_CHECK_LAUNCH();
      keep(P);
      gemm16(INV, P, T, C, mats);
      add_kernel<<<blocks_for(mats * csq), 256, 0, st>>>(INV, T, mats * csq);
      CUDA_CHECK_LAUNCH();
    }
    timer_.mark(2, st);

    uint16_t* h_decay = h_decay_.get(size_t(n) * cg);
    uint16_t* h_inv_decay = h_inv_decay_.get(size_t(n) * cg);
    uint16_t* h_l = h_l_.get(n * csq);
    uint16_t* h_inv = h_inv_.get(mats * csq);
    float* h_pmax = h_pmax_.get(mats);
    CUDA_CHECK(cudaMemcpyAsync(h_decay, decay, size_t(n) * cg * 2, cudaMemcpyDeviceToHost, st));
    CUDA_CHECK(cudaMemcpyAsync(h_inv_decay, inv_decay, size_t(n) * cg * 2, cudaMemcpyDeviceToHost, st));
    CUDA_CHECK(cudaMemcpyAsync(h_l, L, n * csq * 2, cudaMemcpyDeviceToHost, st));
    CUDA_CHECK(cudaMemcpyAsync(h_inv, INV, mats * csq * 2, cudaMemcpyDeviceToHost, st));
    CUDA_CHECK(cudaMemcpyAsync(h_pmax, pmax, size_t(mats) * 4, cudaMemcpyDeviceToHost, st));
    timer_.mark(3, st);
    CUDA_CHECK(cudaStreamSynchronize(st));
    const auto t1 = std::chrono::steady_clock::now();

    // Into the outputs' own storage (kept from batch to batch): no allocation once sized.
    auto run_of = [&](InverseRun& r, size_t m) {
      unpack_fp16_matrix(r.inv, h_inv + m * csq, C);
      r.diagnostics.assign({double(p), double(h_pmax[m])});
      r.intermediates.clear();
      for (size_t q = 0; q < powers.size(); ++q) {  // labelled as methods/neumann.cpp labels them
        r.intermediates.push_back({q == 0 ? std::string("L") : "L^" + std::to_string(1 << q), Mat()});
        unpack_fp16_matrix(r.intermediates.back().m, powers[q].data() + m * csq, C);
      }
    };
    pool.parallel_for(blocks, [&](size_t b) {
      for (size_t s = b * kBlock; s < std::min(size_t(n), (b + 1) * kBlock); ++s) {
        PathOutput& o = out[s];
        unpack_bf16_vector(o.l.decay, h_decay + s * cg, int(cg));
        unpack_bf16_vector(o.l.inv_decay, h_inv_decay + s * cg, int(cg));
        unpack_fp16_matrix(o.l.L, h_l + s * csq, C);
        run_of(o.on_path_l, s);
        if (stable) run_of(o.on_gold_l, n + s);
        else o.on_gold_l = InverseRun{};
      }
    });

    BatchTiming t;
    t.upload_ms = timer_.ms(0, 1);
    t.compute_ms = timer_.ms(1, 2);
    t.download_ms = timer_.ms(2, 3);
    t.host_ms = pack_ms + wall_ms_since(t1);
    return t;
  }

  cublasHandle_t handle_ = nullptr;
  detail::EventTimer timer_;
  detail::PinnedBuffer<uint16_t> h_keys_, h_beta_, h_gold_, h_decay_, h_inv_decay_, h_l_, h_inv_;
  detail::PinnedBuffer<float> h_x_, h_pmax_;
  detail::DeviceBuffer<uint16_t> d_keys_, d_beta_, d_decay_, d_inv_decay_, d_p_, d_pn_, d_inv_, d_t_, d_l_;
  detail::DeviceBuffer<float> d_x_, d_kd_, d_ki_, d_s_, d_pmax_;
};

}  // namespace

std::unique_ptr<Path> make_cublas_path() { return std::make_unique<CublasPath>(); }

}  // namespace chunkinv::gpu

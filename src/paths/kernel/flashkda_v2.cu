// Method flashkda_v2 on the `kernel` path: FlashKDA v2's L and inverse with
// the real instructions (SPEC §2 "FlashKDA v2 inverse"). Its slow, obvious
// reference is the method's CPU form (methods/flashkda_v2.cpp) on the
// emulated path's FP32 L; tests/paths/test_gpu_paths.cpp compares them bit
// for bit.
//
// One warp runs one task, as for Neumann (kernel.cu): a whole sample, or the
// inverse alone on fp32(gold L). Steps:
// 1. decays and scaled keys as the v1 kernel forms them (kernel_launch.cuh);
// 2. L = mma.m16n8k16 BF16 -> FP32 chained over d, strict lower part,
//    times the FP32 beta (mul.rn.f32): kept in FP32;
// 3. C zero-padded to N = 8, 16, 32 or 64; each 8 x 8 diagonal block by the
//    column-oriented substitution, one fma.rn.f32 per update (lanes take the
//    updates of one step; a step's updates are independent);
// 4. merges 8 -> 16 -> ... -> N, each D = P M and O = bf16(-D) P through
//    mma BF16 -> FP32 (every 16 x 8 output tile from a zero C operand, its
//    k-blocks chained in increasing order), INV = bf16(P + bf16(O)).
// Output BF16. Diagnostics as the CPU form: max |X| of the diagonal blocks,
// and max |.| over X, every D and O and the output (+inf if any is not finite).
#pragma nv_diag_suppress 20015
#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/fp.hpp"
#include "core/thread_pool.hpp"
#include "gpu/buffers.cuh"
#include "gpu/check.cuh"
#include "gpu/pack.hpp"
#include "gpu/ptx.cuh"
#include "gpu/tiles.cuh"
#include "paths/kernel/flashkda_v2.hpp"
#include "paths/kernel/kernel_launch.cuh"

namespace chunkinv::gpu {
namespace {

using namespace tiles;

constexpr int kBlockSmemBudget = 96 * 1024;

struct V2Args {
  KernelArgs k;                     // keys, g, gate_width, fp16 beta (unused here), decays out
  int N = 8;                        // the inverse's padded size
  const float* beta32 = nullptr;    // n x C
  const float* gold_l = nullptr;    // n x C x C, fp32(gold L); null: no run on the gold L
  float* l = nullptr;               // n x C x C, the FP32 L
  uint16_t* inv = nullptr;          // per task C x C, BF16
  float* diag_max = nullptr;        // per task
  float* work_max = nullptr;        // per task
};

// |x|, +inf for a non-finite x.
__device__ inline float mag(float x) { return isfinite(x) ? fabsf(x) : INFINITY; }

size_t v2_warp_smem(int cp, int dim, int N) {
  return warp_smem_bytes(cp, dim, true) + size_t(cp) * 4 + 2 * size_t(N) * N * 4;
}

__global__ void flashkda_v2_kernel(V2Args a) {
  extern __shared__ __align__(16) char smem[];
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const long task = long(blockIdx.x) * (blockDim.x >> 5) + warp;
  const int n = a.k.n;
  const int tasks = a.gold_l ? 2 * n : n;
  if (task >= tasks) return;
  const int C = a.k.chunk, cp = a.k.cp, d = a.k.dim, N = a.N;
  const int ms = mat_stride(cp), ks = key_stride(d);
  const bool full = task < n;
  const long sample = full ? task : task - n;
  char* base = smem + size_t(warp) * a.k.warp_smem;
  WarpSmem s = carve(base, cp, d, true);
  float* beta32 = reinterpret_cast<float*>(base + warp_smem_bytes(cp, d, true));
  float* A = beta32 + cp;  // N x N, the FP32 L (zero-padded)
  float* X = A + N * N;    // N x N, the diagonal inverses, then the merged blocks
  const size_t csq = size_t(C) * C;

  for (int e = lane; e < N * N; e += 32) A[e] = 0.0f, X[e] = 0.0f;
  __syncwarp();
  if (!full) {
    const float* gl = a.gold_l + sample * csq;
    for (int e = lane; e < int(csq); e += 32) A[(e / C) * N + e % C] = gl[e];
  } else {
    if (a.k.gate_width != 1) per_channel_scaled_keys(a.k, sample, s, cp, ks, lane);
    else token_scaled_keys(a.k, sample, s, cp, ks, lane);
    for (int i = lane; i < cp; i += 32) beta32[i] = i < C ? a.beta32[sample * C + i] : 0.0f;
    __syncwarp();
    // L in FP32: strict lower part times the FP32 beta; tiles wholly above the diagonal are not formed.
    const int g = lane >> 2, t = lane & 3;
    for (int mi = 0; mi < cp; mi += 16) {
      for (int nj = 0; nj < mi + 16; nj += 8) {
        float acc[4] = {0.f, 0.f, 0.f, 0.f};
        for (int kb = 0; kb < d; kb += 16) {
          uint32_t fa[4], fb[2];
          load_a(fa, s.kd, ks, mi, kb, lane);
          load_b_rows(fb, s.ki, ks, kb, nj, lane);
          ptx::mma_bf16_f32(acc, fa, fb, acc);
        }
        for (int e = 0; e < 4; ++e) {
          const int r = mi + g + (e >= 2 ? 8 : 0), c = nj + 2 * t + (e & 1);
          if (r < C && c < r) A[r * N + c] = __fmul_rn(acc[e], beta32[r]);
        }
      }
    }
    __syncwarp();
    for (int e = lane; e < int(csq); e += 32) a.l[sample * csq + e] = A[(e / C) * N + e % C];
  }
  __syncwarp();

  // Diagonal 8 x 8 blocks: X = (I + A_b)^-1, column-oriented, one FMA per update.
  const int nb = N / 8;
  for (int e = lane; e < nb * 8; e += 32) X[(e * N) + e] = 1.0f;  // element e of the diagonal
  for (int st = 0; st < 7; ++st) {
    for (int e = lane; e < nb * 64; e += 32) {
      const int b = e >> 6, r = (e >> 3) & 7, p = e & 7, o = 8 * b;
      if (r > st && p < st)
        X[(o + r) * N + o + p] = __fmaf_rn(-A[(o + r) * N + o + st], X[(o + st) * N + o + p], X[(o + r) * N + o + p]);
    }
    __syncwarp();
    for (int e = lane; e < nb * 8; e += 32) {
      const int b = e >> 3, r = e & 7, o = 8 * b;
      if (r > st) X[(o + r) * N + o + st] = -A[(o + r) * N + o + st];
    }
    __syncwarp();
  }
  float dmax = 0.0f;
  for (int e = lane; e < N * N; e += 32) dmax = fmaxf(dmax, mag(X[e]));
  dmax = warp_max(dmax);
  float wmax = dmax;

  // Merges: P = diag(bf16(Xa), bf16(Xb)), M = bf16(lower-left block of A).
  uint16_t* P = s.mat[0];
  uint16_t* M = s.mat[1];
  uint16_t* T = s.mat[2];  // bf16(-D)
  const int g = lane >> 2, tq = lane & 3;
  for (int h = 8; h < N; h *= 2) {
    const int w = 2 * h;
    for (int t0 = 0; t0 < N; t0 += w) {
      for (int e = lane; e < w * w; e += 32) {
        const int r = e / w, c = e % w;
        const bool diag = (r < h) == (c < h);
        P[r * ms + c] = diag ? ptx::cvt_rn_bf16(X[(t0 + r) * N + t0 + c]) : uint16_t(0);
        M[r * ms + c] = (r >= h && c < h) ? ptx::cvt_rn_bf16(A[(t0 + r) * N + t0 + c]) : uint16_t(0);
      }
      __syncwarp();
      for (int mi = 0; mi < w; mi += 16)
        for (int nj = 0; nj < w; nj += 8) {
          float acc[4] = {0.f, 0.f, 0.f, 0.f};
          for (int kb = 0; kb < w; kb += 16) {
            uint32_t fa[4], fb[2];
            load_a(fa, P, ms, mi, kb, lane);
            load_b(fb, M, ms, kb, nj, lane);
            ptx::mma_bf16_f32(acc, fa, fb, acc);
          }
          for (int e = 0; e < 4; ++e) {
            const int r = mi + g + (e >= 2 ? 8 : 0), c = nj + 2 * tq + (e & 1);
            wmax = fmaxf(wmax, mag(acc[e]));
            T[r * ms + c] = ptx::cvt_rn_bf16(-acc[e]);
          }
        }
      __syncwarp();
      for (int mi = 0; mi < w; mi += 16)
        for (int nj = 0; nj < w; nj += 8) {
          float acc[4] = {0.f, 0.f, 0.f, 0.f};
          for (int kb = 0; kb < w; kb += 16) {
            uint32_t fa[4], fb[2];
            load_a(fa, T, ms, mi, kb, lane);
            load_b(fb, P, ms, kb, nj, lane);
            ptx::mma_bf16_f32(acc, fa, fb, acc);
          }
          for (int e = 0; e < 4; ++e) {
            const int r = mi + g + (e >= 2 ? 8 : 0), c = nj + 2 * tq + (e & 1);
            wmax = fmaxf(wmax, mag(acc[e]));
            const float o = ptx::bf16_to_f32(ptx::cvt_rn_bf16(acc[e]));
            const float sum = __fadd_rn(ptx::bf16_to_f32(P[r * ms + c]), o);
            X[(t0 + r) * N + t0 + c] = ptx::bf16_to_f32(ptx::cvt_rn_bf16(sum));
          }
        }
      __syncwarp();
    }
  }
  uint16_t* inv = a.inv + size_t(task) * csq;
  for (int e = lane; e < int(csq); e += 32) {
    const uint16_t h = ptx::cvt_rn_bf16(X[(e / C) * N + e % C]);
    inv[e] = h;
    wmax = fmaxf(wmax, mag(ptx::bf16_to_f32(h)));
  }
  wmax = warp_max(wmax);
  if (lane == 0) {
    a.diag_max[task] = dmax;
    a.work_max[task] = wmax;
  }
}

int padded_n(int chunk) {
  int n = 8;
  while (n < chunk) n *= 2;
  return n;
}

}  // namespace

BatchTiming FlashkdaV2Runner::run(std::span<const Sample> samples, std::span<const GoldOutput> gold,
                                  std::span<PathOutput> out, ThreadPool& pool) {
  return detail::run_by_shape(samples, [&](size_t i, size_t n) {
    return run_group(samples.subspan(i, n), gold.subspan(i, n), out.subspan(i, n), pool);
  });
}

BatchTiming FlashkdaV2Runner::run_group(std::span<const Sample> samples, std::span<const GoldOutput> gold,
                                        std::span<PathOutput> out, ThreadPool& pool) {
  using namespace detail;
  const auto t0 = std::chrono::steady_clock::now();
  const int n = int(samples.size());
  const int C = samples[0].chunk, d = samples[0].dim;
  if (C < 2 || C > 64) throw UsageError("path kernel: chunk " + std::to_string(C) + " outside 2..64");
  if (d <= 0 || d % 16 != 0) throw UsageError("path kernel: dim " + std::to_string(d) + " is not a multiple of 16");
  const int N = padded_n(C), cp = std::max(16, N);
  const bool gold_runs = !gold.empty();
  const int tasks = gold_runs ? 2 * n : n;
  const int gw = samples[0].gate_width();
  const size_t csq = size_t(C) * C, cd = size_t(C) * d, cg = size_t(C) * gw;

  static int optin = [] {
    int dev = 0, v = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    CUDA_CHECK(cudaFuncSetAttribute(flashkda_v2_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, v));
    return v;
  }();
  const size_t warp_smem = (v2_warp_smem(cp, d, N) + 15) / 16 * 16;
  if (warp_smem > size_t(optin))
    throw UsageError("path kernel: chunk " + std::to_string(C) + " x dim " + std::to_string(d) +
                     " needs more shared memory than one block has (method flashkda_v2)");
  const int warps = int(std::clamp<size_t>(kBlockSmemBudget / warp_smem, 1, 8));

  uint16_t* h_keys = h_keys_.get(n * cd);
  double* h_g = h_g_.get(size_t(n) * cg);
  float* h_beta = h_beta_.get(size_t(n) * C);
  float* h_gold = gold_runs ? h_gold_.get(n * csq) : nullptr;
  constexpr size_t kBlock = 64;
  const size_t blocks = (size_t(n) + kBlock - 1) / kBlock;
  pool.parallel_for(blocks, [&](size_t b) {
    for (size_t s = b * kBlock; s < std::min(size_t(n), (b + 1) * kBlock); ++s) {
      const Sample& x = samples[s];
      if (x.gate_width() != gw || x.g.size() != cg)
        throw std::logic_error("path kernel: samples of one batch differ in gating");
      for (size_t e = 0; e < cd; ++e) h_keys[s * cd + e] = exact_bf16_bits(x.keys[e]);
      std::copy(x.g.begin(), x.g.end(), h_g + s * cg);
      for (int r = 0; r < C; ++r) h_beta[s * C + r] = static_cast<float>(x.beta[r]);  // fp32(beta), RN
      if (gold_runs)
        for (int r = 0; r < C; ++r)
          for (int c = 0; c < C; ++c) h_gold[s * csq + r * C + c] = static_cast<float>(gold[s].L(r, c));
    }
  });
  const double pack_ms = wall_ms_since(t0);

  V2Args a{};
  a.k.n = n;
  a.k.chunk = C;
  a.k.dim = d;
  a.k.cp = cp;
  a.k.with_keys = true;
  a.k.warp_smem = warp_smem;
  a.k.gate_width = gw;
  a.k.keys = d_keys_.get(n * cd);
  a.k.g = d_g_.get(size_t(n) * cg);
  a.k.beta = d_beta16_.get(size_t(n) * C);  // read by the shared steps; unused by v2's L
  a.k.decay = d_decay_.get(size_t(n) * cg);
  a.k.inv_decay = d_inv_decay_.get(size_t(n) * cg);
  a.N = N;
  a.beta32 = d_beta_.get(size_t(n) * C);
  a.gold_l = gold_runs ? d_gold_.get(n * csq) : nullptr;
  a.l = d_l_.get(n * csq);
  a.inv = d_inv_.get(size_t(tasks) * csq);
  a.diag_max = d_dmax_.get(tasks);
  a.work_max = d_wmax_.get(tasks);

  cudaStream_t st = nullptr;
  timer_.mark(0, st);
  CUDA_CHECK(cudaMemcpyAsync(const_cast<uint16_t*>(a.k.keys), h_keys, n * cd * 2, cudaMemcpyHostToDevice, st));
  CUDA_CHECK(cudaMemcpyAsync(const_cast<double*>(a.k.g), h_g, size_t(n) * cg * 8, cudaMemcpyHostToDevice, st));
  CUDA_CHECK(cudaMemsetAsync(const_cast<uint16_t*>(a.k.beta), 0, size_t(n) * C * 2, st));
  CUDA_CHECK(cudaMemcpyAsync(const_cast<float*>(a.beta32), h_beta, size_t(n) * C * 4, cudaMemcpyHostToDevice, st));
  if (gold_runs)
    CUDA_CHECK(cudaMemcpyAsync(const_cast<float*>(a.gold_l), h_gold, n * csq * 4, cudaMemcpyHostToDevice, st));
  timer_.mark(1, st);
  const int grid = (tasks + warps - 1) / warps;
  flashkda_v2_kernel<<<grid, 32 * warps, warps * warp_smem, st>>>(a);
  CUDA_CHECK_LAUNCH();
  timer_.mark(2, st);

  uint16_t* h_decay = h_decay_.get(size_t(n) * cg);
  uint16_t* h_inv_decay = h_inv_decay_.get(size_t(n) * cg);
  float* h_l = h_l_.get(n * csq);
  uint16_t* h_inv = h_inv_.get(size_t(tasks) * csq);
  float* h_dmax = h_dmax_.get(tasks);
  float* h_wmax = h_wmax_.get(tasks);
  CUDA_CHECK(cudaMemcpyAsync(h_decay, a.k.decay, size_t(n) * cg * 2, cudaMemcpyDeviceToHost, st));
  CUDA_CHECK(cudaMemcpyAsync(h_inv_decay, a.k.inv_decay, size_t(n) * cg * 2, cudaMemcpyDeviceToHost, st));
  CUDA_CHECK(cudaMemcpyAsync(h_l, a.l, n * csq * 4, cudaMemcpyDeviceToHost, st));
  CUDA_CHECK(cudaMemcpyAsync(h_inv, a.inv, size_t(tasks) * csq * 2, cudaMemcpyDeviceToHost, st));
  CUDA_CHECK(cudaMemcpyAsync(h_dmax, a.diag_max, size_t(tasks) * 4, cudaMemcpyDeviceToHost, st));
  CUDA_CHECK(cudaMemcpyAsync(h_wmax, a.work_max, size_t(tasks) * 4, cudaMemcpyDeviceToHost, st));
  timer_.mark(3, st);
  CUDA_CHECK(cudaStreamSynchronize(st));
  const auto t1 = std::chrono::steady_clock::now();

  auto run_of = [&](InverseRun& r, int task) {
    std::vector<double> v;
    unpack_bf16_vector(v, h_inv + size_t(task) * csq, int(csq));
    r.inv.resize(C, C);
    for (int i = 0; i < C; ++i)
      for (int j = 0; j < C; ++j) r.inv(i, j) = v[size_t(i) * C + j];
    r.diagnostics.assign({double(h_dmax[task]), double(h_wmax[task])});
    r.intermediates.clear();  // the GPU form keeps none (inspect shows the CPU form's on the emulated path)
  };
  pool.parallel_for(blocks, [&](size_t b) {
    for (size_t s = b * kBlock; s < std::min(size_t(n), (b + 1) * kBlock); ++s) {
      PathOutput& o = out[s];
      unpack_bf16_vector(o.l.decay, h_decay + s * cg, int(cg));
      unpack_bf16_vector(o.l.inv_decay, h_inv_decay + s * cg, int(cg));
      o.l.L.resize(C, C);
      for (int i = 0; i < C; ++i)
        for (int j = 0; j < C; ++j) o.l.L(i, j) = double(h_l[s * csq + size_t(i) * C + j]);
      run_of(o.on_path_l, int(s));
      if (gold_runs) run_of(o.on_gold_l, n + int(s));
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

}  // namespace chunkinv::gpu

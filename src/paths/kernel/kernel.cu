// The `kernel` path (SPEC §2 "kernel"): FlashKDA v1's K1 arithmetic with the
// real instructions. Its slow, obvious reference is the emulated path
// (paths/emulated), which tests/test_gpu_kernel.cpp compares bit for bit.
//
// One warp runs one task: either a whole sample (decays, scaled keys, L,
// Neumann) or the Neumann arithmetic alone on a given FP16 matrix (the
// run on fp16(gold L)). Everything of a task lives in the warp's
// slice of shared memory; the chunk is zero-padded to a multiple of 16.
// Eigen (through core/matrix.hpp) calls constexpr host functions from host-device code.
#pragma nv_diag_suppress 20015
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/fp.hpp"
#include "core/thread_pool.hpp"
#include "gpu/buffers.cuh"
#include "gpu/check.cuh"
#include "gpu/gpu.hpp"
#include "gpu/pack.hpp"
#include "gpu/ptx.cuh"
#include "gpu/tiles.cuh"
#include "paths/gpu_paths.hpp"
#include "paths/kernel/flashkda_v2.hpp"
#include "paths/kernel/gpu_inverse_runner.hpp"
#include "paths/kernel/activate.hpp"
#include "paths/kernel/kernel_launch.cuh"

namespace chunkinv {
extern const MethodSpec kFlashkdaV2Method;
}  // namespace chunkinv

namespace chunkinv::gpu {
namespace {

using namespace tiles;

constexpr int kWarpsPerBlockMax = 8;
constexpr uint16_t kF16One = 0x3C00;

// D = A * B (+ Add), all cp x cp FP16 in shared memory, through
// mma.m16n8k16 with FP16 accumulation: each 16x8 output tile starts from a
// zero C operand and chains every k-block, in increasing order, through C.
__device__ void matmul_f16(uint16_t* d, const uint16_t* a, const uint16_t* b, const uint16_t* add, int cp,
                           int lane) {
  const int ms = mat_stride(cp);
  const int g = lane >> 2, t = lane & 3;
  for (int mi = 0; mi < cp; mi += 16) {
    for (int nj = 0; nj < cp; nj += 8) {
      uint32_t acc[2] = {0u, 0u};
      for (int kb = 0; kb < cp; kb += 16) {
        uint32_t fa[4], fb[2];
        load_a(fa, a, ms, mi, kb, lane);
        load_b(fb, b, ms, kb, nj, lane);
        ptx::mma_f16_f16(acc, fa, fb, acc);
      }
      uint16_t* p = d + (mi + g) * ms + nj + 2 * t;
      if (add) {
        const uint16_t* q = add + (mi + g) * ms + nj + 2 * t;
        acc[0] = ptx::add_rn_f16x2(ld32(q), acc[0]);
        acc[1] = ptx::add_rn_f16x2(ld32(q + 8 * ms), acc[1]);
      }
      st32(p, acc[0]);
      st32(p + 8 * ms, acc[1]);
    }
  }
}

__device__ float matrix_max(const uint16_t* m, int cp, int lane) {
  const int ms = mat_stride(cp);
  float v = 0.0f;
  for (int e = lane; e < cp * cp; e += 32) v = fmaxf(v, magnitude(m[(e / cp) * ms + e % cp]));
  return warp_max(v);
}

__device__ void store_matrix(uint16_t* out, const uint16_t* m, int chunk, int cp, int lane) {
  const int ms = mat_stride(cp);
  for (int e = lane; e < chunk * chunk; e += 32) out[e] = m[(e / chunk) * ms + e % chunk];
}

// Step 6 on the FP16 strict-lower L in s.mat[0]: INV = I - L, then while
// 2p < C: P = P*P, INV = INV + INV*P.
__device__ void neumann(WarpSmem& s, int chunk, int cp, int lane, uint16_t* inv_out, int* highest_power,
                        float* power_max, uint16_t* powers_out) {
  const int ms = mat_stride(cp);
  uint16_t* P = s.mat[0];
  uint16_t* INV = s.mat[1];
  uint16_t* Pn = s.mat[2];
  uint16_t* INVn = s.mat[3];
  for (int e = lane; e < cp * cp; e += 32) {
    const int r = e / cp, c = e % cp;
    INV[r * ms + c] = ptx::sub_rn_f16(r == c ? kF16One : uint16_t(0), P[r * ms + c]);
  }
  __syncwarp();
  float pmax = matrix_max(P, cp, lane);
  const size_t csq = size_t(chunk) * chunk;
  if (powers_out) store_matrix(powers_out, P, chunk, cp, lane);
  int p = 1, q = 0;
  while (2 * p < chunk) {
    matmul_f16(Pn, P, P, nullptr, cp, lane);
    __syncwarp();
    uint16_t* t = P; P = Pn; Pn = t;
    p *= 2;
    ++q;
    pmax = fmaxf(pmax, matrix_max(P, cp, lane));
    if (powers_out) store_matrix(powers_out + q * csq, P, chunk, cp, lane);
    matmul_f16(INVn, INV, P, INV, cp, lane);
    __syncwarp();
    t = INV; INV = INVn; INVn = t;
  }
  store_matrix(inv_out, INV, chunk, cp, lane);
  if (lane == 0) {
    *highest_power = p;
    *power_max = pmax;
  }
}

__global__ void kernel_path_kernel(KernelArgs args) {
  extern __shared__ __align__(16) char smem[];
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const long task = args.task_first + long(blockIdx.x) * (blockDim.x >> 5) + warp;
  const int tasks = args.task_end ? args.task_end : args.gold_l ? 2 * args.n : args.n;
  if (task >= tasks) return;
  const int C = args.chunk, cp = args.cp, d = args.dim;
  const int ms = mat_stride(cp), ks = key_stride(d);
  const bool full = task < args.n;
  const long sample = full ? task : task - args.n;
  WarpSmem s = carve(smem + size_t(warp) * args.warp_smem, cp, d, args.with_keys);
  const size_t csq = size_t(C) * C;
  uint16_t* powers = args.powers ? args.powers + size_t(task) * args.npow * csq : nullptr;

  for (int e = lane; e < cp * ms; e += 32) s.mat[0][e] = 0;  // L, padding included, starts at +0
  if (!full) {
    __syncwarp();
    const uint16_t* gl = args.gold_l + sample * csq;
    for (int e = lane; e < int(csq); e += 32) s.mat[0][(e / C) * ms + e % C] = gl[e];
    __syncwarp();
    neumann(s, C, cp, lane, args.gold_l_inv + sample * csq, args.highest_power + task, args.power_max + task,
            powers);
    return;
  }

  // Steps 1-3: decays, and the keys scaled by them (kernel_launch.cuh).
  if (args.gate_width != 1) per_channel_scaled_keys(args, sample, s, cp, ks, lane);
  else token_scaled_keys(args, sample, s, cp, ks, lane);
  __syncwarp();

  // Steps 4-5: L = fp16(kd ki^T) through mma BF16 -> FP32, chained over d;
  // strict lower part; L_ij = fp16(L_ij * fp16(beta_i)). Tiles wholly above
  // the diagonal are discarded anyway, so they are not formed.
  {
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
          uint16_t h = 0;
          if (r < C && c < r) h = ptx::mul_rn_f16(ptx::cvt_rn_f16(acc[e]), s.beta[r]);
          s.mat[0][r * ms + c] = h;
        }
      }
    }
  }
  __syncwarp();
  store_matrix(args.l + sample * csq, s.mat[0], C, cp, lane);
  if (args.l_only) return;  // L for another method's inverse (methods/gpu_form.hpp)
  neumann(s, C, cp, lane, args.inv + sample * csq, args.highest_power + task, args.power_max + task, powers);
}

int neumann_powers(int chunk) {  // L, L^2, ..., L^highest
  int n = 1;
  for (int p = 1; 2 * p < chunk; p *= 2) ++n;
  return n;
}

// Version 1 (this file) is the simple reference that version 2
// (kernel_v2.cu) is checked against; the version and the padding are the
// path's options (kernel:version=1:pad=64).
class KernelPath final : public Path {
 public:
  KernelPath(int version, int pad) : version_(version), pad_(pad) {}

  BatchTiming run_batch(const Batch& in, std::span<const Method* const> methods, std::span<PathOutput> out,
                        ThreadPool& pool, bool keep) override {
    // Each method its own launch: the Neumann kernel (v1 or v2 of this
    // file's arithmetic), FlashKDA v2's inverse (flashkda_v2.cu), or this
    // kernel's L handed to a method's GPU form (methods/gpu_form.hpp). The
    // spec's supports() admits no other.
    const size_t n = in.samples.size();
    BatchTiming total;
    // FlashKDA's raw inputs: activated here by the hardware's instructions
    // (the samples hold the CPU model's activation).
    std::vector<Sample> activated;
    Batch batch = in;
    if (gpu::any_raw(in.samples)) {
      const auto t0 = std::chrono::steady_clock::now();
      activated = gpu::activate_raw_on_gpu(in.samples);
      batch.samples = activated;
      total.host_ms += detail::wall_ms_since(t0);
    }
    std::span<PathOutput> neumann;  // Neumann's outputs once formed (neumann and flashkda_v1 share them)
    for (size_t m = 0; m < methods.size(); ++m) {
      std::span<PathOutput> o = out.subspan(m * n, n);
      if (methods[m]->spec == &kFlashkdaV2Method) {
        total += v2_.run(batch.samples, batch.gold, o, pool);
      } else if (const GpuInverse* form = find_gpu_inverse(*methods[m]->spec)) {
        // L (FP16, as Neumann's) from this kernel without its inverse, then
        // the method's GPU form on it and on the gold L.
        total += detail::run_by_shape(batch.samples, [&](size_t i, size_t k) {
          const auto gold = batch.gold.empty() ? batch.gold : batch.gold.subspan(i, k);
          BatchTiming t = run_group(batch.samples.subspan(i, k), gold, o.subspan(i, k), pool, false, true);
          t += inverse_.run(*form, *methods[m], gold, o.subspan(i, k), pool);
          return t;
        });
      } else if (!neumann.empty()) {
        std::copy(neumann.begin(), neumann.end(), o.begin());
      } else {
        total += detail::run_by_shape(batch.samples, [&](size_t i, size_t k) {
          return run_group(batch.samples.subspan(i, k), batch.gold.subspan(i, k), o.subspan(i, k), pool, keep);
        });
        neumann = o;
      }
    }
    return total;
  }

 private:
  // l_only: decays and L alone (no inverse, no run on the gold L): out's inverses are left as they are.
  BatchTiming run_group(std::span<const Sample> samples, std::span<const GoldOutput> gold,
                        std::span<PathOutput> out, ThreadPool& pool, bool keep_powers, bool l_only = false) {
    using namespace detail;
    const auto t0 = std::chrono::steady_clock::now();
    const int n = int(samples.size());
    const int C = samples[0].chunk, d = samples[0].dim;
    if (C < 2 || C > 64) throw UsageError("path kernel: chunk " + std::to_string(C) + " outside 2..64");
    if (d <= 0 || d % 16 != 0) throw UsageError("path kernel: dim " + std::to_string(d) + " is not a multiple of 16");
    const int cp = std::max((C + 15) / 16 * 16, pad_);
    const bool gold_runs = !gold.empty() && !l_only;
    const int tasks = gold_runs ? 2 * n : n;
    const size_t csq = size_t(C) * C, cd = size_t(C) * d;
    const int npow = neumann_powers(C);
    const int gw = samples[0].gate_width();
    const size_t cg = size_t(C) * gw;  // gates (and decays) per sample

    KernelLaunch launch = plan_launch(cp, d);

    // Pack the inputs (BF16 key bits, g, fp16(beta), fp16(gold L)).
    uint16_t* h_keys = h_keys_.get(n * cd);
    double* h_g = h_g_.get(size_t(n) * cg);
    uint16_t* h_beta = h_beta_.get(size_t(n) * C);
    uint16_t* h_gold = gold_runs ? h_gold_.get(n * csq) : nullptr;
    constexpr size_t kBlock = 64;
    const size_t blocks = (size_t(n) + kBlock - 1) / kBlock;
    pool.parallel_for(blocks, [&](size_t b) {
      for (size_t s = b * kBlock; s < std::min(size_t(n), (b + 1) * kBlock); ++s) {
        const Sample& x = samples[s];
        for (size_t e = 0; e < cd; ++e) h_keys[s * cd + e] = exact_bf16_bits(x.keys[e]);
        if (x.gate_width() != gw || x.g.size() != cg)
          throw std::logic_error("path kernel: samples of one batch differ in gating");
        std::copy(x.g.begin(), x.g.end(), h_g + s * cg);
        for (int r = 0; r < C; ++r) h_beta[s * C + r] = fp16_bits_rn(x.beta[r]);
        if (gold_runs)
          for (int r = 0; r < C; ++r)
            for (int c = 0; c < C; ++c) h_gold[s * csq + r * C + c] = fp16_bits_rn(gold[s].L(r, c));
      }
    });
    const double pack_ms = wall_ms_since(t0);

    KernelArgs a{};
    a.n = n;
    a.chunk = C;
    a.dim = d;
    a.cp = cp;
    a.npow = npow;
    a.with_keys = true;
    a.l_only = l_only;
    a.warp_smem = launch.warp_smem;
    a.keys = d_keys_.get(n * cd);
    a.gate_width = gw;
    a.g = d_g_.get(size_t(n) * cg);
    a.beta = d_beta_.get(size_t(n) * C);
    a.gold_l = gold_runs ? d_gold_.get(n * csq) : nullptr;
    a.decay = d_decay_.get(size_t(n) * cg);
    a.inv_decay = d_inv_decay_.get(size_t(n) * cg);
    a.l = d_l_.get(n * csq);
    a.inv = d_inv_.get(n * csq);
    a.gold_l_inv = gold_runs ? d_gold_l_inv_.get(n * csq) : nullptr;
    a.highest_power = d_hp_.get(tasks);
    a.power_max = d_pmax_.get(tasks);
    a.powers = keep_powers ? d_powers_.get(size_t(tasks) * npow * csq) : nullptr;

    cudaStream_t st = nullptr;
    timer_.mark(0, st);
    CUDA_CHECK(cudaMemcpyAsync(const_cast<uint16_t*>(a.keys), h_keys, n * cd * 2, cudaMemcpyHostToDevice, st));
    CUDA_CHECK(cudaMemcpyAsync(const_cast<double*>(a.g), h_g, size_t(n) * cg * 8, cudaMemcpyHostToDevice, st));
    CUDA_CHECK(cudaMemcpyAsync(const_cast<uint16_t*>(a.beta), h_beta, size_t(n) * C * 2, cudaMemcpyHostToDevice, st));
    if (gold_runs)
      CUDA_CHECK(cudaMemcpyAsync(const_cast<uint16_t*>(a.gold_l), h_gold, n * csq * 2, cudaMemcpyHostToDevice, st));
    timer_.mark(1, st);
    if (version_ == 2) launch_kernel_path_v2(a, tasks, st);
    else launch_kernel_path(a, launch, tasks, st);
    timer_.mark(2, st);

    uint16_t* h_decay = h_decay_.get(size_t(n) * cg);
    uint16_t* h_inv_decay = h_inv_decay_.get(size_t(n) * cg);
    uint16_t* h_l = h_l_.get(n * csq);
    uint16_t* h_inv = h_inv_.get(n * csq);
    uint16_t* h_sinv = gold_runs ? h_gold_l_inv_.get(n * csq) : nullptr;
    int* h_hp = h_hp_.get(tasks);
    float* h_pmax = h_pmax_.get(tasks);
    uint16_t* h_powers = keep_powers ? h_powers_.get(size_t(tasks) * npow * csq) : nullptr;
    CUDA_CHECK(cudaMemcpyAsync(h_decay, a.decay, size_t(n) * cg * 2, cudaMemcpyDeviceToHost, st));
    CUDA_CHECK(cudaMemcpyAsync(h_inv_decay, a.inv_decay, size_t(n) * cg * 2, cudaMemcpyDeviceToHost, st));
    CUDA_CHECK(cudaMemcpyAsync(h_l, a.l, n * csq * 2, cudaMemcpyDeviceToHost, st));
    CUDA_CHECK(cudaMemcpyAsync(h_inv, a.inv, n * csq * 2, cudaMemcpyDeviceToHost, st));
    if (gold_runs) CUDA_CHECK(cudaMemcpyAsync(h_sinv, a.gold_l_inv, n * csq * 2, cudaMemcpyDeviceToHost, st));
    CUDA_CHECK(cudaMemcpyAsync(h_hp, a.highest_power, size_t(tasks) * 4, cudaMemcpyDeviceToHost, st));
    CUDA_CHECK(cudaMemcpyAsync(h_pmax, a.power_max, size_t(tasks) * 4, cudaMemcpyDeviceToHost, st));
    if (keep_powers)
      CUDA_CHECK(cudaMemcpyAsync(h_powers, a.powers, size_t(tasks) * npow * csq * 2, cudaMemcpyDeviceToHost, st));
    timer_.mark(3, st);
    CUDA_CHECK(cudaStreamSynchronize(st));
    const auto t1 = std::chrono::steady_clock::now();

    // Unpack: every value exact as a double.
    // Into the outputs' own storage (kept from batch to batch): no allocation once sized.
    auto run_of = [&](InverseRun& r, const uint16_t* inv, int task) {
      unpack_fp16_matrix(r.inv, inv, C);
      r.diagnostics.assign({double(h_hp[task]), double(h_pmax[task])});
      r.intermediates.clear();
      for (int q = 0; keep_powers && q < npow; ++q) {  // labelled as methods/neumann.cpp labels them
        r.intermediates.push_back({q == 0 ? std::string("L") : "L^" + std::to_string(1 << q), Mat()});
        unpack_fp16_matrix(r.intermediates.back().m, h_powers + (size_t(task) * npow + q) * csq, C);
      }
    };
    pool.parallel_for(blocks, [&](size_t b) {
      for (size_t s = b * kBlock; s < std::min(size_t(n), (b + 1) * kBlock); ++s) {
        PathOutput& o = out[s];
        unpack_bf16_vector(o.l.decay, h_decay + s * cg, int(cg));
        unpack_bf16_vector(o.l.inv_decay, h_inv_decay + s * cg, int(cg));
        unpack_fp16_matrix(o.l.L, h_l + s * csq, C);
        if (l_only) continue;
        run_of(o.on_path_l, h_inv + s * csq, int(s));
        if (gold_runs) run_of(o.on_gold_l, h_sinv + s * csq, int(n + s));
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

  const int version_, pad_;
  FlashkdaV2Runner v2_;
  GpuInverseRunner inverse_;
  detail::EventTimer timer_;
  detail::PinnedBuffer<uint16_t> h_keys_, h_beta_, h_gold_, h_decay_, h_inv_decay_, h_l_, h_inv_, h_gold_l_inv_,
      h_powers_;
  detail::PinnedBuffer<double> h_g_;
  detail::PinnedBuffer<int> h_hp_;
  detail::PinnedBuffer<float> h_pmax_;
  detail::DeviceBuffer<uint16_t> d_keys_, d_beta_, d_gold_, d_decay_, d_inv_decay_, d_l_, d_inv_, d_gold_l_inv_,
      d_powers_;
  detail::DeviceBuffer<double> d_g_;
  detail::DeviceBuffer<int> d_hp_;
  detail::DeviceBuffer<float> d_pmax_;
};

// A launch whose warps hold the scaled keys in shared memory (keys) or not.
KernelLaunch plan(int cp, int dim, bool keys) {
  const int optin = detail::allow_optin_smem(reinterpret_cast<const void*>(kernel_path_kernel));
  KernelLaunch l;
  l.warp_smem = warp_smem_bytes(cp, dim, keys);
  if (l.warp_smem > size_t(optin))
    throw UsageError("path kernel: chunk " + std::to_string(cp) + " x dim " + std::to_string(dim) +
                     " needs more shared memory than one block has");
  l.warps = detail::units_per_block(l.warp_smem, 1, kWarpsPerBlockMax, optin);  // one warp a task
  return l;
}

}  // namespace

KernelLaunch plan_launch(int cp, int dim) { return plan(cp, dim, true); }
KernelLaunch plan_gold_l_launch(int cp, int dim) { return plan(cp, dim, false); }

void launch_kernel_path(const KernelArgs& a, const KernelLaunch& l, int tasks, cudaStream_t st) {
  const int blocks = (tasks + l.warps - 1) / l.warps;
  kernel_path_kernel<<<blocks, 32 * l.warps, l.warps * l.warp_smem, st>>>(a);
  CUDA_CHECK_LAUNCH();
}

std::unique_ptr<Path> make_kernel_path(int version, int pad) {
  if (version != 1 && version != 2) throw UsageError("path kernel: version must be 1 or 2");
  if (pad != 0 && (pad % 16 != 0 || pad > 64)) throw UsageError("path kernel: pad must be 16, 32, 48 or 64");
  return std::make_unique<KernelPath>(version, pad);
}

}  // namespace chunkinv::gpu

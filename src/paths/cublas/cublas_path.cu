// The `cublas` path (SPEC §2 "cublas"): the article's simulation, issuing
// the library calls its code makes (references/k3-kda-precision-article.md,
// `kernel_l` and `neumann_inverse_fp16`), so that its bits are the article's.
//
// Per sample, as the article's code runs under PyTorch:
// - G and x = G log2 e in FP64 on the host (`log_decay.cumsum(0) * LOG2E`);
//   decay = bf16(ftz(exp2f(fp32(x)))), inv_decay likewise with -x;
//   kd, ki = fp32(bf16(k * decay)), fp32(bf16(k * inv_decay)).
// - S = kd ki^T: PyTorch's FP32 matmul `kd.float() @ ki.float().t()`, which
//   is cublasSgemm(T, N, m = n = C, k = d, A = ki, lda = d, B = kd, ldb = d,
//   ldc = C) on PyTorch's handle (cublasCommonArgs in ATen's Blas.cpp: a
//   row-major product runs as its column-major transpose): a workspace set
//   with cublasSetWorkspace (32 MiB on sm_90) and CUBLAS_DEFAULT_MATH (TF32
//   is off for matmul by default).
// - L = fp16(S), strict lower, times `beta.half()` of the FP64 beta. c10::Half
//   is built from a float only, so that is fp16(fp32(beta)): two roundings.
//   The run on the gold L takes `l_ref.half()` the same way.
// - Neumann: every product one cublasGemmEx per C x C matrix on the article's
//   own handle (cublasCreate and nothing else: NULL stream, the library's
//   default workspace, default math mode), its arguments exactly: (N, N,
//   C, C, C, fp16 1, B, CUDA_R_16F, C, A, CUDA_R_16F, C, fp16 0, D,
//   CUDA_R_16F, C, CUBLAS_COMPUTE_16F, algo 0). The article's comment calls
//   that last 0 CUBLAS_GEMM_DEFAULT; 0 is CUBLAS_GEMM_ALGO0 (DEFAULT is -1),
//   and it is passed as the article passes it. The adds are FP16 (torch adds
//   two halves in FP32 and rounds once: the correctly rounded FP16 sum).
// - Every matrix starts on a 512-byte boundary, as PyTorch's caching
//   allocator places a fresh tensor: cuBLAS chooses kernels by alignment too.
//
// Option batched=1 issues the same products as one strided-batched call per
// step (cublasSgemmStridedBatched, cublasGemmStridedBatchedEx), many times
// faster; it gives the article's bits only where that is measured
// (docs/paths-compared.md). The elementwise steps are batched in both forms:
// they are the same per element whatever the batch.

// Eigen (through core/matrix.hpp) calls constexpr host functions from host-device code.
#pragma nv_diag_suppress 20015
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
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

constexpr double kLog2e = 1.4426950408889634;  // math.log2(math.e), the article's LOG2E
constexpr size_t kAlignBytes = 512;            // PyTorch's caching allocator: kMinBlockSize
// The article's last argument of cublasGemmEx (ctypes.c_int(0)).
constexpr cublasGemmAlgo_t kArticleAlgo = CUBLAS_GEMM_ALGO0;

// Elements of one matrix's slot: n rounded up to a whole number of kAlignBytes.
template <class T>
size_t slot_of(size_t n) {
  constexpr size_t per = kAlignBytes / sizeof(T);
  return (n + per - 1) / per * per;
}

// `count` slots of `slot` elements from `buf`, the first on a kAlignBytes
// boundary (cudaMalloc promises 256 bytes).
template <class T>
T* aligned_slots(detail::DeviceBuffer<T>& buf, size_t slot, size_t count) {
  const uintptr_t p = reinterpret_cast<uintptr_t>(buf.get(slot * count + kAlignBytes / sizeof(T)));
  return reinterpret_cast<T*>((p + kAlignBytes - 1) / kAlignBytes * kAlignBytes);
}

// PyTorch's `tensor.half()` of an FP64 value: through float (c10::Half(float)).
inline uint16_t torch_half_bits(double x) { return fp16_bits_rn(static_cast<double>(static_cast<float>(x))); }

// PyTorch's cuBLAS workspace (CublasHandlePool.cpp, parseChosenWorkspaceSize):
// CUBLAS_WORKSPACE_CONFIG ":SIZE:COUNT..." (KiB, summed), else 32 MiB on
// sm_90 and 4096 KiB * 2 + 16 KiB * 8 elsewhere.
size_t torch_workspace_bytes() {
  int dev = 0;
  cudaDeviceProp p{};
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaGetDeviceProperties(&p, dev));
  const size_t fallback = (p.major == 9 && p.minor == 0) ? size_t(4096) * 8 * 1024 : size_t(4096) * 1024 * 2 + 16 * 1024 * 8;
  const char* env = std::getenv("CUBLAS_WORKSPACE_CONFIG");
  if (!env) return fallback;
  size_t total = 0;
  bool any = false;
  for (const char* s = env; *s;) {  // every ":digits:digits"
    char* e1 = nullptr;
    char* e2 = nullptr;
    if (s[0] == ':' && s[1] >= '0' && s[1] <= '9') {
      const unsigned long long size = std::strtoull(s + 1, &e1, 10);
      if (e1[0] == ':' && e1[1] >= '0' && e1[1] <= '9') {
        const unsigned long long count = std::strtoull(e1 + 1, &e2, 10);
        total += size_t(size) * 1024 * size_t(count);
        any = true;
        s = e2;
        continue;
      }
    }
    ++s;
  }
  return any ? total : fallback;
}

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

// kd = fp32(bf16(k * decay)), ki = fp32(bf16(k * inv_decay)): the SGEMM's
// inputs, sample s at s * kslot. cd = C * d keys per sample.
__global__ void scale_keys_kernel(const uint16_t* keys, const uint16_t* decay, const uint16_t* inv_decay,
                                  float* kd, float* ki, int dim, bool per_channel, size_t cd, size_t kslot,
                                  size_t n) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const size_t e = per_channel ? i : i / dim;  // decays are laid out like the keys, or one per row
  const size_t o = (i / cd) * kslot + i % cd;
  kd[o] = ptx::bf16_to_f32(ptx::mul_rn_bf16(keys[i], decay[e]));
  ki[o] = ptx::bf16_to_f32(ptx::mul_rn_bf16(keys[i], inv_decay[e]));
}

// L_ij = fp16(fp16(S_ij) * beta16_i) for j < i, else 0; matrix m of S at
// m * sslot, of L at m * lslot.
__global__ void finish_l_kernel(const float* s, const uint16_t* beta16, uint16_t* l, int chunk, size_t sslot,
                                size_t lslot, size_t n) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const size_t csq = size_t(chunk) * chunk, m = i / csq, e = i % csq;
  const int r = int(e / chunk), c = int(e % chunk);
  uint16_t h = 0;
  if (c < r) h = ptx::mul_rn_f16(ptx::cvt_rn_f16(s[m * sslot + e]), beta16[m * chunk + r]);
  l[m * lslot + e] = h;
}

// INV = I - L, matrix by matrix (slots of `slot` elements).
__global__ void identity_minus_kernel(const uint16_t* l, uint16_t* inv, int chunk, size_t slot, size_t n) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const size_t csq = size_t(chunk) * chunk, o = (i / csq) * slot + i % csq;
  const int r = int((i % csq) / chunk), c = int(i % chunk);
  inv[o] = ptx::sub_rn_f16(r == c ? uint16_t(0x3C00) : uint16_t(0), l[o]);
}

__global__ void add_kernel(uint16_t* inv, const uint16_t* t, size_t csq, size_t slot, size_t n) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const size_t o = (i / csq) * slot + i % csq;
  inv[o] = ptx::add_rn_f16(inv[o], t[o]);
}

// power_max[m] = max(power_max[m], max |P_m|), +inf for any non-finite entry; one warp per matrix.
__global__ void power_max_kernel(const uint16_t* p, float* power_max, int chunk, size_t slot, int matrices,
                                 bool first) {
  const int m = int((size_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32);
  if (m >= matrices) return;
  const int lane = threadIdx.x & 31;
  const size_t csq = size_t(chunk) * chunk;
  float v = 0.0f;
  for (size_t e = lane; e < csq; e += 32) {
    const uint16_t h = p[m * slot + e];
    v = fmaxf(v, (h & 0x7C00) == 0x7C00 ? INFINITY : fabsf(ptx::f16_to_f32(h)));
  }
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (lane == 0) power_max[m] = first ? v : fmaxf(power_max[m], v);
}

unsigned blocks_for(size_t n, int threads = 256) { return unsigned((n + threads - 1) / threads); }

class CublasPath final : public Path {
 public:
  explicit CublasPath(bool batched) : batched_(batched) {
    // PyTorch's handle, as getCurrentCUDABlasHandle leaves it: stream, then
    // workspace (cublasSetStream resets the workspace to the default pool),
    // then the math mode.
    CUDA_CHECK(cublas().create(&torch_handle_));
    workspace_bytes_ = torch_workspace_bytes();
    CUDA_CHECK(cudaMalloc(&workspace_, workspace_bytes_));
    CUDA_CHECK(cublas().set_stream(torch_handle_, nullptr));
    CUDA_CHECK(cublas().set_workspace(torch_handle_, workspace_, workspace_bytes_));
    CUDA_CHECK(cublas().set_math_mode(torch_handle_, CUBLAS_DEFAULT_MATH));
    // The article's handle: cublasCreate_v2, nothing set.
    CUDA_CHECK(cublas().create(&article_handle_));
  }
  ~CublasPath() override {
    cublas().destroy(article_handle_);
    cublas().destroy(torch_handle_);
    cudaFree(workspace_);
  }

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
  // Row-major S = kd ki^T for `count` samples, as PyTorch's matmul calls it.
  void sgemm(const float* kd, const float* ki, float* s, int C, int d, size_t kslot, size_t sslot, int count) {
    const float one = 1.0f, zero = 0.0f;
    if (batched_) {
      CUDA_CHECK(cublas().sgemm_strided_batched(torch_handle_, CUBLAS_OP_T, CUBLAS_OP_N, C, C, d, &one, ki, d,
                                           (long long)kslot, kd, d, (long long)kslot, &zero, s, C,
                                           (long long)sslot, count));
      return;
    }
    for (int m = 0; m < count; ++m)
      CUDA_CHECK(cublas().sgemm(torch_handle_, CUBLAS_OP_T, CUBLAS_OP_N, C, C, d, &one, ki + m * kslot, d,
                             kd + m * kslot, d, &zero, s + m * sslot, C));
  }

  // Row-major D = A * B for `count` C x C FP16 matrices, as the article's
  // cublas_fp16_accum_mm calls it (cuBLAS is column-major: D^T = B^T A^T).
  void gemm16(const uint16_t* a, const uint16_t* b, uint16_t* d, int C, size_t slot, int count) {
    const __half one = __float2half(1.0f), zero = __float2half(0.0f);
    if (batched_) {
      CUDA_CHECK(cublas().gemm_strided_batched_ex(article_handle_, CUBLAS_OP_N, CUBLAS_OP_N, C, C, C, &one, b, CUDA_R_16F,
                                            C, (long long)slot, a, CUDA_R_16F, C, (long long)slot, &zero, d,
                                            CUDA_R_16F, C, (long long)slot, count, CUBLAS_COMPUTE_16F, kArticleAlgo));
      return;
    }
    for (int m = 0; m < count; ++m)
      CUDA_CHECK(cublas().gemm_ex(article_handle_, CUBLAS_OP_N, CUBLAS_OP_N, C, C, C, &one, b + m * slot, CUDA_R_16F, C,
                              a + m * slot, CUDA_R_16F, C, &zero, d + m * slot, CUDA_R_16F, C, CUBLAS_COMPUTE_16F,
                              kArticleAlgo));
  }

  BatchTiming run_group(std::span<const Sample> samples, std::span<const GoldOutput> gold,
                        std::span<PathOutput> out, ThreadPool& pool, bool keep_powers) {
    using namespace detail;
    const auto t0 = std::chrono::steady_clock::now();
    const int n = int(samples.size());
    const int C = samples[0].chunk, d = samples[0].dim;
    if (C < 2 || C > 64) throw UsageError("path cublas: chunk " + std::to_string(C) + " outside 2..64");
    const bool gold_runs = !gold.empty();
    const int mats = gold_runs ? 2 * n : n;
    const size_t csq = size_t(C) * C, cd = size_t(C) * d;
    const size_t hslot = slot_of<uint16_t>(csq), sslot = slot_of<float>(csq), kslot = slot_of<float>(cd);
    const int gw = samples[0].gate_width();
    const size_t cg = size_t(C) * gw;  // gates (and decays) per sample

    uint16_t* h_keys = h_keys_.get(n * cd);
    float* h_x = h_x_.get(size_t(n) * cg);
    uint16_t* h_beta = h_beta_.get(size_t(n) * C);
    uint16_t* h_gold = gold_runs ? h_gold_.get(n * csq) : nullptr;
    constexpr size_t kBlock = 64;
    const size_t blocks = (size_t(n) + kBlock - 1) / kBlock;
    pool.parallel_for(blocks, [&](size_t b) {
      for (size_t s = b * kBlock; s < std::min(size_t(n), (b + 1) * kBlock); ++s) {
        const Sample& x = samples[s];
        for (size_t e = 0; e < cd; ++e) h_keys[s * cd + e] = exact_bf16_bits(x.keys[e]);
        if (x.gate_width() != gw || x.g.size() != cg)
          throw std::logic_error("path cublas: samples of one batch differ in gating");
        for (int k = 0; k < gw; ++k) {  // G per channel (one for per-token gates) in FP64, in token order
          double G = 0.0;
          for (int r = 0; r < C; ++r) {
            G += x.g[size_t(r) * gw + k];
            h_x[s * cg + size_t(r) * gw + k] = static_cast<float>(G * kLog2e);  // fp32(x), x = G log2 e in FP64
          }
        }
        for (int r = 0; r < C; ++r) h_beta[s * C + r] = torch_half_bits(x.beta[r]);
        if (gold_runs)
          for (int r = 0; r < C; ++r)
            for (int c = 0; c < C; ++c) h_gold[s * csq + r * C + c] = torch_half_bits(gold[s].L(r, c));
      }
    });
    const double pack_ms = wall_ms_since(t0);

    uint16_t* keys = d_keys_.get(n * cd);
    float* x = d_x_.get(size_t(n) * cg);
    uint16_t* beta = d_beta_.get(size_t(n) * C);
    uint16_t* decay = d_decay_.get(size_t(n) * cg);
    uint16_t* inv_decay = d_inv_decay_.get(size_t(n) * cg);
    float* kd = aligned_slots(d_kd_, kslot, n);
    float* ki = aligned_slots(d_ki_, kslot, n);
    float* s32 = aligned_slots(d_s_, sslot, n);
    uint16_t* P = aligned_slots(d_p_, hslot, mats);  // the path's L, then fp16(gold L)
    uint16_t* Pn = aligned_slots(d_pn_, hslot, mats);
    uint16_t* INV = aligned_slots(d_inv_, hslot, mats);
    uint16_t* T = aligned_slots(d_t_, hslot, mats);
    float* pmax = d_pmax_.get(mats);
    uint16_t* L = aligned_slots(d_l_, hslot, n);

    cudaStream_t st = nullptr;  // both handles' stream: the legacy default stream, as under PyTorch
    timer_.mark(0, st);
    CUDA_CHECK(cudaMemcpyAsync(keys, h_keys, n * cd * 2, cudaMemcpyHostToDevice, st));
    CUDA_CHECK(cudaMemcpyAsync(x, h_x, size_t(n) * cg * 4, cudaMemcpyHostToDevice, st));
    CUDA_CHECK(cudaMemcpyAsync(beta, h_beta, size_t(n) * C * 2, cudaMemcpyHostToDevice, st));
    if (gold_runs)
      CUDA_CHECK(cudaMemcpy2DAsync(P + n * hslot, hslot * 2, h_gold, csq * 2, csq * 2, n, cudaMemcpyHostToDevice, st));
    timer_.mark(1, st);

    decays_kernel<<<blocks_for(size_t(n) * cg), 256, 0, st>>>(x, decay, inv_decay, size_t(n) * cg);
    CUDA_CHECK_LAUNCH();
    scale_keys_kernel<<<blocks_for(n * cd), 256, 0, st>>>(keys, decay, inv_decay, kd, ki, d, gw != 1, cd, kslot,
                                                          n * cd);
    CUDA_CHECK_LAUNCH();
    sgemm(kd, ki, s32, C, d, kslot, sslot, n);
    finish_l_kernel<<<blocks_for(n * csq), 256, 0, st>>>(s32, beta, P, C, sslot, hslot, n * csq);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaMemcpyAsync(L, P, n * hslot * 2, cudaMemcpyDeviceToDevice, st));
    identity_minus_kernel<<<blocks_for(mats * csq), 256, 0, st>>>(P, INV, C, hslot, mats * csq);
    CUDA_CHECK_LAUNCH();
    const unsigned warp_blocks = blocks_for(size_t(mats) * 32);
    power_max_kernel<<<warp_blocks, 256, 0, st>>>(P, pmax, C, hslot, mats, true);
    CUDA_CHECK_LAUNCH();
    std::vector<std::vector<uint16_t>> powers;
    auto keep = [&](const uint16_t* p) {
      if (!keep_powers) return;
      powers.emplace_back(mats * csq);
      CUDA_CHECK(cudaMemcpy2DAsync(powers.back().data(), csq * 2, p, hslot * 2, csq * 2, mats,
                                   cudaMemcpyDeviceToHost, st));
    };
    keep(P);
    int p = 1;
    while (2 * p < C) {  // the article's neumann_inverse_fp16
      gemm16(P, P, Pn, C, hslot, mats);
      std::swap(P, Pn);
      p *= 2;
      power_max_kernel<<<warp_blocks, 256, 0, st>>>(P, pmax, C, hslot, mats, false);
      CUDA_CHECK_LAUNCH();
      keep(P);
      gemm16(INV, P, T, C, hslot, mats);
      add_kernel<<<blocks_for(mats * csq), 256, 0, st>>>(INV, T, csq, hslot, mats * csq);
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
    CUDA_CHECK(cudaMemcpy2DAsync(h_l, csq * 2, L, hslot * 2, csq * 2, n, cudaMemcpyDeviceToHost, st));
    CUDA_CHECK(cudaMemcpy2DAsync(h_inv, csq * 2, INV, hslot * 2, csq * 2, mats, cudaMemcpyDeviceToHost, st));
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
        if (gold_runs) run_of(o.on_gold_l, n + s);
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

  bool batched_;
  cublasHandle_t torch_handle_ = nullptr;    // the SGEMM's: PyTorch's settings
  cublasHandle_t article_handle_ = nullptr;  // the FP16 products': the article's own
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  detail::EventTimer timer_;
  detail::PinnedBuffer<uint16_t> h_keys_, h_beta_, h_gold_, h_decay_, h_inv_decay_, h_l_, h_inv_;
  detail::PinnedBuffer<float> h_x_, h_pmax_;
  detail::DeviceBuffer<uint16_t> d_keys_, d_beta_, d_decay_, d_inv_decay_, d_p_, d_pn_, d_inv_, d_t_, d_l_;
  detail::DeviceBuffer<float> d_x_, d_kd_, d_ki_, d_s_, d_pmax_;
};

}  // namespace

std::unique_ptr<Path> make_cublas_path(bool batched) { return std::make_unique<CublasPath>(batched); }

}  // namespace chunkinv::gpu

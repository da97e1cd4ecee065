// The specs of the CUDA paths, in host code so that a build without CUDA
// knows them too (and says why they cannot run).
#include <fmt/format.h>

#include "core/error.hpp"
#include "gpu/gpu.hpp"
#include "paths/gpu_paths.hpp"
#include "methods/gpu_form.hpp"

namespace chunkinv {

extern const MethodSpec kNeumannMethod;
extern const MethodSpec kFlashkdaV1Method;
extern const MethodSpec kFlashkdaV2Method;

namespace {

// The methods with a GPU form on these paths: Neumann, under its own name or
// FlashKDA v1's (one arithmetic, run once and copied).
bool neumann_only(const Method& m, std::string_view path, std::string* why) {
  if (m.spec == &kNeumannMethod || m.spec == &kFlashkdaV1Method) return true;
  if (why) *why = fmt::format("path {} has no GPU form of method {}", path, m.label());
  return false;
}

std::string unavailable() { return gpu::unavailable_reason(); }

int int_option(std::string_view path, const PathOptions& o, const std::string& key, std::initializer_list<int> allowed,
               int fallback) {
  const auto it = o.find(key);
  if (it == o.end()) return fallback;
  for (int v : allowed)
    if (it->second == std::to_string(v)) return v;
  throw UsageError(fmt::format("path {}: option {}={} is not one of {}", path, key, it->second, fmt::join(allowed, ", ")));
}

// --- kernel ------------------------------------------------------------------


std::string kernel_arithmetic() {
  return "CUDA sm_90: G2 running FP32 sum of fp32(g*log2e); decay = cvt.rn.bf16(ex2.approx.ftz.f32(+-G2)); "
         "kd, ki = mul.rn.bf16; L = cvt.rn.f16(mma.m16n8k16 bf16->f32 chained over d), strict lower, "
         "mul.rn.f16 by fp16(beta); Neumann INV = I - L, P = mma f16.f16 (P,P), INV = INV + mma(INV,P) "
         "(add.rn.f16x2); chunk zero-padded to a multiple of 16. Method flashkda_v2: L kept in FP32 times the "
         "FP32 beta (mul.rn.f32); 8x8 diagonal blocks by column-oriented substitution (fma.rn.f32); merges "
         "8 -> 16 -> ... on mma bf16->f32, INV = bf16(P + bf16(O)); chunk zero-padded to 8, 16, 32 or 64. Methods "
         "with a GPU inverse form (fla_solve_tril, blockwise, residual_neumann, where it covers the options): L as "
         "for Neumann, then the form on it and on the gold's FP64 L, each bit-identical to its CPU form "
         "but for one sign of a zero measured in blockwise's BF16 mma products (docs/methods.md)";
}

bool kernel_supports(const Configuration& c, const Method& m, std::string* why) {
  if (const gpu::GpuInverse* form = gpu::find_gpu_inverse(*m.spec)) {
    // L from the kernel, the inverse by the method's GPU form, where it covers the options.
    if (std::string no = form->refuses(m, c.chunk); !no.empty()) {
      if (why) *why = std::move(no);
      return false;
    }
  } else if (m.spec != &kFlashkdaV2Method && !neumann_only(m, "kernel", why)) {
    return false;
  }
  if (c.dim % 16 != 0) {
    if (why) *why = fmt::format("path kernel needs dim a multiple of 16 (dim = {})", c.dim);
    return false;
  }
  return true;
}

void check_kernel_options(const PathOptions& o) {
  for (const auto& [k, v] : o)
    if (k != "version" && k != "pad")
      throw UsageError(fmt::format("path kernel: unknown option \"{}\" (options: version=1|2, pad=16|32|48|64)", k));
  int_option("kernel", o, "version", {1, 2}, gpu::kDefaultKernelVersion);
  int_option("kernel", o, "pad", {16, 32, 48, 64}, 0);
}

std::unique_ptr<Path> make_kernel(const PathOptions& o) {
  return gpu::make_kernel_path(int_option("kernel", o, "version", {1, 2}, gpu::kDefaultKernelVersion),
                               int_option("kernel", o, "pad", {16, 32, 48, 64}, 0));
}

// --- cublas ------------------------------------------------------------------

std::string cublas_arithmetic() {
  return "CUDA + cuBLAS, the article's calls per sample: x = G*log2e in FP64, decay = bf16(ftz(exp2f(fp32(+-x)))); "
         "kd, ki = bf16 products; L = fp16(cublasSgemm(T, N, C, C, d) on PyTorch's handle settings: 32 MiB "
         "workspace on sm_90, default math mode), strict lower, times fp16(fp32(beta)) (torch's .half() of FP64); "
         "Neumann products one cublasGemmEx per C x C matrix, CUDA_R_16F, CUBLAS_COMPUTE_16F, algo 0, on a plain "
         "handle; FP16 adds; gold L as fp16(fp32(L)); matrices 512-byte aligned; no padding. Option batched=1: "
         "cublasSgemmStridedBatched and cublasGemmStridedBatchedEx instead";
}

bool cublas_supports(const Configuration&, const Method& m, std::string* why) {
  return neumann_only(m, "cublas", why);
}

// batched=1: the strided-batched calls, the article's bits only where measured so (docs/paths-compared.md).
void check_cublas_options(const PathOptions& o) {
  for (const auto& [k, v] : o)
    if (k != "batched") throw UsageError(fmt::format("path cublas: unknown option \"{}\" (options: batched=0|1)", k));
  int_option("cublas", o, "batched", {0, 1}, 0);
}

std::unique_ptr<Path> make_cublas(const PathOptions& o) {
  return gpu::make_cublas_path(int_option("cublas", o, "batched", {0, 1}, 0) == 1);
}

}  // namespace

extern const PathSpec kKernelPath{.name = "kernel",
                                  .device = Device::kGpu,
                                  .arithmetic = kernel_arithmetic,
                                  .fidelity = nullptr,
                                  .unavailable = unavailable,
                                  .supports = kernel_supports,
                                  .check_options = check_kernel_options,
                                  .make = make_kernel,
                                  .equals_cpu_model = true,
                                  .pipeline_form = PipelineForm::kKernel};
extern const PathSpec kCublasPath{.name = "cublas",
                                  .device = Device::kGpu,
                                  .arithmetic = cublas_arithmetic,
                                  .fidelity = nullptr,
                                  .unavailable = unavailable,
                                  .supports = cublas_supports,
                                  .check_options = check_cublas_options,
                                  .make = make_cublas};

}  // namespace chunkinv

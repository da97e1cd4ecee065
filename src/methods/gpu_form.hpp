// GPU forms of inverse methods that take an L already formed: the `kernel`
// path forms L with its own kernel (FP16, FlashKDA v1's L, as the emulated
// path hands these methods) and hands it to the method's GPU form as
// doubles, with the gold's FP64 L for the method on the gold's L; the form
// rounds L to its own input format exactly as the CPU form does. Each form is
// validated bit for bit against the method's CPU reference
// (src/methods/<name>/reference.cpp) on the same L (tests/paths/test_gpu_inverses.cpp).
//
// CUDA-free: the host table (methods/gpu_forms.cpp) is compiled in every build,
// so plans say the same thing with or without a GPU; the launches exist
// only in a CUDA build (src/methods/<name>/gpu.cu).
#pragma once
#include <span>
#include <string>
#include <vector>

#include "methods/method.hpp"

namespace chunkinv::gpu {

// One launch: `tasks` independent C x C problems, row-major, on the device.
struct InverseLaunch {
  int tasks = 0;
  int chunk = 0;                           // C, 2..64
  const double* l = nullptr;               // tasks x C x C: strict-lower L (the form rounds it to its input format)
  float* inv = nullptr;                    // tasks x C x C: the method's inverse, each value exact in FP32
  double* diag = nullptr;                  // tasks x ndiag: the method's diagnostics, in its spec's order
  int ndiag = 0;                           // = spec.diagnostics.size()
  const MethodOptions* options = nullptr;  // every parameter's value (defaults filled in)
  void* stream = nullptr;                  // cudaStream_t
};

struct GpuInverse {
  const MethodSpec* spec;
  // "" when the GPU form covers these options at this chunk; else one line
  // saying what it does not cover (the plan prints it as the skip reason).
  std::string (*refuses)(const MethodOptions& options, int chunk);
  void (*launch)(const InverseLaunch& launch);  // null in a build without CUDA
};

// The method's GPU form on the `kernel` path, or null if it has none.
const GpuInverse* find_gpu_inverse(const MethodSpec& spec);
std::span<const GpuInverse> gpu_inverses();

// Test hook: the method's GPU form on each L, back as the CPU reference
// returns them (inverse and diagnostics; no intermediates). Throws UsageError where the form refuses or there is
// no usable GPU.
std::vector<InverseRun> invert_on_gpu(const GpuInverse& form, const MethodOptions& options,
                                      std::span<const Mat> ls);

}  // namespace chunkinv::gpu

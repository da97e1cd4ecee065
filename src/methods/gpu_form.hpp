// GPU forms of inverse methods that take an L already formed: the `kernel`
// path forms L with its own kernel (FP16, FlashKDA v1's L, as the emulated
// path hands these methods) and hands it to the method's GPU form as
// doubles, with the gold's FP64 L for the method on the gold's L; the form
// rounds L to its own input format exactly as the CPU form does. Each form is
// validated bit for bit against the method's CPU reference
// (src/methods/<name>/reference.cpp) on the same L (tests/paths/test_gpu_inverses.cpp).
//
// A method's form lives in its folder: gpu_form.cpp (host code, compiled in
// every build, so plans say the same thing with or without a GPU) says what
// it covers; gpu.cu has the launch, only in a CUDA build. The method's
// MethodSpec points at the form (MethodSpec::gpu_form).
#pragma once
#include <span>
#include <string>
#include <vector>

#include "methods/method.hpp"

namespace chunkinv::gpu {

// One launch: `tasks` independent C x C problems, row-major, on the device.
struct InverseLaunch {
  int tasks = 0;
  int chunk = 0;                  // C, 2..64
  const double* l = nullptr;      // tasks x C x C: strict-lower L (the form rounds it to its input format)
  float* inv = nullptr;           // tasks x C x C: the method's inverse, each value exact in FP32
  double* diag = nullptr;         // tasks x ndiag: the method's diagnostics, in its spec's order
  int ndiag = 0;                  // = spec.diagnostics.size()
  const Method* method = nullptr;  // the method, its typed parameters (Method::params) included
  void* stream = nullptr;         // cudaStream_t
};

struct GpuInverse {
  const MethodSpec* spec;
  // "" when the GPU form covers the method's parameters at this chunk; else
  // one line saying what it does not cover (the plan prints it as the skip reason).
  std::string (*refuses)(const Method& method, int chunk);
  void (*launch)(const InverseLaunch& launch);  // null in a build without CUDA
};

// A form's launch where this build has one (gpu_form.cpp: `CHUNKINV_GPU_LAUNCH(launch_blockwise)`).
#ifdef CHUNKINV_HAVE_CUDA
#define CHUNKINV_GPU_LAUNCH(f) f
#else
#define CHUNKINV_GPU_LAUNCH(f) nullptr
#endif

// The method's GPU form on the `kernel` path, or null if it has none.
const GpuInverse* find_gpu_inverse(const MethodSpec& spec);
// Every method's GPU form, in registry order.
std::span<const GpuInverse* const> gpu_inverses();

// Test hook: the method's GPU form on each L, back as the CPU reference
// returns them (inverse and diagnostics; no intermediates). Throws UsageError where the form refuses or there is
// no usable GPU.
std::vector<InverseRun> invert_on_gpu(const GpuInverse& form, const Method& method, std::span<const Mat> ls);

}  // namespace chunkinv::gpu

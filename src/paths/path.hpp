// Arithmetic paths (SPEC §2). The driver computes the gold for every sample,
// then hands a batch of samples to each approximate path.
#pragma once
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/matrix.hpp"
#include "inputs/sample.hpp"

namespace chunkinv {

class ThreadPool;

// One run of the Neumann product form (SPEC §2 step 6).
struct NeumannRun {
  Mat inv;                 // FP16 values
  int highest_power = 0;   // exponent of the highest power formed (L^highest_power)
  double power_max = 0.0;  // max |entry| over L and every power formed; inf if any is non-finite
  std::vector<Mat> powers; // L, L^2, L^4, ... (only when asked for, e.g. by inspect)
};

struct GoldOutput {
  Mat L;    // exact L in FP64
  Mat inv;  // (I + L)^-1 in FP64
};

struct PathOutput {
  std::vector<double> decay, inv_decay;  // per row, as the path holds them (BF16 values)
  Mat L;                                 // the path's L (strict lower, FP16 values)
  NeumannRun run;                        // Neumann on the path's L
  NeumannRun stable;                     // the same arithmetic on fp16(gold L)
};

class Path {
 public:
  virtual ~Path() = default;
  virtual std::string name() const = 0;
  // The arithmetic in words, for the report's meta.
  virtual std::string arithmetic() const = 0;
  // Fills out[i] for samples[i]. keep_powers asks for NeumannRun::powers.
  virtual void run_batch(std::span<const Sample> samples, std::span<const GoldOutput> gold,
                         std::span<PathOutput> out, ThreadPool& pool, bool keep_powers) = 0;
};

// The approximate paths this build offers: "emulated" always, "kernel" and
// "cublas" when built with CUDA. Creating a GPU path without a usable GPU
// throws UsageError ("path kernel needs a CUDA GPU: <reason>").
std::vector<std::string> path_names_built();
std::vector<std::string> path_names_usable();  // built and runnable on this machine
std::unique_ptr<Path> make_path(const std::string& name);
std::string gold_arithmetic();

}  // namespace chunkinv

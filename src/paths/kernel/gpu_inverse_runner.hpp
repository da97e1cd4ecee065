// Runs a method's GPU inverse form (methods/gpu_form.hpp) on the L the kernel
// path formed and on the gold L: uploads both as doubles, launches the form
// once over the 2n problems, and unpacks inverse and diagnostics into the
// path's outputs. Its buffers outlive one batch. CUDA code only.
#pragma once
#include <span>

#include "gpu/buffers.cuh"
#include "methods/gpu_form.hpp"
#include "paths/path.hpp"

namespace chunkinv::gpu {

class GpuInverseRunner {
 public:
  // out[i].l.L holds the path's L of samples[i]; fills out[i].on_path_l and,
  // with gold, out[i].on_gold_l (the method on gold[i].L). The timing's
  // compute_ms is the method's launch alone.
  BatchTiming run(const GpuInverse& form, const Method& method, std::span<const GoldOutput> gold,
                  std::span<PathOutput> out, ThreadPool& pool);

  // The form on each of ls (the test hook invert_on_gpu).
  std::vector<InverseRun> run(const GpuInverse& form, const Method& method, std::span<const Mat> ls);

 private:
  // Launches on problems h_l_[0, tasks) of size C and downloads; returns the timing.
  BatchTiming launch(const GpuInverse& form, const Method& method, int tasks, int chunk);
  void unpack(InverseRun& r, int task, int chunk, int ndiag) const;
  detail::EventTimer timer_;
  detail::PinnedBuffer<double> h_l_, h_diag_;
  detail::PinnedBuffer<float> h_inv_;
  detail::DeviceBuffer<double> d_l_, d_diag_;
  detail::DeviceBuffer<float> d_inv_;
  float* inv_host_ = nullptr;     // the last launch's results, in h_inv_ and h_diag_
  double* diag_host_ = nullptr;
};

}  // namespace chunkinv::gpu

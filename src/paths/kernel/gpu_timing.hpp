// Where the time of a GPU path's last run_batch went, for `chunkinv bench`:
// the device's own time (CUDA events) apart from the host's work around it.
#pragma once
#include <string>

namespace chunkinv::gpu {

struct BatchTiming {
  double upload_ms = 0;    // host -> device copies (events)
  double compute_ms = 0;   // the launches (events)
  double download_ms = 0;  // device -> host copies (events)
  double host_ms = 0;      // packing inputs and unpacking outputs on the host (wall clock)
  long samples = 0;
};

// The timing of the last run_batch of path "kernel" or "cublas" (zeros before the first).
BatchTiming last_batch_timing(const std::string& path);

}  // namespace chunkinv::gpu

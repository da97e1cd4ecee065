// The GPU platform of a build without CUDA: nothing is usable, and every
// GPU path's spec says so before anything would be launched.
#ifndef CHUNKINV_HAVE_CUDA
#include <memory>

#include "core/error.hpp"
#include "gpu/gpu.hpp"
#include "gpu/chunked_backward.hpp"
#include "gpu/chunked_forward.hpp"
#include "gpu/recurrence.hpp"
#include "paths/gpu_paths.hpp"

namespace chunkinv::gpu {

bool built() { return false; }
std::string unavailable_reason() { return "this build has no CUDA support"; }
std::vector<DeviceInfo> devices() { return {}; }
std::string runtime_version() { return ""; }
std::string driver_version() { return ""; }

std::unique_ptr<Path> make_kernel_path(int, int) { throw UsageError("path kernel: this build has no CUDA support"); }
std::unique_ptr<Path> make_cublas_path(bool) { throw UsageError("path cublas: this build has no CUDA support"); }

struct DeviceRecurrence::Impl {};
DeviceRecurrence::DeviceRecurrence(int, int, int, bool, double, const double*, int) {
  throw UsageError("the GPU recurrence: this build has no CUDA support");
}
DeviceRecurrence::~DeviceRecurrence() = default;
void DeviceRecurrence::advance(int, const double*, const double*, const double*, const double*, const double*, double*) {
  throw UsageError("the GPU recurrence: this build has no CUDA support");
}
void DeviceRecurrence::state(double*) const { throw UsageError("the GPU recurrence: this build has no CUDA support"); }
RecurrenceTiming time_recurrence(const RecurrenceProblem&, int, int, const std::vector<int>&,
                                 const std::function<bool(const RecurrenceTiming&)>&) {
  throw UsageError("the GPU recurrence: this build has no CUDA support");
}

struct DeviceChunkedForward::Impl {};
DeviceChunkedForward::DeviceChunkedForward(int, int, int, int, double, const std::vector<Stores>&, const double*) {
  throw UsageError("the GPU chunked forward: this build has no CUDA support");
}
DeviceChunkedForward::~DeviceChunkedForward() = default;
void DeviceChunkedForward::advance(const double*, const double*, const double*, const double*, const double*,
                                   const double*, double*, double*) {
  throw UsageError("the GPU chunked forward: this build has no CUDA support");
}
void DeviceChunkedForward::states(double*) const { throw UsageError("the GPU chunked forward: this build has no CUDA support"); }
void DeviceChunkedForward::set_states(const double*) {
  throw UsageError("the GPU chunked forward: this build has no CUDA support");
}

struct DeviceChunkedBackward::Impl {};
DeviceChunkedBackward::DeviceChunkedBackward(int, int, int, int, double, const std::vector<Stores>&,
                                             const std::vector<backward_step::BackwardStores>&, const double*) {
  throw UsageError("the GPU chunked backward: this build has no CUDA support");
}
DeviceChunkedBackward::~DeviceChunkedBackward() = default;
void DeviceChunkedBackward::step(const ChunkRows&, const double*, const double*, const GradientRows&) {
  throw UsageError("the GPU chunked backward: this build has no CUDA support");
}
void DeviceChunkedBackward::state_grad(double*) const {
  throw UsageError("the GPU chunked backward: this build has no CUDA support");
}

}  // namespace chunkinv::gpu
#endif

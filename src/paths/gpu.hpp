// What the CUDA part of the build provides to the host code. Declared
// always; defined in src/paths/kernel and src/paths/cublas when built with
// CUDA, and by src/paths/registry.cpp's fallbacks otherwise.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "paths/path.hpp"

namespace chunkinv::gpu {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int multiprocessors = 0;
  size_t memory_bytes = 0;
};

bool built();                        // compiled with CUDA
std::string unavailable_reason();    // "" when a CUDA GPU of compute capability >= 9.0 is usable
std::vector<DeviceInfo> devices();   // empty without a usable driver
std::string runtime_version();       // e.g. "13.0"; "" when not built
std::string driver_version();        // "" without a driver

std::unique_ptr<Path> make_kernel_path();  // precondition: unavailable_reason() == ""
std::unique_ptr<Path> make_cublas_path();

}  // namespace chunkinv::gpu

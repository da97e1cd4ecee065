// The GPU platform as the host code sees it: is a usable GPU there, which,
// with what runtime and driver. Declared always; defined in gpu/device.cu
// when built with CUDA and by gpu/none.cpp otherwise.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace chunkinv::gpu {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int multiprocessors = 0;
  size_t memory_bytes = 0;
  int clock_khz = 0;         // the SMs' peak clock
  int memory_clock_khz = 0;  // the memory's peak clock (two transfers a cycle)
  int memory_bus_bits = 0;
};

bool built();                        // compiled with CUDA
std::string unavailable_reason();    // "" when a CUDA GPU of compute capability >= 9.0 is usable
std::vector<DeviceInfo> devices();   // empty without a usable driver
std::string runtime_version();       // e.g. "13.0"; "" when not built
std::string driver_version();        // "" without a driver

}  // namespace chunkinv::gpu
